"""specs/movement.toml against independent transcriptions of the PTX text, and the
undefined-behaviour guards of each movement."""

import itertools

import numpy as np
import pytest

from formal.expr import Formula
from formal.transform import prove_transform, registers, tile, fragment
from formal.transform.spaces import TransformError
from formal.transform.steps import make_step, movement_spec

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

# PTX ISA 9.7.9.7 table, transcribed here independently of the spec file:
# mode -> per selector c[1:0] the source byte of [d.b3, d.b2, d.b1, d.b0]
PRMT_TABLE = {
    "f4e": [[3, 2, 1, 0], [4, 3, 2, 1], [5, 4, 3, 2], [6, 5, 4, 3]],
    "b4e": [[5, 6, 7, 0], [6, 7, 0, 1], [7, 0, 1, 2], [0, 1, 2, 3]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[3, 2, 1, 0], [3, 2, 1, 1], [3, 2, 2, 2], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [1, 1, 1, 0], [2, 2, 1, 0], [3, 2, 1, 0]],
    "rc16": [[1, 0, 1, 0], [3, 2, 3, 2], [1, 0, 1, 0], [3, 2, 3, 2]],
}


def test_prmt_mode_formulas_match_the_ptx_table():
    sp = movement_spec()["prmt"]
    assert sp["table"] == PRMT_TABLE          # the spec's verbatim copy is the text's table
    for mode, rows in PRMT_TABLE.items():
        f = Formula(sp["mode"][mode]["byte"])
        for sel in range(4):
            for k in range(4):
                # c carries garbage above bit 1: modes use c[1:0] only
                assert f.eval({"k": k, "c": sel | 0xABC0}) == rows[sel][3 - k], (mode, sel, k)


def test_prmt_default_form():
    sp = movement_spec()["prmt"]["mode"]["default"]
    fb, fs = Formula(sp["byte"]), Formula(sp["sign"])
    for c in (0x3210, 0x7654, 0x89AB, 0xF0E1):
        for k in range(4):
            nib = (c >> (4 * k)) & 0xF
            assert fb.eval({"k": k, "c": c}) == nib & 7
            assert fs.eval({"k": k, "c": c}) == nib >> 3


def _shfl_reference(mode, lane, b, c):
    """The 9.7.9.6 pseudo-code, with Python's signed integers."""
    bval, cval, segmask = b & 31, c & 31, (c >> 8) & 31
    maxLane = (lane & segmask) | (cval & ~segmask & 31)
    minLane = lane & segmask
    if mode == "up":
        j = lane - bval
        pval = j >= maxLane
    elif mode == "down":
        j = lane + bval
        pval = j <= maxLane
    elif mode == "bfly":
        j = lane ^ bval
        pval = j <= maxLane
    else:
        j = minLane | (bval & ~segmask & 31)
        pval = j <= maxLane
    return j if pval else lane


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
def test_shfl_formulas_match_the_pseudocode(mode):
    sp = movement_spec()["shfl"]
    fj, fp = Formula(sp["mode"][mode]["j"], sp["let"]), Formula(sp["mode"][mode]["pval"], sp["let"])
    cs = [0x1f, 0x0, 0x181f, 0x1800, 0x101f, 0x1c0f, 0x1e00, 0x0f, 0x1807, 0x1fff, 0x3f1f]
    for lane, b, c in itertools.product(range(32), range(0, 40), cs):
        p = fp.eval({"lane": lane, "b": b, "c": c})
        got = fj.eval({"lane": lane, "b": b, "c": c}) if p else lane
        assert got == _shfl_reference(mode, lane, b, c), (mode, lane, b, c)


def test_ldmatrix_formulas_match_the_figure_reading():
    """layouts.md 7 / CuTe LDSM_N, LDSM_T: d[j] half e of lane L = M_j[L>>2][2(L&3)+e]
    (.trans: M_j[2(L&3)+e][L>>2]), row r of matrix j addressed by lane 8j + r."""
    for trans in (False, True):
        e = next(x for x in movement_spec()["ldmatrix"] if x["id"] == f"ldmatrix.m8n8{'.trans' if trans else ''}.b16")
        fl, fi = Formula(e["addr_lane"], e.get("let", {})), Formula(e["index"], e.get("let", {}))
        for L, j, h in itertools.product(range(32), range(4), range(2)):
            r, c = (2 * (L & 3) + h, L >> 2) if trans else (L >> 2, 2 * (L & 3) + h)
            assert fl.eval({"lane": L, "j": j, "e": h}) == 8 * j + r
            assert fi.eval({"lane": L, "j": j, "e": h}) == c


def test_cvt_pack_puts_first_operand_in_upper_half():
    """9.7.9.21: 'the value converted from input a is stored in the upper half of d'."""
    src = registers(["a", "b"], 32, 2, 32, row="lane", col="reg")        # a holds (L, 0), b holds (L, 1)
    want = registers(["d"], 32, 2, 16, row="lane", col="1 - elem")      # low half (L, 1), high half (L, 0)
    assert prove_transform(src, ["cvt.rn.f16x2.f32 d, a, b;"], want).status == "proved"
    r = prove_transform(src, ["cvt.rn.f16x2.f32 d, b, a;"], want)
    assert r.status == "refuted" and r.witness == {"lane": 0, "register": "d", "element": 0, "bit": 0}
    assert r.expected == {"row": 0, "col": 1, "bit": 0} and r.got["col"] == 0


def test_cvt_needs_a_whole_f32_element():
    # a register holding two f16 values is not one element: the conversion is garbage
    src = registers(["a", "b"], 32, 4, 16, row="lane", col="2 * reg + elem")
    r = prove_transform(src, ["cvt.rn.f16x2.f32 d, a, b;"], registers(["d"], 32, 4, 16, row="lane", col="elem"))
    assert r.status == "refuted" and r.got["kind"] == "garbled"


def test_mov_pack_order_is_opposite_to_cvt():
    src = registers(["x"], 32, 2, 16, row="lane", col="elem")
    # {lo, hi} = x: lo = bits 15:0 (9.7.9.4 unpack); then d = {lo, hi} rebuilds x
    r = prove_transform(src, ["mov.b32 {lo, hi}, x;", "mov.b32 d, {lo, hi};"],
                        registers(["d"], 32, 2, 16, row="lane", col="elem"))
    assert r.status == "proved"


def test_movmatrix_is_a_transpose():
    rng = np.random.default_rng(0)
    src = registers(["x"], 8, 8, 16, row="lane >> 2", col="2 * (lane & 3) + elem")
    tgt = registers(["y"], 8, 8, 16, row="2 * (lane & 3) + elem", col="lane >> 2")
    assert prove_transform(src, ["movmatrix.sync.aligned.m8n8.trans.b16 y, x;"], tgt).status == "proved"
    # the spec formula, evaluated: source lane/element of destination (lane 5, e 1) is
    # A[2*1+1][1] = lane 4*3 + 0, element 1
    e = movement_spec()["movmatrix"][0]
    env = {"lane": 5, "e": 1}
    assert Formula(e["src_lane"], e["let"]).eval(env) == 12
    assert Formula(e["src_e"], e["let"]).eval(env) == 1


def test_stmatrix_inverts_ldmatrix():
    for num, tr in itertools.product((1, 2, 4), ("", ".trans")):
        regs = [f"d{i}" for i in range(num)]
        src = registers(regs, 8 * num, 8, 16, row="8 * reg + (lane >> 2)", col="2 * (lane & 3) + elem")
        steps = [f"stmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 [p], {{{', '.join(regs)}}};",
                 f"ldmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 {{{', '.join(r + 'x' for r in regs)}}}, [p];"]
        tgt = registers([r + "x" for r in regs], 8 * num, 8, 16, row="8 * reg + (lane >> 2)", col="2 * (lane & 3) + elem")
        r = prove_transform(src, steps, tgt, values={"p": "16 * lane"})
        assert r.status == "proved", (num, tr, r.text())


def test_guard_misaligned_ldmatrix():
    r = prove_transform(tile(16, 8, 16, "row * 8 + col"), ["ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {b0, b1}, [p];"],
                        fragment(F16, "b", ["b0", "b1"]), values={"p": "16 * (lane % 16) + 8 * (lane == 3)"})
    assert r.status == "refuted" and r.reason == "undefined behaviour" and r.witness == {"l": 3}


def test_guard_shfl_membermask():
    src = registers(["x"], 32, 1, 32, row="lane", col="0")
    tgt = registers(["y"], 32, 1, 32, row="lane ^ 1", col="0")
    assert prove_transform(src, ["shfl.sync.bfly.b32 y, x, 1, 0x1f, 0xffffffff;"], tgt).status == "proved"
    r = prove_transform(src, ["shfl.sync.bfly.b32 y, x, 1, 0x1f, 0x7fffffff;"], tgt)
    assert r.reason == "undefined behaviour" and r.witness == {"l": 31}
    # all lanes execute (mask full) but the source lane is outside a partial mask -> still UB
    r = prove_transform(src, ["shfl.sync.bfly.b32 y, x, 1, 0x1f, 0xfffffffe;"], tgt)
    assert r.reason == "undefined behaviour" and r.witness == {"l": 0}


def test_guard_conflicting_stores():
    src = fragment("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "d", ["d0", "d1"])
    r = prove_transform(src, ["stmatrix.sync.aligned.m8n8.x2.shared.b16 [p], {d0, d1};"], tile(16, 8, 16, "row*8+col"),
                        values={"p": "16 * (lane % 8)"})
    assert r.status == "refuted" and r.reason == "undefined behaviour"
    assert r.witness == {"lane": 0, "j": 1, "e": 0, "lane0": 0, "j0": 0, "e0": 0}


@pytest.mark.parametrize("bad", [
    "ldmatrix.sync.aligned.m8n8.x3.shared.b16 {a}, [p];",
    "ldmatrix.aligned.m8n8.x1.shared.b16 {a}, [p];",
    "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {a}, [p];",
    "ldmatrix.sync.aligned.m16n16.x4.trans.shared.b8 {a, b, c, d, e, f, g, h}, [p];",
    "shfl.sync.rotate.b32 d, a, 1, 0x1f, 0xffffffff;",
    "prmt.b32.zzz d, a, b, 0;",
    "cvt.f16x2.f32 d, a, b;",
    "cvt.rn.f32.f16 d, a;",
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1,c2,c3};",
    "movmatrix.sync.aligned.m8n8.b16 d, a;",
])
def test_bad_instructions_are_one_line_errors(bad):
    with pytest.raises(TransformError):
        make_step(bad)


def test_8bit_shapes_are_document_level():
    st = make_step("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {r0, r1}, [p];")
    assert not st.sm90 and st.evidence == "figure"
    # the .m16n16 register map: each lane holds 4 consecutive memory rows ("4 consecutive
    # columns" of the transposed 16x16) across 2 columns, rows 4t..4t+3 / cols g, g+8
    src = tile(16, 16, 8, "row * 16 + col")
    tgt = registers(["r0", "r1"], 16, 16, 8, row="4 * (lane & 3) + (i & 1) + 2 * (i >> 2)",
                    col="(lane >> 2) + 8 * ((i >> 1) & 1)")
    r = prove_transform(src, ["ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {r0, r1}, [p];"], tgt,
                        values={"p": "16 * lane"})
    assert r.status == "proved", r.text()
    assert any("document-level" in n for n in r.notes)


WMMA = "wmma.load.a.sync.aligned.row.m16n16k16.shared.f16"
WMAP = {WMMA: {"row": "(lane >> 2) + 8 * ((i >> 1) & 1)", "col": "2 * (lane & 3) + (i & 1) + 8 * ((i >> 2) & 1)"}}
WREGS = [f"r{i}" for i in range(8)]


def _wmma(p, stride):
    tgt = registers(WREGS, 32, 48, 16, row="(lane >> 2) + 8 * ((i >> 1) & 1)",
                    col="2 * (lane & 3) + (i & 1) + 8 * ((i >> 2) & 1)")
    return prove_transform(tile(32, 48, 16, "row * 48 + col"),
                           [f"{WMMA} {{{', '.join(WREGS)}}}, [p], {stride};"], tgt, values={"p": p}, wmma_maps=WMAP)


def test_wmma_memory_side_from_the_wmma_spec():
    assert _wmma("0", 48).status == "proved"
    # 9.7.14.4.2: each row start aligned to the fragment size (32 bytes): p = 16 breaks it
    r = _wmma("16", 48)
    assert r.reason == "undefined behaviour" and "align.row_start" in r.message
    # stride below the default (16) is undefined (0 keeps every row start aligned)
    r = _wmma("0", 0)
    assert r.reason == "undefined behaviour" and "stride.min" in r.message
    # p must be the same in every lane
    r = _wmma("32 * (lane == 7)", 48)
    assert r.reason == "undefined behaviour" and r.witness == {"l": 7}


def test_wmma_needs_a_map():
    with pytest.raises(TransformError) as e:
        prove_transform(tile(32, 48, 16, "row * 48 + col"), [f"{WMMA} {{{', '.join(WREGS)}}}, [p], 48;"],
                        registers(WREGS, 32, 48, 16, row="0", col="0"), values={"p": "0"})
    assert "unspecified" in str(e.value)
