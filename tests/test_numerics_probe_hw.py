"""``formal.hw.numerics_probe``: the numerics probes as register-level kernels.

No GPU here: the pipeline (probe matrices -> fragment registers -> D registers ->
matrices -> fit.decide) is checked with fake GPUs that compute with the sm_90 model or
with a refuted alternative, one that fails, and ptxas assembles every kernel.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from formal import layout
from formal.hw import numerics_probe as npb
from formal.hw.kernels import Case, module_source
from formal.numerics import MODELS, mma_matrices
from formal.numerics.probes import PROBES


class FakeGPU:
    """Plays the GPU with a given arithmetic model (dense mma forms only)."""

    def __init__(self, model, fail_batch=False, fail_ids=()):
        self.model, self.fail_batch, self.fail_ids = model, fail_batch, set(fail_ids)
        self.calls = 0

        class Info:
            def to_dict(self):
                return {"name": "fake"}
        self.info = Info()

    def run_cases(self, cases, inputs, ptx="8.7", target=None):
        self.calls += 1
        assert target == "sm_90a" and ptx == "8.7"
        if self.fail_batch and len(cases) > 1:
            raise RuntimeError("ptxas failed for the module")
        outs = []
        for case, inp in zip(cases, inputs):
            f = case.form
            if f.opcode in self.fail_ids:
                raise RuntimeError("launch failed")
            A, B, C = (layout.unpack(f, x, inp[x]) for x in ("a", "b", "c"))
            kw = dict(atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, satfinite=f.satfinite,
                      bitop=f.bitop, rounding=f.rounding, shape=f.mnk, arch=self.model)
            if A.ndim == 4:
                T, P = A.shape[:2]
                D = mma_matrices(A.reshape(T * P, *A.shape[2:]), B.reshape(T * P, *B.shape[2:]),
                                 C.reshape(T * P, *C.shape[2:]), **kw).reshape(T, P, *C.shape[2:])
            else:
                D = mma_matrices(A, B, C, **kw)
            outs.append(layout.pack(f, "d", D))
        return outs


def test_every_probe_runs_on_sm90():
    ok, skipped = npb.executable_probes()
    assert not skipped, skipped
    assert len(ok) == len(PROBES)
    ops = {f.opcode for _, f in ok}
    assert "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16" in ops
    assert "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32" in ops
    assert "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64.rp" in ops


def test_probe_inputs_place_the_probe_in_row0_col0():
    p = next(p for p in PROBES if p.id == "Z4")
    f = npb.probe_form(p)
    inp = npb.probe_inputs(p, f)
    A = layout.unpack(f, "a", inp["a"])
    assert A.shape == (1, 4, 8, 4)            # four products per warp, the probe in each
    assert np.all(A[0, :, 0, :] == 0xBC00) and not np.any(A[0, :, 1:, :])
    assert not np.any(layout.unpack(f, "b", inp["b"]))
    assert np.all(layout.unpack(f, "c", inp["c"])[0, :, 0, 0] == 0x80000000)


def test_simulated_run_confirms_the_model(tmp_path):
    rep = npb.run_numerics_probes(str(tmp_path), simulate_only=True)
    assert rep["probes"] == rep["decided"] == rep["model_ok"] == len(PROBES)
    assert not rep["refine"] and not rep["errors"]
    on_disk = json.loads((tmp_path / "numerics_probes.json").read_text())
    assert on_disk["probes"] == len(PROBES)


def test_a_refuted_alternative_is_named(tmp_path):
    alt = MODELS["sm_90"].replace_path("f64", nan_rule="canonical")
    rep = npb.run_numerics_probes(str(tmp_path), gpu=FakeGPU(alt))
    by = {r["id"]: r for r in rep["results"]}
    for pid in ("N64a", "N64b", "N64c", "N64d", "N64e"):
        assert not by[pid]["model_ok"] and by[pid]["matching"] == ["canonical NaN"], by[pid]
        assert pid in rep["refine"]
    assert by["A"]["model_ok"] and by["A"]["other_outputs_ok"]
    alt2 = MODELS["sm_90"].with_path("f16.f32@m8n8k4", MODELS["sm_90"].paths["f16.f32"])
    rep2 = npb.run_numerics_probes(str(tmp_path), gpu=FakeGPU(alt2))
    o4 = next(r for r in rep2["results"] if r["id"] == "O4")
    assert o4["matching"] == ["tensor-core block", "descending chain"] and o4["observed"] == "0x33000000"


def test_failures_are_per_probe(tmp_path):
    bad = "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"
    gpu = FakeGPU(MODELS["sm_90"], fail_batch=True, fail_ids={bad})
    rep = npb.run_numerics_probes(str(tmp_path), gpu=gpu)
    assert rep["errors"] == ["I4"]
    assert rep["decided"] == len(PROBES) - 1 == rep["model_ok"]
    assert gpu.calls == 1 + len(PROBES)       # the batch, then each probe alone


def test_no_gpu_still_writes_a_report(tmp_path, monkeypatch):
    from formal.hw import runner

    class Broken:
        def __init__(self):
            raise runner.NoGPU("no CUDA device")
    monkeypatch.setattr(runner, "GPU", Broken)
    rep = npb.run_numerics_probes(str(tmp_path))
    assert "NoGPU" in rep["device"]["error"] and rep["decided"] == 0
    assert os.path.exists(tmp_path / "numerics_probes.json")


@pytest.mark.ptxas
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_every_probe_kernel_assembles_for_sm90a(tmp_path):
    cases, _ = npb.executable_probes()
    src, names = module_source([Case(f) for _, f in cases], npb.TARGET, npb.PTX)
    (tmp_path / "p.ptx").write_text(src)
    r = subprocess.run(["ptxas", f"-arch={npb.TARGET}", str(tmp_path / "p.ptx"), "-o", str(tmp_path / "p.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    assert len(names) == len(PROBES)
