"""``ptx-formal vectors`` (edge-case test vectors) and ``ptx-formal verify`` (check a device's results)."""

from __future__ import annotations

import argparse
import json
import sys

from ..catalog import BadArgument, parse

GRAMMAR = """\
hex format (one case per line, like Berkeley TestFloat):
  # ptx-formal-vectors {JSON header}
  OPCODE [sel=S] a=LANES b=LANES c=LANES [e=W|W|...] d=LANES  # id=N points=P1,P2 [seen=P3,...] why=TEXT
  LANES = 32 lanes separated by '|', lane 0 first; each lane = its registers of that
          operand separated by ',', each 8 hex digits (16 for 64-bit f64 registers)
  e     = 32 metadata words (mma.sp), lane 0 first;  sel = the sparsity selector
  d     = the expected result registers (same layout)
  matrix-level forms (wmma.mma, block scaling, wgmma.mma_async, --level matrix) use
  A= B= C= [SA= SB=] D= instead (wgmma: A is 64 x K, the dense structured-sparse A for .sp):
  rows separated by '|', elements by ',', each ceil(bits/4) hex digits (raw encodings)
result files for 'verify': the same lines with at least d= (or D=), one per case in
vector order (a '# id=N' note matches by id), or JSONL {"id": N, "d": [[hex,...] x32]},
or an npz with d [T, 32, nd] (D [T, M, N]).
"""


#: random warps by default: 8 per input regime (bits, normal, finite, align, extreme, special)
DEFAULT_COUNT = 48


def _wrap(fn):
    from ..evaluate import EvalError

    try:
        return fn()
    except EvalError as e:
        raise BadArgument(str(e)) from None


def cmd_list_coverage(args) -> int:
    from ..vectors.coverage import list_coverage

    form = parse(args.opcode) if args.opcode else None
    models = list_coverage(form)
    if args.json:
        print(json.dumps([m.to_dict() for m in models] + [{"name": "random", "summary": "random warps per input "
                                                          "regime (--count N)", "points": "random:REGIME",
                                                          "solver": False}], indent=1))
        return 0
    if form:
        print(f"coverage models that apply to {form.opcode}:")
    w = max(len(m.name) for m in models) if models else 8
    for m in models:
        print(f"{m.name:{w}s}  {'[solver] ' if m.solver else ''}{m.summary}")
        print(f"{'':{w}s}  points: {m.points}")
    print(f"{'random':{w}s}  random warps per input regime (--count N); points: random:REGIME")
    return 0


def cmd_vectors(args) -> int:
    from .. import vectors as V

    if args.list_coverage:
        return cmd_list_coverage(args)
    if not args.opcode:
        raise BadArgument("name an OPCODE (or use --list-coverage)")
    if args.json:
        raise BadArgument("--json applies to --list-coverage (vector files: --format jsonl)")
    from . import bounded_int, check_writable, timeout_seconds

    form = parse(args.opcode)
    timeout_ms = timeout_seconds(args.timeout)
    bounded_int(args.count, "--count", 0, 10_000_000)
    for path, opt in ((args.output, "-o"), (args.cuda, "--cuda")):
        if path and path != "-":
            check_writable(path, opt)
    if args.coverage is not None:
        cov = [c.strip() for item in args.coverage for c in item.split(",") if c.strip()]
        if not cov:
            raise BadArgument("--coverage names no coverage model (see --list-coverage)")
    if args.cuda:
        V.cuda_harness(form, args.cuda)
        print(f"wrote {args.cuda} (nvcc -arch=sm_90 -o harness {args.cuda}; ./harness VECTORS.hex RESULTS.hex)",
              file=sys.stderr)
        if not args.output:
            return 0
    cov = None
    if args.coverage is not None:
        cov = [c.strip() for item in args.coverage for c in item.split(",") if c.strip()]
    vs = _wrap(lambda: V.generate(form, arch=args.arch, count=args.count, seed=args.seed, coverage=cov,
                                  timeout_ms=timeout_ms, level=args.level))
    out = args.output or "-"
    fmt = V.fileio.infer_format(out, args.format)
    if fmt == "npz" and out == "-":
        raise BadArgument("--format npz needs -o FILE")
    V.write(vs, out, fmt)
    h = vs.header
    if out != "-" or args.summary:
        msg = (f"{len(vs)} vectors for {form.opcode} ({h['arch']} model, seed {h['seed']}) -> {out} [{fmt}]; "
               f"{len(h['points'])} coverage points; digest {h['digest']}")
        if h["not_covered"]:
            msg += "; not covered: " + "; ".join(f"{p}: {r}" for p, r in h["not_covered"].items())
        if h["dropped"]:
            msg += f"; {len(h['dropped'])} targets the model did not confirm (see header 'dropped')"
        print(msg, file=sys.stderr)
    return 0


def cmd_verify(args) -> int:
    from .. import vectors as V

    vs = V.read(args.vectors)
    form = parse(args.opcode)
    if vs.opcode != form.opcode:
        raise BadArgument(f"{args.vectors} holds vectors for {vs.opcode}, not {form.opcode}")
    got = V.read_results(args.results, vs)
    rep = V.compare(vs, got, keep=args.max_mismatches, source=args.results)
    pick, causes, nel, examined = [], [], 0, 0
    if not rep.ok:          # element witnesses and root causes (no reduction: the device is not in the loop)
        from ..vectors.audit import explain

        ex = explain(vs, got, vs.arch, None, max_witnesses=args.max_mismatches, caught=rep.caught_by)
        pick, causes, nel, examined = ex.witnesses, ex.causes, ex.total, ex.examined
    if args.json:
        d = rep.to_dict(args.max_mismatches)
        d.update(vectors_digest=vs.digest, failed_elements=nel, failed_elements_truncated=examined < nel,
                 failed_elements_examined=examined, causes=causes, witnesses=[w.to_dict() for w in pick])
        print(json.dumps(d, indent=1, default=str))
    else:
        print(rep.table(args.max_mismatches if not pick else 0))
        if pick:
            grouped = (f"; causes grouped over the first {examined}: the rest were only counted"
                       if examined < nel else "")
            print(f"\n{nel} failing output elements (vectors {vs.digest}{grouped}), explained by:")
            for g in causes:
                print(f"  {g['cause']}: {g['elements']} elements in {len(g['cases'])} cases -- {g['what']}")
            print("element witnesses:")
            for w in pick:
                print("\n".join("  " + x for x in w.lines()))
    return 0 if rep.ok else 1


def register(sub) -> None:
    p = sub.add_parser(
        "vectors", help="edge-case test vectors with expected results and coverage annotations",
        description="Deterministic vectors for one form: every applicable coverage model (see --list-coverage; "
                    "solver-found inputs where a corner needs it) plus --count random warps. Each case carries "
                    "the coverage points it hits and why it exists; expected results come from the evaluator.",
        epilog=GRAMMAR, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("opcode", nargs="?", help="the form (canonical or any accepted spelling)")
    p.add_argument("--arch", default="sm_90", help="arithmetic model for the expected results (default sm_90)")
    p.add_argument("--count", type=int, default=DEFAULT_COUNT,
                   help=f"random warps on top of the coverage models, cycling through the input regimes "
                        f"(default {DEFAULT_COUNT}: 8 per regime)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--level", choices=("regs", "matrix"), default="regs",
                   help="registers (default) or matrices A, B, C -> D (mma forms too: a simulator without PTX "
                        "fragment layouts runs them; wmma, block-scaled and wgmma forms are always matrices)")
    p.add_argument("--coverage", nargs="+", metavar="NAME", help="only these coverage models (default: all that apply)")
    p.add_argument("--format", choices=("jsonl", "hex", "npz"), default=None,
                   help="output format (default: from the -o extension, else jsonl)")
    p.add_argument("-o", "--output", default=None, help="output file (default stdout; npz needs a file)")
    p.add_argument("--list-coverage", action="store_true", help="list the coverage models (those of OPCODE if given)")
    p.add_argument("--cuda", metavar="FILE", default=None,
                   help="also write the standalone CUDA harness for this form (reads the hex vectors)")
    p.add_argument("--timeout", type=float, default=20.0, help="solver timeout per query, seconds (default 20)")
    p.add_argument("--summary", action="store_true", help="print the one-line summary even when writing to stdout")
    p.add_argument("--json", action="store_true", help="with --list-coverage: JSON")
    p.set_defaults(func=cmd_vectors)

    q = sub.add_parser(
        "verify", help="check a device's outputs against a vector file's expected results",
        description="Compares every result bit for bit; reports per coverage point which cases pass and the "
                    "first mismatches with their inputs. Exit 0 all pass, 1 any mismatch, 2 bad files.",
        epilog=GRAMMAR, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("opcode")
    q.add_argument("vectors", help="vector file (jsonl, hex or npz from 'ptx-formal vectors')")
    q.add_argument("results", help="the device's results (hex lines with d=, JSONL, or npz with d)")
    q.add_argument("--max-mismatches", type=int, default=5)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_verify)
