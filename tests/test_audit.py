"""Auditing hardware models: no false alarms on a correct model, and a mutation suite.

Each seeded fault is a plausible simulator/RTL bug; each must be caught, and caught by the
coverage point built for it (``AuditReport.caught_by`` lists the points whose own cases
fail at their own target elements), not merely by random vectors.
"""

from __future__ import annotations

import numpy as np
import pytest

import formal
import formal.vectors.audit
from formal import layout
from formal.evaluate import evaluate
from formal.numerics import get_model, mma_matrices
from formal.vectors import generate
from formal.vectors.draft import numerics_kw

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
S8SAT = "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32"
SP = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SM90 = get_model("sm_90")


def model_with_arith(arch_model, name):
    """A simulator that gets layouts right but uses the given arithmetic model."""
    def model(opcode, a, b, c, e=None, sel=None):
        f = formal.parse(opcode)
        A, B, C = (layout.unpack(f, k, x) for k, x in (("a", a), ("b", b), ("c", c)))
        return layout.pack(f, "d", mma_matrices(A, B, C, **numerics_kw(f, arch_model)))
    model.__name__ = name
    return model


def reference(opcode, a, b, c, e=None, sel=None):
    return evaluate(opcode, a, b, c, e=e, sel=sel)


@pytest.fixture(scope="module")
def f16_vectors():
    return generate(F16, count=24, seed=11)


@pytest.fixture(scope="module")
def sat_vectors():
    return generate(S8SAT, count=12, seed=11)


@pytest.fixture(scope="module")
def sp_vectors():
    return generate(SP, count=12, seed=11, coverage=["metadata", "selector", "layout", "specials"])


# ------------------------------------------------------------------------------------------
# no false alarms


def test_correct_models_pass(f16_vectors, sat_vectors, sp_vectors):
    for vs in (f16_vectors, sat_vectors, sp_vectors):
        rep = formal.vectors.audit(vs.opcode, reference, vectors=vs)
        assert rep.ok and rep.caught_by == [] and rep.vectors.cases == len(vs), rep.table()
    # the same arithmetic written by a "simulator" through layouts + the numerics engine
    rep = formal.vectors.audit(F16, model_with_arith(SM90, "sim"), vectors=f16_vectors)
    assert rep.ok


def test_audit_is_callable_as_module_and_function(f16_vectors):
    from formal.vectors.audit import audit

    assert callable(formal.vectors.audit)
    assert formal.vectors.audit(F16, reference, vectors=f16_vectors).ok
    assert audit(F16, reference, vectors=f16_vectors).ok


# ------------------------------------------------------------------------------------------
# the mutation suite


@pytest.fixture(scope="module")
def rn_report(f16_vectors):
    """The audit of a round-to-nearest mutant (asserted on, and rendered, below)."""
    bad = model_with_arith(SM90.replace_path("f16.f32", rounding="rn"), "rn_instead_of_rz")
    return formal.vectors.audit(F16, bad, vectors=f16_vectors)


def test_mutant_round_to_nearest_instead_of_truncation(rn_report):
    rep = rn_report
    assert not rep.ok
    assert "align_shift:24" in rep.caught_by                  # the solver-built alignment corner
    assert not any(p.startswith(("nan_in", "inf_times_zero", "inf_minus_inf")) for p in rep.caught_by)
    m = rep.mismatches[0]
    assert m.inputs and "lane" in m.where


def test_mutant_wrong_nan_encoding(f16_vectors):
    bad = model_with_arith(SM90.replace_path("f16.f32", nan_bits=0x7FC00000), "canonical_qnan")
    rep = formal.vectors.audit(F16, bad, vectors=f16_vectors)
    assert not rep.ok
    assert {"nan_in:a", "nan_in:b", "nan_in:c", "inf_times_zero", "inf_minus_inf", "inf_minus_inf_c"} <= \
        set(rep.caught_by)
    assert not any(p.startswith(("align", "cancel", "layout", "subnormal")) for p in rep.caught_by)


def test_mutant_satfinite_ignored(sat_vectors):
    wrap = formal.parse(S8SAT.replace(".satfinite", ""))

    def bad(opcode, a, b, c):
        return evaluate(wrap, a, b, c)          # same operands, wrap-around instead of clamping
    rep = formal.vectors.audit(S8SAT, bad, vectors=sat_vectors)
    assert not rep.ok
    assert {"int_sat_hi", "int_sat_lo"} <= set(rep.caught_by)
    assert "int_at_max" not in rep.caught_by and "layout:a" not in rep.caught_by


def test_mutant_metadata_indices_swapped(sp_vectors):
    def bad(opcode, a, b, c, e=None, sel=None):
        e = np.asarray(e, np.uint32)
        swapped = ((e & 0x33333333) << 2) | ((e >> 2) & 0x33333333)    # idx0 <-> idx1 in every nibble
        return evaluate(opcode, a, b, c, e=swapped.astype(np.uint32), sel=sel)
    rep = formal.vectors.audit(SP, bad, vectors=sp_vectors)
    assert not rep.ok
    pairs = [p for p in rep.caught_by if p.startswith("metadata_pair:")]
    from formal.metadata import meta

    assert len(pairs) == len(meta(formal.parse(SP)).legal_nibbles)     # every pair's case exposes it


def test_mutant_one_lane_layout_wrong(f16_vectors):
    def bad(opcode, a, b, c):
        a = np.array(a, copy=True)
        a[:, [5, 6]] = a[:, [6, 5]]            # lane 5 reads the A fragment of lane 6 and vice versa
        return evaluate(opcode, a, b, c)
    rep = formal.vectors.audit(F16, bad, vectors=f16_vectors)
    assert not rep.ok
    assert "layout:a" in rep.caught_by
    assert "layout:c" not in rep.caught_by                  # C is read correctly


def test_model_errors_are_reported(f16_vectors):
    def crashes(opcode, a, b, c):
        raise RuntimeError("simulator fault")

    rep = formal.vectors.audit(F16, crashes, vectors=f16_vectors)
    assert not rep.ok and "simulator fault" in rep.errors[0]

    def wrong_shape(opcode, a, b, c):
        return np.zeros((1, 32, 4), np.uint32)

    rep = formal.vectors.audit(F16, wrong_shape, vectors=f16_vectors)
    assert not rep.ok and "shape" in rep.errors[0]


def test_arch_passed_when_accepted(f16_vectors):
    seen = {}

    def model(opcode, a, b, c, arch=None):
        seen["arch"] = arch
        return evaluate(opcode, a, b, c, arch=arch)
    assert formal.vectors.audit(F16, model, vectors=f16_vectors).ok and seen["arch"] == "sm_90"


def test_report_renders(rn_report):
    rep = rn_report
    text = rep.table()
    assert "FAIL" in text and "align_shift:24" in text and "first mismatches" in text
    d = rep.to_dict()
    assert d["ok"] is False and "align_shift:24" in d["caught_by"]
