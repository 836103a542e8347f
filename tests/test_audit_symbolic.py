"""The Z3 reference of one output element, and the solver search of the auditor.

The Z3 encoding (formal.vectors.z3num) is cross-checked against the numpy evaluator on
random inputs in every input regime, for the sm_90 paths it encodes and for parameter
variants (so that a mutated model is encoded as faithfully as the real one).
"""

from __future__ import annotations

import numpy as np
import pytest
import z3

import formal
from formal.vectors.audit import SymbolicModel, audit, symbolic_search, z3_model
from formal.vectors.regimes import random_elements
from formal.numerics import dot_terms, get_model
from formal.vectors import z3num as Z
from formal.vectors.draft import numerics_kw

SM90 = get_model("sm_90")
S8 = "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32"
SAT = "mma.sync.aligned.m8n8k16.row.col.satfinite.s32.s8.u8.s32"
F16K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"


def _cross_check(opcode: str, arch, n: int = 30, seed: int = 0) -> int:
    f = formal.parse(opcode)
    _, _, K = f.mnk
    ref = Z.reference_element(f, arch)
    A, B, C = Z.elems(f.atype, "a", K), Z.elems(f.btype, "b", K), Z.Elem(f.ctype, "c")
    term = ref(A, B, C)
    rng = np.random.default_rng(seed)
    checked = 0
    for regime in ("normal", "finite", "align", "special", "bits", "extreme"):
        for _ in range(n):
            a = random_elements(rng, f.atype, K, regime, "a") & np.uint64((1 << A[0].bits) - 1)
            b = random_elements(rng, f.btype, K, regime, "b") & np.uint64((1 << B[0].bits) - 1)
            c = random_elements(rng, f.ctype, 1, regime, "c") & np.uint64((1 << C.bits) - 1)
            want = int(dot_terms(a[None], b[None], c, **numerics_kw(f, arch))[0])
            sub = [(x.bv, z3.BitVecVal(int(v), x.bits)) for x, v in zip(A + B + [C], list(a) + list(b) + list(c))]
            got = z3.simplify(z3.substitute(term, *sub)).as_long()
            assert got == want, (opcode, regime, [hex(int(x)) for x in a], [hex(int(x)) for x in b], hex(int(c[0])))
            checked += 1
    return checked


@pytest.mark.parametrize("opcode", [
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
    "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32",
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32",
    "mma.sync.aligned.m16n8k64.row.col.s32.s4.u4.s32",
    "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc",
])
def test_reference_matches_evaluator(opcode):
    assert _cross_check(opcode, "sm_90") == 180


@pytest.mark.parametrize("variant", [dict(rounding="rn"), dict(truncation="floor"), dict(zero_sign="ieee"),
                                     dict(minexp=None, F=23), dict(n=4), dict(subnormal_output="ftz")])
def test_reference_matches_evaluator_for_parameter_variants(variant):
    arch = SM90.replace_path("f16.f32", **variant)
    assert _cross_check("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", arch, n=12) == 72


def test_no_encoding_is_reported():
    f = formal.parse("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")   # emulated on sm_90
    with pytest.raises(Z.NoEncoding):
        Z.reference_element(f, "sm_90")
    with pytest.raises(Z.NoEncoding):        # sm_90 runs m8n8k4 .f16 on the FMA pipe (shape-specific path)
        Z.reference_element(formal.parse("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16"), "sm_90")
    r = symbolic_search(f, z3_model(lambda a, b, c: c), "sm_90")
    assert r.status == "unknown" and "no Z3 reference" in r.reason


# ------------------------------------------------------------------------------------------
# user models


@z3_model
def int_model(a, b, c):
    """A user's s8 x s8 model, written in its own style (64-bit products)."""
    acc = z3.SignExt(32, c)
    for x, y in zip(a, b):
        acc = acc + z3.SignExt(64 - x.size(), x) * z3.SignExt(64 - y.size(), y)
    return z3.Extract(31, 0, acc)


@z3_model
def sat_ignored(a, b, c):
    acc = z3.SignExt(32, c)
    for x, y in zip(a, b):
        acc = acc + z3.SignExt(64 - x.size(), x) * z3.ZeroExt(64 - y.size(), y)
    return z3.Extract(31, 0, acc)          # no clamp


def block_model(params) -> SymbolicModel:
    @z3_model
    def m(a, b, c):
        A = [Z.Elem("f16", var=x) for x in a]
        B = [Z.Elem("f16", var=x) for x in b]
        return Z.block_fma(A, B, Z.Elem("f32", var=c), params, "f32")
    return m


def test_integer_model_proved_on_a_slice():
    r = symbolic_search(formal.parse(S8), int_model, k_active=4, timeout_s=120)
    assert r.status == "proved" and "4 of 16" in r.slice


@pytest.mark.slow
def test_integer_model_proved_exactly_over_all_k():
    r = symbolic_search(formal.parse(S8), int_model, timeout_s=300)
    assert r.status == "proved" and "all 16 terms" in r.slice


def test_satfinite_ignored_refuted_with_minimal_witness():
    r = symbolic_search(formal.parse(SAT), sat_ignored, timeout_s=120)
    assert r.status == "refuted"
    w = r.witness
    assert w["model_d"] != w["reference_d"] == w["evaluator_d"]
    nonzero_terms = sum(1 for x, y in zip(w["a"], w["b"]) if int(x, 16) and int(y, 16))
    assert nonzero_terms == 1 and all(int(x, 16) == 0 or int(y, 16) for x, y in zip(w["a"], w["b"]))
    v = int(w["reference_d"], 16)
    assert v in (0x7FFFFFFF, 0x80000000)                # the clamp is what differs


def test_float_mutants_refuted_correct_model_proved():
    f = formal.parse(F16K8)
    p = SM90.paths["f16.f32"]
    assert symbolic_search(f, block_model(p), k_active=2).status == "proved"
    for mutant in (p.but(rounding="rn"), p.but(nan_bits=0x7FC00000)):
        r = symbolic_search(f, block_model(mutant), k_active=2, timeout_s=120)
        assert r.status == "refuted", mutant
        assert r.witness["model_d"] != r.witness["reference_d"] == r.witness["evaluator_d"]
        assert sum(int(x, 16) != 0 for x in r.witness["a"]) <= 2


def test_timeout_is_unknown_never_proved():
    r = symbolic_search(formal.parse(SAT), sat_ignored.__class__(lambda a, b, c: sat_ignored.element(a, b, c)),
                        timeout_s=0.001, minimize=False)
    assert r.status in ("unknown", "refuted")            # too short to prove anything
    assert r.status != "proved"


def test_bad_symbolic_model_is_unknown():
    r = symbolic_search(formal.parse(S8), z3_model(lambda a, b, c: z3.Extract(15, 0, c)))
    assert r.status == "unknown" and "32-bit" in r.reason


def test_audit_with_a_symbolic_model():
    # the audit's plumbing on small slices: the searches themselves (4 of 16 k proved, the whole K
    # refuted with a minimal witness) are the tests above
    rep = audit(S8, int_model, count=3, coverage=["int_bounds", "random"], k_active=2, timeout_s=120)
    assert rep.ok and rep.symbolic.status == "proved", rep.table()
    rep = audit(SAT, sat_ignored, count=3, coverage=["int_bounds", "random"], k_active=4, timeout_s=120)
    assert not rep.ok
    assert "symbolic" in rep.caught_by and {"int_sat_hi", "int_sat_lo"} <= set(rep.caught_by)
    assert "witness" in rep.table()
