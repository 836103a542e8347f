"""Record a wgmma silicon run (formal/hw/wgmma_probe.py, device_session step ``wgmma``).

    python3 tools/wgmma_record.py RUN_DIR --groups layout,readout,numerics,numx [--gpu-json SUMMARY.json]

RUN_DIR holds the run's out_*.npz, probes.json and input_digests.json; ``--groups`` names the
probe groups it ran (formal.hw.wgmma_probe.GROUPS).  Each run is one entry of the record, keyed
by its groups; the slice gains that run's outputs.  Rebuilds every
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
    ap.add_argument("--groups", default="layout,readout,numerics,numx")
    a = ap.parse_args(argv)
    dig = json.load(open(os.path.join(a.run, "input_digests.json")))
    groups = a.groups.split(",")
    probes = wp.all_probes(groups)
    bad = wp.rebuilt_differ(probes, dig)
    assert not bad, f"{len(bad)} rebuilt inputs differ from the run's: {', '.join(bad[:5])}"
    outs = {}
    for g in groups:
        outs.update(dict(np.load(os.path.join(a.run, f"out_{g}.npz"))))
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import wgmma_silicon_checks as chk

    verdicts = chk.check_all(probes, outs)
    run = {"groups": groups, "tool": "formal/hw/wgmma_probe.py + tools/wgmma_record.py", "date": "2026-11-28",
           "gpu": json.load(open(a.gpu_json))["gpu"] if a.gpu_json else None,
           "kernels": "ptxas 13.0 (the device's CUDA 13.0) for sm_90a, one warpgroup per CTA",
           "inputs": {"probes": len(probes), "arrays": sum(len(p.inputs) for p in probes),
                      "digests_sha256": sha(os.path.join(a.run, "input_digests.json")), "rebuilt_and_equal": True},
           "outputs_sha256": {f: sha(os.path.join(a.run, f)) for f in sorted(os.listdir(a.run)) if f.startswith("out_")},
           "verdicts": verdicts}
    path = os.path.join(ROOT, "proofs", "evidence", "wgmma_silicon.json")
    rec = json.load(open(path)) if os.path.exists(path) else {"kind": "wgmma-silicon", "runs": {}}
    rec.setdefault("runs", {})[",".join(groups)] = run
    json.dump(rec, open(path, "w"), indent=1)
    spath = os.path.join(ROOT, "tests", "data", "wgmma_silicon_slice.npz")
    sl = dict(np.load(spath)) if os.path.exists(spath) else {}
    for p in probes:
        d = outs[p.key]
        sl[p.key] = d if p.group in ("layout", "readout") or p.info["kind"] == "sparse_layout" else d[:SLICE_CTAS]
    np.savez_compressed(spath, **sl)
    print(json.dumps(verdicts, indent=1)[:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
