"""Sparse metadata (formal.metadata): spec coverage, literal tables, independent cross-checks,
compress/decompress, word checks, Z3 obligations (and that they can fail), counterexamples.

Expected values come from the PTX ISA text (9.7.14.6), from independent implementations
transcribed here (CuTe ELayouts, XLA's packing rule, formal.layout's compressed A), or
from first principles (combinatorics) -- never from the code under test.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from formal import catalog as cat
from formal.expr import Formula
from formal.metadata import (InvalidMetadata, NotSparse, check_word, compress, decompress, gather_terms, meta,
                             obligations)
from formal.metadata import proofs, witness
from formal.metadata.proofs import metadata_classes
from formal.metadata.spec import SpecError

SPARSE = cat.forms(family="mma.sp")
CLASSES = metadata_classes()
REPS = [members[0] for members in CLASSES.values()]          # one form per metadata class
ids = [f"{meta(f).gran.id}-{f.sparsity}-{meta(f).layout.id}-{f.operands['a'].shift}" for f in REPS]

F16_K32 = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
F16_K16_SP = "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
TF32_K16 = "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"
I8_K32 = "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
I8_K64 = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u8.u8.s32"
I4_K128 = "mma.sp.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32"
I4_K64_ORD = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"
MXF4 = "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"
F8F6F4_E2M1 = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32"


# ----------------------------------------------------------------------------------
# the spec covers the catalog, with the ISA's granularities

# PTX ISA 9.7.14.6.1, paragraph by paragraph
def _isa_granularity(f: cat.Form) -> str:
    if f.atype == "tf32":
        return "1:2"
    if f.atype in ("u4", "s4") or (f.atype == "e2m1" and f.kind in ("mxf4", "mxf4nvf4")):
        return "4:8"
    return "2:4"


def test_every_sparse_form_has_exactly_one_spec_entry():
    assert len(SPARSE) > 150
    for f in SPARSE:
        fm = meta(f)                      # raises SpecError unless exactly one entry each
        assert fm.gran.id == _isa_granularity(f), f.opcode
        assert fm.k % fm.gran.width == 0


def test_metadata_classes_partition_the_catalog():
    assert sum(len(m) for m in CLASSES.values()) == len(SPARSE)
    assert 15 <= len(CLASSES) <= 20


def test_dense_form_is_rejected():
    from formal.metadata.spec import NotSparseForm

    with pytest.raises(NotSparseForm):
        meta("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")


def test_spec_error_on_overlapping_entries(monkeypatch):
    from formal.metadata import spec as S

    s = S._spec()
    dup = dict(s, layout=s["layout"] + s["layout"][:1])
    monkeypatch.setattr(S, "_spec", lambda: dup)
    S._meta.cache_clear()
    try:
        with pytest.raises(SpecError):
            S._meta(cat.parse(F16_K16_SP))
    finally:
        S._meta.cache_clear()


# ----------------------------------------------------------------------------------
# legal nibble values: the ISA's lists (9.7.14.6.1)

ORDERED_SIX = {0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110}
SP_INVALID = {0b0000, 0b0101, 0b1010, 0b1111}


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_legal_nibbles_are_the_isa_lists(f):
    fm = meta(f)
    if fm.gran.id == "1:2":
        want = {0b0100, 0b1110}
    elif f.sparsity == "sp::ordered_metadata":
        want = ORDERED_SIX
    else:
        want = set(range(16)) - SP_INVALID
    assert set(fm.legal_nibbles) == want


def test_nibble_decode_examples():
    # 2:4: idx0 = nib & 3 is the first stored element's column (layouts.md 5.6: 0b1101 -> 5, 7 in cols 4..7)
    assert meta(F16_K32).offsets(0b1101) == (1, 3)
    assert meta(F16_K16_SP).offsets(0b0001) == (1, 0)          # reversed pair, plain .sp
    assert meta(TF32_K16).offsets(0b0100) == (0,)
    assert meta(TF32_K16).offsets(0b1110) == (1,)
    # 4:8 pairs: idx 1 and 3 -> columns 2,3 and 6,7
    assert meta(I4_K128).offsets(0b1101) == (2, 3, 6, 7)


# ----------------------------------------------------------------------------------
# layout tables against independent sources

def test_worked_example_f16_m16n8k32():
    # research notes 5.6 (from XLA/CuTe): lane 4 holds row 1 cols 4..7 at nibble 1 and row 9 at nibble 5,
    # lane 5 holds row 1 cols 20..23 at nibble 1 and row 9 cols 20..23 at nibble 5
    own = meta(F16_K32).owner(0)
    assert own[(1, 1)] == (4, 1)
    assert own[(9, 1)] == (4, 5)
    assert own[(1, 5)] == (5, 1)
    assert own[(9, 5)] == (5, 5)


def test_8bit_m16n8k64_lane_segments():
    # CuTe SM120 ELayout in words: 4g+0 row g cols 0-31, 4g+1 row g+8 cols 0-31,
    # 4g+2 row g cols 32-63, 4g+3 row g+8 cols 32-63
    fm = meta(I8_K64)
    for lane, n, r, c, lo in fm.e_table(0):
        g, t = lane // 4, lane % 4
        assert r == g + 8 * (t % 2)
        assert c * 4 == 32 * (t // 2) + 4 * n
        assert lo == 4 * n


# CuTe ELayouts, transcribed from the research notes (NVIDIA CuTe: SM90 GMMA sparse
# ELayout_64x32 / ELayout_64x16, SM120 sparse ELayout for m16n8k64 / m16n8k128).  Index =
# m + M * k; the 32 bits of a lane's e carry the values in order (each value covers
# 32 / nvals bits, or each bit nvals / 32 values).  thr = (lane & 1, (lane >> 1) & 1, lane >> 2).
CUTE = {
    F16_K32: dict(thr=((2, 2, 8), (1024, 0, 1)), val=((16, 2), (64, 8)), M=64),
    TF32_K16: dict(thr=((2, 2, 8), (512, 0, 1)), val=((8, 2), (64, 8)), M=64),
    I8_K64: dict(thr=((2, 2, 8), (8, 512, 1)), val=((32,), (16,)), M=16),
    MXF4: dict(thr=((2, 2, 8), (8, 1024, 1)), val=((64,), (16,)), M=16),
}


def _cute_index(shape_stride, coord: int) -> int:
    shape, stride = shape_stride
    idx = 0
    for s, d in zip(shape, stride):
        idx += (coord % s) * d
        coord //= s
    return idx


@pytest.mark.parametrize("op", list(CUTE))
def test_confirmed_layouts_match_cute(op):
    fm = meta(op)
    c = CUTE[op]
    nvals = math.prod(c["val"][0])
    for sel in fm.selectors:
        tab = fm.e_table(sel)
        for lane, n, r, ch, lo in tab:
            for v in range(nvals):
                bit = v * 32 // nvals
                if not (4 * n <= bit < 4 * n + 4):
                    continue
                idx = _cute_index(c["thr"], int(lane)) + _cute_index(c["val"], v)
                m, k = idx % c["M"], idx // c["M"]
                assert m % 16 == r, (op, lane, n, v)
                assert k // fm.gran.width == ch, (op, lane, n, v)


def test_xla_packing_rule_f16_m16n8k32():
    """XLA's Ampere lowering packs a lane's word as meta[g][lane % 2] | meta[g + 8][lane % 2] << 16,
    where meta[row][h] is the 16-bit metadata of row `row`, columns 16h..16h+15 (4 bits per chunk)."""
    rng = np.random.default_rng(1)
    fm = meta(F16_K32)
    A = np.zeros((16, 32), dtype=np.uint16)
    for r in range(16):
        for c in range(8):
            cols = rng.choice(4, size=2, replace=False)
            A[r, 4 * c + cols] = rng.integers(1, 0x7C00, size=2)
    for sel in (0, 1):
        _a, e = compress(fm.form, A, sel=sel)
        for lane in range(32):
            g, t = lane // 4, lane % 4
            if t // 2 != sel:
                assert e[0, lane] == 0
                continue
            h = lane % 2
            meta16 = {}
            for row in (g, g + 8):
                word = 0
                for c in range(4):
                    nz = [p for p in range(4) if A[row, 16 * h + 4 * c + p]]
                    word |= (nz[0] | nz[1] << 2) << (4 * c)
                meta16[row] = word
            assert int(e[0, lane]) == meta16[g] | meta16[g + 8] << 16


def test_a_chunks_match_formal_layout():
    """formal.layout's compressed A map (written from the dense half-K layout) == our (row, chunk, slot)."""
    from formal import layout

    for f in REPS:
        fm = meta(f)
        la = layout.fragment(f, "a")
        for lane, i, row, ch, j, ccol in fm.a_table():
            r, c, _p = la.at(lane=int(lane), reg=int(i) // la.epr, elem=int(i) % la.epr)
            assert (r, c) == (row, ch * fm.gran.stored + j), (f.opcode, lane, i)


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_compress_registers_equal_layout_pack(f):
    """compress's A registers == formal.layout.pack of the compressed (M x K/2) matrix."""
    from formal import layout

    fm = meta(f)
    A = _random_sparse(fm, np.random.default_rng(7), T=2)
    a, e = compress(f, A, sel=fm.selectors[-1])
    vals, kidx = gather_terms(f, a, e, sel=fm.selectors[-1])
    assert np.array_equal(layout.pack(f, "a", vals), a)


# ----------------------------------------------------------------------------------
# compress / decompress

def _random_sparse(fm, rng, T=1, density=1.0):
    """Random structured-sparse A (encodings): pick a legal nibble per chunk, fill its columns."""
    bits = int(__import__("formal.specdata", fromlist=["x"]).load_spec("formats")[fm.form.atype]["bits"])
    A = np.zeros((T, fm.rows, fm.k), dtype=np.uint64)
    w = fm.gran.width
    legal = fm.legal_nibbles
    for t in range(T):
        for r in range(fm.rows):
            for c in range(fm.chunks_per_row):
                nib = legal[rng.integers(len(legal))]
                for o in fm.offsets(nib):
                    if rng.random() < density:
                        A[t, r, c * w + o] = rng.integers(1, 1 << bits)
    return A


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_round_trip_every_class_every_selector(f):
    fm = meta(f)
    rng = np.random.default_rng(3)
    A = _random_sparse(fm, rng, T=3, density=0.8)
    for sel in fm.selectors:
        a, e = compress(f, A, sel=sel)
        assert a.shape == (3, 32, f.operands["a"].count) and a.dtype == np.uint32
        assert e.shape == (3, 32) and e.dtype == np.uint32
        assert np.array_equal(decompress(f, a, e, sel=sel), A)
        # every contributing lane's word is legal; the others are zero
        active = {int(x) for x in fm.e_table(sel)[:, 0]}
        for lane in range(32):
            if lane in active:
                assert check_word(fm, sel, int(e[1, lane]), lane).valid
            else:
                assert (e[:, lane] == 0).all()


def test_layout_md_worked_example_registers():
    """layouts.md 5.6: lane 4's nibble 1 = 0b1101 -> a0 of lane 5 is A[1][5], a1 is A[1][7]."""
    fm = meta(F16_K32)
    A = np.zeros((16, 32), dtype=np.uint16)
    A[1, 5], A[1, 7] = 0x3C00, 0x4000          # 1.0, 2.0
    a, e = compress(fm.form, A, sel=0)
    assert (int(e[0, 4]) >> 4) & 0xF == 0b1101
    assert int(a[0, 5, 0]) == 0x4000 << 16 | 0x3C00          # a0 low half, a1 high half


def test_not_sparse_witness():
    fm = meta(F16_K16_SP)
    A = np.zeros((2, 16, 16), dtype=np.uint16)
    A[1, 5, 8:11] = 0x3C00
    with pytest.raises(NotSparse) as ei:
        compress(fm.form, A)
    w = ei.value.witness
    assert (w.instance, w.row, w.chunk, w.columns, w.extra) == (1, 5, 2, [8, 9, 10], 10)
    # 4:8: three non-zeros in three different pairs; two in one pair is fine
    fm4 = meta(I4_K128)
    A = np.zeros((16, 128), dtype=np.uint8)
    A[0, [0, 1, 6]] = 1
    compress(fm4.form, A)
    A[0, 3] = 1
    with pytest.raises(NotSparse) as ei:
        compress(fm4.form, A)
    assert ei.value.witness.columns == [0, 1, 3, 6] and ei.value.witness.extra == 6


def test_negative_zero_is_zero_but_kept_when_room():
    fm = meta(F16_K16_SP)
    A = np.zeros((16, 16), dtype=np.uint16)
    A[0, 0:4] = [0x8000, 0x8000, 0x3C00, 0x3C00]     # two -0 and two 1.0: sparse by value
    a, e = compress(fm.form, A)
    back = decompress(fm.form, a, e)[0]
    assert list(back[0, 0:4]) == [0, 0, 0x3C00, 0x3C00]
    A[0, 0:4] = [0x8000, 0, 0x3C00, 0]               # room for the -0: kept bit for bit
    a, e = compress(fm.form, A)
    assert np.array_equal(decompress(fm.form, a, e)[0], A)


def test_descending_order_plain_sp_only():
    fm = meta(F16_K16_SP)
    rng = np.random.default_rng(5)
    A = _random_sparse(fm, rng, T=2)
    a, e = compress(fm.form, A, order="descending")
    nibs = [(int(x) >> (4 * n)) & 0xF for x in e[0] if x for n in range(8)]
    assert nibs and all((v & 3) > (v >> 2) for v in nibs)
    assert np.array_equal(decompress(fm.form, a, e), A)
    with pytest.raises(ValueError):
        compress(F16_K32, np.zeros((16, 32), dtype=np.uint16), order="descending")
    with pytest.raises(ValueError):
        compress(TF32_K16, np.zeros((16, 16), dtype=np.uint32), order="descending")


def test_invalid_metadata_witness():
    fm = meta(I8_K32)
    a, e = compress(fm.form, np.zeros((16, 32), dtype=np.uint8), sel=1)
    e = e.copy()
    e[0, 3] = (int(e[0, 3]) & ~(0xF << 8)) | (0b1010 << 8)     # lane 3, nibble 2: repeated index 2
    with pytest.raises(InvalidMetadata) as ei:
        decompress(fm.form, a, e, sel=1)
    w = ei.value.witness
    assert (w.lane, w.nibble, w.bits, w.value) == (3, 2, (11, 8), 0b1010)
    assert (w.row, w.chunk) == (8, 2)                      # lane 3 = 4*0 + 3: row g + 8, chunk n
    assert [r["id"] for r in w.rules] == ["distinct"]
    # the literal reading is still available for the evaluator (UB made explicit)
    vals, kidx = gather_terms(fm.form, a, e, sel=1, allow_ub=True)
    assert list(kidx[0, 8, 4:6]) == [10, 10]


def test_bad_inputs():
    from formal.catalog import BadArgument

    with pytest.raises(BadArgument):
        compress(F16_K32, np.zeros((16, 16), dtype=np.uint16))          # wrong K
    with pytest.raises(BadArgument):
        compress(F16_K32, np.zeros((16, 32), dtype=np.float32))          # values, not encodings
    with pytest.raises(BadArgument):
        compress(I4_K128, np.full((16, 128), 16, dtype=np.uint8))        # not a 4-bit encoding
    with pytest.raises(BadArgument):
        compress(F16_K32, np.zeros((16, 32), dtype=np.uint16), sel=2)    # illegal selector


def test_gather_terms_dot_product_equals_dense():
    """sum_c vals * B[kidx] == A_dense @ B (small integers: exact), every class."""
    rng = np.random.default_rng(11)
    for f in REPS:
        fm = meta(f)
        if fm.form.atype not in ("u8", "s8", "u4", "s4"):
            continue
        A = _random_sparse(fm, rng, T=2)
        Ai = A.astype(np.int64)
        if fm.form.atype in ("s8", "s4"):
            b = 8 if fm.form.atype == "s8" else 4
            Ai = np.where(Ai >= 1 << (b - 1), Ai - (1 << b), Ai)
        B = rng.integers(-3, 4, size=(fm.k, 8))
        a, e = compress(f, A)
        vals, kidx = gather_terms(f, a, e)
        v = vals.astype(np.int64)
        if fm.form.atype in ("s8", "s4"):
            v = np.where(v >= 1 << (b - 1), v - (1 << b), v)
        D = np.einsum("tmc,tmcn->tmn", v, B[kidx])
        assert np.array_equal(D, Ai @ B)


# ----------------------------------------------------------------------------------
# check_word

def test_check_word_reasons():
    r = check_word(F16_K32, 0, 0x44444441)
    assert not r.valid and len(r.errors) == 1
    err = r.errors[0]
    assert err["bits"] == [3, 0] and err["row"] == 0 and err["cols"] == [0, 3]
    assert [x["id"] for x in err["rules"]] == ["increasing"]
    r = check_word(F16_K16_SP, 2, 0x44444441)                 # plain .sp: reversed is fine
    assert r.valid and r.lane == 2
    r = check_word(F16_K16_SP, 2, 0xF0000000, lane=6)
    assert [e["bits"] for e in r.errors] == [[3, 0], [7, 4], [11, 8], [15, 12], [19, 16], [23, 20], [27, 24], [31, 28]]
    r = check_word(F16_K16_SP, 2, 0, lane=5)                  # lane 5 is not T2 of its group
    assert r.valid and not r.contributes
    r = check_word(TF32_K16, 1, 0x4444444E)
    assert r.valid
    r = check_word(TF32_K16, 1, 0x44444445)
    assert [x["id"] for x in r.errors[0]["rules"]] == ["tf32-pair"]
    r = check_word(I8_K32, 2, 0x44444444)
    assert not r.valid and not r.selector_legal


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_check_word_agrees_with_word_formula_and_lists(f):
    """Three formulations on random words: check_word (per-chunk rules at the layout's bits),
    the spec's closed form, the ISA's value lists nibble by nibble."""
    fm = meta(f)
    rng = np.random.default_rng(2)
    legal = np.array(fm.legal_nibbles)
    words = list(rng.integers(0, 1 << 32, 200, dtype=np.uint64))
    nibs = legal[rng.integers(0, len(legal), (200, 8))]
    words += list((nibs.astype(np.uint64) << (4 * np.arange(8, dtype=np.uint64))).sum(1))
    ok = proofs.text_set(fm)
    sel = fm.selectors[0]
    for w in words:
        w = int(w)
        want = all(((w >> (4 * n)) & 0xF) in ok for n in range(8))
        assert check_word(fm, sel, w).valid == want
        assert bool(fm.gran.word[fm.variant].eval({"e": w})) == want


# ----------------------------------------------------------------------------------
# Z3 obligations: all proved, over the whole catalog (one form per class)

@pytest.mark.parametrize("f", REPS, ids=ids)
def test_obligations_proved(f):
    res = obligations(f)
    bad = [str(r) for r in res if not r.proved]
    assert not bad, bad
    fm = meta(f)
    counts = [r for r in res if r.obligation == "word-count"]
    per_chunk = 2 if fm.gran.id == "1:2" else (6 if f.sparsity == "sp::ordered_metadata" else 12)
    assert counts and all(r.witness["count"] == per_chunk ** 8 for r in counts)


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_enumeration_engine_agrees(f):
    fm = meta(f)
    assert proofs.enum_rules_text(fm) is None
    assert proofs.enum_codec(fm) is None
    for sel in fm.selectors:
        assert proofs.enum_cover(fm, sel) is None
        assert proofs.enum_word_halves(fm, sel) is None


def test_alternative_hypotheses_are_well_formed_and_differ():
    for op in (I8_K32, "mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32"):
        fm = meta(op)
        alt = fm.layout.alternative
        for sel in fm.selectors:
            assert proofs.prove_cover(fm, sel, alt).proved
            assert fm.owner(sel) != fm.owner(sel, alt)


# the obligations can fail: broken specs give Refuted with a minimal witness

def test_cover_refuted_for_a_broken_layout():
    fm = meta(F16_K32)
    let = dict(fm.layout.row.let)
    bad = dataclasses.replace(fm.layout, chunk=Formula("n & 3", let=let))      # forgets the lane's 16-column half
    r = proofs.prove_cover(fm, 0, bad)
    assert r.status == "refuted"
    assert proofs.enum_cover(fm, 0, bad) is not None


def test_cover_refuted_for_an_illegal_selector():
    r = proofs.prove_cover(meta(F16_K32), 2)
    assert r.status == "refuted" and r.witness == {"row": 0, "chunk": 0, "held_by": None}


def test_word_valid_refuted_for_shifted_bits():
    fm = meta(F16_K16_SP)
    let = dict(fm.layout.lo.let)
    bad = dataclasses.replace(fm, layout=dataclasses.replace(fm.layout, lo=Formula("(4 * n + 1) % 32", let=let)))
    r = proofs.prove_word_valid(bad, 0)
    assert r.status == "refuted"
    assert r.witness["lane"] == 0                      # minimal: the first lane


def test_rules_text_refuted_for_a_wrong_rule():
    fm = meta(F16_K32)
    wrong = dataclasses.replace(fm.rules[1], require=Formula("idx0 <= idx1"))
    bad = dataclasses.replace(fm, rules=(fm.rules[0], wrong))
    r = proofs.prove_rules_text(bad)
    assert r.status == "refuted"
    assert proofs.enum_rules_text(bad) is not None


def test_count_refuted_when_combinatorics_disagree():
    fm = meta(F16_K32)
    g = dataclasses.replace(fm.gran, combinatorics={**fm.gran.combinatorics, fm.variant: Formula("4 * 3")})
    r = proofs.count_words(dataclasses.replace(fm, gran=g), 0)
    assert r.status == "refuted" and r.witness["count"] == 6 ** 8


def test_metadata_obligations_registered_with_prove():
    from formal import prove as P

    obs = [o for o in P.collect([cat.parse(I8_K32)]) if o.family.startswith("metadata.")]
    fams = {o.family for o in obs}
    assert fams == {"metadata." + c for c in ("rules-text", "codec", "a-chunks", "word-valid", "word-count",
                                              "cover", "round-trip")}
    res = P.run(obs)
    assert all(r.status == "proved" for r in res), [r.to_dict() for r in res if r.status != "proved"]
    assert any(r.solver == "z3+enum" for r in res)


# ----------------------------------------------------------------------------------
# counterexamples

@pytest.mark.parametrize("op,cols,extra", [(F16_K16_SP, [0, 1, 2], 2), (TF32_K16, [0, 1], 1),
                                            (I4_K128, [0, 2, 4], 4), (F8F6F4_E2M1, [0, 1, 2], 2)])
def test_not_sparse_minimal(op, cols, extra):
    w = witness.not_sparse(op)
    assert w.where["columns"] == cols and w.where["extra"] == extra and w.where["row"] == 0


def _two_d_differ(w):
    assert len(w.readings) == 2
    assert w.readings[0]["D"] != w.readings[1]["D"]


def test_repeated_index_witness():
    w = witness.repeated_index(F16_K32, 1)
    assert w.where["nibble"] == "0b0000" and w.where["lane"] == 2 and w.where["bits"] == [3, 0]
    word = int(w.inputs["e[lane]"], 16)
    r = check_word(F16_K32, 1, word, 2)
    assert not r.valid and len(r.errors) == 1 and r.errors[0]["rules"][0]["id"] == "distinct"
    _two_d_differ(w)
    # the sum reading really is the sum: both stored values on one column
    assert {rd["id"] for rd in w.readings} == {"repeated-sum", "repeated-last"}


def test_unsorted_witness():
    w = witness.unsorted(I8_K64, 0)
    assert w.where["nibble"] == "0b0001"                   # idx0 = 1 > idx1 = 0, fewest bits
    r = check_word(I8_K64, 0, int(w.inputs["e[lane]"], 16))
    assert [x["rules"][0]["id"] for x in r.errors] == ["increasing"]
    _two_d_differ(w)
    with pytest.raises(cat.BadArgument):
        witness.unsorted(I8_K32, 0)                        # plain .sp has no such rule


def test_tf32_witness():
    w = witness.tf32_value(TF32_K16, 0)
    v = int(w.where["nibble"], 2)
    assert v not in (0b0100, 0b1110) and bin(v).count("1") == 1
    _two_d_differ(w)


def test_selector_witness():
    w = witness.selector_out_of_range(F16_K32)
    assert w.sel == 2 and w.where["uncovered"]["row"] == 0
    _two_d_differ(w)
    w = witness.selector_out_of_range(I8_K64)
    assert w.sel == 1
    _two_d_differ(w)
    w = witness.selector_out_of_range(F16_K16_SP)            # 0..3 all legal: the first illegal is 4
    assert w.sel == 4


@pytest.mark.parametrize("op,mistake", [(F16_K32, "swap-rows"), (I8_K32, "alternative"),
                                         ("mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32", "alternative"),
                                         (I4_K128, "swap-rows")])
def test_wrong_bits_witness_reproduced_by_decompress(op, mistake):
    """Write the witness's A with the wrong layout by hand; decompress (spec layout) must see
    exactly what the witness says the hardware sees."""
    fm = meta(op)
    sel = fm.selectors[0]
    w = witness.wrong_bits(op, sel, mistake)
    r, c = w.where["row"], w.where["chunk"]
    intended = next(v for k, v in w.inputs.items() if k.endswith("intended"))
    seen = w.inputs["as the hardware sees it"]
    assert intended != seen and sum(1 for x in intended if x) == 1          # one non-zero: minimal
    A = np.zeros((fm.rows, fm.k), dtype=np.uint64)
    A[r, c * fm.gran.width:(c + 1) * fm.gran.width] = intended
    a, e_true = compress(op, A, sel=sel)
    wrong = witness._mistake_layout(fm, mistake)
    # re-place every nibble where the wrong layout puts it
    e_wrong = np.zeros_like(e_true)
    true_own, wrong_own = fm.owner(sel), fm.owner(sel, wrong)
    for rc, (lane, n) in true_own.items():
        nib = (int(e_true[0, lane]) >> (4 * n)) & 0xF
        wl, wn = wrong_own[rc]
        e_wrong[0, wl] |= np.uint32(nib << (4 * wn))
    got = decompress(op, a, e_wrong, sel=sel)[0]
    assert list(got[r, c * fm.gran.width:(c + 1) * fm.gran.width]) == seen
    _two_d_differ(w)


def test_witness_alternative_needs_a_hypothesis():
    with pytest.raises(cat.BadArgument):
        witness.wrong_bits(F16_K32, 0, "alternative")


@pytest.mark.parametrize("f", REPS[:6], ids=ids[:6])
def test_all_witnesses_run(f):
    ws = witness.all_witnesses(f)
    kinds = {w.kind.split("/")[0] for w in ws}
    assert {"not-sparse", "invalid-metadata", "selector-out-of-range", "wrong-bits"} <= kinds
    for w in ws:
        assert w.text() and w.to_dict()["opcode"] == f.opcode


# ----------------------------------------------------------------------------------
# brute force on a slice (the full 2^32 scans are in test_metadata_slow.py)

@pytest.mark.parametrize("op,sel,top,per_nibble", [(F16_K32, 0, 0x44, 6), (I8_K32, 1, 0x12, 12),
                                                   (TF32_K16, 0, 0xE4, 2), (I4_K128, 0, 0x00, 12)])
def test_scan_slice(op, sel, top, per_nibble):
    """Words whose top byte is ``top``: 2^24 of them, 6 free nibbles -> per_nibble^6 legal
    when both fixed nibbles are legal, else 0 (counted from the ISA lists by hand)."""
    from formal.metadata import scan

    fm = meta(op)
    fixed_ok = (top >> 4) in fm.legal_nibbles and (top & 0xF) in fm.legal_nibbles
    want = per_nibble ** 6 if fixed_ok else 0
    for kind in ("chunk", "word"):
        r = scan(fm, sel, kind=kind, start=top << 24, stop=(top + 1) << 24, block=1 << 20)
        assert r.count == want


def test_sparse_terms_and_undefined_selector():
    from formal.metadata import UndefinedBehavior, UndefinedSelector, sparse_terms

    fm = meta(F16_K16_SP)
    A = np.zeros((16, 16), dtype=np.uint16)
    A[2, 3] = 0x3C00                              # one non-zero at column 3: padded with column 0
    vals, kidx = sparse_terms(F16_K16_SP, A)
    assert list(kidx[0, 2, :2]) == [0, 3] and list(vals[0, 2, :2]) == [0, 0x3C00]
    a, e = compress(F16_K32, np.zeros((16, 32), dtype=np.uint16))
    with pytest.raises(UndefinedSelector) as ei:
        gather_terms(F16_K32, a, e, sel=3)
    assert isinstance(ei.value, UndefinedBehavior) and isinstance(ei.value, cat.BadArgument)
    assert issubclass(InvalidMetadata, UndefinedBehavior)


@pytest.mark.parametrize("f", REPS, ids=ids)
def test_contributing_lanes_follow_the_selector_text(f):
    """9.7.14.6.1: one thread T_f of each group / the pair T0,T1 (f=0) or T2,T3 (f=1) / all four."""
    fm = meta(f)
    mode = {(0, 1, 2, 3): "one", (0, 1): "pair", (0,): "all"}[fm.selectors]
    assert fm.layout.selectors == mode
    for sel in fm.selectors:
        lanes = {int(x) for x in fm.e_table(sel)[:, 0]}
        want = {"one": {sel}, "pair": {2 * sel, 2 * sel + 1}, "all": {0, 1, 2, 3}}[mode]
        assert lanes == {4 * g + t for g in range(8) for t in want}
