"""Wrong models of one mechanism each are caught in every seed by the coverage point built
for that mechanism, with a minimal element-level witness (issue 15)."""

import os
import sys

import pytest

import formal
from formal.vectors import generate

sys.path.insert(0, os.path.dirname(__file__))
from wrong_models import WRONG  # noqa: E402

SEEDS = (0, 1)
_VS: dict = {}


def _vectors(op, seed):
    if (op, seed) not in _VS:
        _VS[(op, seed)] = generate(op, seed=seed, coverage=["mechanisms"])
    return _VS[(op, seed)]


def _check(name, op, model, point, max_terms, seed):
    rep = formal.vectors.audit(op, model, vectors=_vectors(op, seed))
    assert not rep.ok and not rep.errors, name
    assert point in rep.caught_by, (name, seed, rep.caught_by)
    # an element witness at the point, reduced to few terms, still failing
    ws = [w for w in rep.witnesses if point in w.points]
    assert ws, (name, seed)
    red = ws[0].reduced
    assert red and "terms" in red, red
    assert 0 <= red["terms"] <= max_terms, (name, red)
    assert red["got"] != red["expected"]
    # the witness names the inputs that feed the element, encodings and decoded values
    w = ws[0]
    assert set(w.a) == set(w.b) and w.values["c"] is not None
    assert w.got != w.expected
    # and the failures are grouped: every failing element belongs to a named cause
    assert sum(g["elements"] for g in rep.causes) == rep.failed_elements
    return rep


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,op,model,point,max_terms", WRONG, ids=[w[0] for w in WRONG])
def test_wrong_model_caught_by_its_point(name, op, model, point, max_terms, seed):
    _check(name, op, model, point, max_terms, seed)


def test_floor_witness_has_zero_c_and_the_cause_is_the_floor():
    name, op, model, point, _ = WRONG[0]
    rep = _check(name, op, model, point, 3, 0)
    w = next(w for w in rep.witnesses if point in w.points)
    assert int(w.reduced["c"], 16) == 0                      # c dropped: the floor with a zero c
    assert rep.causes[0]["cause"] == "mech:acc_floor"


def test_correct_model_passes_the_mechanism_vectors():
    from wrong_models import BF16, regs_model
    from formal.numerics.archs import SM90

    rep = formal.vectors.audit(BF16, regs_model(SM90, "right"), vectors=_vectors(BF16, 0))
    assert rep.ok and rep.failed_elements == 0 and not rep.witnesses


@pytest.mark.slow
@pytest.mark.parametrize("name,op,model,point,max_terms", WRONG, ids=[w[0] for w in WRONG])
def test_wrong_model_caught_in_every_one_of_16_seeds(name, op, model, point, max_terms):
    for seed in range(16):
        _check(name, op, model, point, max_terms, seed)


def test_decide_variants_on_model_outputs():
    """Outputs equal to the model's rule out every placed variant (the floor +-1 included): the
    offline decision used on the H100 results."""
    from formal.vectors.witness import decide_variants
    from wrong_models import TF32

    vs = _vectors(TF32, 0)
    dec = decide_variants(vs, [c.expected for c in vs.cases])
    assert dec["reference (the sm_90 model)"]["refuted_on"] == 0
    floors = {k: v for k, v in dec.items() if k.startswith("mech:acc_floor")}
    assert len(floors) == 3 and all(v["refuted_on"] >= 1 for v in floors.values())


def test_h100_evidence_of_the_mechanism_vectors():
    """proofs/evidence/vectors_mechanisms_h100.json: the new coverage vectors ran on the H100 with
    0 mismatches (every form's digest recorded), the tf32 floor is -133 (-126, -132, -134 refuted),
    and the identify vectors pick sm_90 (with the models whose records equal it)."""
    import json
    from pathlib import Path

    rec = json.loads((Path(__file__).resolve().parent.parent / "proofs/evidence/vectors_mechanisms_h100.json").read_text())
    assert rec["device"]["name"].startswith("NVIDIA H100") and rec["total_mismatches"] == 0
    assert rec["coverage_vectors_digest"].startswith("sha256:")
    for f in rec["coverage"]:
        assert f["mismatches"] == 0 and f["model_refuted_on"] == 0 and f["digest"].startswith("sha256:")
        if "tf32" in f["opcode"]:
            floors = [v for v in f["variants_refuted"] if v.startswith("mech:acc_floor")]
            assert len(floors) == 3, f["opcode"]
    for f in rec["identify"]:
        assert "sm_90" in f["identified"] and "exact" not in f["identified"]
