"""The host-only fast paths of the numerics agree with the code the GPU runs.

``formal.numerics`` takes shortcuts on host numpy (``on_host()``) that the device path does
not: sparse terms from gathered decoded rows of B (``engine.sparse_dot``), RZ into binary32
and RN into f16 / bf16 from the float64 bits, binary32 -> float64 by the hardware
conversion, the float32 window sum one k at a time.  Each is checked here against the
general code on edge cases: the integer encoder, ``dot_terms`` over gathered B codes, the
bit-built conversion, and the FTZ-emulating module (``tests/ftz_numpy.py``), which runs
the device code on the CPU.
"""
from __future__ import annotations

import unittest.mock as um

import numpy as np
import pytest

from formal.catalog import parse
from formal.evaluate import _numerics_kw, _wgmma_kw
from formal.numerics import engine, from_float64
from formal.numerics import formats as F
from formal.numerics.xp import backend

import ftz_numpy

FTZ = ftz_numpy.module()


def _edge_encode_inputs(rng, n, lo, hi):
    mag = rng.integers(0, 1 << 40, n, dtype=np.int64) >> rng.integers(0, 40, n)
    lsb = rng.integers(lo, hi, n).astype(np.int64)
    t = n // 4
    mag[:t] = (rng.integers(0, 1 << 12, t) * 2 + 1) << rng.integers(0, 10, t)    # exact ties
    mag[t:t + 64] = 0                                                            # +-0
    return rng.random(n) < 0.5, mag, lsb


@pytest.mark.parametrize("fmt,mode,lo,hi", [("f32", "rz", -200, 120), ("f32", "rz", -1022, 960),
                                            ("f16", "rn", -60, 25), ("bf16", "rn", -180, 140)])
def test_float_encoders_equal_the_integer_path(fmt, mode, lo, hi):
    rng = np.random.default_rng(1)
    neg, mag, lsb = _edge_encode_inputs(rng, 40_000, lo, hi)
    nan = rng.random(mag.size) < 0.01
    inf = (rng.random(mag.size) < 0.01) & ~nan
    for overflow in ("inf", "ieee", "satfinite"):
        for ftz in (False, True):
            kw = dict(overflow=overflow, ftz=ftz, nan=nan, inf=inf, nan_code=0x7FFF)
            got = F.encode(neg, mag, lsb, fmt, mode, **kw)
            with um.patch.object(F, "_encode_binary32", lambda *a, **k: None), \
                    um.patch.object(F, "_encode_rn16_host", lambda *a, **k: None):
                want = F.encode(neg, mag, lsb, fmt, mode, **kw)
            assert got.dtype == want.dtype
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (overflow, ftz, int(mag[bad[0]]), int(lsb[bad[0]]), hex(got[bad[0]]),
                                   hex(want[bad[0]]))
            if fmt == "f32":       # and the device code (f64_to_b32 and the step back), FTZ emulated
                with backend(FTZ):
                    dev = np.asarray(F.encode(FTZ.asarray(neg), FTZ.asarray(mag), FTZ.asarray(lsb), fmt, mode, **kw))
                assert np.array_equal(got, dev)


def test_hand_computed_roundings():
    def e(neg, mag, lsb, fmt, mode):       # the value (-1)**neg * mag * 2**lsb
        return int(F.encode(np.bool_(neg), np.int64(mag), np.int64(lsb), fmt, mode, overflow="inf"))
    assert e(0, (1 << 11) + 1, -11, "f16", "rn") == 0x3C00            # 1 + 2**-11: a tie, to even
    assert e(0, (1 << 11) + 3, -11, "f16", "rn") == 0x3C02            # 1 + 3 * 2**-11: a tie, up to even
    assert e(1, 1, -25, "f16", "rn") == 0x8000                        # half the smallest subnormal: -0
    assert e(0, 3, -26, "f16", "rn") == 0x0001                        # 0.75 of it: up
    assert e(0, 65520, 0, "f16", "rn") == 0x7C00 and e(0, 65519, 0, "f16", "rn") == 0x7BFF
    assert e(0, (1 << 30) - 1, -30, "f32", "rz") == 0x3F7FFFFF        # 1 - 2**-30: down to the float below 1
    assert e(1, 3, -150, "f32", "rz") == 0x80000001                   # -1.5 * 2**-149: toward zero
    assert e(0, 1, 128, "f32", "rz") == 0x7F800000                    # the "inf" overflow policy
    assert e(0, (1 << 24) - 1, 104, "f32", "rz") == 0x7F7FFFFF        # the largest finite number, exact


def test_binary32_to_float64_host_equals_bit_built():
    u = np.concatenate([np.arange(0, 1 << 12, dtype=np.uint32),
                        np.arange((1 << 23) - 99, (1 << 23) + 99, dtype=np.uint32),
                        np.array([0x7F800000, 0x7F800001, 0x7FC00000, 0x7F7FFFFF], np.uint32),
                        np.random.default_rng(2).integers(0, 1 << 32, 20_000, dtype=np.uint64).astype(np.uint32)])
    u = np.concatenate([u, u | np.uint32(1 << 31)])
    host = F.b32_to_f64(u)
    built = F.b32_to_f64(u.astype(np.uint64))          # not a uint32 array: the device's bit-built code
    nan = np.isnan(built)
    assert np.array_equal(np.isnan(host), nan)
    assert np.array_equal(host[~nan].view(np.uint64), built[~nan].view(np.uint64))
    val = F._b32_val(u)                                 # NaN and Inf read as a zero of their sign
    sp = (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    assert np.all(val[sp] == 0) and np.array_equal(np.signbit(val[sp]), (u[sp] >> 31) == 1)
    assert np.array_equal(val[~sp].view(np.uint64), built[~sp].view(np.uint64))


def _codes(rng, t, shape, regime):
    if regime == "raw":                      # every encoding, NaN and Inf included
        bits = {"f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "tf32": 32, "f32": 32, "s8": 8, "s32": 32}[t]
        dt = {8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]
        return rng.integers(0, 1 << bits, shape, dtype=np.uint64).astype(dt)
    if t in ("s8", "s32"):
        return rng.integers(0, 1 << (8 if t == "s8" else 32), shape, dtype=np.uint64).astype(
            np.uint8 if t == "s8" else np.uint32)
    v = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape))
    v[rng.random(shape) < 0.2] = 0
    return from_float64(v, "f32" if t == "tf32" else t)


@pytest.mark.parametrize("op", [
    "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.f16.f16",
    "wgmma.mma_async.sp.sync.aligned.m64n256k32.f16.f16.f16",
    "wgmma.mma_async.sp.sync.aligned.m64n256k32.f32.bf16.bf16",
    "wgmma.mma_async.sp.sync.aligned.m64n256k16.f32.tf32.tf32",
    "wgmma.mma_async.sp.sync.aligned.m64n256k64.f16.e4m3.e5m2",
    "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",
    "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32",
    "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"])
def test_sparse_dot_equals_dot_terms_over_gathered_rows(op, monkeypatch):
    f = parse(op)
    M, N, K = f.mnk
    kw = _wgmma_kw(f, "sm_90") if f.family == "wgmma" else _numerics_kw(f, "sm_90")
    N = min(N, 16)
    T = 3
    rng = np.random.default_rng(3)
    monkeypatch.setattr(engine, "CHUNK_OUTPUTS", 40)           # several chunks, one cut inside an instance
    for regime in ("normal", "raw"):
        vals = _codes(rng, f.atype, (T, M, K // 2), regime)
        b = _codes(rng, f.btype, (T, K, N), regime)
        c = _codes(rng, f.dtype, (T, M, N), regime)
        kidx = rng.integers(0, K, (T, M, K // 2))                # any rows (repeats: the 'sum' reading of UB)
        got = engine.sparse_dot(vals, kidx, b, c, **kw)
        bt = b[np.arange(T)[:, None, None], kidx]
        want = engine.dot_terms(np.moveaxis(np.broadcast_to(vals[..., None], bt.shape), 3, 2), np.moveaxis(bt, 3, 2),
                                c, **kw)
        assert got.dtype == want.dtype and np.array_equal(got, want), (regime, int(np.sum(got != want)))
