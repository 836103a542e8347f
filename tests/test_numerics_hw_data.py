"""Silicon evidence for the sm_90 arithmetic model, checked in CI.

``tests/data/numerics_hw_slice.npz`` holds D registers captured on an H100 (provenance in
``tests/data/README.md``) for 292 warps of 96 batches: every path the first sm_90 model
got wrong (m8n8k4 .f16 on the FMA pipe, fp8 m16n8k16, f64 NaN payloads) and the
special-value regimes of the other paths.  Inputs are regenerated from the recorded
seeds with ``formal.vectors.regimes.random_inputs`` (their SHA-256 must equal the capture's)
and evaluated with ``formal.evaluate.evaluate``; every register must match bit for bit.
A second test checks that the slice still *refutes* the alternatives it was chosen
against, so it stays evidence and not just a regression snapshot.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from formal.catalog import parse
from formal.evaluate import evaluate
from formal.hw.capture import input_digest
from formal.vectors.regimes import random_inputs

DATA = os.path.join(os.path.dirname(__file__), "data", "numerics_hw_slice.npz")


def _load():
    z = np.load(DATA)
    man = json.loads(bytes(z["manifest"]).decode())
    return man, {b["key"]: z[b["key"]] for b in man["batches"]}


MAN, OUTS = _load()
BATCHES = MAN["batches"]


def _inputs(b):
    form = parse(b["opcode"])
    full = random_inputs(form, b["batch_warps"], b["regime"], b["seed"])
    assert input_digest(full) == b["digest"], "input generator changed: regenerated inputs differ from the capture"
    idx = np.asarray(b["warps"])
    return form, {k: v[idx] for k, v in full.items()}


def test_slice_provenance():
    assert MAN["gpu"]["name"].startswith("NVIDIA H100")
    assert MAN["gpu"]["compute_capability"] == "9.0"
    assert sum(len(b["warps"]) for b in BATCHES) == 292
    ops = {b["opcode"] for b in BATCHES}
    # the previously mismatching paths are all present
    assert sum(".m8n8k4." in o and ".f16" in o and "f64" not in o for o in ops) == 12
    assert sum("m16n8k16" in o and (".e4m3" in o or ".e5m2" in o) for o in ops) == 8
    assert sum(".f64.f64.f64.f64" in o for o in ops) == 20


@pytest.mark.parametrize("b", BATCHES, ids=[f"{b['opcode']}|{b['sel']}|{b['regime']}" for b in BATCHES])
def test_sm90_model_matches_silicon(b):
    form, inp = _inputs(b)
    d = evaluate(form, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=b["sel"], arch="sm_90")
    got = OUTS[b["key"]]
    bad = np.argwhere(d != got)
    assert not len(bad), (f"{len(bad)} registers differ; first warp {b['warps'][bad[0][0]]} lane {bad[0][1]} "
                          f"r{bad[0][2]}: silicon {int(got[tuple(bad[0])]):#x} model {int(d[tuple(bad[0])]):#x}")


def test_slice_refutes_the_old_hypotheses():
    """The alternatives the slice was chosen against disagree with silicon on it."""
    from formal.numerics import MODELS
    from formal.numerics.params import mod4_groups

    S = MODELS["sm_90"]
    old16 = ((32, mod4_groups(32)), (16, (tuple(range(16)),)))
    alts = {
        "old": S.with_path("f16.f32@m8n8k4", S.paths["f16.f32"]).with_path("f16.f16@m8n8k4", S.paths["f16.f16"])
        .with_path("f8.f32", S.paths["f8.f32"].but(groups=old16))
        .with_path("f8.f16", S.paths["f8.f16"].but(groups=old16)),
        "nan": S.replace_path("f64", nan_rule="canonical"),
        "int": S.replace_path("int", saturation="per_step"),
    }
    from formal import layout
    from formal.numerics import mma_matrices

    refuted = {k: 0 for k in alts}
    for b in BATCHES:
        if not b["refuted_model"] or parse(b["opcode"]).is_sparse:
            continue
        form, inp = _inputs(b)
        A, B, C = (layout.unpack(form, x, inp[x]) for x in ("a", "b", "c"))
        kw = dict(atype=form.atype, btype=form.btype, ctype=form.ctype, dtype=form.dtype, satfinite=form.satfinite,
                  rounding=form.rounding, shape=form.mnk)
        if A.ndim == 4:   # m8n8k4 .f16: four products per warp
            T, P = A.shape[:2]
            D = mma_matrices(A.reshape(T * P, *A.shape[2:]), B.reshape(T * P, *B.shape[2:]),
                             C.reshape(T * P, *C.shape[2:]), arch=alts[b["refuted_model"]], **kw)
            D = D.reshape(T, P, *D.shape[1:])
        else:
            D = mma_matrices(A, B, C, arch=alts[b["refuted_model"]], **kw)
        refuted[b["refuted_model"]] += int((layout.pack(form, "d", D) != OUTS[b["key"]]).sum())
    recorded = {k: sum(b["refuted_registers"] or 0 for b in BATCHES if b["refuted_model"] == k) for k in alts}
    assert refuted == recorded, (refuted, recorded)
    assert refuted["old"] > 5000 and refuted["nan"] > 2000 and refuted["int"] > 200, refuted
