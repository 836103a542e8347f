"""``ptx-formal hw-check``: run forms on a CUDA GPU and compare with the evaluator."""

from __future__ import annotations

import json
import sys

from ..catalog import BadArgument, forms, parse


def cmd_hw_check(args) -> int:
    from ..hw import check as hwc
    from ..hw.runner import GPU, NoGPU

    if not args.all and not args.opcodes and not args.family:
        raise BadArgument("name one or more OPCODEs, or --all, or --family")
    for o in args.opcodes:          # bad input is exit 2 with or without a GPU
        parse(o)
    if not 1 <= args.trials <= 1 << 32:
        raise BadArgument(f"--trials must be in 1..2^32, got {args.trials}")
    if args.out:
        from . import check_writable
        check_writable(args.out, "--out")
    try:
        gpu = GPU()
    except NoGPU as e:
        print(f"ptx-formal: hw-check: no GPU: {e}", file=sys.stderr)
        return 3
    target = gpu.info.target
    if args.opcodes:
        fs = [parse(o) for o in args.opcodes]
    else:
        fs = forms(target if target in ("sm_80", "sm_89", "sm_90") else "sm_90", args.ptx, args.family)
    sels = None
    if args.sel is not None:
        sels = {f.opcode: (args.sel,) for f in fs if f.is_sparse}
    cases = hwc.cases_for(fs, sels)
    if not cases:
        raise BadArgument("no register-level mma/mma.sp forms selected")
    regimes = args.regimes.split(",") if args.regimes else hwc.DEFAULT_REGIMES
    prog = (lambda m: print(m, file=sys.stderr, flush=True)) if not args.quiet else None
    results = hwc.run(cases, args.trials, seed=args.seed, regimes=regimes, arch=args.arch, gpu=gpu,
                      workers=args.workers, progress=prog)
    rec = hwc.evidence_record(results, gpu.info.to_dict(), args.seed, regimes, args.arch)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rec, f, indent=1)
    if args.json:
        print(json.dumps(rec, indent=1))
    else:
        print(hwc.table(results))
        print(f"\n{rec['forms']} forms, {rec['cases']} cases, {rec['trials']} warps, "
              f"{rec['mismatched_warps']} mismatching warps, {rec['errors']} errors on {rec['gpu']['name']} "
              f"(driver {rec['gpu']['driver']}, CUDA runtime {rec['gpu']['cuda_runtime']})")
    return 0 if rec["mismatched_warps"] == 0 and rec["errors"] == 0 else 1


def register(sub) -> None:
    p = sub.add_parser("hw-check", help="run forms on a CUDA GPU and compare with the evaluator bit for bit",
                       description="Runs each form on the GPU (CuPy) with random inputs in several regimes and "
                                   "compares every destination register with formal.evaluate. Exit 0 all agree, "
                                   "1 any mismatch, 3 no GPU.")
    p.add_argument("opcodes", nargs="*", help="forms to check (default with --all: every register-level form of the GPU's target)")
    p.add_argument("--all", action="store_true", help="every mma/mma.sp form the catalog lists for this GPU")
    p.add_argument("--family", default=None, help="restrict --all to a family (mma, mma.sp)")
    p.add_argument("--ptx", default="9.0", help="PTX ISA version for the catalog listing (default 9.0)")
    p.add_argument("--trials", type=int, default=10000, help="warps per case, split over the regimes (default 10000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sel", type=int, default=None, help="only this sparsity selector")
    p.add_argument("--regimes", default=None, help="comma list of input regimes (default: all)")
    p.add_argument("--arch", default="sm_90", help="evaluator model to compare with (default sm_90)")
    p.add_argument("--workers", type=int, default=None, help="CPU processes for the evaluator")
    p.add_argument("--out", default=None, help="write the evidence record (JSON) here")
    p.add_argument("--json", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_hw_check)
