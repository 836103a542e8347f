"""Device session script: capture raw outputs of every sm_90 register-level form.

Run on a CUDA machine from the repo root:  PYTHONPATH=. python3 tools/device_capture.py OUT_DIR
Writes outputs_<i>.npz (each < 14 MB) and manifest.json.
"""
import json
import os
import sys
import time

import numpy as np

from formal.hw.capture import capture
from formal.hw.check import all_cases
from formal.vectors.regimes import REGIMES


def main(out):
    t0 = time.time()
    cases = all_cases("sm_90", "9.0")
    def warps_for(c, regime):
        t = c.form.dtype
        if t == "s32":
            return 4
        return 24 if c.form.is_sparse else 48
    man = capture(cases, 0, REGIMES, 2026, out, warps_for=warps_for)
    # split the npz into files under 14 MB
    data = dict(np.load(os.path.join(out, "outputs.npz")))
    os.remove(os.path.join(out, "outputs.npz"))
    part, size, idx = {}, 0, 0
    for k, v in data.items():
        part[k] = v
        size += v.nbytes
        if size > 12_000_000:
            np.savez_compressed(os.path.join(out, f"outputs_{idx}.npz"), **part)
            part, size, idx = {}, 0, idx + 1
    if part:
        np.savez_compressed(os.path.join(out, f"outputs_{idx}.npz"), **part)
    print(json.dumps(man["gpu"]), len(man["cases"]), "batches", f"{time.time()-t0:.1f}s")
    print("sass:", {k: sorted(set(v)) for k, v in list(man.get("sass", {}).items())[:400]})


if __name__ == "__main__":
    main(sys.argv[1])
