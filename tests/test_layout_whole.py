"""Whole layouts as users' tools print them: Triton encodings and linear layouts over a CTA
tile, cut into instruction tiles and audited (formal.transform.triton.audit_whole, `layout audit --triton`),
and atom-level equivalence up to shared permutations (formal.transform.atom, `layout audit-atom`)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from formal.transform import atom, cute, triton as T
from formal.cli import main
from formal.layout import LayoutError

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16K8 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def enc(op, kwidth, warps=(1, 1), shape=(64, 64), dtype="f16"):
    mma = (f"#mma = #ttg.nvidia_mma<{{versionMajor = 2, versionMinor = 0, warpsPerCTA = [{warps[0]}, {warps[1]}], "
           f"instrShape = [16, 8]}}>\n")
    if op is None:
        return mma + f"tensor<{shape[0]}x{shape[1]}x{dtype}, #mma>"
    return mma + (f"tensor<{shape[0]}x{shape[1]}x{dtype}, #ttg.dot_op<{{opIdx = {op}, parent = #mma, "
                  f"kWidth = {kwidth}}}>>")


# ------------------------------------------------------------------ encodings vs Triton itself

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
for warps in ([1,1],[2,2],[4,1],[1,4],[2,4]):
  mma = Ls.NVMMADistributedLayout(version=[2,0], warps_per_cta=warps, instr_shape=[16,8])
  for shape in ([16,8],[64,32],[32,64],[128,128]):
    out.append(("mma", warps, None, None, shape, ll(mma, shape)))
  for kw in (1,2,4,8,16):
    for op in (0,1):
      for shape in ([16,16],[32,32],[64,64],[128,32],[16,128]):
        out.append(("dot", warps, op, kw, shape, ll(Ls.DotOperandLayout(operand_index=op, parent=mma, k_width=kw), shape)))
print(json.dumps(out))
'''


def test_encodings_match_tritons_own_conversion():
    """Our conversion of #ttg.nvidia_mma / #ttg.dot_op (written from Triton's documented
    semantics) against Triton's C++ conversion in the installed wheel, 270 configurations."""
    pytest.importorskip("triton")
    p = subprocess.run([sys.executable, "-c", ORACLE], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not p.stdout.strip():
        pytest.skip(f"triton's layout conversion is not callable here: {p.stderr[-200:]}")
    cases = json.loads(p.stdout.splitlines()[-1])
    assert len(cases) == 270
    for kind, warps, op, kw, shape, ref in cases:
        mma = {"versionMajor": 2, "warpsPerCTA": warps, "instrShape": [16, 8]}
        got = T.mma_bases(mma, shape) if kind == "mma" else T.dot_bases(op, kw, mma, shape)
        assert got == ref, (kind, warps, op, kw, shape)


def test_linear_text_as_triton_prints_it():
    # Printed by triton 3.9 (GluonOpBuilder.to_linear_layout) for #ttg.nvidia_mma<{versionMajor = 2,
    # warpsPerCTA = [2, 2], instrShape = [16, 8]}> over tensor<64x32xf32>.
    text = ("#ttg.linear<{register = [[0, 1], [8, 0], [0, 16], [32, 0]], lane = [[0, 2], [0, 4], [1, 0], [2, 0], "
            "[4, 0]], warp = [[0, 8], [16, 0]], block = []}>")
    wl = T.parse_whole(text)
    assert wl.shape == (64, 32) and wl.bases == T.mma_bases({"versionMajor": 2, "warpsPerCTA": [2, 2]}, (64, 32))
    rep = T.audit_whole(wl, F16, "c")
    assert rep.status == "proved" and len(rep.tiles) == 16
    assert sorted(t.origin for t in rep.tiles) == [(r, c) for r in range(0, 64, 16) for c in range(0, 32, 8)]


# ------------------------------------------------------------------ whole-CTA audits

@pytest.mark.parametrize("warps", [(1, 1), (2, 2), (4, 1), (2, 4)])
@pytest.mark.parametrize("op,kwidth,dtype,form", [
    (0, 2, "f16", F16), (1, 2, "f16", F16), (None, None, "f32", F16),
    (0, 4, "i8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    (1, 4, "i8", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    (0, 1, "f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    (1, 1, "f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    (0, 2, "bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")])
def test_whole_cta_mma_v2_layouts_are_proved_tile_by_tile(warps, op, kwidth, dtype, form):
    shape = (64, 64)
    wl = T.parse_whole(enc(op, kwidth, warps, shape, dtype))
    rep = T.audit_whole(wl)                     # the form is implied by the encoding + element type
    assert rep.form == form
    ref_elems = {F16: {0: 8, 1: 4}, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32": {0: 16, 1: 8},
                 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32": {0: 4, 1: 2},
                 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32": {0: 8, 1: 4}}[form].get(op, 4)
    nwarps = warps[0] * warps[1]
    values = (1 << len(wl.bases["register"])) * 32 * nwarps
    assert len(rep.tiles) == values // (32 * ref_elems)
    assert rep.status == "proved", rep.to_dict()["tiles"][0]
    assert rep.coverage["complete"] and rep.coverage["held"] == 64 * 64
    # a tile per warp x register repeat; broadcast copies only where Triton broadcasts (dot operands)
    assert rep.coverage["copies"] == [values // (64 * 64)]


def test_a_wrong_linear_layout_is_refuted_with_a_witness():
    # the accumulator of mma v2 with two lane bases swapped: lanes 1 and 4 trade places
    text = ("#ttg.linear<{register = [[0, 1], [8, 0]], lane = [[1, 0], [0, 4], [0, 2], [2, 0], [4, 0]], "
            "warp = [], block = []}>")
    rep = T.audit_whole(T.parse_whole(text), F16, "d")
    assert rep.status == "refuted"
    w = rep.tiles[0].witness
    assert w["point"]["lane"] == 1 and w["candidate"] != w["spec"]


def test_kwidth8_tiles_are_k_permuted_and_atom_equivalent():
    """Triton's kWidth-8 16-bit dot operands: each instruction gets a K-permuted tile (MMAv2.cpp
    'largeK': the j-th MMA takes the j-th 32-bit slice of each run of kWidth values).  Alone, each
    operand is the spec's up to a relabelling of K (undecided); A and B together are proved, K
    permuted the same way."""
    ra = T.audit_whole(T.parse_whole(enc(0, 8)))
    rb = T.audit_whole(T.parse_whole(enc(1, 8)))
    assert ra.status == rb.status == "relabelled" and ra.relabelled_axes == rb.relabelled_axes == ["K"]
    assert ra.bits == [0, 3, 4] and rb.bits == [0, 3]
    ta, _, _, _ = T.tiles(T.parse_whole(enc(0, 8)), F16, "a")
    tb, _, _, _ = T.tiles(T.parse_whole(enc(1, 8)), F16, "b")
    rep = atom.audit_atom(F16, {"a": ta[0][2], "b": tb[0][2]})
    assert rep.status == "proved"
    # instruction 0: spec k = 2c + e (+8) holds logical k = 8c + e (+32)
    assert rep.permutations["K"] == [8 * (k % 8 // 2) + k % 2 + 32 * (k // 8) for k in range(16)]
    assert rep.permutations["M"] == list(range(16)) and rep.permutations["N"] == list(range(8))
    # instruction 1 of A with instruction 0 of B pairs the wrong k
    bad = atom.audit_atom(F16, {"a": ta[1][2], "b": tb[0][2]})
    assert bad.status == "refuted"
    w = next(r.witness for r in bad.results if r.status == "refuted")
    assert w["axis"] == "K" and w["p"]["spec_cell"][1] == w["q"]["spec_cell"][0]
    assert w["p"]["user_cell"][1] != w["q"]["user_cell"][0]


# ------------------------------------------------------------------ atom-level equivalence (CuTe)

# CUTLASS v3.0.0 .. v3.2.0, include/cute/atom/mma_traits_sm75.hpp lines 51-56 (commit 3a8f57a3 = v3.2.0):
# SM75_16x8x8_F32F16F16F32_TN ALayout/CLayout Stride<Stride<_32,_2>,Stride<_16,_1>> (M relabelled);
# v3.2.1 (commit 5cd735c4) has Stride<Stride<_32,_1>,Stride<_16,_8>>.  BLayout unchanged.
SM75_320_A = "((4,8),(2,2)):((32,2),(16,1))"
SM75_321_A = "((4,8),(2,2)):((32,1),(16,8))"
SM75_B = "((4,8),2):((16,1),8)"


def _cute(op, tv, form=F16K8):
    return cute.from_cute(tv, form, op)


def test_sm75_relabelled_m_is_equivalent():
    rep = atom.audit_atom(F16K8, {"a": _cute("a", SM75_320_A), "b": _cute("b", SM75_B), "c": _cute("c", SM75_320_A)})
    assert rep.status == "proved"
    assert rep.permutations["M"] == [2 * m for m in range(8)] + [2 * m + 1 for m in range(8)]
    assert rep.permutations["K"] == list(range(8)) and rep.permutations["N"] == list(range(8))
    fixed = atom.audit_atom(F16K8, {"a": _cute("a", SM75_321_A), "b": _cute("b", SM75_B), "c": _cute("c", SM75_321_A)})
    assert fixed.status == "proved" and all(v == list(range(len(v))) for v in fixed.permutations.values())


def test_relabelled_a_with_the_spec_c_is_refuted():
    rep = atom.audit_atom(F16K8, {"a": _cute("a", SM75_320_A), "b": _cute("b", SM75_B)})
    assert rep.status == "refuted"
    w = next(r.witness for r in rep.results if r.status == "refuted")
    assert w["axis"] == "M" and {w["p"]["operand"], w["q"]["operand"]} == {"a", "c"}


def test_a_genuinely_wrong_atom_is_refuted_by_both_engines():
    # A with its two value modes swapped: a1 holds (row 8) where the spec has k+1 -- mixes M and K
    wrong = "((4,8),(2,2)):((32,1),(8,16))"
    for engine in ("z3", "enum", "both"):
        rep = atom.audit_atom(F16K8, {"a": _cute("a", wrong), "b": _cute("b", SM75_B)}, engine=engine)
        assert rep.status == "refuted", engine
        assert [r.obligation.family for r in rep.results if r.status == "refuted"][0] == "atom.M"


def test_engines_agree_on_the_permutations():
    lays = {"a": _cute("a", SM75_320_A), "b": _cute("b", SM75_B), "c": _cute("c", SM75_320_A)}
    z = atom.audit_atom(F16K8, lays, engine="z3")
    e = atom.audit_atom(F16K8, lays, engine="enum")
    assert z.status == e.status == "proved" and z.permutations == e.permutations


# ------------------------------------------------------------------ CLI

def test_cli_triton_whole_layout_json_and_exit_codes():
    rc, out, _ = run("layout", "audit", "--triton", enc(0, 2, (2, 2)), "--json")
    d = json.loads(out)
    assert rc == 0 and d["status"] == "proved" and d["tiles_total"] == 32 and d["tiles_proved"] == 32
    rc, out, _ = run("layout", "audit", "--triton", enc(0, 8), "--json")
    d = json.loads(out)
    assert rc == 3 and d["status"] == "relabelled" and d["tiles_relabelled"] == d["tiles_total"]
    assert "audit-atom" in d["hint"] and "--triton A --triton B" in d["hint"]
    rc, out, err = run("layout", "audit", "--triton", "#ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>")
    assert rc == 2 and "#mma" in err and len(err.strip().splitlines()) == 1
    rc, out, err = run("layout", "audit", F16, "--operand", "b", "--triton", enc(0, 2))
    assert rc == 2 and "opIdx = 0" in err


def test_cli_triton_file(tmp_path):
    f = tmp_path / "acc.mlir"
    f.write_text(enc(None, None, (4, 1), (64, 32), "f32"))
    rc, out, _ = run("layout", "audit", F16, "--operand", "c", "--triton", str(f))
    assert rc == 0 and out.rstrip().endswith("verdict: 16 of 16 tiles PROVED")


def test_cli_audit_atom():
    rc, out, _ = run("layout", "audit-atom", F16K8, "--a", "cute:" + SM75_320_A, "--b", "cute:" + SM75_B,
                     "--c", "cute:" + SM75_320_A)
    assert rc == 0 and "M: spec -> yours 0->0 1->2" in out and "K: identity" in out
    rc, out, _ = run("layout", "audit-atom", F16K8, "--a", "cute:" + SM75_320_A, "--b", "cute:" + SM75_B)
    assert rc == 1 and "REFUTED  atom.M" in out
    rc, out, _ = run("layout", "audit-atom", F16, "--a", "triton:" + enc(0, 8), "--b", "triton:" + enc(1, 8), "--json")
    d = json.loads(out)
    assert rc == 0 and d["identity"] == {"M": True, "K": False, "N": True}
    rc, _, err = run("layout", "audit-atom", F16, "--a", "bogus:1")
    assert rc == 2 and "KIND" in err
    sparse = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
    with pytest.raises(LayoutError, match="dense mma"):
        atom.audit_atom(sparse, {})


def test_kwidth8_with_k_smaller_than_the_tile():
    """K = 32 < the 64-wide kWidth-8 tile: Triton's layout broadcasts the K repeat and the
    lowering's 'kIters > repK' branch takes an instruction's upper K half from the same run
    (MMAv2.cpp); A and B still pair the same k."""
    ta, bits_a, _, _ = T.tiles(T.parse_whole(enc(0, 8, shape=(16, 32))), F16, "a")
    tb, bits_b, _, _ = T.tiles(T.parse_whole(enc(1, 8, shape=(32, 8))), F16, "b")
    assert bits_a == [0, 3, 1] and bits_b == [0, 1]
    rep = atom.audit_atom(F16, {"a": ta[0][2], "b": tb[0][2]})
    assert rep.status == "proved"
    assert rep.permutations["K"] == [8 * (k % 8 // 2) + k % 2 + 2 * (k // 8) for k in range(16)]


def test_kwidth8_pasted_as_linear_layouts():
    """The same operands as Triton prints them after conversion (#ttg.linear): the tile rule
    finds kWidth from the run of unit K steps, and audit-atom proves the pair."""
    texts = {op: T.format_attribute(T.parse_whole(enc(i, 8)).bases) for i, op in enumerate("ab")}
    assert texts["a"].startswith("#ttg.linear<{register = [[0, 1], [0, 2], [0, 4], [8, 0], [0, 32]")
    for i, op in enumerate("ab"):
        enc_tiles, _, _, _ = T.tiles(T.parse_whole(enc(i, 8)), F16, op)
        lin_tiles, _, how, _ = T.tiles(T.parse_whole(texts[op]), F16, op)
        assert "kWidth 8" in how
        assert [t[2].map_key for t in enc_tiles] == [t[2].map_key for t in lin_tiles]
    rc, out, _ = run("layout", "audit-atom", F16, "--a", "triton:" + texts["a"], "--b", "triton:" + texts["b"])
    assert rc == 0 and "K: spec -> yours 0->0 1->1 2->8 3->9" in out
