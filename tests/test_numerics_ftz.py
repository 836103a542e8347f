"""The GPU path does not depend on float32 subnormals (CuPy compiles with ``-ftz=true``).

The evaluator's GPU path is the CPU code run by CuPy; CuPy's kernels flush float32
subnormals (inputs and results of every float32 instruction and conversion).  An H100 run
found one warp where that mattered: a subnormal f32 accumulator converted to float64 became
0 (``../shared/witnesses/sparse_tf32_sel1.npz``: the CuPy path gave 0x8bc99010, the H100
and the CPU path 0x8bc9900e).  ``tests/ftz_numpy.py`` emulates the flush on the CPU (it
reproduces that wrong 0x8bc99010 on the old code), so every form is checked here against
it without a GPU; the device run checks the real CuPy path against the CPU and the H100.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import formal
from formal.catalog import forms
from formal.numerics.formats import b32_to_f64, f64_to_b16, f64_to_b32
from formal.numerics.xp import backend
from formal.vectors.regimes import random_inputs

import ftz_numpy

WITNESS = Path(__file__).resolve().parents[1] / "tests" / "data" / "witness_sparse_tf32_sel1.npz"
FTZ = ftz_numpy.module()


def _eval(form, inp, module=None):
    kw = {k: inp[k] for k in ("e", "sel") if k in inp}
    if module is None:
        return formal.evaluate(form, inp["a"], inp["b"], inp["c"], **kw)
    with backend(module):
        return np.asarray(formal.evaluate(form, inp["a"], inp["b"], inp["c"], **kw))


def test_the_h100_witness_warp():
    z = np.load(WITNESS)
    inp = {k: z[k][None] for k in ("a", "b", "c", "e")}
    inp["sel"] = int(z["sel"])
    op = str(z["opcode"])
    assert np.array_equal(_eval(op, inp)[0], z["want"])
    assert np.array_equal(_eval(op, inp, FTZ)[0], z["want"])
    assert int(z["want"][11, 3]) == 0x8BC9900E       # the element the CuPy path got wrong


def test_the_emulation_flushes_what_cuda_flushes():
    u = np.array([0x005262E4, 0x80000001, 0x00800000], np.uint32)      # two subnormals, the smallest normal
    with backend(FTZ):
        from formal.numerics.xp import np as xnp
        old = np.asarray(xnp.asarray(u).view(np.float32).astype(np.float64))
        new = np.asarray(b32_to_f64(xnp.asarray(u)))
    assert list(old) == [0.0, -0.0, 2.0 ** -126] and np.signbit(old[1])
    assert list(new) == [0x5262E4 * 2.0 ** -149, -(2.0 ** -149), 2.0 ** -126]


def _conversions_agree(u: np.ndarray, rng, n_random: int, n_ftz: int):
    u = np.concatenate([u, u | np.uint32(1 << 31)])
    with np.errstate(invalid="ignore"):
        ref = u.view(np.float32).astype(np.float64)
    got = b32_to_f64(u)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan].view(np.uint64), ref[~nan].view(np.uint64))
    # float64 values on and between the binary32 / binary16 grids, ties, underflow, overflow
    v = np.concatenate([ref, ref * (1 + 2.0 ** -25), ref + 2.0 ** -150, ref * 1.5,
                        rng.standard_normal(n_random) * 2.0 ** rng.integers(-160, 140, n_random)])
    with np.errstate(over="ignore", invalid="ignore"):
        want32 = v.astype(np.float32).view(np.uint32)
        want16 = v.astype(np.float16).view(np.uint16)
    assert np.array_equal(f64_to_b32(v), want32)
    assert np.array_equal(f64_to_b16(v), want16)
    with backend(FTZ):                                   # and the same bits where float32 flushes
        assert np.array_equal(np.asarray(f64_to_b32(v[:n_ftz])), want32[:n_ftz])


def test_binary_conversions_agree_with_numpy():
    """A sample: every 61st subnormal code, the subnormal/normal boundaries, random codes."""
    rng = np.random.default_rng(7)
    u = np.concatenate([np.arange(0, 1 << 23, 61, dtype=np.uint32), np.arange((1 << 23) - 64, (1 << 23) + 64, dtype=np.uint32),
                        rng.integers(0, 1 << 32, 100_000).astype(np.uint32)])
    _conversions_agree(u, rng, 100_000, 100_000)


@pytest.mark.slow
def test_binary_conversions_agree_with_numpy_on_every_subnormal():
    rng = np.random.default_rng(7)
    u = np.concatenate([np.arange(1 << 23, dtype=np.uint32), rng.integers(0, 1 << 32, 200_000).astype(np.uint32)])
    _conversions_agree(u, rng, 200_000, 1 << 20)


def _register_forms():
    out = []
    for f in forms(target="sm_90", ptx="9.0"):
        if f.family not in ("mma", "mma.sp") or f.block_scale:
            continue
        sels = list(f.selectors) if f.is_sparse else [None]
        out += [(f, s) for s in sels]
    return out


@pytest.mark.parametrize("regime", ["tiny", "finite", "special"])
def test_every_form_is_the_same_where_float32_flushes(regime):
    mism = []
    for i, (f, sel) in enumerate(_register_forms()):
        inp = random_inputs(f, 4, regime, seed=100 + i)
        if sel is not None:
            inp["sel"] = sel
        cpu = _eval(f, inp)
        ftz = _eval(f, inp, FTZ)
        if not np.array_equal(cpu, ftz):
            mism.append(f.opcode)
    assert not mism, f"{len(mism)} forms differ under flush-to-zero, e.g. {mism[:3]}"
