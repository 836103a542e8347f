"""Throughput of the arithmetic core: MMAs per second on one core, vectorised vs scalar.

    .venv/bin/python benchmarks/bench_numerics.py [--T 10000] [--scalar-T 2] [--arch sm_90]
                                                  [--warps 2000] [--skip-matrix] [--skip-evaluate]

One "MMA" is one warp-level instruction's worth of outputs (m16n8kK: 128 dot products).

Table 1 (matrix level): random normal values (integers: uniform codes), batched T at a
time through ``mma_matrices``; the scalar column runs ``mma_scalar`` (Fractions) on a few.

Table 2 (register level, what a hardware check runs): ``formal.evaluate.evaluate`` on
``--warps`` warps of ``formal.inputs.random_inputs`` per form family and regime
(layouts, metadata and numerics included), CPU seconds of this process; the last
column is the CPU time 10,000 warps of one form take.
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
    ("m8n8k4 f16->f32 (FMA pipe)", (8, 8, 4), "f16", "f32", {"shape": (8, 8, 4)}),
    ("m16n8k32 e4m3->f32", (16, 8, 32), "e4m3", "f32", {}),
    # wmma (256 outputs per MMA): f16 D from an f32 C is the f32 block then F2FP; tf32 m16n16k8 two k=4 blocks
    ("wmma m16n16k16 f16+f32->f16 (Narrowed)", (16, 16, 16), "f16", "f32", {"dtype": "f16", "shape": (16, 16, 16)}),
    ("wmma m16n16k8 tf32->f32 (n=4)", (16, 16, 8), "tf32", "f32", {"shape": (16, 16, 8)}),
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


EVAL_FORMS = [
    # label, opcode
    ("f16 m16n8k16 ->f32", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("f16 m16n8k16 ->f16", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    ("bf16 m16n8k16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("tf32 m16n8k8", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("f16 m8n8k4 (FMA pipe) ->f32", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"),
    ("f16 m8n8k4 (FMA pipe) ->f16", "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16"),
    ("e4m3 m16n8k32 (emulated)", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
    ("e5m2 m16n8k16 (emulated)", "mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f16"),
    ("f64 m8n8k4", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"),
    ("f64 m16n8k8 .rz", "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64.rz"),
    ("f64 m16n8k16 .rn", "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64.rn"),
    ("s8 m16n8k32 .satfinite", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32"),
    ("s4 m16n8k64", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"),
    ("b1 m16n8k256 .xor", "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"),
    ("sparse f16 m16n8k32", "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"),
    ("sparse e4m3 m16n8k64", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32"),
]


def scalar_rate(f, regime="normal") -> float:
    """MMA/s of the scalar reference (``dot_scalar``, Fractions) on one warp of ``f``: the
    baseline the vectorised path is measured against in the same run."""
    from formal import layout, metadata
    from formal.hw.inputs import random_inputs
    from formal.numerics import dot_scalar

    inp = random_inputs(f, 1, regime, 1)
    B = layout.unpack(f, "b", inp["b"])[0]
    C = layout.unpack(f, "c", inp["c"])[0]
    M, N, K = f.mnk
    kw = dict(atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, arch="sm_90", satfinite=f.satfinite,
              bitop=f.bitop, rounding=f.rounding, kind=f.kind, shape=f.mnk, sparse=f.is_sparse)
    if f.is_sparse:
        vals, kidx = metadata.gather_terms(f, inp["a"], np.asarray(inp["e"], np.uint32).reshape(1, 32), 0)
    elif f.mnk == (8, 8, 4) and f.atype == "f16":
        return float("nan")     # four products per warp: the matrix-level table has its scalar figure
    else:
        A = layout.unpack(f, "a", inp["a"])[0]
    c = time.process_time()
    for i in range(M):
        for j in range(N):
            a_t, b_t = (vals[0, i], B[kidx[0, i], j]) if f.is_sparse else (A[i], B[:, j])
            dot_scalar(list(a_t), list(b_t), C[i, j], **kw)
    return 1 / max(time.process_time() - c, 1e-9)


def bench_evaluate(warps: int, regimes=("normal", "bits", "special"), scalar: bool = True):
    from formal.catalog import parse
    from formal.evaluate import evaluate
    from formal.inputs import random_inputs

    print(f"\nRegister level: formal.evaluate.evaluate, arch=sm_90, {warps} warps per batch, one core (CPU time)")
    print("Goal (issue 14): >= 20,000 MMA/s in the normal regime (sparse >= 10,000), every regime within 2x of that.")
    print("| form | " + " | ".join(f"{r} MMA/s" for r in regimes) + " | goal | met | scalar reference MMA/s | "
          "10k warps (s, worst regime) |")
    print("|---|" + "---|" * (len(regimes) + 4))
    warm = parse(EVAL_FORMS[0][1])
    w = random_inputs(warm, 4, "normal", 0)
    evaluate(warm, w["a"], w["b"], w["c"])
    for label, op in EVAL_FORMS:
        f = parse(op)
        rates = []
        for r in regimes:
            inp = random_inputs(f, warps, r, 1)
            sel = 0 if f.is_sparse else None
            best = float("inf")
            for _ in range(2):   # best of two: a shared machine's hiccups are not the evaluator's
                c = time.process_time()
                evaluate(f, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=sel, arch="sm_90")
                best = min(best, time.process_time() - c)
            rates.append(warps / max(best, 1e-9))
        goal = 10000 if f.is_sparse else 20000
        met = rates[0] >= goal and min(rates) >= goal / 2
        sc = scalar_rate(f) if scalar else float("nan")
        print(f"| {label} | " + " | ".join(f"{x:,.0f}" for x in rates) +
              f" | {goal:,} | {'yes' if met else 'NO'} | {sc:,.2f} | {10000 / min(rates):.1f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--T", type=int, default=10000, help="MMAs per vectorised batch")
    ap.add_argument("--scalar-T", type=int, default=2, help="MMAs for the scalar reference")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warps", type=int, default=2000, help="warps per batch for the register-level table")
    ap.add_argument("--skip-matrix", action="store_true")
    ap.add_argument("--skip-evaluate", action="store_true")
    ap.add_argument("--skip-scalar", action="store_true", help="no scalar-reference column in the register table")
    args = ap.parse_args(argv)
    if not args.skip_matrix:
        bench_matrix(args)
    if not args.skip_evaluate:
        bench_evaluate(args.warps, scalar=not args.skip_scalar)


def bench_matrix(args):
    rng = np.random.default_rng(0)
    print(f"arch={args.arch}  numpy {np.__version__}  one core, best of {args.repeat}")
    print("| form | T | vectorised MMA/s (cpu) | vectorised MMA/s (wall) | scalar MMA/s (cpu) | speed-up |")
    print("|---|---|---|---|---|---|")
    for label, mnk, at, ct, kw in FORMS:
        T = args.T if at != "f64" else max(1, args.T // 10)
        A, B, C = make(rng, T, mnk, at, ct)
        kw = dict(dict(atype=at, btype=at, ctype=ct, dtype=ct, arch=args.arch), **kw)
        vw, vc = rate(lambda: mma_matrices(A, B, C, **kw), T, args.repeat)
        ts = args.scalar_T
        As, Bs, Cs = A[:ts].tolist(), B[:ts].tolist(), C[:ts].tolist()
        _, sc = rate(lambda: mma_scalar(As, Bs, Cs, **kw), ts, 1)
        print(f"| {label} | {T} | {vc:,.0f} | {vw:,.0f} | {sc:,.2f} | {vc / sc:,.0f}x |")


if __name__ == "__main__":
    main()
