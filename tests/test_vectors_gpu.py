"""Vectors through the hardware harness: batching, the GPU summary, and the CUDA template.

The GPU itself is replaced by a stand-in with the ``formal.hw.runner.GPU`` interface
(``info``, ``run_cases``) that computes with the evaluator, or with a fault injected; the
real run is ``run_vectors_on_gpu`` on a CUDA machine (see the report).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import formal
from formal.evaluate import evaluate
from formal.hw import vectors as vgpu
from formal.hw.vectors import prepare, run_vectors_on_gpu, vectors_as_inputs
from formal.vectors import generate

F16 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64.rn"

#: the coverage models that shape a batch (NaN/Inf codes, signed zeros, every sparsity selector
#: and metadata pair, layout probes) and random warps; the solver- and search-built models add
#: cases of the same shape at seconds per form (f64 cancellation alone ~5 s), so they are left
#: to tests/test_vectors.py and tests/test_audit_mechanisms.py
HARNESS_COV = ["specials", "invalid", "signed_zero", "metadata", "selector", "layout", "random"]


class FakeInfo:
    def to_dict(self):
        return {"name": "stand-in", "compute_capability": "9.0", "target": "sm_90"}


class FakeGPU:
    """The runner's interface, computing with the evaluator; ``flip`` corrupts one register."""

    def __init__(self, flip: tuple | None = None):
        self.info = FakeInfo()
        self.flip = flip
        self.calls = 0

    def run_cases(self, cases, inputs, ptx="8.7", target=None):
        self.calls += 1
        outs = []
        for case, inp in zip(cases, inputs):
            f = case.form
            d = evaluate(f, inp["a"], inp["b"], inp["c"], e=inp.get("e"),
                         sel=case.imm.sel if f.is_sparse else None)
            if self.flip and self.flip[0] == f.opcode:
                d = d.copy()
                d[self.flip[1], self.flip[2], self.flip[3]] ^= 1
            outs.append(d)
        return outs


def test_vectors_as_inputs_groups_by_selector():
    vs = generate(SP, count=8, coverage=["selector", "random"])
    groups = vectors_as_inputs(vs)
    f = formal.parse(SP)
    assert sorted(g["sel"] for g in groups) == sorted(f.selectors)
    assert sum(len(g["ids"]) for g in groups) == len(vs)
    for g in groups:
        T = len(g["ids"])
        assert g["inputs"]["a"].shape == (T, 32, f.operands["a"].count) and g["inputs"]["a"].dtype == np.uint32
        assert g["inputs"]["e"].shape == (T, 32)
        assert g["case"].imm.sel == g["sel"]
        assert g["expected"].shape == (T, 32, f.operands["d"].count)
    vs64 = generate(F64, coverage=["specials"])
    (g,) = vectors_as_inputs(vs64)
    assert g["inputs"]["a"].dtype == np.uint64


def test_run_vectors_on_gpu_summary(tmp_path, monkeypatch):
    vdir = str(tmp_path / "vec")
    paths = prepare([F16, SP, F64], vdir, count=6, coverage=HARNESS_COV)
    assert len(paths) == 3 and all(os.path.isfile(p) for p in paths)
    # on the device the prepared files are read, nothing is generated (no Z3 needed there)
    monkeypatch.setattr("formal.vectors.build.generate",
                        lambda *a, **k: (_ for _ in ()).throw(AssertionError("generated on the device")))
    gpu = FakeGPU()
    out = str(tmp_path / "out")
    s = run_vectors_on_gpu([F16, SP, F64], out, vectors_dir=vdir, gpu=gpu)
    assert gpu.calls == 1                                    # one batch for every form
    assert s["total_mismatches"] == 0 and s["errors"] == []
    assert [x["opcode"] for x in s["forms"]] == [formal.parse(o).opcode for o in (F16, SP, F64)]
    assert all(x["vectors"] > 5 and x["first_mismatch"] is None for x in s["forms"])
    assert json.load(open(os.path.join(out, "summary.json")))["total_vectors"] == s["total_vectors"]


def test_run_vectors_on_gpu_reports_a_mismatch(tmp_path):
    vdir = str(tmp_path / "vec")
    prepare([F16], vdir, count=4, coverage=HARNESS_COV)
    gpu = FakeGPU(flip=(formal.parse(F16).opcode, 0, 7, 2))   # case 0 of the first batch, lane 7, reg 2
    s = run_vectors_on_gpu([F16], str(tmp_path / "out"), vectors_dir=vdir, gpu=gpu, save_results=True)
    (f,) = s["forms"]
    assert f["mismatches"] == 1 and s["total_mismatches"] == 1
    m = f["first_mismatch"]
    assert m["where"]["lane"] == 7 and m["where"]["reg"] == 2 and set(m["inputs"]) == {"a", "b", "c"}
    # the saved result file goes through `ptx-formal verify` with the same verdict
    from formal.cli import main

    res = os.path.join(str(tmp_path / "out"), "results", vgpu.file_name(f["opcode"])[:-4] + ".hex")
    assert main(["verify", F16, os.path.join(vdir, vgpu.file_name(f["opcode"])), res]) == 1


def test_default_forms_are_the_hw_check_forms():
    fs = vgpu.default_forms()
    assert len(fs) == len({f.opcode for f in fs}) and len(fs) > 150
    assert all(f.family in ("mma", "mma.sp") and not f.block_scale for f in fs)


# ------------------------------------------------------------------------------------------
# the standalone CUDA harness


def _nvcc():
    p = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not p:
        pytest.skip("nvcc not found: the CUDA harness compile check needs the CUDA toolkit")
    return p


def test_render_fills_the_form_block():
    from formal.vectors.cuda import render

    src = render(SP)
    f = formal.parse(SP)
    assert f'FORM_OPCODE = "{f.opcode}"' in src and src.count("// ===== BEGIN FORM =====") == 1
    assert all(f"mma_sel{s}(" in src for s in f.selectors) and "#define SPARSE 1" in src
    assert "typedef uint64_t reg_t;" in render(F64) and '"=d"(dd[0])' in render(F64)
    from formal.vectors import VectorError

    with pytest.raises(VectorError):
        render("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32")


@pytest.mark.ptxas
@pytest.mark.parametrize("opcode", [None, SP, F64, "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc"])
def test_cuda_harness_compiles_for_sm90(tmp_path, opcode):
    nvcc = _nvcc()
    from formal.vectors.cuda import TEMPLATE, render

    src = tmp_path / "h.cu"
    if opcode is None:
        shutil.copy(TEMPLATE, src)             # the template itself is a complete program
    else:
        src.write_text(render(opcode))
    r = subprocess.run([nvcc, "-arch=sm_90", "-o", str(tmp_path / "h"), str(src)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert os.path.getsize(tmp_path / "h") > 0
