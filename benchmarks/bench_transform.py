"""Benchmark: proving the recipe library and the layout algebra's operations.

    python benchmarks/bench_transform.py [--repeat N]

Prints one table row per recipe (status, steps, unit, Z3 + enumeration seconds) and per
algebra operation, plus the totals.  No GPU needed.
"""

from __future__ import annotations

import argparse
import time


def bench_recipes(repeat: int) -> list[tuple]:
    from formal.transform import library

    rows = []
    for r in library():
        best = None
        res = None
        for _ in range(repeat):
            t = time.perf_counter()
            res = r.prove()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        rows.append((r.name, res.status, len(r.steps), res.unit_bits, best))
    return rows


def bench_algebra(repeat: int) -> list[tuple]:
    from formal import algebra as alg
    from formal.transform import triton
    from formal.layout import fragment
    from formal.transform import cute, sparse

    F = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    a = alg.from_formulas([("lane", 32), ("reg", 4), ("elem", 2)], [("row", 16), ("col", 16)],
                          {"row": "(lane >> 2) + 8 * (reg & 1)", "col": "2 * (lane & 3) + elem + 8 * (reg >> 1)"})
    sw = alg.from_formulas([("row", 64), ("col", 64)], [("offset", 4096)],
                           {"offset": "row * 64 + (col ^ ((row & 7) << 3))"})
    ops = [
        ("bijective (A fragment, 256 points)", lambda: a.bijective()),
        ("invert + certify (A fragment)", lambda: a.invert()),
        ("invert + certify (64x64 swizzled tile)", lambda: sw.invert()),
        ("equals (A vs its table)", lambda: a.equals(a.table())),
        ("is_linear (A fragment)", lambda: alg.is_linear(a)),
        ("Triton export (spec A)", lambda: triton.export(fragment(F, "a"))),
        ("CuTe export (spec A)", lambda: cute.export(fragment(F, "a"))),
        ("sparse A relation (14 proofs)", lambda: sparse.prove_all("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32")),
    ]
    rows = []
    for name, fn in ops:
        best = None
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        rows.append((name, best))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = bench_recipes(args.repeat)
    print(f"{'recipe':46s} {'status':8s} {'steps':>5s} {'unit':>4s} {'seconds':>8s}")
    for name, st, n, u, dt in rows:
        print(f"{name:46s} {st:8s} {n:5d} {u:4d} {dt:8.3f}")
    print(f"{'total (' + str(len(rows)) + ' recipes)':46s} {'':8s} {'':5s} {'':4s} {sum(r[4] for r in rows):8.3f}")
    print()
    print(f"{'algebra operation':46s} {'seconds':>8s}")
    for name, dt in bench_algebra(args.repeat):
        print(f"{name:46s} {dt:8.3f}")
    print(f"\nwall {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    main()
