"""Timings of the wmma engine: memory checks, stride sets, per-form proofs, maps, theorems, probe host side.

    python benchmarks/bench_wmma.py [--quick]

Prints one row per operation: how many times it ran, total and mean seconds.
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from formal.hw import wmma_probe as W
from formal.wmma import maps as mp
from formal.wmma import memory as M
from formal.wmma import theorems as T


def timed(label, fn, items, rows):
    t0 = time.perf_counter()
    n = 0
    for x in items:
        fn(x)
        n += 1
    dt = time.perf_counter() - t0
    rows.append((label, n, dt, dt / max(n, 1)))


def main(quick: bool = False) -> None:
    rows: list[tuple[str, int, float, float]] = []
    views = [v for v in M.memory_forms("sm_90", "8.5") if v.space == ""]
    some = views[:: 12 if quick else 3]
    rng = np.random.default_rng(0)
    pairs = [(v, int(rng.integers(0, 1 << 20)) * 16, int(rng.integers(0, 300))) for v in some for _ in range(4)]
    timed("check_access (Z3 + enumeration)", lambda a: M.check_access(a[0].form, a[1], a[2]), pairs, rows)
    timed("legal_strides (Z3 derive+prove, enum 2048x8)", lambda v: M.legal_strides(v.form, ptr_align=256), some, rows)
    timed("legal_strides (Z3 only)", lambda v: M.legal_strides(v.form, ptr_align=256, enumerate_strides=0), some, rows)
    timed("prove_align_readings_agree", M.prove_align_readings_agree, some, rows)
    timed("prove_overlap_iff_below_default", M.prove_overlap_iff_below_default, some, rows)
    tp = list(mp.third_party())
    timed("map covers (published maps)", mp.prove_covers, tp, rows)
    timed("map injective (published maps)", mp.prove_injective, tp, rows)
    sm90 = [m for m in mp.all_maps() if m.evidence == "silicon"]
    timed(f"map covers + injective (sm_90 silicon, {len(sm90)} maps)",
          lambda m: (mp.prove_covers(m), mp.prove_injective(m)), sm90[:: 6 if quick else 1], rows)
    if not quick:
        timed("map property report (every map, ptx-formal wmma maps --properties)",
              lambda _: mp._properties(mp.all_maps()), [0], rows)
    timed("theorem pipeline[general]", lambda _: T.pipeline_general(), [0], rows)
    timed("theorem pipeline[m2n2k2, symbolic maps]", lambda _: T.pipeline_small(), [0], rows)
    timed("theorem elementwise + counterexamples", lambda _: (T.elementwise_general(), T.elementwise_counterexamples()), [0], rows)
    timed("theorem accumulator reinterpretation", lambda _: T.accumulator_reinterpretation(), [0], rows)
    timed("theorem sub-byte order invariance", lambda _: T.subbyte_order_invariance(), [0], rows)
    timed("probe kernels (load+store+pipeline PTX)", lambda _: (W.memory_probes("load"), W.memory_probes("store"),
                                                                W.pipeline_probes()), [0], rows)

    def sim(_):
        rng2 = np.random.default_rng(1)
        cache = {}

        def maps_for(op):
            v = M.memory_view(op)
            key = (v.form.shape, v.matrix in "cd", v.etype, v.layout)
            if key not in cache:
                E, n = v.regs * v.elems_per_reg, v.rows * v.cols
                cache[key] = rng2.permutation(np.concatenate([rng2.permutation(n), rng2.integers(0, n, 32 * E - n)])).reshape(32, E)
            return cache[key]
        with tempfile.TemporaryDirectory() as d:
            W.run_wmma_probes(d, backend=W.SimulatedBackend(maps_for), log=lambda s: None, with_pipeline=not quick,
                              only=(lambda p: "m16n16k16" in p.opcode) if quick else None)
    timed("probe host side end to end (simulated device)", sim, [0], rows)

    # alignment sweep: host side, and the fault-isolated executor's own cost per job and per fault
    from pathlib import Path

    from formal.wmma import alignment as A
    from formal.wmma import pipeline as PL
    from formal.specdata import spec_dir

    timed("alignment_probes (7118 probes, 798 kernels)", lambda _: W.alignment_probes(), [0], rows)
    probes, _ = W.alignment_probes()
    timed("SASS-model predictions (per probe)", lambda p: A.predict(p.manifest()), probes[:2000], rows)

    def executor(mode: str, n: int, faults: int):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "k").mkdir()
            (root / "k" / "x.ptx").write_text("//")
            jobs = []
            for i in range(n):
                refs = W._write_job_inputs(root, f"j{i}", {"m": np.zeros(64, np.uint8)})
                jobs.append({"name": f"j{i}", "ptx": "k/x.ptx", "kernel": "x", "bufs": [{"name": "m", "bytes": 64,
                             "init": refs["m"], "out": True}], "args": [{"buf": "m"}],
                             "sim": {"fault": i % max(1, n // max(faults, 1)) == 1 if faults else False}})
            W.run_isolated(jobs, root, workers=4, simulate=mode, log=lambda s: None)
    n = 200 if quick else 1000
    timed(f"isolated executor, {n} jobs, no fault (4 workers, stand-in device)", lambda _: executor("plain", n, 0), [0], rows)
    timed(f"isolated executor, {n} jobs, 40 faults, fresh process each", lambda _: executor("plain", n, 40), [0], rows)
    timed(f"isolated executor, {n} jobs, 40 faults, fresh context in-process", lambda _: executor("recover", n, 40), [0], rows)
    sl = spec_dir() / "observed" / "wmma_pipeline_slice_sm90.json"
    timed("check_pipeline_data (run3 slice: 14 entries, silicon D)", lambda _: PL.check_pipeline_data(sl), [0], rows)
    timed("alignment summary -> probes -> errata verdicts (7118 probes)",
          lambda _: A.errata_status(A.summary_doc(), A.load_summary()["wrong_data"]), [0], rows)
    w = max(len(r[0]) for r in rows)
    print(f"{'operation':{w}s} {'n':>5s} {'total s':>9s} {'mean s':>9s}")
    for label, n, tot, mean in rows:
        print(f"{label:{w}s} {n:5d} {tot:9.2f} {mean:9.4f}")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
