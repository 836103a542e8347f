"""Layout audits always decide (issue 19): a wrong CuTe TiledMMA layout is refuted with the
first (thread, value) that lands outside the tile or on the wrong element (never exit 2), and
a Triton dot operand that differs from the spec only by a relabelling of K (kWidth 4 for
16-bit values: fp8 converted to f16, int8 weights) is named as such alone (exit 3, with the
command that decides it) and proved with its partner (exit 0)."""

from __future__ import annotations

import io
import itertools
import json
import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from formal import catalog as cat
from formal.cli import main
from formal.layout import fragment
from formal.transform import cute
from formal.transform import triton as T


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------ CuTe TiledMMA layouts

def _leaves(t):
    return [x for y in t for x in _leaves(y)] if isinstance(t, tuple) else [t]


def _fmt(t):
    return "(" + ",".join(_fmt(x) for x in t) + ")" if isinstance(t, tuple) else str(t)


def tiled(atom: str, op: str, form: str, warps: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """A TiledMMA's TV layout over its operand tile, built from the instruction's CuTe atom
    (`transform --export cute`): warps (wm, wn) tile M and N; A is broadcast over the N warps,
    B over the M warps.  Tile: A M x K, B N x K, C M x N (column-major, as CuTe indexes)."""
    (tsh, vsh), (tst, vst) = cute.parse(atom)
    M, N, K = cat.parse(form).mnk
    wm, wn = warps
    Ra, R, wr = {"a": (M, M * wm, (M, 0)), "b": (N, N * wn, (0, N)), "c": (M, M * wm, (M, None))}[op]
    cols = {"a": K, "b": K, "c": N * wn}[op]

    def rescale(s):      # atom index r + Ra*c -> tile index r + R*c
        return s % Ra + R * (s // Ra)

    ts = [rescale(s) for s in _leaves(tst)]
    vs = [rescale(s) for s in _leaves(vst)]
    warp_m, warp_n = wr
    if op == "c":
        warp_n = N * R              # the n-th warp column starts N columns on
    shape = f"(({','.join(map(str, _leaves(tsh)))},{wm},{wn}),{_fmt(vsh)})"
    vstride = _fmt(_restride(vst, iter(vs)))
    stride = f"(({','.join(map(str, ts))},{warp_m},{warp_n}),{vstride})"
    return f"{shape}:{stride}", (R, cols)


def _restride(t, it):
    return tuple(_restride(x, it) for x in t) if isinstance(t, tuple) else next(it)


def brute(tv: str, form: str, op: str, tile, relabel: bool = False) -> bool:
    """Independent decision: every (warp, value group) puts each (lane, element) at one instruction
    box's origin + the spec's cell, and the tile is covered -- by enumeration, no Layout, no Z3.
    ``relabel``: instead, each group's rows are a function of the spec's rows alone and its
    columns of the spec's columns alone, both one-to-one (the spec up to relabelled axes)."""
    (ts, vs), (td, vd) = cute.parse(tv)
    ref = fragment(cat.parse(form), op)
    R, C = tile
    nthr, nval = cute.size(ts), cute.size(vs)
    E = ref.elements
    t = np.repeat(np.arange(nthr), nval)
    v = np.tile(np.arange(nval), nthr)
    idx = cute.evaluate(ts, td, t) + cute.evaluate(vs, vd, v)
    if (idx < 0).any() or (idx >= R * C).any():
        return False
    rows, cols = (idx // R, idx % R) if op == "b" else (idx % R, idx // R)
    held = np.zeros((C, R) if op == "b" else (R, C), bool)
    held[rows, cols] = True
    if not held.all():
        return False
    spec = np.array([ref.at(ln, *divmod(i, ref.epr))[:2] for ln in range(32) for i in range(E)])
    for w in range(nthr // 32):
        for g in range(nval // E):
            sel = (t // 32 == w) & (v // E == g)
            lane, i = t[sel] % 32, v[sel] % E
            cell = np.stack([rows[sel], cols[sel]], 1)
            want = spec[lane * E + i]
            if relabel:
                for d in (0, 1):
                    pairs = set(zip(want[:, d].tolist(), cell[:, d].tolist()))
                    if len({a for a, _ in pairs}) != len(pairs) or len({b for _, b in pairs}) != len(pairs):
                        return False
                continue
            origin = cell - want
            if not (origin == origin[0]).all() or origin[0, 0] % ref.rows or origin[0, 1] % ref.cols:
                return False
    return True


ATOMS = [("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", op) for op in "abc"] + \
        [("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", op) for op in "abc"] + \
        [("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "a"), ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "b")]
WARPS = [(2, 2), (4, 1), (1, 2)]


def _export(form, op):
    rc, out, _ = run("transform", "--export", "cute", form, op)
    assert rc == 0
    return out.strip()


def _mutants(tv: str):
    """Every layout with two strides of different value exchanged (lane, warp and value strides)."""
    shape, stride = tv.split(":", 1)
    nums = list(re.finditer(r"\d+", stride))
    for i, j in itertools.combinations(range(len(nums)), 2):
        a, b = nums[i], nums[j]
        if a.group() != b.group():
            yield shape + ":" + stride[:a.start()] + b.group() + stride[a.end():b.start()] + a.group() + stride[b.end():]


@pytest.mark.parametrize("form,op", ATOMS, ids=[f"{f.split('.')[3]}.{f.split('.')[-3]}-{o}" for f, o in ATOMS])
def test_correct_tiled_layouts_are_proved(form, op):
    atom = _export(form, op)
    for warps in WARPS:
        tv, tile = tiled(atom, op, form, warps)
        assert brute(tv, form, op, tile), (tv, tile)
        rep = cute.audit_tiled(tv, form, op, tile)
        assert rep.status == "proved" and rep.coverage["complete"], (tv, tile)


def _ids(atoms):
    return [f"{f.split('.')[3]}.{f.split('.')[-3]}-{o}" for f, o in atoms]


@pytest.mark.parametrize("form,op", [pytest.param(*x, marks=() if i == 2 else pytest.mark.slow)
                                     for i, x in enumerate(ATOMS)], ids=_ids(ATOMS))
def test_tiled_mutants_are_decided(form, op):
    """Two strides exchanged: proved exactly when the enumeration says the layout is right,
    relabelled exactly when it is the spec up to relabelled axes, otherwise refuted with a
    witness naming a thread and a value; never an error."""
    atom = _export(form, op)
    tv, tile = tiled(atom, op, form, (2, 2))
    n = {"proved": 0, "refuted": 0, "relabelled": 0, "outside": 0}
    for m in _mutants(tv):
        rep = cute.audit_tiled(m, form, op, tile)
        assert rep.status in ("proved", "refuted", "relabelled"), (m, rep.status)
        right = brute(m, form, op, tile)
        assert (rep.status == "proved") == right, m
        if not right:    # relabelled: the spec up to relabelled axes (a partner sharing them decides)
            assert (rep.status == "relabelled") == brute(m, form, op, tile, relabel=True), m
        n[rep.status] += 1
        if rep.status == "refuted":
            bad = [t for t in rep.tiles if t.status == "refuted"]
            if bad:
                w = bad[0].witness
                assert isinstance(w.get("thread"), int) and isinstance(w.get("value"), int), (m, w)
            else:
                assert not rep.coverage["complete"]
            if rep.coverage["first_outside"] is not None:
                n["outside"] += 1
    assert n["refuted"] >= 5 and n["outside"] >= 1, n


def test_cli_tiled_mutant_past_the_tile_is_refuted_not_bad_input():
    form = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    rc, out, err = run("layout", "audit", form, "--operand", "c", "--cute",
                       "((4,8,2,2),(2,2)):((1,64,16,256),(32,8))", "--cute-tile", "32x16")
    assert rc == 1 and not err
    assert "REFUTED audit.range: thread 80 value 0 reaches index 512, outside the 32 x 16 tile" in out
    assert "first outside [0, 16]" in out
    rc, out, _ = run("layout", "audit", form, "--operand", "c", "--cute",
                     "((4,8,2,2),(2,2)):((1,64,16,256),(32,8))", "--cute-tile", "32x16", "--json")
    d = json.loads(out)
    assert rc == 1 and d["status"] == "refuted" and d["coverage"]["first_outside"] == [0, 16]


# ------------------------------------------------------------------ Triton kWidth-4 dot operands

# Printed by the installed triton 3.9.0 (TTGIR of a tl.dot of a.to(f16) and b.to(f16), num_warps w),
# see _triton_dots below: (target, A type, B type, M, N, K, w) -> #mma line, A's and B's tensor types
TRITON_39 = {
    "sm_90 e4m3 x e4m3 16x64x64 w1": (
        "#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 1], instrShape = [16, 8]}>",
        "tensor<16x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>>",
        "tensor<64x64xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 4}>>"),
    "sm_90 f16 x i8 32x32x64 w2": (
        "#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 2], instrShape = [16, 8]}>",
        "tensor<32x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>>",
        "tensor<64x32xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 4}>>"),
    "sm_80 f16 x i8 64x128x32 w4": (
        "#mma = #ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 4], instrShape = [16, 8]}>",
        "tensor<64x32xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 4}>>",
        "tensor<32x128xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 4}>>"),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i == 1 else pytest.mark.slow)
                                  for i, n in enumerate(sorted(TRITON_39))])
def test_kwidth4_operand_alone_is_relabelled_not_refuted(name):
    mma, ta, tb = TRITON_39[name]
    for text, op in ((ta, "a"), (tb, "b")):
        rep = T.audit_whole(T.parse_whole(mma + "\n" + text))
        assert rep.status == "relabelled" and rep.relabelled_axes == ["K"], (name, op)
        assert all(t.status == "relabelled" for t in rep.tiles)
    rc, out, err = run("layout", "audit", "--triton", mma + "\n" + ta)
    assert rc == 3 and "REFUTED" not in out and not err
    assert "RELABELLED" in out and "--triton A --triton B" in out and "layout audit-atom" in out


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i == 0 else pytest.mark.slow)
                                  for i, n in enumerate(sorted(TRITON_39))])
def test_kwidth4_operands_together_are_proved(name):
    mma, ta, tb = TRITON_39[name]
    rep = T.audit_pair(T.parse_whole(mma + "\n" + ta), T.parse_whole(mma + "\n" + tb))
    assert rep.status == "proved" and rep.pairs and not rep.unpaired
    assert all(p["status"] == "proved" for p in rep.pairs)
    # the relabelling is Triton's large-kWidth split: instruction j of a K tile takes the j-th
    # 32-bit slice (2 f16) of each run of 4 values -- k = 4*(s//2) + s%2 (+2 for the second)
    ks = sorted({tuple(p["K"]) for p in rep.pairs})
    assert ks == [tuple(4 * (s // 2) + s % 2 + d for s in range(16)) for d in (0, 2)]
    rc, out, _ = run("layout", "audit", "--triton", mma + "\n" + tb, "--triton", mma + "\n" + ta)   # any order
    assert rc == 0
    assert out.rstrip().endswith("verdict: PROVED: equal to the spec up to a relabelling of K shared by A and B "
                                 "(proved by audit-atom)")


def test_kwidth_mismatch_between_a_and_b_is_refuted():
    mma, ta, _ = TRITON_39["sm_90 f16 x i8 32x32x64 w2"]
    tb2 = "tensor<64x32xf16, #ttg.dot_op<{opIdx = 1, parent = #mma, kWidth = 2}>>"
    rep = T.audit_pair(T.parse_whole(mma + "\n" + ta), T.parse_whole(mma + "\n" + tb2))
    assert rep.status == "refuted" and rep.unpaired
    rc, out, _ = run("layout", "audit", "--triton", mma + "\n" + ta, "--triton", mma + "\n" + tb2, "--json")
    assert rc == 1 and json.loads(out)["status"] == "refuted"


def test_pair_with_a_wrong_operand_is_refuted_with_the_atom_witness():
    """B with two lane bases exchanged (a #ttg.linear Triton never makes): the same k sets, but
    the pairing multiplies the wrong elements."""
    mma, ta, tb = TRITON_39["sm_90 e4m3 x e4m3 16x64x64 w1"]
    wb = T.parse_whole(mma + "\n" + tb)
    lane = wb.bases["lane"]
    bad = dict(wb.bases, lane=[lane[1], lane[0]] + lane[2:])
    rep = T.audit_pair(T.parse_whole(mma + "\n" + ta), T.parse_whole(T.format_attribute(bad)))
    assert rep.status == "refuted"


def test_pair_usage_errors():
    mma, ta, tb = TRITON_39["sm_90 e4m3 x e4m3 16x64x64 w1"]
    rc, _, err = run("layout", "audit", "--triton", mma + "\n" + ta, "--triton", mma + "\n" + ta)
    assert rc == 2 and "opIdx = 0 and 1" in err
    rc, _, err = run("layout", "audit", "--triton", mma + "\n" + ta, "--triton", mma + "\n" + tb,
                     "--triton", mma + "\n" + tb)
    assert rc == 2 and "not 3" in err


def test_relabelled_single_atom_names_audit_atom():
    """CUTLASS 3.0-3.2.0's SM75 16x8x8 A atom relabels M: alone it is not refuted but undecided."""
    rc, out, _ = run("layout", "audit", "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", "--operand", "a",
                     "--cute", "((4,8),(2,2)):((32,2),(16,1))")
    assert rc == 3 and "RELABELLED M: spec -> yours 0->0 1->2" in out and "--a KIND:LAYOUT --c KIND:LAYOUT" in out
    assert "REFUTED" not in out and "DIFFERS  audit.equal" in out


# ------------------------------------------------------------------ against the installed Triton

_TRITON = r'''
import json, re, sys, os
sys.stderr = open(os.devnull, "w")
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

@triton.jit
def k(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)[:, None]
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + tl.arange(0, N)[None, :])
    acc = tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float32)
    tl.store(c_ptr + rm * N + tl.arange(0, N)[None, :], acc)

out = []
for cap, at, bt, M, N, K, w in json.loads(sys.argv[1]):
    src = ASTSource(fn=k, signature={"a_ptr": "*" + at, "b_ptr": "*" + bt, "c_ptr": "*fp32", "M": "constexpr",
                                     "N": "constexpr", "K": "constexpr"}, constexprs={"M": M, "N": N, "K": K})
    ir = triton.compile(src, target=GPUTarget("cuda", cap, 32), options={"num_warps": w}).asm["ttgir"]
    mma = re.search(r"^#mma = .*$", ir, re.M)
    dot = re.search(r"tt\.dot [^:]*: (tensor<[^>]*>>) \* (tensor<[^>]*>>)", ir)
    if mma and dot and "versionMajor = 2" in mma.group(0):
        out.append([cap, at, bt, M, N, K, w, mma.group(0), dot.group(1), dot.group(2)])
print(json.dumps(out))
'''


def _triton_dots(cfgs):
    import tempfile

    pytest.importorskip("triton")
    with tempfile.TemporaryDirectory() as d:      # triton.jit reads the kernel's source file
        script = f"{d}/dots.py"
        with open(script, "w") as f:
            f.write(_TRITON)
        try:
            p = subprocess.run([sys.executable, script, json.dumps(cfgs)], capture_output=True, text=True,
                               timeout=900)
        except subprocess.TimeoutExpired:
            pytest.skip("triton compiles too slowly here")
    if p.returncode != 0 or not p.stdout.strip():
        pytest.skip(f"triton cannot compile here: {p.stderr[-200:]}")
    return json.loads(p.stdout.splitlines()[-1])


def _check_triton(cfgs):
    dots = _triton_dots(cfgs)
    assert dots, "no mma v2 dot was generated"
    for cap, at, bt, M, N, K, w, mma, ta, tb in dots:
        wa, wb = T.parse_whole(mma + "\n" + ta), T.parse_whole(mma + "\n" + tb)
        ra, rb = T.audit_whole(wa), T.audit_whole(wb)
        assert ra.status in ("proved", "relabelled") and rb.status in ("proved", "relabelled"), (cap, at, bt, M, N, K)
        assert T.audit_pair(wa, wb).status == "proved", (cap, at, bt, M, N, K, w)
    return dots


def test_installed_triton_kwidth4_dots_are_proved():
    """Compiled by the installed Triton (no GPU needed): fp8 and int8 operands converted to f16
    get kWidth 4; each pair is proved together."""
    dots = _check_triton([[90, "fp8e4nv", "fp8e4nv", 16, 32, 32, 1]])
    assert all("kWidth = 4" in d[8] for d in dots)


@pytest.mark.slow
def test_installed_triton_grid_of_dots_is_proved():
    cfgs = [[cap, at, bt, M, N, K, w] for cap in (80, 89, 90)
            for at, bt in (("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"), ("fp16", "i8"), ("bf16", "i8"), ("i8", "fp16"))
            if not (cap == 80 and "fp8" in at)
            for M, N, K, w in ((16, 16, 32, 1), (16, 64, 64, 1), (32, 32, 64, 2), (64, 128, 32, 4), (128, 64, 128, 4),
                               (32, 16, 128, 2))]
    assert len(_check_triton(cfgs)) >= 60
