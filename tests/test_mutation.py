"""The mutation suite: deliberately broken layouts, each refuted with a witness.

Every mutation is a plausible bug (the CUTLASS int4 B layout shipped before PR #3140, rows
off by 8, swapped register halves, a dropped lane, a wrong packing order, a 6-bit element
in the wrong bits, ...).  For each, the engine must refute the named claim with a witness
that really is one (checked by evaluating the candidate at the witness), and where the
witness was worked out by hand from the formulas (comments), it must be exactly that
minimal witness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest

from formal import catalog as cat
from formal.transform import cute
from formal import layout as L
from formal import prove as P

F16_A = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16_A8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
TF32_8 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
I8_16 = "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32"
I8_32 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
I4_32 = "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32"
I4_64 = "mma.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32"
B1_128 = "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.xor.popc"
B1_256 = "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"
B1_88 = "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc"
F64_16 = "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64"
M884 = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
F8F6F4 = "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32"
MXF4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
MX1X = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.f32.ue8m0"
NV4X = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
SP_F16_16 = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP_F16_32 = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
LET = {"groupID": "lane >> 2", "threadID_in_group": "lane % 4"}


def spec(opc: str, op: str, **params) -> L.Layout:
    return L.fragment(opc, op, **params)


def formulas(opc: str, op: str, row: str, col: str, *, product=None, active=None, let=None, params=None, **dims):
    ref = spec(opc, op, **(params or {}))
    lets = dict(LET)
    lets.update(dict(ref.let))
    lets.update(let or {})
    return L.Layout.from_formulas(row, col, product=product if product is not None else (
        ref.product_src if ref.products > 1 else None), active=active if active is not None else ref.active_src,
        let=lets, like=ref, name="mutant", **dims)


def with_packing(opc: str, op: str, **over) -> L.Layout:
    ref = spec(opc, op)
    return formulas(opc, op, ref.row_src, ref.col_src, **over)


@dataclass
class Mutation:
    name: str
    form: str
    operand: str
    build: Callable[[], L.Layout]
    expect: str                         # range | injective | surjective | equal | packing | regcount
    witness: dict | None = None         # hand-derived minimal witness (a subset of the engine's)
    params: dict = field(default_factory=dict)


def cute_int4_b_pre_pr3140():
    # CuTe SM80_16x8x32_S32S4S4S32_TN BLayout before CUTLASS PR #3140: thread stride 32, not 64
    return cute.from_cute("((4,8),8):((32,1),8)", I4_32, "b")


def dropped_lane(opc, op):
    ref = spec(opc, op)
    return L.Layout.from_function(lambda lane, reg, elem: ref.at(min(lane, 30), reg, elem), like=ref, name="lane31-lost")


MUTATIONS = [
    # k = 4*t + v for lane t: lanes 0 and 1 (both column n = 0) overlap from k = 4
    Mutation("cutlass-int4-B-stride32-injective", I4_32, "b", cute_int4_b_pre_pr3140, "injective",
             {"p": {"lane": 0, "reg": 0, "elem": 4}, "q": {"lane": 1, "reg": 0, "elem": 0}, "cell": {"row": 4, "col": 0}}),
    # ... and k never exceeds 4*3 + 7 = 19: rows 20..31 are held by nobody
    Mutation("cutlass-int4-B-stride32-surjective", I4_32, "b", cute_int4_b_pre_pr3140, "surjective",
             {"cell": {"row": 20, "col": 0}}),
    # the literal PTX text of m16n8k256 A (erratum E-LAYOUT-K256-A-COL)
    Mutation("k256-A-ptx-text", B1_256, "a", lambda: formulas(
        B1_256, "a", "groupID if (0 <= i < 32 or 64 <= i < 96) else groupID + 8",
        "(threadID_in_group * 32) + i if i < 64 else (threadID_in_group * 32) + (i & 0x1F) + 128"), "injective",
        {"p": {"lane": 0, "reg": 3, "elem": 0}, "q": {"lane": 3, "reg": 1, "elem": 0}, "cell": {"row": 8, "col": 128}}),
    # c2 of lane 0 lands on row 0 + 8 + 8 = 16
    Mutation("C-rows-off-by-8", F16_A, "c", lambda: formulas(
        F16_A, "c", "groupID + 8 * (i >> 1) + 8", "(threadID_in_group * 2) + (i & 0x1)"), "range",
        {"point": {"lane": 0, "reg": 2, "elem": 0}}),
    # C halves swapped (rows g and g+8 exchanged): a bijection, but not the spec
    Mutation("C-row-halves-swapped", F16_A, "c", lambda: formulas(
        F16_A, "c", "groupID + 8 if i < 2 else groupID", "(threadID_in_group * 2) + (i & 0x1)"), "equal",
        {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # the two f16 halves of each register exchanged
    Mutation("A-swapped-register-halves", F16_A, "a", lambda: with_packing(F16_A, "a", index="reg * epr + (1 - elem)"),
             "equal", {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # lane 31 holds lane 30's elements
    Mutation("A-dropped-lane", F16_A, "a", lambda: dropped_lane(F16_A, "a"), "injective",
             {"p": {"lane": 30, "reg": 0, "elem": 0}, "q": {"lane": 31, "reg": 0, "elem": 0}}),
    Mutation("B1-B-reversed-bit-order", B1_88, "b", lambda: with_packing(B1_88, "b", index="reg * epr + (epr - 1 - elem)"),
             "equal", {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # e3m2 placed like e2m1 (bits [7:2] instead of [5:0]): fits the byte, but not where the text says
    Mutation("e3m2-in-the-wrong-bits", F8F6F4, "a", lambda: with_packing(F8F6F4, "a", shift=2), "equal",
             {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # a 6-bit element at offset 4 spills out of its 8-bit container
    Mutation("e3m2-spills-its-container", F8F6F4, "a", lambda: with_packing(F8F6F4, "a", shift=4), "packing",
             {"elem": 0}),
    # e2m1 left in the low nibble (as ldmatrix b4x16_p64 leaves it) instead of bits [5:2]
    Mutation("e2m1-in-the-low-nibble", F8F6F4, "b", lambda: with_packing(F8F6F4, "b", shift=0), "equal",
             {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # mxf4 e2m1 padded to bytes as under kind::f8f6f4: twice the registers
    Mutation("mxf4-e2m1-padded-to-bytes", MXF4, "a", lambda: with_packing(MXF4, "a", elem_bits=8, shift=2, epr=4, nregs=8),
             "regcount"),
    # .f64 in 32-bit registers
    Mutation("f64-in-32-bit-registers", F64_16, "a", lambda: with_packing(F64_16, "a", reg_bits=32), "packing",
             {"elem": 0}),
    # m8n8k4 without its four products: lanes 0 and 4 collide
    Mutation("m8n8k4-products-dropped", M884, "a", lambda: formulas(
        M884, "a", "lane % 4 if lane < 16 else (lane % 4) + 4", "i", product="0"), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 0}, "q": {"lane": 4, "reg": 0, "elem": 0}}),
    Mutation("m8n8k4-products-by-lane>>3", M884, "a", lambda: formulas(
        M884, "a", "lane % 4 if lane < 16 else (lane % 4) + 4", "i", product="lane >> 3"), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 0}, "q": {"lane": 4, "reg": 0, "elem": 0}}),
    # m8n8k4 .f32 C with the two lane bits exchanged: lane 0's c1 and lane 1's c0 both at (0, 1)
    Mutation("m8n8k4-C-f32-lane-bits-swapped", M884, "c", lambda: formulas(
        M884, "c", "X if lane < 16 else X + 4", "(i & 0b100) + (lane & 0b1) + (i & 0b1)",
        let={"X": "(lane & 0b10) + (i & 0b10)"}), "injective",
        {"p": {"lane": 0, "reg": 1, "elem": 0}, "q": {"lane": 1, "reg": 0, "elem": 0},
         "cell": {"row": 0, "col": 1, "product": 0}}),
    # the column-major A formula used for a .row A: a bijection, wrong from a1 on
    Mutation("m8n8k4-A-col-formula-for-row", M884, "a", lambda: formulas(
        M884, "a", "i % 4 if lane < 16 else (i % 4) + 4", "lane % 4"), "equal",
        {"point": {"lane": 0, "reg": 0, "elem": 1}}),
    # tf32 A written with the f16 pattern
    Mutation("tf32-A-with-f16-pattern", TF32_8, "a", lambda: formulas(
        TF32_8, "a", "groupID if i < 2 else groupID + 8", "threadID_in_group * 2 + (i & 0x1)"), "equal",
        {"point": {"lane": 0, "reg": 1, "elem": 0}}),
    # sparse A laid over the logical K: 256 points cannot cover 16 x 32 cells; columns >= 16 are empty
    Mutation("sparse-A-over-logical-K", SP_F16_32, "a", lambda: with_packing(SP_F16_32, "a", cols=32), "surjective",
             {"cell": {"row": 0, "col": 16}}),
    # sparse A addressed by the logical firstcol: lane 2 (firstcol 8) leaves the 16 x 8 compressed matrix
    Mutation("sparse-A-logical-columns", SP_F16_16, "a", lambda: formulas(
        SP_F16_16, "a", "groupID if i < 2 else groupID + 8", "firstcol + i % 2"), "range",
        {"point": {"lane": 2, "reg": 0, "elem": 0}}),
    # C without the (i & 0x1): lane 3's c2 lands on column 8
    Mutation("C-missing-mask", F16_A, "c", lambda: formulas(
        F16_A, "c", "groupID if i < 2 else groupID + 8", "(threadID_in_group * 2) + i"), "range",
        {"point": {"lane": 3, "reg": 2, "elem": 0}}),
    # B columns by lane & 7: lanes 0 and 8 share column 0 and rows
    Mutation("B-column-by-lane&7", F16_A, "b", lambda: formulas(
        F16_A, "b", "(threadID_in_group * 2) + (i & 0x1) if i < 2 else (threadID_in_group * 2) + (i & 0x1) + 8",
        "lane & 7"), "injective", {"p": {"lane": 0, "reg": 0, "elem": 0}, "q": {"lane": 8, "reg": 0, "elem": 0}}),
    # groupID and threadID_in_group exchanged: lane 16's a4 reaches column 2*4 + 8 = 16
    Mutation("A-group-and-thread-swapped", F16_A, "a", lambda: formulas(
        F16_A, "a", "threadID_in_group if (0 <= i < 2 or 4 <= i < 6) else threadID_in_group + 8",
        "(groupID * 2) + (i & 0x1) if i < 4 else (groupID * 2) + (i & 0x1) + 8"), "range",
        {"point": {"lane": 16, "reg": 2, "elem": 0}}),
    # int8 k32 A: +16 from i >= 4 instead of i >= 8; a4 and a12 collide at (8, 16)
    Mutation("i8-k32-A-second-half-too-early", I8_32, "a", lambda: formulas(
        I8_32, "a", "groupID if (0 <= i < 4 or 8 <= i < 12) else groupID + 8",
        "(threadID_in_group * 4) + (i & 0x3) if i < 4 else (threadID_in_group * 4) + (i & 0x3) + 16"), "injective",
        {"p": {"lane": 0, "reg": 1, "elem": 0}, "q": {"lane": 0, "reg": 3, "elem": 0}, "cell": {"row": 8, "col": 16}}),
    # int4 k64 B: +32 from i >= 4 instead of i >= 8; b4 and b12 collide at (36, 0)
    Mutation("i4-k64-B-second-half-too-early", I4_64, "b", lambda: formulas(
        I4_64, "b", "(threadID_in_group * 8) + (i & 0x7) if i < 4 else (threadID_in_group * 8) + (i & 0x7) + 32",
        "groupID"), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 4}, "q": {"lane": 0, "reg": 1, "elem": 4}, "cell": {"row": 36, "col": 0}}),
    # b1 k128 A rows split at i = 16 instead of 32: a16 and a48 collide at (8, 16)
    Mutation("b1-k128-A-rows-split-at-16", B1_128, "a", lambda: formulas(
        B1_128, "a", "groupID if i < 16 else groupID + 8", "(threadID_in_group * 32) + (i & 0x1F)"), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 16}, "q": {"lane": 0, "reg": 1, "elem": 16}, "cell": {"row": 8, "col": 16}}),
    # b1 m8n8k128 B with a thread stride of 16 bits: lane 0's b16 and lane 1's b0 collide
    Mutation("b1-m8n8k128-B-thread-stride-16", B1_88, "b", lambda: formulas(
        B1_88, "b", "(threadID_in_group * 16) + i", "groupID"), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 16}, "q": {"lane": 1, "reg": 0, "elem": 0}, "cell": {"row": 16, "col": 0}}),
    # f64 k16 A: the odd-element branch applied to every element: a0's column is -2
    Mutation("f64-k16-A-odd-branch-everywhere", F64_16, "a", lambda: formulas(
        F64_16, "a", "groupID if i % 2 == 0 else groupID + 8", "(i * 2) - 2 + threadID_in_group"), "range",
        {"point": {"lane": 0, "reg": 0, "elem": 0}}),
    # i8 k16 A with (i & 0x7): lane 3's a4 reaches column 16
    Mutation("i8-k16-A-mask-0x7", I8_16, "a", lambda: formulas(
        I8_16, "a", "groupID if i < 4 else groupID + 8", "(threadID_in_group * 4) + (i & 0x7)"), "range",
        {"point": {"lane": 3, "reg": 1, "elem": 0}}),
    # f16 k8 B one row down: lane 3's b1 reaches row 8
    Mutation("f16-k8-B-off-by-one", F16_A8, "b", lambda: formulas(
        F16_A8, "b", "(threadID_in_group * 2) + i + 1", "groupID"), "range",
        {"point": {"lane": 3, "reg": 0, "elem": 1}}),
    # one element short: a7 is missing (and 7 x 16 bits do not fill 4 registers)
    Mutation("A-element-dropped-surjective", F16_A, "a", lambda: with_packing(F16_A, "a", elements=7), "surjective",
             {"cell": {"row": 8, "col": 9}}),
    Mutation("A-element-dropped-regcount", F16_A, "a", lambda: with_packing(F16_A, "a", elements=7), "regcount"),
    # s4 in byte containers: 4 registers where the catalog has 2
    Mutation("s4-in-byte-containers", I4_32, "a", lambda: with_packing(I4_32, "a", elem_bits=8, epr=4, nregs=4),
             "regcount"),
    # a CuTe A layout written row-major (m * K + k) instead of CuTe's column-major (m + M * k)
    Mutation("cute-A-row-major-strides", F16_A, "a", lambda: cute.from_cute(
        "((4,8),(2,2,2)):((2,16),(1,128,8))", F16_A, "a"), "equal", {"point": {"lane": 0, "reg": 0, "elem": 1}}),
    # scale_A: both lanes of the pair supply row groupID
    Mutation("scale-A-pair-same-row", MX1X, "scale_a", lambda: formulas(
        MX1X, "scale_a", "groupID", "i - byte_id", params={"byte_id": 0, "thread_id": 0}), "injective",
        {"p": {"lane": 0, "reg": 0, "elem": 0}, "q": {"lane": 1, "reg": 0, "elem": 0}}, {"byte_id": 0, "thread_id": 0}),
    # scale_A: the pair chosen by lane parity instead of lane % 4 >> 1: lanes 0 and 2 both give row 0
    Mutation("scale-A-pair-by-parity", MX1X, "scale_a", lambda: formulas(
        MX1X, "scale_a", "groupID if lane % 2 == 0 else groupID + 8", "i - byte_id",
        active="(lane % 2) == thread_id and byte_id <= i < byte_id + 1", params={"byte_id": 0, "thread_id": 0}),
        "injective", {"p": {"lane": 0, "reg": 0, "elem": 0}, "q": {"lane": 2, "reg": 0, "elem": 0}},
        {"byte_id": 0, "thread_id": 0}),
    # scale_B ignoring byte-id: with byte-id 2 it reads bytes 0, 1 instead of 2, 3
    Mutation("scale-B-ignores-byte-id", NV4X, "scale_b", lambda: formulas(
        NV4X, "scale_b", "i", "groupID", active="threadID_in_group == thread_id and i < 2",
        params={"byte_id": 2, "thread_id": 0}), "equal", {"point": {"lane": 0, "reg": 0, "elem": 0}},
        {"byte_id": 2, "thread_id": 0}),
    # scale_A 2X reading one byte per lane: chunk 1 of every row is missing
    Mutation("scale-A-2X-one-byte", NV4X, "scale_a", lambda: formulas(
        NV4X, "scale_a", "groupID if lane % 2 == 0 else groupID + 8", "i - byte_id",
        active="(threadID_in_group >> 1) == thread_id and byte_id <= i < byte_id + 1",
        params={"byte_id": 0, "thread_id": 0}), "surjective", {"cell": {"row": 0, "col": 1}},
        {"byte_id": 0, "thread_id": 0}),
]


def test_the_suite_has_at_least_30_distinct_mutations():
    assert len(MUTATIONS) >= 30
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)


def _refute(m: Mutation, lay: L.Layout) -> P.Result:
    opts = P.Options()
    form = cat.parse(m.form)
    if m.expect == "packing":
        return P.check_packing(lay, m.name, opts)
    if m.expect == "regcount":
        return P.check_regcount(lay, form.operands[m.operand], m.name, opts)
    rep = P.audit_layout(lay, form, m.operand, **m.params)
    (r,) = [r for r in rep.results if r.obligation.family == f"audit.{m.expect}"]
    return r


def _subset(small: dict, big: dict) -> bool:
    return all(k in big and (_subset(v, big[k]) if isinstance(v, dict) else big[k] == v) for k, v in small.items())


@pytest.mark.parametrize("m", MUTATIONS, ids=lambda m: m.name)
def test_mutation_is_refuted_with_a_real_witness(m: Mutation):
    lay = m.build()
    r = _refute(m, lay)
    assert r.status == "refuted", (m.name, r.to_dict())
    assert r.solver in ("z3+enum", "arithmetic", "shape"), r.solver    # both engines agreed
    w = r.witness
    assert w
    if m.witness:
        assert _subset(m.witness, w), (m.name, w)
    # the witness is a witness: evaluate the candidate there
    if m.expect == "injective":
        p, q = w["p"], w["q"]
        assert (p["lane"], p["reg"], p["elem"]) < (q["lane"], q["reg"], q["elem"])
        cp, cq = lay.at(p["lane"], p["reg"], p["elem"]), lay.at(q["lane"], q["reg"], q["elem"])
        assert cp is not None and cp == cq
    elif m.expect == "range":
        pt = w["point"]
        row, col, prod = lay.at(pt["lane"], pt["reg"], pt["elem"])
        assert not (0 <= row < lay.rows and 0 <= col < lay.cols and 0 <= prod < lay.products)
    elif m.expect == "surjective":
        c = w["cell"]
        e = lay.enumerate()
        hit = (e["row"] == c["row"]) & (e["col"] == c["col"]) & (e["product"] == c.get("product", 0))
        assert not hit.any()
    elif m.expect == "equal":
        pt = w["point"]
        ref = L.fragment(m.form, m.operand, **m.params)
        a, b = lay.at(pt["lane"], pt["reg"], pt["elem"]), ref.at(pt["lane"], pt["reg"], pt["elem"])
        k = (pt["lane"] * lay.nregs + pt["reg"]) * lay.epr + pt["elem"]
        bits_differ = lay._full["bit_lo"][k] != ref._full["bit_lo"][k]
        assert a != b or bits_differ
    elif m.expect == "packing":
        assert "why" in w and w["why"]
    elif m.expect == "regcount":
        assert w.get("spec_bits") != w.get("register_bits") or "cells" in w


@pytest.mark.parametrize("m", [m for m in MUTATIONS if m.expect in ("injective", "range", "surjective")],
                         ids=lambda m: m.name)
def test_each_engine_alone_refutes_the_mutation(m: Mutation):
    """Z3 alone and enumeration alone find the same minimal witness (both paths exercised)."""
    lay = m.build()
    fn = {"injective": P.check_injective, "range": P.check_range, "surjective": P.check_surjective}[m.expect]
    rz = fn(lay, m.name, P.Options(engine="z3"))
    re_ = fn(lay, m.name, P.Options(engine="enum"))
    assert rz.status == re_.status == "refuted"
    key = {"injective": ("p", "q"), "range": ("point",), "surjective": ("cell",)}[m.expect]
    assert [rz.witness[k] for k in key] == [re_.witness[k] for k in key]


def test_the_unmutated_spec_layouts_pass_the_same_checks():
    """The checks are not simply refuting everything: the spec originals are proved."""
    seen = set()
    for m in MUTATIONS:
        key = (m.form, m.operand, tuple(sorted(m.params.items())))
        if key in seen:
            continue
        seen.add(key)
        ref = L.fragment(m.form, m.operand, **m.params)
        rep = P.audit_layout(ref, m.form, m.operand, **m.params)
        assert rep.status == "proved", (m.name, rep.to_dict())
        assert P.check_packing(ref, m.name, P.Options()).status == "proved"
        assert P.check_regcount(ref, cat.parse(m.form).operands[m.operand], m.name, P.Options()).status == "proved"
