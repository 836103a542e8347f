"""Test-vector generation speed: vectors per second per form family, solver time per coverage point.

    python benchmarks/bench_vectors.py [--random N] [--families f16,int8,...]

Three numbers per family:
  cold    all coverage models with an empty solver cache (what one `ptx-formal vectors` costs)
  warm    the same again (solver answers cached per type signature, as in a batch over many forms)
  random  N random warps only (evaluation + packing, no solver)
and then the solver's time per coverage point (cold runs), with its status.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

FAMILIES = {
    "f16->f32": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "f16->f16": "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "fp8": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
    "f64": "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64",
    "int8": "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32",
    "int4": "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32",
    "b1": "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc",
    "sparse f16": "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
    "sparse int8": "mma.sp.sync.aligned.m16n8k64.row.col.s32.s8.u8.s32",
    "wmma f16": "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random", type=int, default=512, help="random warps for the random-only rate (default 512)")
    ap.add_argument("--families", default=None, help="comma list of families (default: all)")
    args = ap.parse_args()
    from formal.vectors import coverage
    from formal.vectors import generate

    fams = FAMILIES if not args.families else {k: FAMILIES[k] for k in args.families.split(",")}
    print(f"{'family':12s} {'vectors':>7s} {'cold s':>8s} {'warm s':>8s} {'warm vec/s':>10s} "
          f"{'random vec/s':>12s}  not covered")
    solver_rows = []
    for name, op in fams.items():
        coverage._SOLUTIONS.clear()
        t0 = time.perf_counter()
        vs = generate(op)
        cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        vs2 = generate(op)
        warm = time.perf_counter() - t0
        assert len(vs2) == len(vs)
        t0 = time.perf_counter()
        vr = generate(op, coverage=["random"], count=args.random)
        rnd = time.perf_counter() - t0
        nc = ", ".join(vs.header["not_covered"]) or "-"
        print(f"{name:12s} {len(vs):7d} {cold:8.2f} {warm:8.2f} {len(vs) / warm:10.1f} {len(vr) / rnd:12.1f}  {nc}",
              flush=True)
        for p, r in vs.stats.items():
            solver_rows.append((name, p, r.get("status", "?"), r.get("seconds", 0.0), r.get("solutions", 0)))
    print()
    print(f"{'family':12s} {'coverage point':28s} {'status':15s} {'seconds':>8s} {'solutions':>9s}")
    for name, p, st, sec, n in solver_rows:
        print(f"{name:12s} {p:28s} {st:15s} {sec:8.3f} {n:9d}")
    tot = sum(r[3] for r in solver_rows)
    print(f"\nsolver total {tot:.1f} s over {len(solver_rows)} queries "
          f"(median {sorted(r[3] for r in solver_rows)[len(solver_rows) // 2]:.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
