"""Throughput of the arithmetic core: MMAs per second on one core, vectorised vs scalar.

    .venv/bin/python benchmarks/bench_numerics.py [--T 10000] [--scalar-T 2] [--arch sm_90]

One "MMA" is one warp-level instruction's worth of outputs (m16n8kK: 128 dot products).
Inputs are random normal values (integers: uniform codes), batched T at a time through
``mma_matrices``; the scalar column runs ``mma_scalar`` (Fractions) on a few of them.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from formal.numerics import from_float64, mma_matrices, mma_scalar  # noqa: E402

FORMS = [
    # label, (M, N, K), atype, ctype/dtype, extra kwargs
    ("m16n8k16 f16->f32", (16, 8, 16), "f16", "f32", {}),
    ("m16n8k32 s8->s32", (16, 8, 32), "s8", "s32", {}),
    ("m16n8k8 f64", (16, 8, 8), "f64", "f64", {"rounding": "rn"}),
    ("m16n8k32 e4m3->f32", (16, 8, 32), "e4m3", "f32", {}),
]


def make(rng, T, mnk, at, ct):
    M, N, K = mnk
    if at in ("s8", "u8"):
        A = rng.integers(0, 256, (T, M, K)).astype(np.uint8)
        B = rng.integers(0, 256, (T, K, N)).astype(np.uint8)
        C = rng.integers(0, 2**32, (T, M, N), dtype=np.uint64).astype(np.uint32)
        return A, B, C
    A = from_float64(rng.standard_normal((T, M, K)), at)
    B = from_float64(rng.standard_normal((T, K, N)), at)
    C = from_float64(rng.standard_normal((T, M, N)), ct)
    return A, B, C


def rate(fn, n, repeat=3):
    """(wall, cpu) MMAs per second, best of ``repeat``.  CPU time is what the process
    itself used: on a shared machine it is the honest one-core figure."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return n / wall, n / max(cpu, 1e-9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--T", type=int, default=10000, help="MMAs per vectorised batch")
    ap.add_argument("--scalar-T", type=int, default=2, help="MMAs for the scalar reference")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"arch={args.arch}  numpy {np.__version__}  one core, best of {args.repeat}")
    print("| form | T | vectorised MMA/s (cpu) | vectorised MMA/s (wall) | scalar MMA/s (cpu) | speed-up |")
    print("|---|---|---|---|---|---|")
    for label, mnk, at, ct, kw in FORMS:
        T = args.T if at != "f64" else max(1, args.T // 10)
        A, B, C = make(rng, T, mnk, at, ct)
        kw = dict(atype=at, btype=at, ctype=ct, dtype=ct, arch=args.arch, **kw)
        vw, vc = rate(lambda: mma_matrices(A, B, C, **kw), T, args.repeat)
        ts = args.scalar_T
        As, Bs, Cs = A[:ts].tolist(), B[:ts].tolist(), C[:ts].tolist()
        _, sc = rate(lambda: mma_scalar(As, Bs, Cs, **kw), ts, 1)
        print(f"| {label} | {T} | {vc:,.0f} | {vw:,.0f} | {sc:,.2f} | {vc / sc:,.0f}x |")


if __name__ == "__main__":
    main()
