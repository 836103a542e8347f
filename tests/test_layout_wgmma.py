"""wgmma register fragments (specs/fragments_wgmma.toml): (warp, lane, reg, elem) -> (row, col)
over a warpgroup, proved bijections, pack/unpack, and cross-checked against what others say:
CuTe's GMMA TV layouts as CuTe writes them, Triton's MMAv3 encodings (and the installed Triton's
own conversion), the per-warp mma / mma.sp layouts the text's figures reuse, and the layout maps
the silicon probe confirmed (formal/hw/wgmma_probe.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from formal import catalog as cat
from formal import layout as L
from formal import prove as P
from formal.cli import main
from formal.transform import cute, triton as T

F16 = "wgmma.mma_async.sync.aligned.m64n{n}k16.{d}.f16.f16"
TYPES = {  # atype -> (K, dtype) of a dense form
    "f16": (16, "f32"), "bf16": (16, "f32"), "tf32": (8, "f32"), "e4m3": (32, "f16"), "e5m2": (32, "f32"),
    "s8": (32, "s32"), "u8": (32, "s32"), "b1": (256, "s32")}


def dense(atype: str, n: int = 64) -> str:
    k, d = TYPES[atype]
    return f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{d}.{atype}.{atype}" + (".and.popc" if atype == "b1" else "")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


# ---- the warp dimension --------------------------------------------------------------------------

def test_d_is_a_warpgroup_layout():
    lay = L.fragment(F16.format(n=8, d="f32"), "d")
    assert (lay.warps, lay.warp_lanes, lay.lanes, lay.nregs, lay.rows, lay.cols) == (4, 32, 128, 4, 64, 8)
    # d2 of warp 3, lane 6: the text's mma C/D layout per warp (groupID 1 + 8, col 2*2), 48 rows down
    assert lay.at(6, 2, 0, warp=3) == (48 + 1 + 8, 4, 0)
    assert lay.at(3 * 32 + 6, 2, 0) == lay.at(6, 2, 0, warp=3)               # thread = 32 * warp + lane
    assert lay.locate(57, 4) == {"warp": 3, "lane": 6, "thread": 102, "reg": 2, "elem": 0, "i": 2}
    e = lay.enumerate()
    assert set(e) >= {"warp", "lane", "thread"} and e["lane"].max() == 31 and e["thread"].max() == 127
    assert L.by_lane(lay)[0] == {"warp": 0, "lane": 0, "reg": 0, "elem": 0, "i": 0, "bits": "[31:0]", "row": 0, "col": 0}


@pytest.mark.parametrize("n", [8, 24, 136, 256])
@pytest.mark.parametrize("dtype", ["f32", "f16", "s32"])
def test_d_every_n_and_dtype_is_one_mma_accumulator_per_warp_and_block(n, dtype):
    """Per warp and per 8-column block, D is the mma m16n8 C/D layout (specs/fragments_mma.toml,
    an independent entry) 16 * warp rows down: the reading the figures and the silicon confirm."""
    op = (f"wgmma.mma_async.sync.aligned.m64n{n}k32.s32.s8.s8" if dtype == "s32" else F16.format(n=n, d=dtype))
    if dtype == "s32" and n == 136:
        pytest.skip("not an integer N")
    wg = L.fragment(op, "d")
    mma = L.fragment(f"mma.sync.aligned.m16n8k16.row.col.{'f32' if dtype == 's32' else dtype}.f16.f16."
                     f"{'f32' if dtype == 's32' else dtype}", "d")
    e = wg.enumerate()
    for w in range(4):
        for lane in range(32):
            for i in range(n // 2):
                r, c = e["row"], e["col"]
                k = (w * 32 + lane) * (n // 2) + i                     # box order, every point held
                block, j = divmod(i, 4)
                mr, mc, _ = mma.at(lane, *divmod(j, mma.epr))
                assert (int(r[k]), int(c[k])) == (16 * w + mr, 8 * block + mc)


def test_a_is_the_mma_a_layout_per_warp():
    pairs = {"f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
             "tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
             "s8": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
             "e4m3": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
             "b1": "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc"}
    for t, ref in pairs.items():
        wg, m = L.fragment(dense(t), "a"), L.fragment(ref, "a")
        assert (wg.nregs, wg.epr, wg.elem_bits) == (m.nregs, m.epr, m.elem_bits)
        for w in range(4):
            for lane in range(0, 32, 3):
                for reg in range(wg.nregs):
                    for el in range(0, wg.epr, max(1, wg.epr // 4)):
                        r, c, _ = m.at(lane, reg, el)
                        assert wg.at(lane, reg, el, warp=w) == (16 * w + r, c, 0), (t, w, lane, reg, el)


def test_sparse_a_equals_the_dense_layout_of_half_k():
    """The compressed A (written as the mma.sp figures are, with firstcol / lastcol) is the dense
    register-A layout of the half-K shape: proved by Z3 and enumeration (check_equal)."""
    for sp, half in (("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16", dense("f16")),
                     ("wgmma.mma_async.sp.sync.aligned.m64n64k16.f32.tf32.tf32", dense("tf32")),
                     ("wgmma.mma_async.sp.sync.aligned.m64n64k64.s32.u8.u8", dense("u8"))):
        r = P.check_equal(L.fragment(sp, "a"), L.fragment(half, "a"), "sparse = dense half K", P.Options())
        assert r.status == "proved", r


def test_metadata_is_the_mma_sp_layout_per_warp():
    """specs/metadata.toml's per-warp layouts (the figures wgmma.sp reuses) plus 16 * warp rows."""
    from formal.metadata import meta

    for wg_op, sp_op in (("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.bf16.bf16",
                          "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"),
                         ("wgmma.mma_async.sp.sync.aligned.m64n64k16.f32.tf32.tf32",
                          "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"),
                         ("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e5m2.e4m3",
                          "mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32")):
        fm = meta(sp_op)
        for sel in cat.parse(wg_op).selectors:
            e = L.fragment(wg_op, "e", sel=sel).enumerate()
            got = {(int(w), int(l), int(n)): (int(r), int(c)) for w, l, n, r, c in
                   zip(e["warp"], e["lane"], e["elem"], e["row"], e["col"])}
            want = {(w, int(lane), int(n)): (int(row) + 16 * w, int(ch))
                    for w in range(4) for lane, n, row, ch, _lo in fm.e_table(sel)}
            assert got == want and len(set(got.values())) == len(got), (wg_op, sel)


def test_every_wgmma_fragment_is_proved_by_each_engine():
    forms = [f for f in cat.documented_forms() if f.family == "wgmma"]
    obs = P.dedupe(P.layout_obligations(forms))
    assert len([o for o in obs if o.family == "layout.injective"]) > 50
    for engine in ("z3", "enum"):
        res = P.run([o for o in obs if o.family != "layout.resolve"][::7], P.Options(engine=engine))
        assert {r.status for r in res} == {"proved"}


def test_a_broken_fragment_is_refuted_with_warp_and_lane():
    ref = L.fragment(F16.format(n=16, d="f32"), "d")
    bad = L.Layout.from_formulas("16 * (warp & 1) + (lane >> 2) + 8 * ((i >> 1) & 1)",
                                 "8 * (i >> 2) + 2 * (lane & 3) + (i & 1)", like=ref)
    r = P.check_injective(bad, "two warps on the same rows", P.Options())
    assert r.status == "refuted" and r.witness["p"]["warp"] == 0 and r.witness["q"]["warp"] == 2


# ---- pack / unpack and the silicon probe's maps ------------------------------------------------

def test_pack_unpack_match_the_silicon_harness():
    from formal.hw import wgmma_probe as wp

    rng = np.random.default_rng(7)
    for n, d in ((64, "f16"), (8, "f32"), (256, "f32")):
        op = F16.format(n=n, d=d)
        M = rng.integers(0, 1 << 16, (2, 64, n)).astype(np.uint32)
        regs = L.pack(op, "d", M)
        assert regs.shape == (2, 128, n // 2 if d == "f32" else n // 4)
        assert (regs == wp.pack_c(d, n, M)).all() and (L.unpack(op, "d", regs) == M).all()
    for t in ("f16", "bf16", "tf32", "e4m3", "s8", "b1"):
        k, _ = TYPES[t]
        bits = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "s8": 8, "b1": 1}[t]
        A = rng.integers(0, 1 << min(bits, 31), (2, 64, k)).astype(np.uint32)
        regs = L.pack(dense(t), "a", A)
        assert (regs == wp.pack_a(t, A)).all() and (L.unpack(dense(t), "a", regs) == A).all(), t


def test_compare_observed_tables():
    """The function the H100 one-hot run is compared with: a (thread, reg, elem) -> (row, col)
    array or (warp, lane, reg, elem, row, col) records."""
    from formal.hw import wgmma_probe as wp

    op = F16.format(n=64, d="f16")
    r, c = wp.d_map(64, "f16")
    obs = np.stack([r, c], axis=-1)
    assert P.compare_observed(op, "d", obs).ok
    swapped = obs.copy()
    swapped[[37, 38], 3, 1] = swapped[[38, 37], 3, 1]
    rep = P.compare_observed(op, "d", swapped)
    assert not rep.ok and rep.first_difference["point"] == {"warp": 1, "lane": 5, "thread": 37, "reg": 3, "elem": 1}
    ar, ac = wp.a_map("s8")                                                  # [128, 16] per element i
    recs = [{"warp": t // 32, "lane": t % 32, "reg": i // 4, "elem": i % 4, "row": int(ar[t, i]), "col": int(ac[t, i])}
            for t in range(128) for i in range(16)]
    assert P.compare_observed(dense("s8"), "a", recs).ok


# ---- CuTe (mma_traits_sm90_gmma.hpp, as CuTe writes them) ----------------------------------------

CUTE = [  # (opcode, operand, TV layout, selector)
    (F16.format(n=64, d="f32"), "d", "((4,8,4),(2,2,8)):((128,1,16),(64,8,512))", None),        # CLayout_64x64
    (F16.format(n=96, d="f16"), "d", "Layout<Shape <Shape <_4,_8,_4>,Shape <_2,_2,_12>>, "
                                     "Stride<Stride<_128,_1,_16>,Stride<_64,_8,_512>>>", None),
    (dense("tf32"), "a", "((4,8,4),(2,2)):((64,1,16),(8,256))", None),                         # ALayout_64x8
    (dense("bf16"), "a", "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", None),                   # ALayout_64x16
    (dense("e4m3"), "a", "((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))", None),                  # ALayout_64x32
    ("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16", "a", "((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))", None),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k16.f32.tf32.tf32", "a", "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))", None),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k64.s32.s8.s8", "a", "((4,8,4),(8,2,2)):((512,1,16),(64,8,2048))", None),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.f16.f16", "e", "((2,2,8,4),(16,2)):((1024,0,1,16),(64,8))", 1),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k16.f32.tf32.tf32", "e", "((2,2,8,4),(8,2)):((512,0,1,16),(64,8))", 0),
    ("wgmma.mma_async.sp.sync.aligned.m64n64k64.f32.e4m3.e4m3", "e", "((2,2,8,4),(32)):((8,2048,1,16),(64))", 0),
]


@pytest.mark.parametrize("op,operand,tv,sel", CUTE, ids=[f"{i}" for i in range(len(CUTE))])
def test_cute_gmma_layouts_are_the_spec(op, operand, tv, sel):
    args = ["layout", "audit", op, "--operand", operand, "--cute", tv] + (["--selector", str(sel)] if sel is not None else [])
    rc, out, err = run(*args)
    assert rc == 0 and "equal to the spec and bijective" in out, (out, err)


def test_cute_layout_with_warps_swapped_is_refuted():
    # warp stride 32 instead of 16 (warps 1 and 2 swap their rows): refuted at warp 1
    rc, out, _ = run("layout", "audit", F16.format(n=8, d="f32"), "--operand", "d", "--cute",
                     "((4,8,(2,2)),(2,2,1)):((128,1,(32,16)),(64,8,512))")
    assert rc == 1 and '"point": {"warp": 1, "lane": 0, "thread": 32, "reg": 0, "elem": 0}' in out, out


# ---- Triton (#ttg.nvidia_mma versionMajor = 3, #ttg.dot_op) ---------------------------------------

def enc(n, warps=(4, 1)):
    return (f"#mma = #ttg.nvidia_mma<{{versionMajor = 3, versionMinor = 0, warpsPerCTA = [{warps[0]}, {warps[1]}], "
            f"instrShape = [16, {n}, 16]}}>\n")


@pytest.mark.parametrize("text,tiles", [
    (enc(128) + "tensor<128x256xf32, #mma>", 4),
    (enc(64, (8, 1)) + "tensor<128x64xf16, #mma>", 2),
    (enc(64, (4, 2)) + "tensor<64x128xf32, #mma>", 2),
    (enc(64) + "tensor<64x32xbf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>", 2),
    (enc(64, (8, 1)) + "tensor<128x64xf8E4M3FN, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>>", 4),
    (enc(32) + "tensor<64x16xf32, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 1}>>", 2),
])
def test_triton_v3_layouts_are_the_spec(text, tiles):
    rc, out, err = run("layout", "audit", "--triton", text)
    assert rc == 0 and f"verdict: {tiles} of {tiles} tiles PROVED" in out and "(1 copy each)" in out, (out, err)


def test_triton_v3_errors():
    for text, msg in ((enc(64) + "tensor<64x64xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 2}>>", "shared memory"),
                      ("#mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [2, 2], "
                       "instrShape = [16, 64, 16]}>\ntensor<64x64xf32, #mma>", "at least 4 warps")):
        rc, _, err = run("layout", "audit", "--triton", text)
        assert rc == 2 and msg in err, err
    # a v2 encoding is not a wgmma layout, nor v3 an mma.sync one
    rc, _, err = run("layout", "audit", F16.format(n=64, d="f32"), "--triton",
                     "#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [4, 1], "
                     "instrShape = [16, 8]}>\ntensor<64x64xf32, #mma>")
    assert rc == 2 and "v2 is warp-level" in err


ORACLE = r'''
import sys, json, os
sys.stderr = open(os.devnull, "w")
from triton._C.libtriton import ir, gluon_ir
from triton.experimental.gluon.language import _layouts as Ls
ctx = ir.context(); ir.load_dialects(ctx)
b = gluon_ir.GluonOpBuilder(ctx)
def ll(lay, shape):
    r = b.to_linear_layout(lay._to_ir(b), list(shape))
    return {"register": r.reg_bases, "lane": r.lane_bases, "warp": r.warp_bases, "block": r.block_bases}
out = []
for warps in ([4,1],[4,2],[8,1]):
  for n in (8, 64, 256):
    mma = Ls.NVMMADistributedLayout(version=[3,0], warps_per_cta=warps, instr_shape=[16,n,16])
    for shape in ([64,n],[128,n],[64,2*n],[256,256]):
      out.append(("mma", warps, n, None, shape, ll(mma, shape)))
    for kw in (1,2,4):
      for shape in ([64,16],[128,64],[64,8]):
        out.append(("dot", warps, n, kw, shape, ll(Ls.DotOperandLayout(operand_index=0, parent=mma, k_width=kw), shape)))
print(json.dumps(out))
'''


def test_v3_encodings_match_tritons_own_conversion():
    pytest.importorskip("triton")
    p = subprocess.run([sys.executable, "-c", ORACLE], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not p.stdout.strip():
        pytest.skip(f"triton's layout conversion is not callable here: {p.stderr[-200:]}")
    cases = json.loads(p.stdout.splitlines()[-1])
    assert len(cases) == 9 * 4 + 9 * 9
    for kind, warps, n, kw, shape, ref in cases:
        mma = {"versionMajor": 3, "warpsPerCTA": warps, "instrShape": [16, n, 16]}
        got = T.mma_bases(mma, shape) if kind == "mma" else T.dot_bases(0, kw, mma, shape)
        assert got == ref, (kind, warps, n, kw, shape)


# ---- the CLI ------------------------------------------------------------------------------------

def test_layout_cli_prints_and_draws(tmp_path):
    rc, out, _ = run("layout", F16.format(n=8, d="f32"), "--operand", "d", "--by", "lane")
    assert rc == 0 and "4 warps x 32 lanes" in out and "warp 3 lane 31 reg 3:" in out
    rc, out, _ = run("layout", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", "--operand", "e",
                     "--selector", "1", "--csv", "--by", "element")
    assert rc == 0 and out.splitlines()[0] == "warp,lane,reg,elem,i,bits,row,col" and len(out.splitlines()) == 1 + 512
    svg = tmp_path / "d.svg"
    rc, _, _ = run("layout", F16.format(n=8, d="f32"), "--operand", "d", "--svg", str(svg))
    assert rc == 0 and "T127" in svg.read_text()
    rc, _, err = run("layout", F16.format(n=8, d="f32"), "--operand", "b")
    assert rc == 2 and "shared-memory matrix" in err
    rc, _, err = run("layout", "wgmma.fence.sync.aligned")
    assert rc == 2 and "no register operands" in err
