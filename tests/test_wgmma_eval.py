"""formal.evaluate for wgmma against the silicon: every recorded warpgroup of the wgmma runs
(tests/data/wgmma_silicon_slice.npz: fragments, 500 descriptor readouts, every dense and sparse type
combination, imm-scale, scale-d) evaluated at register level from what the harness gave the
instruction (accumulator registers, A registers or descriptor, B descriptor, the shared-memory
image) equals the H200's registers bit for bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import formal
from formal.evaluate import EvalError, evaluate_wgmma, wgmma_matrices
from formal.hw import wgmma_probe as wp
from formal.layout import fragment

ROOT = Path(__file__).resolve().parents[1]


def _opcode(k) -> str:
    op = ("wgmma.mma_async" + (".sp" if k.sparse else "") + ".sync.aligned." + k.shape
          + (".satfinite" if k.satfinite else "") + f".{k.dtype}.{k.atype}.{k.btype}")
    return op + (".and.popc" if k.atype == "b1" else "")


@pytest.fixture(scope="module")
def run():
    return wp.all_probes(list(wp.GROUPS)), dict(np.load(ROOT / "tests" / "data" / "wgmma_silicon_slice.npz"))


def _eval(p, T):
    k, i = p.kernel, p.inputs
    a = i["a"][:T] if k.asrc == "reg" else i["desc"][:T, 0]
    return formal.evaluate(_opcode(k), a, i["desc"][:T, 1], i["c"][:T], e=i["e"][:T] if k.sparse else None,
                           sel=k.sel if k.sparse else None, smem=i["img"][:T], scale_d=i["flags"][:T].astype(bool),
                           imm_scale_a=k.scale_a, imm_scale_b=k.scale_b, imm_trans_a=k.trans_a, imm_trans_b=k.trans_b)


def test_register_level_equals_the_silicon(run):
    probes, outs = run
    n = kinds = 0
    seen = set()
    for p in probes:
        got = outs.get(p.key)
        if got is None:
            continue
        d = _eval(p, got.shape[0])
        assert np.array_equal(d, got), p.key
        n += d.size
        seen.add(p.info["kind"])
    assert n > 6_000_000
    assert seen == {"dlayout", "alayout", "readout", "random", "scale", "probes", "sparse_layout", "sparse_random"}


def test_a_wrong_reading_is_caught(run):
    """The check can fail: reading the descriptor relative to its start address, or ignoring
    imm-scale, changes silicon-recorded outputs."""
    probes, outs = run
    p = next(q for q in probes if q.key == "ns.f32.bf16.bf16.-1.1.normal")
    k = p.kernel
    T = outs[p.key].shape[0]
    i = p.inputs
    d = evaluate_wgmma(_opcode(k), i["c"][:T], i["a"][:T], i["desc"][:T, 1], smem=i["img"][:T],
                       scale_d=i["flags"][:T].astype(bool), imm_scale_a=1)
    assert not np.array_equal(d, outs[p.key])


def test_matrix_level_is_the_register_level():
    rng = np.random.default_rng(3)
    op = "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e5m2"
    A = rng.integers(0, 256, (3, 64, 32), dtype=np.uint8)
    A[(A & 0x7F) == 0x7F] = 0x10
    B = rng.integers(0, 256, (3, 32, 32), dtype=np.uint8)
    C = rng.integers(0, 1 << 31, (3, 64, 32)).astype(np.uint32)
    D = wgmma_matrices(op, A, B, C)
    f = formal.parse(op)
    from formal import layout

    img, bdesc = _b_image(B)
    regs = evaluate_wgmma(op, layout.pack(f, "d", C), layout.pack(_reg_form(f), "a", A), bdesc, smem=img)
    assert np.array_equal(layout.unpack(f, "d", regs), D)


def _reg_form(f):
    import dataclasses

    return dataclasses.replace(f, asource="reg")


def _b_image(B):
    """B [T, K, N] 8-bit codes in the no-swizzle K-major canonical layout at byte 0, and its descriptor."""
    T, K, N = B.shape
    img = np.zeros((T, 8192), np.uint8)
    lbo, sbo = wp.write_kmajor(img, 0, np.swapaxes(B, 1, 2).astype(np.uint64), 8)
    return img, wp.desc(0, lbo, sbo)


def test_sparse_warps_read_like_the_mma_sp_form():
    """The spec's sparse wgmma fragments (A stored, metadata) are, warp by warp, those of the
    mma.sp form the evaluator reads each warp's 16 rows through."""
    for op, twin in (("wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.f16.f16",
                      "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"),
                     ("wgmma.mma_async.sp.sync.aligned.m64n16k16.f32.tf32.tf32",
                      "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"),
                     ("wgmma.mma_async.sp.sync.aligned.m64n16k64.f32.e4m3.e4m3",
                      "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32")):
        w = _reg_form(formal.parse(op))
        t = formal.parse(twin)
        W, Tw = fragment(w, "a").enumerate(), fragment(t, "a").enumerate()
        tw = {(int(l), int(r), int(e)): (int(ro), int(co))
              for l, r, e, ro, co in zip(Tw["lane"], Tw["reg"], Tw["elem"], Tw["row"], Tw["col"])}
        lanes = W["lane"] % 32
        warp = W["lane"] // 32 if "warp" not in W else W["warp"]
        n = 0
        for l, wa, r, e, ro, co in zip(lanes, warp, W["reg"], W["elem"], W["row"], W["col"]):
            assert tw[(int(l), int(r), int(e))] == (int(ro) - 16 * int(wa), int(co)), (op, int(wa), int(l), int(r))
            n += 1
        assert n == 4 * len(tw)


def test_bad_input_is_one_line():
    op = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"
    d = np.zeros((1, 128, 4), np.uint32)
    with pytest.raises(EvalError, match="smem="):
        evaluate_wgmma(op, d, 0, 0)
    with pytest.raises(EvalError, match="imm-scale-a must be 1 or -1"):
        evaluate_wgmma(op, d, 0, 0, smem=np.zeros(4096, np.uint8), imm_scale_a=2)
    with pytest.raises(EvalError, match="imm-scale-a = -1 needs a floating"):
        evaluate_wgmma("wgmma.mma_async.sync.aligned.m64n8k32.s32.s8.s8", d, 0, 0, smem=np.zeros(4096, np.uint8),
                       imm_scale_a=-1)
