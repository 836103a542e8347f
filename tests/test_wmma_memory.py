"""wmma memory semantics (specs/wmma_memory.toml via formal.wmma.memory).

Expected values here are computed by hand from the PTX text (9.7.14.4.1-2), or by closed
formulas written independently of the spec (``_oracle``), never copied from the code's output.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formal import catalog as cat
from formal.catalog import BadArgument
from formal.wmma import memory as M

F16A = "wmma.load.a.sync.aligned.row.m16n16k16.f16"
SM90 = [v for v in M.memory_forms("sm_90", "8.5")]
SM90_GENERIC = [v for v in SM90 if v.space == ""]


# -- an oracle written from the text, independent of the spec formulas --------------------

BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "s32": 32, "s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1}


def _dims(form):
    m, n, k = form.mnk
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[form.matrix]


def _frag_bytes(form) -> int:
    op = form.operands["r"]
    return op.count * op.reg_bits // 8      # "eight elements of type .f16x2" = 32 bytes


def _oracle(form, ptr, stride):
    """(legal, first misaligned instance or None) straight from 9.7.14.4.2."""
    rows, cols = _dims(form)
    n_ld, ld = (rows, cols) if form.layout == "row" else (cols, rows)
    F = _frag_bytes(form)
    eb = BITS[{"a": form.atype, "b": form.btype, "c": form.ctype, "d": form.dtype}[form.matrix]]
    first = next((i for i in range(n_ld) if (8 * ptr + i * stride * eb) % (8 * F)), None)
    return (first is None and ld <= stride < 2 ** 32), first


def _modulus(form) -> int:
    """Smallest positive stride s with s * bits a multiple of 8 * F (a closed formula)."""
    F = _frag_bytes(form)
    eb = BITS[{"a": form.atype, "b": form.btype, "c": form.ctype, "d": form.dtype}[form.matrix]]
    return 8 * F // math.gcd(8 * F, eb)


# -- the spec against the other sources --------------------------------------------------------

def test_element_bits_agree_with_formats_containers():
    for t, bits in M.spec().element_bits.items():
        assert cat.element_container(t, None)[0] == bits, t


def test_every_sm90_form_has_a_memory_view_and_default_is_leading_size():
    assert len(SM90) == 352 + 104
    for v in SM90:
        r = M.prove_default_is_leading_size(v)
        assert r.proved, r.line()


@pytest.mark.parametrize("opcode,registers,elements", [
    # hand-computed: registers x register bytes / (rows x cols x bits / 8 / 32 threads)
    (F16A, 32, 16),
    ("wmma.load.a.sync.aligned.col.m8n32k16.f16", 32, 8),        # 8 x 16 halves / 32 threads: 4 copies held
    ("wmma.load.b.sync.aligned.col.m8n32k16.f16", 32, 32),       # 16 x 32 halves / 32 threads = 32 bytes
    ("wmma.load.a.sync.aligned.row.m32n8k16.f16", 32, 32),
    ("wmma.load.b.sync.aligned.row.m32n8k16.f16", 32, 8),
    ("wmma.load.c.sync.aligned.row.m16n16k16.f16", 16, 16),
    ("wmma.store.d.sync.aligned.row.m16n16k16.f32", 32, 32),
    ("wmma.load.a.sync.aligned.row.m16n16k16.s8", 8, 8),
    ("wmma.load.a.sync.aligned.row.m8n32k16.u8", 4, 4),
    ("wmma.load.b.sync.aligned.row.m8n32k16.u8", 16, 16),
    ("wmma.load.a.sync.aligned.col.m16n16k16.bf16", 16, 16),
    ("wmma.load.b.sync.aligned.col.m32n8k16.bf16", 8, 8),
    ("wmma.load.a.sync.aligned.row.m16n16k8.tf32", 16, 16),
    ("wmma.load.a.sync.aligned.row.m8n8k4.f64", 8, 8),
    ("wmma.load.c.sync.aligned.row.m8n8k4.f64", 16, 16),
    ("wmma.load.a.sync.aligned.row.m8n8k32.s4", 4, 4),
    ("wmma.load.b.sync.aligned.col.m8n8k128.b1", 4, 4),
    ("wmma.store.d.sync.aligned.col.m8n8k32.s32", 8, 8),
])
def test_fragment_bytes_both_readings(opcode, registers, elements):
    v = M.memory_view(opcode)
    assert v.frag_bytes("registers") == registers
    assert v.frag_bytes("elements") == elements


def test_readings_differ_only_for_f16_multiplicands():
    diff = {(v.etype, v.matrix, v.form.shape) for v in SM90 if v.frag_bytes("registers") != v.frag_bytes("elements")}
    assert diff == {("f16", "a", "m16n16k16"), ("f16", "b", "m16n16k16"), ("f16", "a", "m8n32k16"), ("f16", "b", "m32n8k16")}


# -- the ISA's worked example and hand-made cases ---------------------------------------------

def test_isa_example_legal_and_each_condition():
    # "p is a multiple of 32", "2*s is a multiple of 32"
    assert M.check_access(F16A, 0x1000, 16).legal
    assert M.check_access(F16A, 0x1000, 48).legal
    r = M.check_access(F16A, 0x1010, 16)
    assert [v.rule for v in r.violations] == ["align.row_start"] and r.violations[0].witness["ld"] == 0
    r = M.check_access(F16A, 0x1000, 24)
    assert [v.rule for v in r.violations] == ["align.row_start"]
    assert r.violations[0].witness["ld"] == 1 and r.violations[0].witness["start_byte"] == 0x1000 + 48
    assert any("elements" in n for n in r.notes)         # aligned under the other reading


def test_stride_below_default_gives_overlapping_cells():
    r = M.check_access(F16A, 0, 8)
    v = next(x for x in r.violations if x.rule == "stride.min")
    assert v.witness["same_address"] == [[0, 8], [1, 0]]       # 0*8+8 == 1*8+0
    r = M.check_access("wmma.load.a.sync.aligned.col.m16n16k16.f16", 0, 0)
    v = next(x for x in r.violations if x.rule == "stride.min")
    assert v.witness["same_address"] == [[0, 0], [0, 1]]       # every column starts at element 0
    assert v.witness["index"] == 0


@pytest.mark.parametrize("opcode,stride", [
    (F16A, 0), (F16A, 7), (F16A, 16), ("wmma.load.c.sync.aligned.col.m32n8k16.f32", 3)])
def test_overlap_witness_queries_give_the_optimisers_minimum(opcode, stride):
    """The two satisfiability queries of overlap_witness certify the same pair that Z3's
    nested minimisation (the slower reference query) finds, and the enumeration agrees."""
    v = M.memory_view(opcode)
    enum, zz = M.overlap_witness(v, stride)
    ref = M._overlap_witness_optimize(v, stride)
    assert enum == zz == ref
    assert (ref is None) == (stride >= v.default_stride)


def test_overlap_witness_falls_back_to_z3s_own_minimum(monkeypatch):
    """A wrong enumeration (indices shifted) is not certified: Z3's minimum comes back, so the
    disagreement is seen."""
    v = M.memory_view(F16A)
    right = M.MemoryView.index
    monkeypatch.setattr(M.MemoryView, "index", lambda self, r, c, s: right(self, r, c, s) + (r == 0 and c == 0) * 7)
    enum, zz = M.overlap_witness(v, 8)
    assert zz == {"index": 8, "cells": [[0, 8], [1, 0]]}
    assert enum != zz


def test_omitted_stride_is_the_default():
    r = M.check_access("wmma.load.b.sync.aligned.row.m8n32k16.f16", 0)
    assert r.legal and not r.stride_given and r.stride == 32


def test_stride_operand_width_and_signedness():
    r = M.check_access(F16A, 0, 1 << 32)
    assert [v.rule for v in r.violations] == ["stride.width"]
    r = M.check_access(F16A, 0, 1 << 31)
    assert r.legal and any("signed" in n for n in r.notes)


def test_footprint_and_ptr_width():
    r = M.check_access(F16A, 0, 32)
    assert r.footprint == (0, (15 * 32 + 16) * 2)
    r = M.check_access(F16A, (1 << 64) - 32, 16)
    assert [v.rule for v in r.violations] == ["ptr.width"]


def test_f64_accumulator_erratum_note():
    op = "wmma.store.d.sync.aligned.row.m8n8k4.f64"
    r = M.check_access(op, 0, 9)
    assert not r.legal and any("single .f64 register" in n for n in r.notes)
    assert M.check_access(op, 0, 9, fragment_bytes=8).legal


def test_address_of_subbyte_and_bit_elements():
    v = M.memory_view("wmma.load.b.sync.aligned.col.m8n8k128.b1")
    a = v.address(13, 5, ptr=0x100, stride=256)
    assert (a["index"], a["byte"], a["bit_in_byte"]) == (5 * 256 + 13, 0x100 + (5 * 256 + 13) // 8, (5 * 256 + 13) % 8)
    assert a["bit_msb_first"] == 8 * a["byte"] + 7 - a["bit_in_byte"]
    v = M.memory_view("wmma.load.a.sync.aligned.row.m8n8k32.u4")
    a = v.address(1, 3, ptr=0x40, stride=32)
    assert (a["byte"], a["bit_in_byte"], a["bit_msb_first"] - 8 * a["byte"]) == (0x40 + 35 // 2, 4, 0)


def test_state_spaces():
    r = M.check_access("wmma.load.a.sync.aligned.row.m16n16k16.f16", 0, points_to="local")
    assert [v.rule for v in r.violations] == ["space.generic_target"]
    assert M.check_access("wmma.load.a.sync.aligned.row.m16n16k16.f16", 0, points_to="shared").legal
    r = M.check_access("wmma.load.a.sync.aligned.row.m16n16k16.global.f16", 0, points_to="shared")
    assert [v.rule for v in r.violations] == ["space.window"]
    r = M.check_access("wmma.store.d.sync.aligned.row.m16n16k16.f32", 0, points_to="shared::cluster")
    assert not r.legal and any("ambiguous" in n for n in r.notes)


def test_per_thread_operands_must_be_uniform():
    ptrs = [0x1000] * 32
    assert M.check_access(F16A, ptrs, [16] * 32).legal
    ptrs[7] = 0x2000
    r = M.check_access(F16A, ptrs, 16)
    assert [v.rule for v in r.violations] == ["uniform.operands"] and r.violations[0].witness["lanes"] == [0, 7]


@pytest.mark.parametrize("args", [
    dict(opcode="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", ptr=0),
    dict(opcode="wmma.load.a.sync.aligned.col.m8n8k32.s4", ptr=0),      # sub-byte A is .row only
    dict(opcode=F16A, ptr=-1),
    dict(opcode=F16A, ptr=1 << 64),
    dict(opcode=F16A, ptr="0x10"),
    dict(opcode=F16A, ptr=0, stride=-4),
    dict(opcode=F16A, ptr=0, reading="bytes"),
    dict(opcode=F16A, ptr=0, points_to="texture"),
    dict(opcode=F16A, ptr=[0] * 31),
])
def test_bad_input(args):
    with pytest.raises(BadArgument):
        M.check_access(**args)


# -- stride sets -------------------------------------------------------------------------------

@pytest.mark.parametrize("opcode,align,modulus,minimum", [
    (F16A, 32, 16, 16),                                                    # the brief's example
    ("wmma.load.c.sync.aligned.row.m16n16k16.f32", 32, 8, 16),
    ("wmma.load.c.sync.aligned.col.m16n16k16.f16", 16, 8, 16),
    ("wmma.load.a.sync.aligned.row.m8n8k32.s4", 4, 8, 32),
    ("wmma.load.b.sync.aligned.col.m8n8k128.b1", 64, 32, 128),
    ("wmma.store.d.sync.aligned.col.m8n8k4.f64", 16, 2, 8),
    ("wmma.load.a.sync.aligned.row.m16n16k8.tf32", 16, 4, 8),
    ("wmma.load.b.sync.aligned.row.m8n32k16.s8", 16, 16, 32),
])
def test_stride_sets(opcode, align, modulus, minimum):
    s = M.legal_strides(opcode, ptr_align=align, enumerate_strides=512, enumerate_ptrs=4)
    assert not s.empty and (s.modulus, s.minimum) == (modulus, minimum)
    assert all(p.proved for p in s.proofs) and s.cross_check["agrees"]


def test_stride_set_elements_reading_and_empty_set():
    s = M.legal_strides(F16A, ptr_align=32, reading="elements", enumerate_strides=256)
    assert (s.modulus, s.minimum) == (8, 16)
    s = M.legal_strides(F16A, ptr_align=16, enumerate_strides=256)
    assert s.empty and s.witness["ptr"] == 16 and s.proofs[0].proved
    s = M.legal_strides(F16A, ptr=0x1010, enumerate_strides=128)
    assert s.empty
    s = M.legal_strides(F16A, ptr=0x1020, enumerate_strides=128)
    assert (s.modulus, s.minimum) == (16, 16)
    with pytest.raises(BadArgument):
        M.legal_strides(F16A)
    with pytest.raises(BadArgument):
        M.legal_strides(F16A, ptr_align=0)


# -- random pairs (hypothesis) ------------------------------------------------------------------

forms = st.sampled_from(SM90_GENERIC)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forms, st.integers(0, 1 << 40), st.integers(0, 64))
def test_random_legal_pairs_accepted(view, q, j):
    form = view.form
    F, g = _frag_bytes(form), _modulus(form)
    ptr = F * q
    stride = -(-view.default_stride // g) * g + g * j
    r = M.check_access(form, ptr, stride)
    assert r.legal, r.text()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forms, st.integers(0, 1 << 40), st.integers(1, 1 << 12), st.integers(0, 3))
def test_random_illegal_pairs_refused_with_the_right_rule(view, q, off, kind):
    form = view.form
    F, g = _frag_bytes(form), _modulus(form)
    good = -(-view.default_stride // g) * g
    if kind == 0:                       # misaligned base pointer -> instance 0
        ptr, stride = F * q + (off % F or 1), good
        want = ("align.row_start", 0)
    elif kind == 1:                     # stride * bits not a multiple of 8F -> instance 1
        if g == 1:
            return
        ptr, stride = F * q, good + (off % g or 1)
        want = ("align.row_start", 1)
    else:                               # stride below the default -> overlap
        ptr, stride = F * q, off % view.default_stride
        want = ("stride.min", None)
    r = M.check_access(form, ptr, stride)
    assert not r.legal
    rules = {v.rule: v for v in r.violations}
    assert want[0] in rules, r.text()
    if want[1] is not None:
        assert rules[want[0]].witness["ld"] == want[1]
    else:
        a, b = rules["stride.min"].witness["same_address"]
        idx = lambda rc: (rc[0] * stride + rc[1]) if form.layout == "row" else (rc[1] * stride + rc[0])  # noqa: E731
        assert a != b and idx(a) == idx(b)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forms, st.integers(0, 4096), st.integers(0, 600), st.sampled_from(["row", "col"]))
def test_verdict_matches_text_oracle_for_any_stride_and_layout(view, ptr, stride, layout):
    form = cat.parse(view.opcode.replace(f".{view.layout}.", f".{layout}."))
    if not cat.is_documented(form):
        return                          # sub-byte A/B exist in one layout only
    legal, first = _oracle(form, ptr, stride)
    r = M.check_access(form, ptr, stride)
    assert r.legal == legal, r.text()
    got = next((v.witness["ld"] for v in r.violations if v.rule == "align.row_start"), None)
    assert got == first


# -- per-form obligations ------------------------------------------------------------------------

SLICE = [F16A, "wmma.load.c.sync.aligned.col.m32n8k16.f32", "wmma.load.a.sync.aligned.row.m8n8k32.s4",
         "wmma.store.d.sync.aligned.col.m8n8k4.f64", "wmma.load.b.sync.aligned.col.m8n8k128.b1"]


@pytest.mark.parametrize("opcode", SLICE)
def test_alignment_readings_agree_and_overlap_iff_below_default(opcode):
    v = M.memory_view(opcode)
    a = M.prove_align_readings_agree(v)
    assert a.proved and a.cross_check["agrees"], a.line()
    b = M.prove_overlap_iff_below_default(v)
    assert b.proved and b.cross_check["agrees"], b.line()
    assert a.smt2 and "(check-sat)" in a.smt2


@pytest.mark.slow
@pytest.mark.parametrize("view", SM90_GENERIC, ids=lambda v: v.opcode)
def test_every_form_obligations(view):
    for r in (M.prove_align_readings_agree(view), M.prove_overlap_iff_below_default(view),
              M.prove_align_readings_agree(view, "elements")):
        assert r.proved and r.cross_check["agrees"], r.line()


def test_refuted_obligation_is_reported_with_witness():
    """A deliberately wrong rule is refuted (the checker can fail)."""
    import z3
    v = M.memory_view(F16A)
    ptr, s = M._bv("ptr"), M._bv("stride")
    per_row = M.rule_all_z3(v, M.spec().rule("align.row_start"), ptr, s, 32)
    wrong = z3.And(z3.URem(ptr, M._val(32)) == 0)            # forgets the stride condition
    from formal.wmma.results import check_negation
    r = check_negation("wrong", "per-row rule <=> ptr aligned", [z3.ULT(ptr, M._val(1 << 64)), z3.ULT(s, M._val(1 << 32)),
                                                                  per_row != wrong], {"ptr": ptr, "stride": s})
    assert r.status == "refuted" and (r.witness["stride"] * 16) % 256 != 0
