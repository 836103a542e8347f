"""The ``ptx-formal`` command line (argparse; one module per command group).

Each ``formal/cli/<group>.py`` exposes ``register(sub)`` that adds its subcommands to
the argparse sub-parser collection ``sub``; a subcommand sets ``func(args) -> int``.

Exit codes: 0 success / legal / proved, 1 illegal / refuted / mismatch, 2 bad input
(a one-line message on stderr, never a traceback), 3 unknown (a proof that timed out,
or a check that could not run, e.g. no GPU).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Command groups, in help order.  A group whose module is not written yet is skipped.
GROUPS = ["catalog", "layout", "prove", "metadata", "evaluate", "hw", "vectors", "transform", "wmma", "ptxas", "errata", "kernel"]


class InputError(Exception):
    """Bad input detected by a command: printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage + message)
        raise InputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ptx-formal",
                description="Formal specification of PTX warp-level matrix instructions (mma, mma.sp, wmma): "
                            "catalog and legality, layout proofs, sparse metadata, a bit-exact evaluator, "
                            "hardware checks, test vectors.")
    p.add_argument("--version", action="version", version=f"ptx-formal {_version()}")
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


def main(argv: list[str] | None = None) -> int:
    from ..catalog import BadArgument, MalformedOpcode

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        return int(args.func(args) or 0)
    except (MalformedOpcode, BadArgument, InputError) as e:
        print(f"ptx-formal: error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"ptx-formal: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ptx-formal: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # pragma: no cover
        return 0


def run() -> None:  # console-script entry
    sys.exit(main())
