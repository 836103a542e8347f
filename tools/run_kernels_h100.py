"""Run every corpus kernel on the GPU (CuPy) and record the output buffers bit for bit.

On the device:   python3 tools/run_kernels_h100.py --out $OUT            # seeds 0 and 1
Here (no GPU):   python3 tools/run_kernels_h100.py --out /tmp/x --dry-run # everything but the launch
Import:          python3 tools/run_kernels_h100.py --import DIR           # -> proofs/evidence/

Inputs are ``corpus_inputs(spec, seed)`` (formal.kernel.buffers), so anyone can regenerate them;
their sha256 is recorded to prove it.  Each launch also evaluates the spec's contracts in float64
(``contract_reference``) as a sanity check of the kernel itself.  One failing kernel is recorded
as an error and does not stop the others.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
EVIDENCE = ROOT / "proofs" / "evidence"
NO_ARRAYS = {"bench_f16_gemm512"}     # recorded by sha256 only (1 MiB of f32 per launch)


def sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def device_info() -> dict:
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    v = cp.cuda.runtime.driverGetVersion()
    return {"gpu": name, "compute_capability": f"{props['major']}.{props['minor']}",
            "driver_cuda": f"{v // 1000}.{(v % 1000) // 10}", "cupy": cp.__version__, "numpy": np.__version__,
            "loaded_by": "cupy.RawModule(path=<module>.ptx): the driver JIT-compiles the checked-in PTX"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--corpus", help="a folder of specs and modules (default tests/data/kernels); without a "
                                      "manifest.json every spec runs against every module that has its entry")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: outputs are the inputs")
    ap.add_argument("--import", dest="imp", help="a folder with kernels_h100.json/.npz from the device")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.imp:
        return import_records(Path(args.imp))

    from formal.kernel.buffers import contract_reference, corpus_inputs
    from formal.kernel.spec import load_spec

    corpus = Path(args.corpus) if args.corpus else CORPUS
    manifest = _manifest(corpus)
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "seeds": args.seeds, "kernels": {}}
    record.update(device_info() if not args.dry_run else {"gpu": "dry run"})
    arrays = {}
    if not args.dry_run:
        from formal.hw.kernel_launch import launch
    for name, meta in manifest.items():
        if args.only and name not in args.only:
            continue
        rec = record["kernels"][name] = {"ptx": meta["ptx"], "ptx_sha256": meta["sha256"], "launches": []}
        try:
            spec = load_spec(corpus / meta["spec"])
            ptx = (corpus / meta["ptx"]).read_text()
            names = {b.name for b in spec.buffers}
            outputs = sorted({c.out for c in spec.contracts if c.out in names}) or sorted(names)
            for seed in args.seeds:
                inputs = corpus_inputs(spec, seed)
                t = time.time()
                if args.dry_run:
                    from formal.hw.kernel_launch import entry_params
                    entry_params(ptx, spec.entry)
                    outs = {k: v.copy() for k, v in inputs.items()}
                else:
                    outs = launch(ptx, spec, inputs)
                dt = time.time() - t
                try:
                    ref = contract_reference(spec, inputs, outs)
                except Exception as e:  # noqa: BLE001 - views / chained steps: checked by kernel run instead
                    ref = f"not computed: {type(e).__name__}: {e}"[:200]
                rec["launches"].append({
                    "seed": seed, "seconds": round(dt, 4),
                    "inputs_sha256": {k: sha(v) for k, v in inputs.items()},
                    "outputs_sha256": {k: sha(outs[k]) for k in outputs},
                    "unchanged_inputs": sorted(k for k in inputs if k not in outputs
                                               and np.array_equal(inputs[k], outs[k])),
                    "output_elements": int(sum(outs[k].size for k in outputs)),
                    "contract_rel_error": ref})
                if name not in NO_ARRAYS:
                    for k in outputs:
                        arrays[f"{name}/{seed}/{k}"] = outs[k]
            print(f"{name}: ok {[l['contract_rel_error'] for l in rec['launches']]}", flush=True)
        except Exception as e:  # recorded; the other kernels still run
            rec["error"] = f"{type(e).__name__}: {e}"
            rec["traceback"] = traceback.format_exc()[-2000:]
            print(f"{name}: ERROR {rec['error']}", flush=True)
    # mutants: one launch each (seed 0) -- evidence that the mutation changes what the kernel computes
    mm = corpus / "mutants" / "manifest.json"
    if mm.exists() and not args.only:
        record["mutants"] = {}
        for name, m in json.loads(mm.read_text())["mutants"].items():
            try:
                spec = load_spec(corpus / manifest[m["kernel"]]["spec"])
                ptx = (corpus / "mutants" / m["ptx"]).read_text()
                inputs = corpus_inputs(spec, 0)
                outs = {k: v.copy() for k, v in inputs.items()} if args.dry_run else launch(ptx, spec, inputs)
                base = record["kernels"][m["kernel"]]["launches"][0]["outputs_sha256"]
                record["mutants"][name] = {
                    "kernel": m["kernel"], "line": m["line"],
                    "outputs_equal_kernel": all(sha(outs[k]) == h for k, h in base.items()),
                    "contract_rel_error": contract_reference(spec, inputs, outs)}
            except Exception as e:
                record["mutants"][name] = {"kernel": m["kernel"], "error": f"{type(e).__name__}: {e}"}
            print(f"mutant {name}: {record['mutants'][name]}", flush=True)
    ks = record["kernels"].values()
    record["summary"] = {"kernels": len(record["kernels"]), "errors": sum("error" in k for k in ks),
                         "launches": sum(len(k["launches"]) for k in ks),
                         "output_elements": sum(l["output_elements"] for k in ks for l in k["launches"])}
    print(json.dumps(record["summary"]))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernels_h100.json").write_text(json.dumps(record, indent=1) + "\n")
        np.savez_compressed(out / "kernels_h100.npz", **arrays)
    return 0


def _manifest(corpus: Path) -> dict:
    if (corpus / "manifest.json").exists():
        return json.loads((corpus / "manifest.json").read_text())
    import re

    out = {}
    for spec in sorted(corpus.glob("*.toml")):
        entry = re.search(r'^entry\s*=\s*"([^"]+)"', spec.read_text(), re.M).group(1)
        for ptx in sorted(corpus.glob("*.ptx")):
            text = ptx.read_text()
            if re.search(rf"\.entry\s+{re.escape(entry)}\s*\(", text):
                out[f"{spec.stem}@{ptx.stem}"] = {"spec": spec.name, "ptx": ptx.name,
                                                  "sha256": hashlib.sha256(text.encode()).hexdigest()}
    return out


def import_records(src: Path) -> int:
    """Split the device's one npz into proofs/evidence/kernels_h100/<kernel>.npz (keys 'seed/buffer')."""
    record = json.loads((src / "kernels_h100.json").read_text())
    data = np.load(src / "kernels_h100.npz")
    per = {}
    for key in data.files:
        kernel, rest = key.split("/", 1)
        per.setdefault(kernel, {})[rest.replace("/", "_")] = data[key]
    d = EVIDENCE / "kernels_h100"
    d.mkdir(parents=True, exist_ok=True)
    for kernel, arrs in per.items():
        np.savez_compressed(d / f"{kernel}.npz", **arrs)
    for r in record["kernels"].values():
        r.pop("traceback", None)
    smi = src / "smi.txt"                      # nvidia-smi --query-gpu=name,driver_version --format=csv
    if smi.exists():
        record["nvidia_driver"] = smi.read_text().strip().splitlines()[-1].split(",")[-1].strip()
    old = EVIDENCE / "kernels_h100.json"
    if old.exists():                           # a repeat run: are the outputs the same bits?
        prev = json.loads(old.read_text())
        if prev["date"] != record["date"]:
            shas = lambda r: {k: [l["outputs_sha256"] for l in v["launches"]] for k, v in r["kernels"].items()}
            record["repeat_of"] = {"date": prev["date"], "identical_outputs": shas(prev) == shas(record)}
    old.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
