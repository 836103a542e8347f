"""Kernel engine benchmarks on the corpus (tests/data/kernels): `check` and `run` per kernel.

    python benchmarks/bench_kernel.py                 # every corpus kernel + the two goal kernels
    python benchmarks/bench_kernel.py --only NAME ... # some kernels
    python benchmarks/bench_kernel.py --quick         # skip the two goal kernels

Prints, per kernel: the engine's instruction steps (one step = one PTX instruction issued to all
threads of the launch in lock step), seconds and steps per second for `check` (symbolic
provenance) and `run` (bit-exact values), thread-instructions per second (steps x threads: an upper
bound, masked-off threads count), the verdict, and whether `run` reproduces the H100 record bit
for bit.  Goals (one core):
  check of one 128x128 CTA tile with K = 1024 (bench_f16_tile128_k1024)  < 30 s
  run of a whole 512x512x512 GEMM (bench_f16_gemm512, 16 CTAs)            < 60 s
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):   # one core
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
RECORDS = ROOT / "proofs" / "evidence" / "kernels_h100.json"
GOALS = {"bench_f16_tile128_k1024": ("check", 30.0), "bench_f16_gemm512": ("run", 60.0)}


def _sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def bench(kernel, name: str, meta: dict, records: dict | None, do_check: bool, do_run: bool) -> dict:
    from formal.kernel.buffers import corpus_inputs
    from formal.kernel.spec import load_spec, raw_dtype

    spec = load_spec(CORPUS / meta["spec"])
    t = time.perf_counter()
    mod = kernel.parse_module((CORPUS / meta["ptx"]).read_text(), path=meta["ptx"])
    row = {"kernel": name, "parse_s": time.perf_counter() - t, "threads": spec.threads}
    if do_check:
        t = time.perf_counter()
        try:
            res = kernel.check(mod, spec)
            row["verdict"] = res.verdict
            row["check_steps"] = (getattr(res, "stats", None) or {}).get("steps")
        except Exception as e:  # Unsupported (wgmma) is a verdict here, not a crash
            row["verdict"] = type(e).__name__
        row["check_s"] = time.perf_counter() - t
    if do_run and row.get("verdict", "proved") not in ("Unsupported",):
        inputs = corpus_inputs(spec, 0)
        t = time.perf_counter()
        try:
            out = kernel.run(mod, spec, inputs, arch="sm_90")
            row["run_s"] = time.perf_counter() - t
            row["run_steps"] = out.steps
            if records and name in records["kernels"]:
                want = records["kernels"][name]["launches"][0]["outputs_sha256"]
                got = {k: _sha(np.asarray(out[k]).astype(raw_dtype(spec.buffer(k).type))) for k in want}
                row["h100"] = "equal" if got == want else "MISMATCH"
        except Exception as e:
            row["run_s"] = time.perf_counter() - t
            row["run_error"] = f"{type(e).__name__}: {str(e)[:80]}"
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--quick", action="store_true", help="skip the two goal kernels")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from formal import kernel
    if not all(hasattr(kernel, n) for n in ("parse_module", "check", "run")):
        print("formal.kernel has no engine (parse_module/check/run) yet")
        return 3
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    records = json.loads(RECORDS.read_text()) if RECORDS.exists() else None
    names = [n for n in manifest if (not args.only or n in args.only) and not (args.quick and n in GOALS)]
    hdr = (f"{'kernel':28s} {'verdict':>11s} {'check s':>8s} {'steps':>7s} {'steps/s':>8s} "
           f"{'run s':>7s} {'steps':>7s} {'steps/s':>8s} {'thr-ins/s':>9s}  H100")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for name in names:
        goal = GOALS.get(name)
        do_check = not args.no_check and (goal is None or goal[0] == "check")
        do_run = not args.no_run and (goal is None or goal[0] == "run")
        r = bench(kernel, name, manifest[name], records, do_check, do_run)
        rows.append(r)
        f = lambda k, fmt: format(r[k], fmt) if r.get(k) is not None else "-"
        ips = lambda s, n: format(r[n] / r[s], ".3g") if r.get(n) and r.get(s) else "-"
        tps = format(r["run_steps"] * r["threads"] / r["run_s"], ".3g") if r.get("run_steps") else "-"
        print(f"{name:28s} {r.get('verdict', '-'):>11s} {f('check_s', '8.2f'):>8s} {f('check_steps', 'd'):>7s} "
              f"{ips('check_s', 'check_steps'):>8s} {f('run_s', '7.2f'):>7s} {f('run_steps', 'd'):>7s} "
              f"{ips('run_s', 'run_steps'):>8s} {tps:>9s}  {r.get('h100', r.get('run_error', '-'))}", flush=True)
    print()
    for name, (what, limit) in GOALS.items():
        r = next((x for x in rows if x["kernel"] == name), None)
        if r and r.get(f"{what}_s") is not None:
            s = r[f"{what}_s"]
            print(f"goal: {what} {name}: {s:.1f} s (goal < {limit:.0f} s) {'MET' if s < limit else 'NOT MET'}")
    for what in ("check", "run"):
        done = [r for r in rows if r.get(f"{what}_steps")]
        steps = sum(r[f"{what}_steps"] for r in done)
        secs = sum(r[f"{what}_s"] for r in done)
        thr = sum(r[f"{what}_steps"] * r["threads"] for r in done)
        if secs:
            print(f"{what}: {len(done)} kernels, {steps} steps in {secs:.1f} s = {steps / secs:.3g} steps/s, "
                  f"{thr / secs:.3g} thread-instructions/s (upper bound)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
