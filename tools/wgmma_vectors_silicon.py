"""The wgmma vectors of `ptx-formal vectors <form> --level matrix` run on the H100/H200.

1. prepare (any machine):  for each form, `ptx-formal vectors FORM --level matrix --count 16 --seed 0
   --format npz -o .devdata/wgvec/<form>.npz`  (the files this tool reads; see FORMS)
2. device:  `WG_GROUPS=vectors python3 tools/device_session.py $OUT wgmma`  (formal/hw/wgmma_probe.py's
   "vectors" group: one CTA per case, A in registers, B K-major in shared memory)
3. record:  `python3 tools/wgmma_vectors_silicon.py record OUT/wgmma .devdata/wgvec`  writes
   tests/data/wgmma_vectors_h200.npz (each case's A, B, C and the silicon's D) and
   proofs/evidence/wgmma_vectors_h200.json (per form: cases, elements, differing from the file's
   expected D, sha256 of inputs and outputs).  tests/test_wgmma_vectors_silicon.py re-evaluates the
   recorded inputs with formal.evaluate and compares with the silicon's D.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FORMS = ["m64n8k16.f16.f16.f16", "m64n8k16.f32.f16.f16", "m64n8k16.f32.bf16.bf16", "m64n8k8.f32.tf32.tf32",
         "m64n8k32.f32.e4m3.e4m3", "m64n8k32.f32.e5m2.e4m3", "m64n8k32.f16.e4m3.e5m2", "m64n8k32.f16.e5m2.e5m2",
         "m64n8k32.s32.s8.u8", "m64n8k32.satfinite.s32.s8.s8", "m64n8k32.s32.u8.u8"]


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _narrow(a: np.ndarray) -> np.ndarray:
    m = int(a.max()) if a.size else 0
    for t in (np.uint8, np.uint16, np.uint32):
        if m <= np.iinfo(t).max:
            return a.astype(t)
    return a


def record(outdir: str, vdir: str) -> int:
    from formal.hw import wgmma_probe as wp

    got = np.load(os.path.join(outdir, "out_vectors.npz"))
    arrays, forms = {}, {}
    total_bad = 0
    for p in wp.vector_probes(vdir):
        z = np.load(os.path.join(vdir, p.info["file"]))
        head = json.loads(str(z["meta"]))["header"]
        k = p.kernel
        D_si = wp.unpack_d(k.dtype, k.n, got[p.key])
        want = z["D"].astype(np.uint32)
        bad = np.argwhere(D_si != want)
        total_bad += len(bad)
        first = None
        if len(bad):
            t, r, c = (int(x) for x in bad[0])
            first = {"case": t, "row": r, "col": c, "silicon": f"{int(D_si[t, r, c]):#x}", "file": f"{int(want[t, r, c]):#x}"}
        key = p.key
        for n, v in (("A", z["A"]), ("B", z["B"]), ("C", z["C"]), ("D", D_si)):
            arrays[f"{key}.{n}"] = _narrow(v)
        forms[key] = {"opcode": head["opcode"], "cases": int(z["A"].shape[0]), "elements": int(want.size),
                      "differing": int(len(bad)), "first_difference": first, "seed": head["seed"],
                      "count": head["count"], "points": sorted(head.get("points", {})),
                      "sha256": {"A": sha(z["A"]), "B": sha(z["B"]), "C": sha(z["C"]), "D_file": sha(want),
                                 "D_silicon": sha(D_si)}}
        print(f"{key:34s} {forms[key]['cases']:3d} cases {want.size:6d} elements  differing {len(bad)}")
    np.savez_compressed(os.path.join(ROOT, "tests", "data", "wgmma_vectors_h200.npz"), **arrays)
    # the device built its inputs from the same files: its digests must be this machine's
    digests = json.load(open(os.path.join(outdir, "input_digests.json")))
    differ = wp.rebuilt_differ(wp.vector_probes(vdir), digests)
    if differ:
        raise SystemExit(f"the device's inputs are not the ones built here: {', '.join(differ[:5])}")
    digests = digests["vectors"]
    ev = {"what": "ptx-formal vectors --level matrix (coverage models + 16 random cases, seed 0) for 11 dense "
                  "wgmma forms, run on the GPU by formal/hw/wgmma_probe.py (group 'vectors'); D compared with "
                  "the file's expected D bit for bit",
          "device": os.environ.get("WG_DEVICE", "NVIDIA H200 (sm_90), driver 580.159.04, CUDA 13.0"),
          "forms": forms, "elements": sum(f["elements"] for f in forms.values()), "differing": total_bad,
          "device_input_digests": digests}
    with open(os.path.join(ROOT, "proofs", "evidence", "wgmma_vectors_h200.json"), "w") as f:
        json.dump(ev, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{ev['elements']} elements, {total_bad} differing")
    return 1 if total_bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "record":
        sys.exit(__doc__)
    sys.exit(record(sys.argv[2], sys.argv[3]))
