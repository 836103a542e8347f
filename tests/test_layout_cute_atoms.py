"""CuTe atoms pasted as CuTe writes them: sparse A (logical M x K, converted to the compressed
M x K/2), scale-factor layouts (SFALayout / SFBLayout, stride-0 modes for lanes the hardware does
not read), sparse metadata (ELayout), and the sm_70 quad-pair atoms (which need --cute-thr and
--cute-product-stride, and say so by flag).

Transcriptions from NVIDIA/cutlass at 7107b05535f8977f5ecb9d01ee203205b1fd9bc4 (the same text
is in the nvidia-cutlass 4.2 wheel, cutlass_library/source/include/cute/atom/):
  mma_traits_sm120_sparse.hpp  199 ALayout, 202 BLayout, 208 ELayout   (SM120_SPARSE_16x8x64_TN)
                               253 ALayout, 256 BLayout, 259 SFALayout, 262 SFBLayout, 267 ELayout
                                                                       (SM120_SPARSE_16x8x128_TN_VS)
  mma_traits_sm120.hpp         158 SFALayout, 161 SFBLayout            (SM120_16x8x64_TN_VS)
                               194 SFALayout, 197 SFBLayout            (SM120_16x8x32_TN_VS)
  mma_traits_sm70.hpp          44 SM70_QuadPair (ThrID), 47 SM70_8x4_Row, 50 SM70_8x4_Col,
                               53 SM70_8x8_16b, 56 SM70_8x8_32b
CuTe has no warp-level sparse SM80 atoms (CUTLASS 2.x carries those); the SM80 dense atoms are
audited in tests/test_layout_spec.py."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal.transform import cute
from formal.cli import main
from formal.layout import LayoutError, param_space
from formal.prove import audit_layout as audit

SP64 = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32"
SP64_BS = "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.f32.ue8m0"
SP128 = ("mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.scale_vec::2X"
         ".f32.e2m1.e2m1.f32.ue8m0")
K64_2X = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"
K64_4X = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
K32_1X = "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.f32.ue8m0"

A_SP64 = "Layout<Shape <Shape <  _4,_8>,Shape < _8,_2,  _2>>, Stride<Stride<_128,_1>,Stride<_16,_8,_512>>>"
B_SP64 = "Layout<Shape <Shape < _4,_8>,Shape <_4,  _4>>, Stride<Stride<_32,_1>,Stride<_8,_128>>>"
E_SP64 = "Layout<Shape <Shape <_2,  _2,_8>, _32>, Stride<Stride<_8,_512,_1>,_16>>"
A_SP128 = "Layout<Shape <Shape <  _4,_8>,Shape <_16,_2,   _2>>, Stride<Stride<_256,_1>,Stride<_16,_8,_1024>>>"
B_SP128 = "Layout<Shape <Shape < _4,_8>,Shape <_8,  _4>>, Stride<Stride<_64,_1>,Stride<_8,_256>>>"
E_SP128 = "Layout<Shape <Shape <_2,   _2,_8>, Shape< _64>>, Stride<Stride<_8,_1024,_1>,Stride<_16>>>"


def sfa(k):
    return f"Layout<Shape <Shape <_2,_2,_8>,_{k}>, Stride<Stride<_8,_0,_1>,_16>>"


def sfb(k):
    return f"Layout<Shape <Shape <_4,_8>,_{k}>, Stride<Stride<_0,_1>, _8>>"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _status(form, op, tv, **prm):
    return audit(cute.from_cute(tv, form, op, **prm), form, op, **prm).status


@pytest.mark.parametrize("form,a,b", [(SP64, A_SP64, B_SP64), (SP64_BS, A_SP64, B_SP64), (SP128, A_SP128, B_SP128)])
def test_sparse_atoms_as_cute_writes_them(form, a, b):
    lay = cute.from_cute(a, form, "a")         # logical M x K -> compressed M x K/2
    assert (lay.rows, lay.cols) == (16, {SP128: 64}.get(form, 32))
    assert audit(lay, form, "a").status == "proved"
    assert _status(form, "b", b) == "proved"


def test_sparse_a_conversion_checks_the_pairs():
    # values 2i and 2i+1 must be one stored element: a layout whose value 0 and 1 are 8 rows apart is refused
    with pytest.raises(LayoutError, match="stored element 0"):
        cute.from_cute("((4,8),(2,8,2)):((128,1),(8,16,512))", SP64, "a")
    # a genuinely wrong sparse A (M and K/2 strides of the stored elements swapped) is refuted
    wrong = "((4,8),(2,4,2,2)):((128,1),(16,64,8,512))"
    r = audit(cute.from_cute(wrong, SP64, "a"), SP64, "a")
    assert r.status == "refuted" and r.first_difference is not None


@pytest.mark.parametrize("form,k", [(K32_1X, 32), (K64_2X, 64), (K64_4X, 64), (SP64_BS, 64), (SP128, 128)])
def test_scale_factor_layouts_hold_for_every_selector(form, k):
    for op, tv in (("scale_a", sfa(k)), ("scale_b", sfb(k))):
        space = param_space(form, op)
        assert len(space) >= 2
        assert {_status(form, op, tv, **prm) for prm in space} == {"proved"}


def test_a_wrong_scale_factor_layout_is_refuted():
    # stride 0 on the wrong lane bit: lanes 0 and 1 both supply row g, lanes 2 and 3 row g + 8;
    # the hardware reads rows g and g + 8 from the two lanes of the selected pair
    bad = cute.from_cute("((2,2,8),64):((0,8,1),16)", K64_2X, "scale_a", byte_id=0, thread_id=0)
    r = audit(bad, K64_2X, "scale_a", byte_id=0, thread_id=0)
    assert r.status == "refuted"
    w = r.first_difference
    assert w["point"]["lane"] == 1 and w["candidate"]["row"] == 0 and w["spec"]["row"] == 8
    # a lane that supplies factors of two rows is refused (the register holds one row's factors)
    with pytest.raises(LayoutError, match="16 rows"):
        cute.from_cute("((2,2,8),64):((8,0,1),1)", K64_2X, "scale_a")


def test_metadata_elayout():
    assert cute.audit_metadata(E_SP64, SP64)["status"] == "proved"
    assert cute.audit_metadata(E_SP128, SP128)["status"] == "proved"
    # the row bit and the k-half bit exchanged: lane 1 would supply row 0, columns 32..
    r = cute.audit_metadata("((2,2,8),32):((512,8,1),16)", SP64)
    assert r["status"] == "refuted" and r["witness"]["spec"] is not None


SM70 = "mma.sync.aligned.m8n8k4.{}.{}.f32.f16.f16.f32"


# SM70_8x8x4_F32F16F16F32_TN: A = B = SM70_8x4_Row (K-major); _NT: A = B = SM70_8x4_Col; C = SM70_8x8_32b
@pytest.mark.parametrize("alay,blay,a,b", [("row", "col", "(8,4):(1,8)", "(8,4):(1,8)"),
                                           ("col", "row", "((4,2),4):((8,4),1)", "((4,2),4):((8,4),1)")])
def test_sm70_quad_pair_atoms_with_the_flags(alay, blay, a, b):
    form = SM70.format(alay, blay)
    flags = ["--cute-thr", "(4,2):(1,16)", "--cute-product-stride", "4"]
    for op, tv in (("a", a), ("b", b), ("c", "((2,2,2),(2,2,2)):((1,16,4),(8,2,32))")):
        rc, out, err = run("layout", "audit", form, "--operand", op, "--cute", tv, *flags)
        assert rc == 0, (op, out, err)


def test_sm70_errors_name_the_cli_flags():
    rc, out, err = run("layout", "audit", SM70.format("row", "col"), "--operand", "a", "--cute", "(8,4):(1,8)")
    assert rc == 2 and "--cute-thr" in err and "--cute-product-stride" in err
    assert "product_lane_stride" not in err and "thr_to_lane" not in err and len(err.strip().splitlines()) == 1


def test_cli_scale_metadata_and_sparse_a():
    rc, out, _ = run("layout", "audit", SP128, "--operand", "scale_b", "--cute", sfb(128))
    assert rc == 0 and out.rstrip().endswith("verdict: PROVED for all 8 selectors")
    rc, out, _ = run("layout", "audit", SP128, "--operand", "e", "--cute", E_SP128, "--json")
    assert rc == 0 and json.loads(out)["status"] == "proved"
    rc, out, _ = run("layout", "audit", SP64, "--operand", "e", "--cute", "((2,2,8),32):((512,8,1),16)")
    assert rc == 1 and "REFUTED" in out
    rc, out, _ = run("layout", "audit", SP128, "--operand", "a", "--cute", A_SP128)
    assert rc == 0
    rc, _, err = run("layout", "audit", SP64, "--operand", "e")
    assert rc == 2 and "--cute" in err


# A TiledMMA over a CTA tile: SM80_16x8x16_F32F16F16F32_TN with AtomLayout (2,2,1) (4 warps).
# A as CuTe DSL prints it (NVIDIA/cutlass @7107b055, examples/python/CuTeDSL/blackwell_geforce/
# dense_gemm/dense_gemm_013_ConvertCuteTypesInScfOps.mlir: the ldmatrix copy made for the MMA's A,
# layout_copy_tv over tiler [32:1;16:1]); B and C derived the same way from the atom's
# BLayout/CLayout (mma_traits_sm80.hpp) and the warp tiling.
TILED = {
    "a": ("((4,8,2,2),((2,2,2),(1,1))):((64,1,16,0),((32,8,256),(0,0)))", "32x16", 4, [2]),
    "b": ("((4,8,2,2),(2,2)):((32,1,0,8),(16,128))", "16x16", 4, [2]),
    "c": ("((4,8,2,2),(2,2)):((64,1,16,256),(32,8))", "32x16", 4, [1]),
}
SM80 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


@pytest.mark.parametrize("op", sorted(TILED))
def test_tiled_mma_over_a_cta_tile(op):
    tv, tile, ntiles, copies = TILED[op]
    rep = cute.audit_tiled(tv, SM80, op, tuple(int(x) for x in tile.split("x")))
    assert rep.status == "proved" and len(rep.tiles) == ntiles
    assert rep.coverage["complete"] and rep.coverage["copies"] == copies
    rc, out, _ = run("layout", "audit", SM80, "--operand", op, "--cute", tv, "--cute-tile", tile, "--json")
    assert rc == 0 and json.loads(out)["tiles_proved"] == ntiles


def test_tiled_mma_wrong_warp_stride_is_refuted():
    # the warps in the other order tile C just as well; a warp stride past the tile is refuted with
    # the first (thread, value) outside it; with the value strides exchanged, every tile is refuted
    assert cute.audit_tiled("((4,8,2,2),(2,2)):((64,1,256,16),(32,8))", SM80, "c", (32, 16)).status == "proved"
    rep = cute.audit_tiled("((4,8,2,2),(2,2)):((64,1,16,512),(32,8))", SM80, "c", (32, 16))
    assert rep.status == "refuted" and rep.coverage["first_outside"] == [0, 16]
    bad = [t for t in rep.tiles if t.status == "refuted"]
    assert [t.witness["thread"] for t in bad] == [64, 96]          # warps 2 and 3 start past column 15
    assert all(t.witness["value"] == 0 and "outside the 32 x 16 tile" in t.detail for t in bad)
    rep = cute.audit_tiled("((4,8,2,2),(2,2)):((64,1,16,256),(8,32))", SM80, "c", (32, 16))
    assert rep.status == "refuted" and all(t.status == "refuted" for t in rep.tiles)
