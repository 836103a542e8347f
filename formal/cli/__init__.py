"""The ``ptx-formal`` command line (argparse; one module per command group).

Each ``formal/cli/<group>.py`` exposes ``register(sub)`` that adds its subcommands to
the argparse sub-parser collection ``sub``; a subcommand sets ``func(args) -> int``.

Exit codes (README "Exit codes"; ``tests/test_fuzz_cli.py`` enforces them):

  0  legal / proved / all agree
  1  illegal / refuted / mismatch / undefined behaviour (with its witness)
  2  bad input: one line on stderr naming the argument or file and what is wrong
  3  unknown / could not run: a proof that timed out, no GPU, no ptxas
  4  internal error: one line ``ptx-formal: internal error, please report: <Type>: <message>``;
     the traceback only with the global ``--debug`` flag (or PTX_FORMAL_DEBUG=1)

No Python traceback reaches a user by default: ``main`` maps every exception to one of these.
The engine raises typed errors; commands convert OS and decoding errors where they read or
write a file, so the message names the file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
import traceback
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path

# Command groups, in help order.  A group whose module is not written yet is skipped.
GROUPS = ["catalog", "layout", "prove", "metadata", "evaluate", "hw", "vectors", "transform", "wmma", "smem", "ptxas",
          "errata", "kernel", "audit"]

EXIT_OK, EXIT_FAIL, EXIT_INPUT, EXIT_UNKNOWN, EXIT_INTERNAL = 0, 1, 2, 3, 4
MAX_MESSAGE = 400        # an error line never echoes a whole (maybe 100 KB) input back


class InputError(Exception):
    """Bad input detected by a command: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage + message)
        raise InputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ptx-formal",
                description="Formal specification of PTX warp-level matrix instructions (mma, mma.sp, wmma): "
                            "catalog and legality, layout proofs, sparse metadata, a bit-exact evaluator, "
                            "hardware checks, test vectors.",
                epilog="Exit codes: 0 legal/proved/agree, 1 illegal/refuted/mismatch/undefined behaviour, "
                       "2 bad input, 3 unknown/no GPU/no ptxas, 4 internal error (--debug shows the traceback).")
    p.add_argument("--version", action="version", version=f"ptx-formal {_version()}")
    p.add_argument("--debug", action="store_true", help="on an internal error, print the Python traceback")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for g in GROUPS:
        try:
            mod = importlib.import_module(f"formal.cli.{g}")
        except ModuleNotFoundError as e:
            if e.name == f"formal.cli.{g}":
                continue
            raise
        mod.register(sub)
    return p


def _version() -> str:
    from .. import __version__
    return __version__


# ---------------------------------------------------------------------------------- helpers for commands

def one_line(text: object, limit: int = MAX_MESSAGE) -> str:
    """``text`` on one line, at most ``limit`` characters (long inputs are cut, not echoed)."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[:limit - 25] + f" ... [{len(s) - limit + 25} more characters]"


def timeout_seconds(value: float, option: str = "--timeout", limit: float = 86400.0) -> int:
    """A solver timeout in seconds -> milliseconds; inf, nan, zero and negative values are bad input."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= limit):
        raise InputError(f"{option} must be a number of seconds in (0, {limit:g}], got {value}")
    return max(1, int(value * 1000))


def bounded_int(value: int, option: str, lo: int, hi: int) -> int:
    if not lo <= value <= hi:
        raise InputError(f"{option} must be in {lo}..{hi}, got {one_line(value, 60)}")
    return value


def check_writable(path: str | os.PathLike, option: str, directory: bool = False) -> Path:
    """Fail before any long work if ``path`` (a file, or with ``directory`` a directory that may
    not exist yet) cannot be written: a path under a regular file, a missing parent, no permission."""
    p = Path(path)
    if str(path) == "-" and not directory:
        return p
    if directory:
        if p.exists() and not p.is_dir():
            raise InputError(f"{option} {path}: exists and is not a directory")
        anc = p
        while not anc.exists():
            if anc.parent == anc:
                break
            anc = anc.parent
    else:
        if p.is_dir():
            raise InputError(f"{option} {path}: is a directory")
        anc = p.parent if str(p.parent) else Path(".")
        if not anc.exists():
            up = anc
            while not up.exists() and up.parent != up:
                up = up.parent
            why = f"{up} is not a directory" if up.exists() and not up.is_dir() else f"directory {anc} does not exist"
            raise InputError(f"{option} {path}: {why}")
    if not anc.is_dir():
        raise InputError(f"{option} {path}: {anc} is not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: {anc} is not writable")
    if not directory and p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"{option} {path}: not writable")
    return p


def read_text(path: str | os.PathLike, what: str = "") -> str:
    """A text input file as UTF-8 (CRLF tolerated); unreadable or binary files are bad input naming the file."""
    label = f"{what} {path}" if what else str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read {label}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as e:
        raise InputError(f"{label}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def read_json(path: str | os.PathLike, what: str = ""):
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{what + ' ' if what else ''}{path}: invalid JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}") from None
    except RecursionError:
        raise InputError(f"{what + ' ' if what else ''}{path}: JSON nested too deeply") from None


# ---------------------------------------------------------------------------------- main

def _input_errors() -> tuple[type[BaseException], ...]:
    """The engine's typed errors that mean "the input is wrong" (exit 2)."""
    from ..algebra import AlgebraError
    from ..catalog import BadArgument, MalformedOpcode
    from ..evaluate import EvalError
    from ..expr import FormulaError
    from ..transform import TransformError

    return (MalformedOpcode, BadArgument, InputError, FormulaError, TransformError, AlgebraError, EvalError)


def _os_message(e: OSError) -> str:
    name = e.filename if e.filename is not None else ""
    why = e.strerror or type(e).__name__
    return f"{name}: {why}" if name else f"{why}: {e}"


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code.  Never raises (except SystemExit from nothing)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is global: accepted anywhere before a bare '--'
    cut = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:cut] or os.environ.get("PTX_FORMAL_DEBUG", "") not in ("", "0")
    argv = [a for i, a in enumerate(argv) if not (i < cut and a == "--debug")]
    try:
        with warnings.catch_warnings():
            if not debug:     # numpy's RuntimeWarnings (overflow in a user's formula, ...) are not for users
                warnings.simplefilter("ignore", RuntimeWarning)
            return _dispatch(argv)
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. `ptx-formal list | head`
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except SystemExit as e:      # argparse --help / --version, or sys.exit deep inside
        if e.code is None or isinstance(e.code, int):
            return int(e.code or 0)
        _err(one_line(e.code))
        return EXIT_INPUT
    except BaseException as e:   # noqa: BLE001 - the one place that turns any exception into an exit code
        code, msg = _classify(e)
        if code == EXIT_INTERNAL:
            if debug:
                traceback.print_exc(file=sys.stderr)
            _err(f"internal error, please report: {type(e).__name__}: {one_line(msg)}")
        else:
            _err(one_line(msg) if code != EXIT_FAIL else "undefined behaviour: " + one_line(msg, 4000))
        return code


@lru_cache(maxsize=1)
def _parser(builder) -> argparse.ArgumentParser:
    """The parser, built once per process (about 9 ms; parsing does not change it).  Keyed by
    the builder so that a patched ``build_parser`` (tests) gets its own."""
    return builder()


def _dispatch(argv: list[str]) -> int:
    parser = _parser(build_parser)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    code = args.func(args)
    return int(code or 0)


def _classify(e: BaseException) -> tuple[int, str]:
    try:
        from ..metadata.storage import UndefinedBehavior
        inputs = _input_errors()
    except Exception:  # pragma: no cover - a broken install: everything is internal
        UndefinedBehavior, inputs = (), (InputError,)
    if isinstance(e, UndefinedBehavior) and not isinstance(e, InputError):
        from ..catalog import BadArgument
        if not isinstance(e, BadArgument):
            return EXIT_FAIL, str(e)
    if isinstance(e, inputs):
        return EXIT_INPUT, str(e)
    if isinstance(e, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return EXIT_INPUT, _os_message(e)
    if isinstance(e, OSError) and e.errno is not None:       # ENOSPC, EROFS, ...: the environment, not a bug
        return EXIT_INPUT, _os_message(e)
    if isinstance(e, UnicodeDecodeError):
        return EXIT_INPUT, f"an input is not UTF-8 text: {e}"
    if isinstance(e, (zipfile.BadZipFile, EOFError)):
        return EXIT_INPUT, f"an input archive is empty or truncated: {e}"
    if isinstance(e, RecursionError):
        return EXIT_INPUT, "an input is nested too deeply"
    if isinstance(e, MemoryError):
        return EXIT_INPUT, "an input is too large (out of memory)"
    return EXIT_INTERNAL, str(e)


def _err(msg: str) -> None:
    try:
        print(f"ptx-formal: {msg}" if msg.startswith(("internal error", "interrupted", "undefined")) else
              f"ptx-formal: error: {msg}", file=sys.stderr)
    except (OSError, ValueError):  # pragma: no cover - stderr closed
        pass


def run() -> None:  # console-script entry
    sys.exit(main())


def load_user_function(spec: str):
    """``--python FILE:FUNC``: the user's function, imported from FILE (any file name); a failing
    import, ``sys.exit`` included, is one line of bad input (exit 2), never a pass."""
    import importlib.util
    from pathlib import Path

    if ":" not in spec:
        raise InputError("--python takes FILE:FUNC")
    path, func = spec.rsplit(":", 1)
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--python: no such file {path}")
    import importlib.machinery    # any file name: a source loader, not one chosen by the suffix
    modspec = importlib.util.spec_from_loader("_ptx_formal_audit_user",
                                              importlib.machinery.SourceFileLoader("_ptx_formal_audit_user", str(p)))
    mod = importlib.util.module_from_spec(modspec)
    try:
        modspec.loader.exec_module(mod)
    except (Exception, SystemExit) as e:  # user code (sys.exit too): report it in one line, never a pass
        raise InputError(f"--python: {path} failed to import: {type(e).__name__}: {e}") from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise InputError(f"--python: {path} has no function {func}")
    return fn
