"""Triton linear layouts and CuTe TV layouts in and out, and the sparse A relation."""

import json

import pytest

from formal import algebra as alg
from formal.transform import triton
from formal.layout import fragment
from formal.transform import cute, prove_transform, registers, sparse
from formal.transform.recipe import endpoint

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SP = "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"


# ---- Triton -------------------------------------------------------------------------------
# Expected bases derived by hand from PTX 9.7.14.5.8 (lane bit b -> image of lane 2^b):
# A: lane 1 -> col 2, lane 2 -> col 4, lane 4/8/16 -> rows 1/2/4; value 1 -> col 1,
#    value 2 -> row 8, value 4 -> col 8.  (Triton prints these for its MMAv2 dot operand.)
TRITON_A = {"register": [[0, 1], [8, 0], [0, 8]], "lane": [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
            "warp": [], "block": []}
TRITON_B = {"register": [[1, 0], [8, 0]], "lane": [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], "warp": [], "block": []}
TRITON_C = {"register": [[0, 1], [8, 0]], "lane": [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]], "warp": [], "block": []}


@pytest.mark.parametrize("op, want", [("a", TRITON_A), ("b", TRITON_B), ("c", TRITON_C)])
def test_triton_export_literal(op, want):
    assert triton.export(fragment(F16, op)) == want


def test_triton_attribute_round_trip():
    text = triton.export(fragment(F16, "a"), attribute=True)
    assert text == ("#ttg.linear<{register = [[0, 1], [8, 0], [0, 8]], lane = [[0, 2], [0, 4], [1, 0], [2, 0], "
                    "[4, 0]], warp = [], block = []}>")
    assert triton.parse(text) == TRITON_A
    assert triton.check(text, fragment(F16, "a")).status == "proved"


def test_triton_check_refutes_a_wrong_table():
    wrong = json.loads(json.dumps(TRITON_A))
    wrong["register"][0], wrong["register"][1] = wrong["register"][1], wrong["register"][0]
    p = triton.check(wrong, fragment(F16, "a"))
    assert p.status == "refuted" and p.witness == {"lane": 0, "reg": 0, "elem": 1}
    assert "(row=0, col=1)" in p.detail and "(row=8, col=0)" in p.detail


def test_triton_with_warps_as_recipe_endpoint():
    # a 2-warp layout: warp 0 is the A fragment; the endpoint takes warp 0
    two = dict(TRITON_A, warp=[[0, 0]])
    lin = triton.from_triton_json(two, 16, 16)
    ep = triton.to_reg_layout(lin, ["a0", "a1", "a2", "a3"], 16)
    from formal.transform import fragment as frag
    assert prove_transform(ep, [], frag(F16, "a", ["a0", "a1", "a2", "a3"])).status == "proved"


def test_triton_export_refuses_nonlinear():
    m = alg.from_formulas([("lane", 32), ("reg", 1), ("elem", 1)], [("row", 32), ("col", 1)],
                          {"row": "(lane * 3) % 32", "col": "0"}, name="times3")
    with pytest.raises(triton.TritonError) as e:
        triton.export(m)
    assert "not GF(2)-linear" in str(e.value)


# ---- CuTe ---------------------------------------------------------------------------------
# CuTe's published layouts (mma_traits_sm80.hpp, SM80_16x8x16_F32F16F16F32_TN):
#   ALayout ((4,8),(2,2,2)):((32,1),(16,8,128))   BLayout ((4,8),(2,2)):((16,1),(8,64)) [N x K]
#   CLayout = SM80_16x8_Row ((4,8),(2,2)):((32,1),(16,8))
def test_cute_export_literal():
    assert cute.export(fragment(F16, "a")) == "((4,8),(2,2,2)):((32,1),(16,8,128))"
    assert cute.export(fragment(F16, "b"), transpose=True) == "((4,8),(2,2)):((16,1),(8,64))"
    assert cute.export(fragment(F16, "c")) == "((4,8),(2,2)):((32,1),(16,8))"


def test_cute_export_imports_back_through_formal_cute():
    cute = pytest.importorskip("formal.transform.cute")
    for op in "abc":
        lay = fragment(F16, op)
        s = cute.export(lay, transpose=op == "b")
        back = cute.from_cute(s, F16, op)
        from formal.transform.spaces import LayoutMap
        assert LayoutMap(back).equals(LayoutMap(lay)).status == "proved"


def test_cute_parse_and_its_errors():
    assert cute.parse("((4,8),(2,2,2)):((32,1),(16,8,128))") == (((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
    assert cute.parse("Layout<Shape<_32,_4>, Stride<_1,_32>>") == ((32, 4), (1, 32))
    for bad in ("(4,8)", "((4,8):((1,4)", "(4,8):(1,(2,4))", "(4,8):(1,4)x"):
        with pytest.raises(cute.CuteError):
            cute.parse(bad)


def test_cute_endpoint_in_a_recipe():
    b = endpoint({"kind": "cute", "layout": "((4,8),(2,2)):((16,1),(8,64))", "rows": 16, "cols": 8,
                  "regs": ["b0", "b1"], "bits": 16, "nk": True})
    from formal.transform import fragment as frag
    assert prove_transform(b, [], frag(F16, "b", ["b0", "b1"])).status == "proved"
    # without the N x K flag it is the transpose: refuted at lane 0, b0, element 1
    b2 = endpoint({"kind": "cute", "layout": "((4,8),(2,2)):((16,1),(8,64))", "rows": 16, "cols": 8,
                   "regs": ["b0", "b1"], "bits": 16})
    r = prove_transform(b2, [], frag(F16, "b", ["b0", "b1"]))
    assert r.status == "refuted" and r.witness["lane"] == 0 and r.witness["register"] == "b0"


def test_cute_export_refuses_swizzle():
    m = alg.from_formulas([("lane", 32), ("reg", 1), ("elem", 2)], [("row", 8), ("col", 8)],
                          {"row": "lane >> 2", "col": "(2 * (lane & 3) + elem) ^ (lane >> 2)"})
    with pytest.raises(cute.CuteError):
        cute.export(m)


# ---- sparse -------------------------------------------------------------------------------
def test_sparse_structure_chunks_decompression():
    ps = sparse.prove_all(SP)
    assert all(p.status == "proved" for p in ps), [str(p) for p in ps if p.status != "proved"]
    assert len(ps) == 2 + 12          # 12 legal nibbles under .sp (formal.metadata)


def test_sparse_decompressed_literal():
    m = sparse.decompressed(SP)
    # lane 1 (t = 1), a1 = reg 0 elem 1: compressed col 3 = chunk 1, slot 1; nibble 0b1110
    # puts slot 1 at column 3 of its chunk -> logical column 4 + 3
    assert m.eval({"lane": 1, "reg": 0, "elem": 1, "nib": 0b1110}) == {"row": 0, "col": 7}
    # nibble 0b0100: slots at columns 0, 1 -> logical column 4 + 1
    assert m.eval({"lane": 1, "reg": 0, "elem": 1, "nib": 0b0100}) == {"row": 0, "col": 5}


def test_sparse_dense_opcode():
    assert sparse.dense_opcode_for(SP) == F16
    assert sparse.structure("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32").status == "proved"
