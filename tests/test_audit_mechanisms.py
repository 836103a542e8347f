"""Wrong models of one mechanism each are caught in every seed by the coverage point built
for that mechanism, with a minimal element-level witness (issue 15)."""

import os
import sys

import pytest

import formal
import formal.vectors.audit  # noqa: F401  (formal.vectors.audit(...))
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
    """Outputs equal to the model's rule out every placed variant (the floor +-1 and no floor
    included): the offline decision used on the H100 results."""
    from formal.vectors.witness import decide_variants
    from wrong_models import TF32

    vs = _vectors(TF32, 0)
    dec = decide_variants(vs, [c.expected for c in vs.cases])
    assert dec["reference (the sm_90 model)"]["refuted_on"] == 0
    floors = {k: v for k, v in dec.items() if k.startswith("mech:acc_floor")}
    assert len(floors) == 4 and all(v["refuted_on"] >= 1 for v in floors.values())
    assert any("no floor" in k for k in floors)
    zeros = {k: v for k, v in dec.items() if k.startswith("mech:zero_align")}
    assert len(zeros) == 1 and all(v["refuted_on"] >= 1 for v in zeros.values())


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


# ------------------------------------------------------------------------------------------
# issue 19: mechanisms of a peer simulator (MMA-Sim's Hopper model), on models written
# independently of formal.numerics (tests/wrong_models.py INDEPENDENT, matrix level)

from formal.numerics.archs import SM90  # noqa: E402
from wrong_models import BF16, F16F32, INDEPENDENT, TF32  # noqa: E402

_MVS: dict = {}


def _mvectors(op, seed):
    if (op, seed) not in _MVS:
        _MVS[(op, seed)] = generate(op, seed=seed, coverage=["mechanisms"], level="matrix")
    return _MVS[(op, seed)]


def _check_independent(name, op, model, cause, word, seed):
    rep = formal.vectors.audit(op, model, vectors=_mvectors(op, seed))
    assert not rep.errors, (name, rep.errors)
    if cause is None:          # the correct model: no false alarm
        assert rep.ok and rep.failed_elements == 0, (name, seed, rep.caught_by)
        return rep
    assert not rep.ok and cause in rep.caught_by, (name, seed, rep.caught_by)
    # labelled exactly: one cause explains every failing element, the mechanism's own variant
    assert [g["cause"] for g in rep.causes] == [cause], (name, seed, rep.causes)
    assert word in rep.causes[0]["what"], (name, seed, rep.causes[0]["what"])
    assert rep.causes[0]["elements"] == rep.failed_elements
    w = next(w for w in rep.witnesses if w.cause == cause)
    assert w.reduced and "terms" in w.reduced and w.reduced["got"] != w.reduced["expected"]
    return rep


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,op,model,cause,word", INDEPENDENT, ids=[w[0] for w in INDEPENDENT])
def test_independent_model_labelled_exactly(name, op, model, cause, word, seed):
    _check_independent(name, op, model, cause, word, seed)


@pytest.mark.slow
@pytest.mark.parametrize("name,op,model,cause,word", INDEPENDENT, ids=[w[0] for w in INDEPENDENT])
def test_independent_model_labelled_exactly_in_16_seeds(name, op, model, cause, word):
    for seed in range(16):
        _check_independent(name, op, model, cause, word, seed)


def test_zero_operand_mechanism_three_ways():
    """0 x 65504 + 2^-149 (f16 -> f32, the issue's example) and 0 x 2^127 + 2^-30 (bf16): the
    reference keeps c; a zero aligned at -126 cuts it.  The vectorised engine, the scalar
    reference (exact rationals) and the independent model of tests/wrong_models.py agree."""
    import numpy as np

    from formal.numerics import dot_terms
    from formal.numerics.reference import dot_scalar
    from wrong_models import independent_model

    for op, at, a0, b0, c0 in ((F16F32, "f16", 0x0000, 0x7BFF, 0x00000001), (BF16, "bf16", 0x8000, 0x7F00, 0x30800000),
                               (TF32, "tf32", 0x00000000, 0x7F000000, 0x30800000)):
        K = formal.parse(op).mnk[2]
        a = np.zeros(K, np.uint64)
        b = np.zeros(K, np.uint64)
        a[3], b[3] = a0, b0
        kw = dict(atype=at, btype=at, ctype="f32", dtype="f32")
        key = f"{at}.f32"
        wrong = SM90.replace_path(key, zero_factor_exp=-126)
        assert int(dot_terms(a, b, np.uint64(c0), **kw)) == c0
        assert int(dot_terms(a, b, np.uint64(c0), arch=wrong, **kw)) == 0
        assert int(dot_scalar(a, b, c0, arch=wrong, **kw)) == 0 and int(dot_scalar(a, b, c0, **kw)) == c0
        A = np.zeros((1, 16, K), np.uint64)
        B = np.zeros((1, K, 8), np.uint64)
        C = np.zeros((1, 16, 8), np.uint64)
        A[0, 0], B[0, :, 0], C[0, 0, 0] = a, b, c0
        assert int(independent_model("z", zero_exp=-126)(op, A, B, C)[0, 0, 0]) == 0
        assert int(independent_model("r")(op, A, B, C)[0, 0, 0]) == c0


def test_sibling_variants_are_told_apart():
    """A zero aligned at -14 (the f16 emin) is named as such, not as the -126 variant: the
    mechanism vectors hold an input telling the two siblings apart."""
    from wrong_models import independent_model

    for seed in SEEDS:
        rep = formal.vectors.audit(F16F32, independent_model("z14", zero_exp=-14), vectors=_mvectors(F16F32, seed))
        assert [g["cause"] for g in rep.causes] == ["mech:zero_align"] and "-14" in rep.causes[0]["what"]
