"""``ptx-formal audit``: audit a hardware model (simulator, RTL reference) written in Python.

    ptx-formal audit OPCODE --python FILE:FUNC [--level regs|matrix] [--seed S] [--count N]
                     [--coverage NAME ...] [--json] [--markdown FILE] [--save-vectors FILE]
    ptx-formal audit OPCODE --python FILE:FUNC --identify

FUNC is called like the evaluator: ``FUNC(opcode, a, b, c, e=None, sel=None)`` with
register arrays ``[T, 32, nregs]`` (``--level regs``, the default for mma forms), or
``FUNC(opcode, A, B, C)`` with matrices ``[T, M, K]``, ``[T, K, N]``, ``[T, M, N]`` of raw
element encodings (``--level matrix``: no PTX fragment layouts needed), returning d (D).
Exit codes: 0 pass (or identified), 1 a mismatch (with an element witness) or no model
matches, 2 bad input or the user's code failed to load or crashed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..catalog import BadArgument, parse


def _load(spec: str):
    """The user's function (one loader for every ``--python``), contained when called."""
    from . import load_user_function

    return _contained(load_user_function(spec), spec)


def _contained(fn, name: str):
    """Run the user's function so that SystemExit (and any BaseException but Ctrl-C) is an
    ordinary exception the audit reports, never an exit of ptx-formal itself."""
    import functools
    import inspect

    @functools.wraps(fn)
    def call(*a, **kw):
        try:
            return fn(*a, **kw)
        except KeyboardInterrupt:
            raise
        except Exception:
            raise
        except BaseException as e:  # noqa: BLE001  SystemExit, GeneratorExit ...
            raise RuntimeError(f"{type(e).__name__}: {e}") from None

    try:
        call.__signature__ = inspect.signature(fn)      # the audit passes arch= only if FUNC takes it
    except (TypeError, ValueError):
        pass
    call.__name__ = getattr(fn, "__name__", name)
    return call


def cmd_audit(args) -> int:
    from ..vectors import audit as A

    form = parse(args.opcode)
    if form.family not in ("mma", "mma.sp", "wmma.mma"):
        raise BadArgument(f"{form.opcode}: audit is for mma, mma.sp and wmma.mma forms, not {form.family}")
    model = _load(args.python)
    if args.identify:
        rep = A.identify(form, model, seed=args.seed, level=args.level)
        if rep.errors:
            raise BadArgument(f"the model failed: {rep.errors[0]}")
        print(json.dumps(rep.to_dict(), indent=1) if args.json else rep.table())
        return 0 if rep.identified else 1
    cov = [c for item in args.coverage for c in item.split(",") if c] if args.coverage else None
    rep = A.audit(form, model, arch=args.arch, count=args.count, seed=args.seed, coverage=cov, level=args.level,
                  reduce=not args.no_reduce)
    if rep.errors:                      # the user's code raised: one line, exit 2
        raise BadArgument(f"the model failed: {rep.errors[0]}")
    if args.markdown:
        Path(args.markdown).write_text(rep.markdown())
    print(json.dumps(rep.to_dict(), indent=1, default=str) if args.json else rep.table())
    return 0 if rep.ok else 1


def register(sub) -> None:
    from .vectors import DEFAULT_COUNT

    p = sub.add_parser(
        "audit", help="audit a Python hardware model (simulator) against the spec: coverage vectors, element "
                      "witnesses, root causes; --identify: which architecture model it behaves like",
        description=__doc__.split("\n\n", 1)[1], formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("opcode", help="the form (canonical or any accepted spelling)")
    p.add_argument("--python", required=True, metavar="FILE:FUNC", help="the model: a function in a Python file")
    p.add_argument("--level", choices=("regs", "matrix"), default="regs",
                   help="what FUNC takes: registers (default) or matrices (no fragment layouts needed)")
    p.add_argument("--arch", default="sm_90", help="reference model (default sm_90)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"random warps (default {DEFAULT_COUNT})")
    p.add_argument("--coverage", nargs="+", metavar="NAME", help="only these coverage models")
    p.add_argument("--identify", action="store_true",
                   help="which of the evaluator's architecture models FUNC behaves like, and where it departs")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    p.add_argument("--no-reduce", action="store_true", help="do not reduce the witnesses (faster)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)
