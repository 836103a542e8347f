"""Benchmark: proving the fragment layouts of the whole catalog (Z3, enumeration, both).

    python benchmarks/bench_prove.py [--all-modules] [--repeat N]
    python benchmarks/bench_prove.py --jobs-only      # just the cold whole-catalog run, -j 1 vs -j N

Prints the number of obligations (unique and form-operands covered), then per engine the
total and per-obligation time, per family, and the cold wall time of
``ptx-formal prove --all`` and of one form in a fresh interpreter.  Goal (2-core box):
whole catalog < 30 s cold, one form < 1 s.  First, the issue-14 figure: cold
``ptx-formal prove --all --check-report`` (every module, both engines) on one core
(``-j 1``, the baseline) and on every core (``-j N``), next to the goal (< 15 s on 2 cores);
both must find proofs/REPORT.md current (the report is byte-identical for any N).  ``--all-modules`` includes the obligations
other modules register (metadata, wmma, transform); by default only the layout family.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ONE_FORM = "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"


def cold(argv: list[str]) -> float:
    code = ("import sys, time; t = time.perf_counter(); from formal.cli import main; "
            f"rc = main({argv!r}); print(time.perf_counter() - t, file=sys.stderr); sys.exit(rc)")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"ptx-formal {' '.join(argv)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all-modules", action="store_true", help="include other modules' obligations")
    ap.add_argument("--repeat", type=int, default=1, help="repeat the in-process runs (best time kept)")
    ap.add_argument("--jobs-only", action="store_true", help="only the cold -j 1 vs -j N whole-catalog run")
    args = ap.parse_args()

    from formal import catalog as cat
    from formal import prove as P

    n = P.default_jobs()
    t1 = cold(["prove", "--all", "--check-report", "-q", "-j", "1"])
    tn = cold(["prove", "--all", "--check-report", "-q", "-j", str(n)])
    print(f"cold `ptx-formal prove --all` (every module, both engines, report checked byte-identical):")
    print(f"  -j 1 (baseline, one core): {t1:6.2f} s")
    print(f"  -j {n} ({n} cores):          {tn:6.2f} s   (goal < 15 s on 2 cores; speed-up {t1 / tn:.2f}x)")
    print()
    if args.jobs_only:
        return 0

    fam = [] if args.all_modules else ["--family", "layout"]
    t_cold_all = cold(["prove", "--all", "--no-report", "-q"] + fam)
    t_cold_one = cold(["prove", ONE_FORM, "-q"] + fam)

    if args.all_modules:
        P.load_optional_modules()
    forms = list(cat.documented_forms())
    t0 = time.perf_counter()
    obs = P.collect(forms)
    if not args.all_modules:
        obs = [o for o in obs if o.family.startswith("layout.")]
    t_collect = time.perf_counter() - t0

    rows = {}
    per_family: dict[str, dict[str, float]] = defaultdict(dict)
    for engine in ("z3", "enum", "both"):
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = P.run(obs, P.Options(engine=engine, certificates=engine != "enum"))
            dt = time.perf_counter() - t0
            if best is None or dt < best[0]:
                best = (dt, res)
        dt, res = best
        bad = [r for r in res if r.status != "proved"]
        secs = [r.seconds for r in res]
        rows[engine] = (dt, statistics.mean(secs), max(secs), len(bad))
        acc: dict[str, float] = defaultdict(float)
        for r in res:
            acc[r.obligation.family] += r.seconds
        for f, v in acc.items():
            per_family[f][engine] = v

    t0 = time.perf_counter()
    one = P.run(P.collect([cat.parse(ONE_FORM)]))
    t_one = time.perf_counter() - t0

    n_cover = sum(len(o.cover) for o in obs)
    print(f"catalog: {len(forms)} documented forms; {len(obs)} unique obligations covering {n_cover} "
          f"form-operand claims (collect {t_collect:.2f} s)")
    print()
    print(f"{'engine':8s} {'total s':>9s} {'mean ms':>9s} {'max ms':>9s} {'not proved':>11s}")
    for engine, (dt, mean, mx, nb) in rows.items():
        print(f"{engine:8s} {dt:9.2f} {mean * 1000:9.2f} {mx * 1000:9.1f} {nb:11d}")
    print()
    fams = sorted(per_family)
    counts = defaultdict(int)
    for o in obs:
        counts[o.family] += 1
    print(f"{'family':22s} {'n':>6s} {'z3 s':>8s} {'enum s':>8s} {'both s':>8s}")
    for f in fams:
        d = per_family[f]
        print(f"{f:22s} {counts[f]:6d} {d.get('z3', 0):8.2f} {d.get('enum', 0):8.2f} {d.get('both', 0):8.2f}")
    print()
    scope = "all modules" if args.all_modules else "layout family"
    print(f"cold `ptx-formal prove --all` ({scope}): {t_cold_all:6.2f} s   (goal < 30 s)")
    print(f"cold `ptx-formal prove {ONE_FORM}`: {t_cold_one:5.2f} s")
    print(f"one form in process ({len(one)} obligations): {t_one:5.2f} s   (goal < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
