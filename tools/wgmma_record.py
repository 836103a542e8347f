"""Record a wgmma silicon run (formal/hw/wgmma_probe.py, device_session step ``wgmma``).

    python3 tools/wgmma_record.py RUN_DIR [--gpu-json SUMMARY.json]

RUN_DIR holds the run's out_*.npz, probes.json and input_digests.json.  Rebuilds every
probe's inputs (deterministic) and checks their digests against the run's, decides each
probe against the spec's models, and writes

* proofs/evidence/wgmma_silicon.json   the record: GPU, digests, every verdict with counts;
* tests/data/wgmma_silicon_slice.npz   the layout and readout outputs whole, and the first
                                       CTAs of every numerics probe (tests/test_wgmma_silicon.py).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from formal.hw import wgmma_probe as wp  # noqa: E402

SLICE_CTAS = 4


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--gpu-json")
    a = ap.parse_args(argv)
    dig = json.load(open(os.path.join(a.run, "input_digests.json")))
    probes = wp.all_probes()
    bad = 0
    for p in probes:
        for k, v in p.inputs.items():
            if dig[p.group][f"{p.key}.{k}"] != hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]:
                bad += 1
    assert bad == 0, f"{bad} rebuilt inputs differ from the run's"
    outs = {}
    for g in ("layout", "readout", "numerics", "numx"):
        outs.update(dict(np.load(os.path.join(a.run, f"out_{g}.npz"))))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import wgmma_silicon_checks as chk

    verdicts = chk.check_all(probes, outs)
    rec = {"kind": "wgmma-silicon", "tool": "formal/hw/wgmma_probe.py + tools/wgmma_record.py", "date": "2026-11-28",
           "gpu": json.load(open(a.gpu_json))["gpu"] if a.gpu_json else None,
           "kernels": "ptxas 13.0 (the device's CUDA 13.0) for sm_90a, one warpgroup per CTA",
           "inputs": {"probes": len(probes), "arrays": sum(len(p.inputs) for p in probes),
                      "digests_sha256": sha(os.path.join(a.run, "input_digests.json")), "rebuilt_and_equal": True},
           "outputs_sha256": {f: sha(os.path.join(a.run, f)) for f in sorted(os.listdir(a.run)) if f.startswith("out_")},
           "verdicts": verdicts}
    json.dump(rec, open(os.path.join(ROOT, "proofs", "evidence", "wgmma_silicon.json"), "w"), indent=1)
    sl = {}
    for p in probes:
        d = outs[p.key]
        sl[p.key] = d if p.group in ("layout", "readout") else d[:SLICE_CTAS]
    np.savez_compressed(os.path.join(ROOT, "tests", "data", "wgmma_silicon_slice.npz"), **sl)
    print(json.dumps(verdicts, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
