"""The directed wgmma vectors (`ptx-formal vectors FORM --level matrix`: NaN/Inf/subnormal/-0,
cancellation, alignment, overflow, integer bounds, mechanism points, random) as the H200 computed
them (tools/wgmma_vectors_silicon.py; proofs/evidence/wgmma_vectors_h200.json): the evaluator
reproduces every recorded element from the recorded inputs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from formal.evaluate import wgmma_matrices

ROOT = Path(__file__).resolve().parent.parent
EV = json.loads((ROOT / "proofs" / "evidence" / "wgmma_vectors_h200.json").read_text())
Z = np.load(ROOT / "tests" / "data" / "wgmma_vectors_h200.npz")


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def test_record_is_complete_and_agrees():
    assert len(EV["forms"]) == 11 and EV["differing"] == 0
    assert EV["elements"] == sum(f["elements"] for f in EV["forms"].values()) > 200_000
    points = {p for f in EV["forms"].values() for p in f["points"]}
    assert {"nan_out", "inf_out", "subnormal_out", "cancel_exact_zero", "mech:zero_align", "int_sat_hi",
            "fp8_nan:0x7f", "silicon:f8.f32_m64:n=16"} <= points, points


@pytest.mark.parametrize("key", sorted(EV["forms"]))
def test_evaluator_equals_the_silicon(key):
    f = EV["forms"][key]
    A, B, C, D = (Z[f"{key}.{n}"] for n in "ABCD")
    assert A.shape[0] == f["cases"]
    # the recorded arrays are the ones the device ran (inputs widened back to the file's uint64)
    for n, a in (("A", A), ("B", B), ("C", C)):
        assert sha(a.astype(np.uint64)) == f["sha256"][n], n
    assert sha(D.astype(np.uint32)) == f["sha256"]["D_silicon"]
    got = wgmma_matrices(f["opcode"], A.astype(np.uint64), B.astype(np.uint64), C.astype(np.uint64))
    bad = np.argwhere(got.astype(np.uint32) != D.astype(np.uint32))
    assert not len(bad), f"{key}: case/row/col {bad[0].tolist()}: silicon {int(D[tuple(bad[0])]):#x}, evaluator {int(got[tuple(bad[0])]):#x}"


@pytest.mark.slow
def test_vectors_regenerate_to_the_recorded_inputs(tmp_path):
    """The recorded inputs are what the CLI writes today (seed 0, count 16)."""
    key = "m64n8k32.f32.e4m3.e4m3"
    f = EV["forms"][key]
    out = tmp_path / "v.npz"
    subprocess.run([sys.executable, "-c", "import sys, formal.cli as c; sys.exit(c.main())", "vectors", f["opcode"],
                    "--level", "matrix", "--count", str(f["count"]), "--seed", str(f["seed"]), "--format", "npz",
                    "-o", str(out)], check=True, cwd=ROOT, capture_output=True)
    z = np.load(out)
    assert [sha(z[n]) for n in "ABC"] == [f["sha256"][n] for n in "ABC"]
