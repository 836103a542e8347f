"""Sparse wgmma with A from shared memory (a.sp) on silicon: record a device run.

device:  `WG_GROUPS=sparse_desc python3 tools/device_session.py $OUT wgmma`
record:  `python3 tools/wgmma_sparse_desc_record.py OUT/wgmma`  checks the device built the inputs
this machine builds (formal/hw/wgmma_probe.py sparse_desc_probes, deterministic), compares every
register with formal.evaluate.evaluate_wgmma, and writes tests/data/wgmma_sparse_desc_h200.npz
(the silicon's registers) and proofs/evidence/wgmma_sparse_desc_h200.json.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(outdir: str) -> int:
    from formal.evaluate import evaluate_wgmma
    from formal.hw import wgmma_probe as wp

    got = np.load(os.path.join(outdir, "out_sparse_desc.npz"))
    built = wp.sparse_desc_probes()
    differ = wp.rebuilt_differ(built, json.load(open(os.path.join(outdir, "input_digests.json"))))
    if differ:
        raise SystemExit(f"the device's inputs are not the ones built here: {', '.join(differ[:5])}")
    probes, out, total, bad = {}, {}, 0, 0
    for p in built:
        i, k = p.inputs, p.kernel
        op = f"wgmma.mma_async.sp.sync.aligned.{k.shape}.{k.dtype}.{k.atype}.{k.btype}"
        d = evaluate_wgmma(op, i["c"], i["desc"][:, 0], i["desc"][:, 1], smem=i["img"], e=i["e"], sel=k.sel,
                           scale_d=i["flags"].astype(bool)).astype(np.uint32)
        si = got[p.key]
        nb = int((d != si).sum())
        total, bad = total + d.size, bad + nb
        out[p.key] = si
        probes[p.key] = {"opcode": op, "sel": k.sel, "regime": p.info["regime"], "ctas": int(si.shape[0]),
                         "registers": int(si.size), "differing": nb,
                         "sha256": hashlib.sha256(np.ascontiguousarray(si).tobytes()).hexdigest()}
    np.savez_compressed(os.path.join(ROOT, "tests", "data", "wgmma_sparse_desc_h200.npz"), **out)
    ev = {"what": "wgmma.mma_async.sp with A from shared memory (a.sp, K-major, no swizzle, at byte 1024) and B "
                  "(b.sp): every sparse type combination, every selector, random metadata, normal and special "
                  "regimes (scale-d = 0 in every other CTA of the special regime); registers compared with "
                  "formal.evaluate.evaluate_wgmma",
          "device": "NVIDIA H200 (sm_90), driver 580.159.04, CUDA 13.0", "probes": probes,
          "registers": total, "differing": bad}
    with open(os.path.join(ROOT, "proofs", "evidence", "wgmma_sparse_desc_h200.json"), "w") as f:
        json.dump(ev, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(probes)} probes, {total} registers, {bad} differing")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
