"""formal.layout: the Layout object, its three compilations, pack/unpack, constructors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formal import catalog as cat
from formal import layout as L
from formal.prove import audit_layout

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16C16 = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
M884 = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32"
F64 = "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64"
B1 = "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc"
F8F6F4 = "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e3m2.f32"
MXF4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"
U4 = "mma.sync.aligned.m8n8k32.row.col.s32.u4.s4.s32"

SAMPLES = [(F16, "a"), (F16, "b"), (F16, "c"), (F16C16, "d"), (M884, "a"), (M884, "c"), (F64, "a"), (F64, "d"),
           (B1, "a"), (B1, "b"), (F8F6F4, "a"), (F8F6F4, "b"), (MXF4, "a"), (MXF4, "scale_a"), (MXF4, "scale_b"),
           (SP, "a"), (SP, "b"), (U4, "a")]


def test_isa_worked_examples():
    # 9.7.14.5.8: a2 of lane 5 (groupID 1, threadID_in_group 1) is row groupID + 8, col 2*1 + 0
    lay = L.fragment(F16, "a")
    assert lay.at(5, 1, 0) == (9, 2, 0)
    # a5 (reg 2, elem 1): i >= 4, row groupID, col 2 + 1 + 8
    assert lay.at(5, 2, 1) == (1, 11, 0)
    # 9.7.14.5.1: lane 17 (high group of MMA computation 1), c0 of .f16 C: row 1 + 4, col 0
    c16 = L.fragment("mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f16", "c")
    assert c16.at(17, 0, 0) == (5, 0, 0)
    # m16n8k8 .f64 A: a1 of lane 0 is row 8, col 0 (rows alternate with i)
    assert L.fragment(F64, "a").at(0, 1, 0) == (8, 0, 0)
    assert L.fragment(F64, "a").reg_bits == 64
    # and back: cell (9, 2) of A is held by lane 5, register 1, element 0
    assert lay.where(9, 2) == (5, 1, 0)
    assert lay.where(16, 0) is None


def test_enumerate_keys_and_counts():
    for opc, op in SAMPLES:
        lay = L.fragment(opc, op)
        e = lay.enumerate()
        assert set(e) == {"lane", "reg", "elem", "i", "product", "row", "col", "bit_lo"}
        n = e["lane"].size
        assert all(v.size == n for v in e.values())
        if lay.active_src is None:
            assert n == lay.lanes * lay.nregs * lay.epr == lay.rows * lay.cols * lay.products
        assert (e["i"] == e["reg"] * lay.epr + e["elem"]).all()
        assert (e["bit_lo"] == e["elem"] * lay.elem_bits + lay.shift).all()


@pytest.mark.parametrize("opc,op", SAMPLES)
def test_z3_terms_agree_with_the_enumerator(opc, op):
    """The Z3 compilation and the numpy compilation of one formula give the same map."""
    import z3

    lay = L.fragment(opc, op)
    f = lay._full
    rng = np.random.default_rng(1)
    idx = rng.choice(f["lane"].size, size=min(48, f["lane"].size), replace=False)
    for k in idx:
        pt = [z3.BitVecVal(int(f[x][k]), L.Z3_WIDTH) for x in ("lane", "reg", "elem")]
        r, c, p = (z3.simplify(t).as_long() for t in lay.z3_terms(*pt))
        held = z3.is_true(z3.simplify(lay.z3_held(*pt)))
        assert held == bool(f["held"][k])
        if held:
            assert (r, c, p) == (f["row"][k], f["col"][k], f["product"][k])
        assert z3.simplify(lay.z3_bit_lo(*pt)).as_long() == f["bit_lo"][k]


def _unpack_scalar(lay: L.Layout, regs: np.ndarray) -> np.ndarray:
    """A slow, obviously-correct unpack from the contract: element e of a register sits at
    bits [bit_lo, bit_lo + value_bits)."""
    shape = (lay.products, lay.rows, lay.cols) if lay.products > 1 else (lay.rows, lay.cols)
    out = np.zeros((regs.shape[0],) + shape, dtype=np.uint64)
    e = lay.enumerate()
    for t in range(regs.shape[0]):
        for k in range(e["lane"].size):
            v = (int(regs[t, e["lane"][k], e["reg"][k]]) >> int(e["bit_lo"][k])) & ((1 << lay.value_bits) - 1)
            cell = (e["product"][k], e["row"][k], e["col"][k]) if lay.products > 1 else (e["row"][k], e["col"][k])
            out[(t,) + tuple(int(x) for x in cell)] = v
    return out


@pytest.mark.parametrize("opc,op", SAMPLES)
def test_unpack_matches_the_scalar_contract_and_pack_inverts_it(opc, op):
    lay = L.fragment(opc, op)
    rng = np.random.default_rng(7)
    dt = np.uint64 if lay.reg_bits == 64 else np.uint32
    regs = rng.integers(0, 2 ** 63, size=(3, 32, lay.nregs), dtype=np.uint64).astype(dt)
    m = L.unpack(opc, op, regs)
    assert m.shape == ((3, lay.products, lay.rows, lay.cols) if lay.products > 1 else (3, lay.rows, lay.cols))
    assert m.dtype == {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[
        8 if lay.value_bits <= 8 else 16 if lay.value_bits <= 16 else 32 if lay.value_bits <= 32 else 64]
    assert (m.astype(np.uint64) == _unpack_scalar(lay, regs)).all()
    back = L.pack(opc, op, m)
    assert back.dtype == dt and back.shape == regs.shape
    assert (L.unpack(opc, op, back) == m).all()
    # pack leaves every bit no element covers at 0: exactly the value bits of held elements survive
    covered = np.zeros((32, lay.nregs), dtype=np.uint64)
    e = lay.enumerate()
    for k in range(e["lane"].size):
        covered[e["lane"][k], e["reg"][k]] |= np.uint64(((1 << lay.value_bits) - 1) << int(e["bit_lo"][k]))
    assert (back.astype(np.uint64) == (regs.astype(np.uint64) & covered)).all()


def test_pack_then_unpack_is_identity_on_matrices():
    rng = np.random.default_rng(3)
    for opc, op in SAMPLES:
        lay = L.fragment(opc, op)
        shape = (5, lay.products, lay.rows, lay.cols) if lay.products > 1 else (5, lay.rows, lay.cols)
        mats = rng.integers(0, 1 << min(lay.value_bits, 62), size=shape, dtype=np.uint64)
        assert (L.unpack(opc, op, L.pack(opc, op, mats)).astype(np.uint64) == mats).all()


def test_e2m1_sits_in_bits_5_2_of_its_byte():
    lay = L.fragment(F8F6F4, "a")
    mats = np.zeros((1, lay.rows, lay.cols), dtype=np.uint8)
    mats[0, 0, 0] = 0xF            # a0 of lane 0
    regs = L.pack(F8F6F4, "a", mats)
    assert regs[0, 0, 0] == 0b111100
    mats[0, 0, 0] = 0xFF           # masked to 4 bits
    assert L.pack(F8F6F4, "a", mats)[0, 0, 0] == 0b111100
    e3m2 = L.fragment(F8F6F4, "b")
    mb = np.zeros((1, e3m2.rows, e3m2.cols), dtype=np.uint8)
    mb[0, 1, 0] = 0x3F             # b1 of lane 0: bits [13:8]
    assert L.pack(F8F6F4, "b", mb)[0, 0, 0] == 0x3F << 8


def test_signed_encodings_and_single_warps_are_accepted():
    lay = L.fragment(U4, "a")
    m = np.full((lay.rows, lay.cols), -1, dtype=np.int8)        # -1 as s4 is 0xF
    regs = L.pack(U4, "a", m)
    assert regs.shape == (32, lay.nregs) and (regs == 0xFFFFFFFF).all()
    assert (L.unpack(U4, "a", regs) == 0xF).all()


def test_unpack_is_fast_enough_for_the_evaluator():
    import time

    lay = L.fragment(B1, "a")
    regs = np.random.default_rng(0).integers(0, 2 ** 32, size=(10000, 32, lay.nregs), dtype=np.uint64).astype(np.uint32)
    L.unpack(B1, "a", regs[:2])
    t = time.perf_counter()
    m = L.unpack(B1, "a", regs)
    L.pack(B1, "a", m)
    assert time.perf_counter() - t < 5.0      # ~0.1 s here; generous for a loaded CI box


def test_scale_selectors_change_the_layout():
    a0 = L.fragment(MXF4, "scale_a", byte_id=0, thread_id=0)
    a1 = L.fragment(MXF4, "scale_a", byte_id=0, thread_id=1)
    assert a0.key != a1.key
    lanes0 = sorted(set(a0.enumerate()["lane"].tolist()))
    assert lanes0 == [l for l in range(32) if l % 4 in (0, 1)]
    assert sorted(set(a1.enumerate()["lane"].tolist())) == [l for l in range(32) if l % 4 in (2, 3)]
    with pytest.raises(L.LayoutError):
        L.fragment(MXF4, "scale_a", byte_id=2, thread_id=0)      # 4X: byte-id must be 0 (Table 37)
    assert L.param_space(MXF4, "scale_b") == [{"byte_id": 0, "thread_id": t} for t in range(4)]


def test_sparse_a_is_compressed_and_exposes_the_chunk():
    lay = L.fragment(SP, "a")
    assert (lay.rows, lay.cols) == (16, 16)
    first = lay.eval_let("firstcol")
    e = lay.enumerate()
    # the stored element lies in the compressed image of its logical chunk [firstcol, firstcol + 3]
    assert ((e["col"] >= first // 2) & (e["col"] < (first + 4) // 2)).all()
    with pytest.raises(L.LayoutError):
        lay.eval_let("nope")


def test_bad_operands_and_families_are_bad_input():
    with pytest.raises(L.LayoutError, match="metadata"):
        L.fragment(SP, "e")
    with pytest.raises(L.LayoutError, match="no operand"):
        L.fragment(F16, "scale_a")
    with pytest.raises(L.LayoutError, match="unspecified"):
        L.fragment("wmma.load.a.sync.aligned.row.m16n16k16.f16", "a")
    with pytest.raises(cat.MalformedOpcode):
        L.fragment("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16", "a")
    with pytest.raises(L.LayoutError):
        L.unpack(F16, "a", np.zeros((2, 32, 3), dtype=np.uint32))
    with pytest.raises(L.LayoutError):
        L.pack(F16, "a", np.zeros((2, 16, 15), dtype=np.uint16))
    with pytest.raises(L.LayoutError):
        L.unpack(F16, "a", np.zeros((1, 32, 4), dtype=np.float32))


def test_operand_names_are_normalised():
    assert L.fragment(F16, "A").key == L.fragment(F16, "a").key
    assert L.fragment(MXF4, "scale-a").key == L.fragment(MXF4, "scale_a").key


def test_constructors_from_table_function_formulas_agree():
    ref = L.fragment(F16, "b")
    e = ref.enumerate()
    recs = [dict(lane=int(l), reg=int(r), elem=int(x), row=int(a), col=int(b))
            for l, r, x, a, b in zip(e["lane"], e["reg"], e["elem"], e["row"], e["col"])]
    t = L.Layout.from_table(recs, like=ref)
    fn = L.Layout.from_function(lambda lane, reg, elem: ref.at(lane, reg, elem)[:2], like=ref)
    fo = L.Layout.from_formulas(ref.row_src, ref.col_src, let=dict(ref.let), like=ref)
    for lay in (t, fn, fo):
        assert lay.map_key != "" and (lay.enumerate()["row"] == e["row"]).all() and (lay.enumerate()["col"] == e["col"]).all()
    assert t.map_key == fn.map_key                     # same table content, same hash
    assert fo.map_key == ref.map_key                   # same formulas, same hash
    # records by element index i instead of reg/elem
    t2 = L.Layout.from_table([dict(lane=r["lane"], i=r["reg"] * ref.epr + r["elem"], row=r["row"], col=r["col"])
                              for r in recs], like=ref)
    assert t2.map_key == t.map_key
    with pytest.raises(L.LayoutError, match="twice"):
        L.Layout.from_table(recs + [dict(recs[0], row=recs[0]["row"] + 1)], like=ref)
    with pytest.raises(L.LayoutError, match="outside"):
        L.Layout.from_table([dict(lane=40, reg=0, elem=0, row=0, col=0)], like=ref)
    with pytest.raises(L.LayoutError, match="unbound"):
        L.Layout.from_formulas("lane + foo", "0", like=ref)
    with pytest.raises(L.LayoutError, match="needs"):
        L.Layout.from_formulas("lane", "0")


def test_load_table_csv_and_json(tmp_path):
    ref = L.fragment(F16, "c")
    recs = L.by_lane(ref)
    p = tmp_path / "c.csv"
    p.write_text(L.records_csv(recs))
    assert L.load_table(p, like=ref).map_key == L.load_table(p, like=ref).map_key
    q = tmp_path / "c.json"
    q.write_text(json.dumps({"entries": recs}))
    a, b = L.load_table(p, like=ref), L.load_table(q, like=ref)
    assert a.map_key == b.map_key
    assert audit_layout(a, F16, "c").status == "proved"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(L.LayoutError):
        L.load_table(bad, like=ref)


def test_tables_both_ways_and_text():
    lay = L.fragment(M884, "c")
    by_lane, by_el = L.by_lane(lay), L.by_element(lay)
    assert len(by_lane) == len(by_el) == 32 * 8
    assert by_lane[0] == {"lane": 0, "reg": 0, "elem": 0, "i": 0, "bits": "[31:0]", "row": 0, "col": 0, "product": 0}
    assert [r["lane"] for r in by_lane] == sorted(r["lane"] for r in by_lane)
    assert [(r["product"], r["row"], r["col"]) for r in by_el] == sorted((r["product"], r["row"], r["col"]) for r in by_el)
    grid = L.text_grid(lay, "c")
    assert "product 3:" in grid and "T0:c0" in grid
    assert "lane  0 reg 0: c0[31:0]=(p0 0,0)" in L.text_lanes(lay, "c")
    d = L.layout_json(lay, cat.parse(M884))
    assert d["products"] == 4 and d["entry"]["id"] == "mma.m8n8k4.f16.c.f32"
    assert "row =" in lay.describe()
    s = lay.sympy()
    assert set(s) == {"row", "col", "product"}


def test_spec_errors_are_reported_with_their_entry(monkeypatch):
    from formal import specdata

    real = specdata.load_spec

    def fake(name):
        d = real(name)
        if name == "fragments_mma_sp":
            d = dict(d)
            d["fragment"] = list(d["fragment"]) + [dict(d["fragment"][0], id="mma.m16n8k16.f16.a")]
        return d

    L.spec.cache_clear()
    monkeypatch.setattr(L, "load_spec", fake)
    try:
        with pytest.raises(L.SpecError, match="defined twice"):
            L.spec()
    finally:
        monkeypatch.setattr(L, "load_spec", real)
        L.spec.cache_clear()
