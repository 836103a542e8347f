"""``ptx-formal audit``: audit a hardware model (simulator, RTL reference) written in Python.

    ptx-formal audit OPCODE --python FILE:FUNC [--level regs|matrix] [--seed S] [--count N]
                     [--coverage NAME ...] [--json] [--markdown FILE] [--save-vectors FILE]
                     [--model-timeout SECONDS]
    ptx-formal audit OPCODE --python FILE:FUNC --identify [--save-vectors FILE]

FUNC is called like the evaluator: ``FUNC(opcode, a, b, c, e=None, sel=None)`` with
register arrays ``[T, 32, nregs]`` (``--level regs``, the default for mma forms), or
``FUNC(opcode, A, B, C)`` with matrices ``[T, M, K]``, ``[T, K, N]``, ``[T, M, N]`` of raw
element encodings (``--level matrix``: no PTX fragment layouts needed), returning d (D): an
integer array of that shape, every value a raw encoding within the register (or element)
width.  wmma.mma, block-scaled and wgmma.mma_async forms are always audited with matrices
(a wgmma: A [T, 64, K], the dense structured-sparse A for .sp; B [T, K, N]; C [T, 64, N];
scale-d = 1, imm-scale-a/b = 1).  FUNC runs in a child process; its prints go to stderr.
Exit codes: 0 pass (or identified), 1 a mismatch (with an element witness) or no model
matches, 2 bad input, or the model's own failure: FILE fails to import, FUNC raises, ends its
process (os._exit, a crash) without returning, or returns something that is not D (floats,
NaN, values outside the width, the wrong shape); 3 one call of FUNC (or the import) took
longer than --model-timeout seconds (the child is stopped).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from ..catalog import BadArgument, parse


#: most random warps one audit runs (each is generated, run through the model and compared)
MAX_COUNT = 100_000


def cmd_audit(args) -> int:
    from ..vectors import audit as A
    from . import bounded_int, check_writable
    from .sandbox import ModelTimeout, SandboxedModel

    form = parse(args.opcode)
    if form.family not in ("mma", "mma.sp", "wmma.mma", "wgmma"):
        raise BadArgument(f"{form.opcode}: audit is for mma, mma.sp, wmma.mma and wgmma.mma_async forms, "
                          f"not {form.family}")
    bounded_int(args.count, "--count", 0, MAX_COUNT)
    t = args.model_timeout
    if not (isinstance(t, (int, float)) and math.isfinite(t) and 0 < t <= 86400):
        raise BadArgument(f"--model-timeout must be a number of seconds in (0, 86400], got {t}")
    for path, opt in ((args.markdown, "--markdown"), (args.save_vectors, "--save-vectors")):
        if path:
            check_writable(path, opt)
    cov = None
    if args.coverage is not None:
        from ..vectors import coverage as C

        cov = [c.strip() for item in args.coverage for c in item.split(",") if c.strip()]
        if not cov:
            raise BadArgument("--coverage names no coverage model (see ptx-formal vectors --list-coverage)")
        unknown = [c for c in cov if c not in C.MODELS and c != "random"]
        if unknown:
            raise BadArgument(f"--coverage: unknown coverage model {unknown[0][:60]!r}; known: "
                              f"{', '.join(C.MODELS)}, random")
    from ..numerics.archs import get_model

    try:
        get_model(args.arch)
    except KeyError as e:
        raise BadArgument(f"--arch: {str(e).strip(chr(34) + chr(39))[:300]}") from None
    # checked before the model's process starts (a bad option costs no child)
    # the user's code runs in a child process: a hang is stopped at --model-timeout, an exit of
    # its process is a failure, never a pass (formal.cli.sandbox)
    try:
        with SandboxedModel(args.python, timeout=t) as model:
            return _run(args, form, model, cov, A)
    except ModelTimeout as e:
        print(f"ptx-formal: audit: {e}", file=sys.stderr)
        return 3


def _save(vs, path: str) -> None:
    from .. import vectors as V

    V.write(vs, path, V.fileio.infer_format(path, None))
    print(f"wrote {len(vs.cases)} vectors to {path} ({vs.header.get('digest') or vs.digest})", file=sys.stderr)


def _run(args, form, model, cov, A) -> int:
    from ..vectors import VectorError, generate

    if args.identify:
        prep = A.distinguishing_vectors(form, seed=args.seed, level=args.level)
        if args.save_vectors:
            _save(prep[0], args.save_vectors)
        rep = A.identify(form, model, seed=args.seed, level=args.level, prepared=prep)
        if rep.errors:
            raise BadArgument(f"the model failed: {rep.errors[0]}")
        print(json.dumps(rep.to_dict(), indent=1) if args.json else rep.table())
        return 0 if rep.identified else 1
    try:
        vs = generate(form, arch=args.arch, count=args.count, seed=args.seed, coverage=cov, level=args.level)
    except (VectorError, KeyError) as e:
        raise BadArgument(str(e).strip("'\"")) from None
    if args.save_vectors:
        _save(vs, args.save_vectors)
    rep = A.audit(form, model, arch=args.arch, vectors=vs, reduce=not args.no_reduce)
    if rep.errors:                      # the user's code raised or returned no D: one line, exit 2
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
                   help="what FUNC takes: registers (default) or matrices (no fragment layouts needed; wmma, "
                        "block-scaled and wgmma forms always take matrices)")
    p.add_argument("--arch", default="sm_90", help="reference model (default sm_90)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=DEFAULT_COUNT,
                   help=f"random warps (default {DEFAULT_COUNT}, at most {MAX_COUNT:,})")
    p.add_argument("--coverage", nargs="+", metavar="NAME", help="only these coverage models")
    p.add_argument("--identify", action="store_true",
                   help="which of the evaluator's architecture models FUNC behaves like, and where it departs")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown")
    p.add_argument("--save-vectors", metavar="FILE",
                   help="also write the vectors the audit ran (with --identify: the model-distinguishing ones) "
                        "to FILE: .hex (default), .jsonl or .npz, as `ptx-formal vectors` writes them")
    p.add_argument("--model-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="stop the model when one call (or its import) takes longer (default 60): exit 3")
    p.add_argument("--no-reduce", action="store_true", help="do not reduce the witnesses (faster)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)
