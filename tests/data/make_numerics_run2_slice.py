"""Build ``numerics_run2_slice.json``: the checked-in silicon evidence of the H100 run2.

    python tests/data/make_numerics_run2_slice.py /path/to/hwdata/run2 /path/to/.devdata/vectors

Two parts, both small and complete enough to re-decide in CI without a GPU:

* ``probes``: every *decided* numerics probe of ``RUN2/numerics/numerics_probes.json``
  (``formal.hw.numerics_probe`` output): the opcode, the observed D[0][0] and the D
  registers of the one-warp run (inputs are ``formal.numerics.probes.by_id(id).matrices()``,
  so they are not stored).  Probes that errored on the device are listed in
  ``probes_errored`` with the device's error.
* ``vectors``: every run2 edge-case vector (``VECTORS/*.npz``, the files the GPU ran,
  read with ``formal.vectors.fileio``; results ``RUN2/vectors_results/*.hex``) on which
  the run1-fitted sm_90 model (the current model with the two run2 changes undone:
  ``rounded_zero_sign="sum"`` and ``c_as_f32=True`` on every HMMA block) disagrees with
  silicon.  Stored with the full register inputs, the silicon D registers and that
  model's D registers, plus the SHA-256 of the vector file the case comes from.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

from formal.numerics import MODELS  # noqa: E402

OUT = os.path.join(HERE, "numerics_run2_slice.json")


def run1_model():
    """The run1-fitted sm_90 model: the current one with the run2 changes undone."""
    from formal.numerics.fit import run1_fit

    return run1_fit()


def _hexregs(x: np.ndarray) -> list[str]:
    """[32, n] registers -> 32 strings 'r0,r1,...' (hex, no 0x)."""
    w = 16 if x.dtype == np.uint64 else 8
    return [",".join(f"{int(v):0{w}x}" for v in lane) for lane in np.asarray(x).reshape(32, -1)]


def _sha(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def probes_part(run2: str) -> tuple[list, list, dict]:
    with open(os.path.join(run2, "numerics", "numerics_probes.json")) as f:
        rep = json.load(f)
    probes, errored = [], []
    for r in rep["results"]:
        if "error" in r:
            errored.append({"id": r["id"], "opcode": r["opcode"], "error": r["error"]})
            continue
        probes.append({"id": r["id"], "opcode": r["opcode"], "observed": r["observed"],
                       "d": [",".join(lane) for lane in r["d_registers"]]})
    meta = {"device": rep["device"], "target": rep["target"], "ptx": rep["ptx"], "probes": rep["probes"],
            "decided": rep["decided"], "model_ok_at_run": rep["model_ok"], "refine_at_run": rep["refine"]}
    return probes, errored, meta


def vectors_part(run2: str, vec_dir: str) -> tuple[list, dict]:
    import formal.evaluate as ev
    from formal.vectors.draft import evaluate_inputs
    from formal.vectors.fileio import read, read_results

    MODELS["sm_90 (run1 fit)"] = run1_model()
    ev.ARCH_TARGETS["sm_90 (run1 fit)"] = ev.ARCH_TARGETS["sm_90"]
    out, total, files = [], 0, 0
    for fn in sorted(glob.glob(os.path.join(vec_dir, "*.npz"))):
        vs = read(fn)
        rf = os.path.join(run2, "vectors_results", os.path.basename(fn)[:-4] + ".hex")
        got = read_results(rf, vs)
        old = evaluate_inputs(vs.form, [c.inputs for c in vs.cases], [c.sel for c in vs.cases], "sm_90 (run1 fit)")
        files += 1
        for case, g, o in zip(vs.cases, got, old):
            total += 1
            if np.array_equal(np.asarray(g, np.uint64), np.asarray(o, np.uint64)):
                continue
            rec = {"opcode": vs.opcode, "id": case.id, "sel": case.sel, "points": case.all_points, "why": case.why,
                   "vector_file": os.path.basename(fn), "vector_file_sha256": _sha(fn)}
            for op in ("a", "b", "c"):
                rec[op] = _hexregs(np.asarray(case.inputs[op]))
            if "e" in case.inputs:
                rec["e"] = [f"{int(v):08x}" for v in np.asarray(case.inputs["e"]).reshape(32)]
            rec["silicon_d"] = _hexregs(np.asarray(g))
            rec["run1_model_d"] = _hexregs(np.asarray(o))
            out.append(rec)
    return out, {"vector_files": files, "vectors": total}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: make_numerics_run2_slice.py RUN2_DIR VECTORS_DIR", file=sys.stderr)
        return 2
    run2, vec_dir = argv
    probes, errored, pmeta = probes_part(run2)
    vectors, vmeta = vectors_part(run2, vec_dir)
    doc = {
        "kind": "ptx-formal numerics silicon slice (run2)",
        "gpu": pmeta["device"],
        "captured": "2026-11-22, the lead's run2 (driver 580.159.04 / CUDA 13.0, ptxas 13.0, sm_90a, numpy 2.5.2)",
        "probe_run": {k: v for k, v in pmeta.items() if k != "device"},
        "vector_run": dict(vmeta, mismatches_at_run=len(vectors)),
        "probes": probes,
        "probes_errored": errored,
        "vectors": vectors,
    }
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"written {OUT}: {len(probes)} probes, {len(errored)} errored, {len(vectors)} vectors "
          f"(of {vmeta['vectors']} in {vmeta['vector_files']} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
