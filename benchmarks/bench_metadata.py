"""Sparse metadata benchmarks: per-(form, selector) validation proofs, the 2^32 scan, compress.

    python benchmarks/bench_metadata.py            # proofs for every metadata class, a 2^28 scan slice
    python benchmarks/bench_metadata.py --full     # + one full 2^32 scan per granularity

Goal: each (form, selector) validation proof (word-valid + word-count + cover) under 1 s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from formal.metadata import compress, decompress, meta, scan
from formal.metadata import proofs
from formal.metadata.proofs import metadata_classes


def bench_proofs() -> list[tuple]:
    rows = []
    for _key, members in metadata_classes().items():
        fm = meta(members[0])
        for sel in fm.selectors:
            t = {}
            for name, fn in (("word-valid", proofs.prove_word_valid), ("word-count", proofs.count_words),
                             ("cover", proofs.prove_cover), ("round-trip", proofs.prove_round_trip)):
                t0 = time.perf_counter()
                r = fn(fm, sel)
                t[name] = (time.perf_counter() - t0, r.status)
            valid_s = t["word-valid"][0] + t["word-count"][0] + t["cover"][0]
            ok = all(s == "proved" for _, s in t.values())
            rows.append((f"{fm.gran.id} {fm.variant:20s} {fm.layout.id:15s} k{fm.k:<3d} {fm.form.atype:5s}"
                         f" sh{fm.form.operands['a'].shift}", sel, len(members), t["word-valid"][0],
                         t["word-count"][0], t["cover"][0], valid_s, t["round-trip"][0], ok))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="full 2^32 scans (about a minute each on 2 cores)")
    args = ap.parse_args()

    print("Validation proofs per (metadata class, selector)  [seconds]")
    hdr = f"{'class':58s} {'sel':>3} {'forms':>5} {'valid':>6} {'count':>6} {'cover':>6} {'TOTAL':>6} {'rtrip':>6}  ok"
    print(hdr)
    print("-" * len(hdr))
    rows = bench_proofs()
    for name, sel, n, a, b, c, tot, rt, ok in rows:
        flag = "" if tot < 1.0 else "  > 1 s"
        print(f"{name:58s} {sel:>3} {n:>5} {a:6.3f} {b:6.3f} {c:6.3f} {tot:6.3f} {rt:6.3f}  {'yes' if ok else 'NO'}{flag}")
    tots = [r[6] for r in rows]
    print(f"{len(rows)} (class, selector) pairs: max {max(tots):.3f} s, mean {np.mean(tots):.3f} s, "
          f"{sum(t < 1.0 for t in tots)}/{len(tots)} under 1 s; all proved: {all(r[-1] for r in rows)}")

    print("\nBrute-force scan (words/s; numpy, thread pool)")
    cases = [("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", 0, 6 ** 8),
             ("mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32", 0, 2 ** 8),
             ("mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", 0, 12 ** 8)]
    for op, sel, want in cases:
        fm = meta(op)
        for kind in ("word", "chunk"):
            if args.full:
                r = scan(fm, sel, kind=kind)
                verdict = f"count {r.count} == {want}: {r.count == want}"
            else:
                r = scan(fm, sel, kind=kind, start=0x40000000, stop=0x50000000)
                verdict = f"count {r.count} in [0x40000000, 0x50000000)"
            print(f"  {fm.gran.id} {fm.variant:20s} {kind:5s} {r.words:>11d} words {r.seconds:7.2f} s "
                  f"{r.rate / 1e6:8.1f} M words/s   {verdict}")

    print("\ncompress / decompress (T = 1024 instances)")
    for op in ("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
               "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32"):
        fm = meta(op)
        rng = np.random.default_rng(0)
        A = np.zeros((1024, fm.rows, fm.k), dtype=np.uint64)
        w = fm.gran.width
        for c in range(fm.chunks_per_row):
            nib = np.array(fm.legal_nibbles)[rng.integers(0, len(fm.legal_nibbles), (1024, fm.rows))]
            for j in range(fm.gran.stored):
                off = np.vectorize(lambda v: fm.offsets(int(v))[j])(nib)
                np.put_along_axis(A[:, :, c * w:(c + 1) * w], off[..., None], 1, -1)
        t0 = time.perf_counter()
        a, e = compress(op, A)
        t1 = time.perf_counter()
        B = decompress(op, a, e)
        t2 = time.perf_counter()
        assert np.array_equal(A, B)
        print(f"  {op:70s} compress {1024 / (t1 - t0):9.0f} /s  decompress {1024 / (t2 - t1):9.0f} /s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
