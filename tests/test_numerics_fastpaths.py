"""The evaluator's fast paths against the paths they replace, bit for bit.

Each fast path is an algorithmic change with the same semantics (issue 14); these tests run
old and new side by side on random inputs of every regime, and the register-level
evaluation of each form whose path changed against the scalar Fraction reference:

* ``convert`` through a per-code table (and ``decode_converted``) == decode + encode;
* ``dot_terms`` on broadcast (stride-0) views == on materialised copies;
* one step of the f64 chain (scaled float64 FMA + NaN rule) == ``fma_f64`` + the NaN rule;
* b1 popcount on packed bytes, the permuted fp8 groups, the float f16/f32 final add,
  the row gather of sparse B: ``evaluate`` == ``mma_scalar`` / ``dot_scalar``.
"""
from __future__ import annotations

import numpy as np
import pytest

from formal import layout, metadata
from formal.catalog import parse
from formal.evaluate import evaluate
from formal.vectors.regimes import random_inputs
from formal.numerics import dot_scalar, dot_terms
from formal.numerics import engine as E
from formal.numerics.formats import all_codes, convert, decode, decode_converted, encode, get_format
from formal.numerics.params import FmaChain

REGIMES = ("normal", "finite", "align", "special", "bits", "extreme")


def _arith_convert(x, src, dst, mode):
    d = decode(x, src)
    return encode(d.neg, d.sig, d.lsb, dst, mode, nan=d.nan, inf=d.inf)


@pytest.mark.parametrize("src", ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "f16", "bf16"])
@pytest.mark.parametrize("dst", ["f16", "f32", "bf16", "e4m3"])
def test_convert_table_is_the_arithmetic_conversion(src, dst):
    codes = all_codes(src)
    for mode in ("rn", "rz", "rm", "rp", "rna"):
        want = _arith_convert(codes, src, dst, mode)
        assert np.array_equal(convert(codes, src, dst, mode), want)
        # a broadcast view converts the same, position by position
        view = np.broadcast_to(codes[:, None], (codes.size, 3))
        assert np.array_equal(convert(view, src, dst, mode), np.broadcast_to(want[:, None], view.shape))
    if get_format(dst).field_bits <= 16:
        d1, d2 = decode_converted(codes, src, dst), decode(_arith_convert(codes, src, dst, "rn"), dst)
        for name in ("neg", "sig", "exp", "nan", "inf", "zero", "val", "ealign"):
            assert np.array_equal(np.asarray(getattr(d1, name)), np.asarray(getattr(d2, name)), equal_nan=True), name


@pytest.mark.parametrize("op", ["mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32",
                                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                                "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64.rn"])
def test_dot_terms_on_broadcast_views_equals_materialised(op):
    f = parse(op)
    M, N, K = f.mnk
    K = K // 2 if f.is_sparse else K
    rng = np.random.default_rng(3)
    at = get_format(f.atype)
    a = rng.integers(0, 1 << at.bits, (6, M, 1, K), dtype=np.uint64).astype(at.np_container)
    b = rng.integers(0, 1 << at.bits, (6, 1, N, K), dtype=np.uint64).astype(at.np_container)
    ct = get_format(f.ctype)
    c = rng.integers(0, 1 << ct.bits, (6, M, N), dtype=np.uint64).astype(ct.np_container)
    kw = dict(atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, rounding=f.rounding, shape=f.mnk)
    full = (6, M, N, K)
    views = dot_terms(np.broadcast_to(a, full), np.broadcast_to(b, full), c, **kw)
    copies = dot_terms(np.ascontiguousarray(np.broadcast_to(a, full)), np.ascontiguousarray(np.broadcast_to(b, full)),
                       c, **kw)
    assert np.array_equal(views, copies)


def _f64_codes(rng, regime, n):
    from formal.vectors.regimes import random_elements

    return np.asarray(random_elements(rng, "f64", n, regime), np.uint64)


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_f64_chain_step_is_the_exact_fma(regime, mode):
    """One step of the f64 chain (float64 scaled FMA + the NaN rule) == the Python-integer
    fma_f64 + the NaN rule, on whole arrays and on broadcast [M, 1] x [1, N] operands."""
    rng = np.random.default_rng(hash((regime, mode)) % 2**32)
    n = 4000
    a, b, c = (_f64_codes(rng, regime, n) for _ in range(3))
    # exact cancellations (zero sums and their signs) and zero operands
    a[:200] = np.float64(1.5).view(np.uint64)
    with np.errstate(all="ignore"):
        c[:100] = (-np.asarray(b[:100]).view(np.float64) * 1.5).view(np.uint64)     # a*b + c = 0 exactly
    c[100:200] = b[100:200] ^ np.uint64(1 << 63)                                     # a*b + c = b/2
    c[200:300] = np.uint64(1 << 63)                                                  # c = -0
    p = FmaChain(nan_rule="propagate")
    prop = tuple(reversed(p.nan_priority))

    def exact(x, y, z):
        r = E.fma_f64(decode(x, "f64"), decode(y, "f64"), decode(z, "f64"), mode, p.default_nan)
        return E.f64_nan_select(p, r, {"a": x, "b": y, "c": z})

    for sl in (slice(0, 100), slice(100, 300), slice(300, n), slice(0, n)):
        x, y, z = a[sl], b[sl], c[sl]
        got = E._fma_f64_step(x, y, z, E._f64_factor(x), E._f64_factor(y), mode, p.default_nan, prop)
        assert np.array_equal(got, exact(x, y, z))
    # the direct tier (no scaling) where its ranges hold: |a|, |b| in [2**-450, 2**451), |c| < 2**900
    fa, fb, fc = (x.view(np.float64) for x in (a, b, c))
    inside = lambda x: (np.abs(x) >= 2.0 ** -450) & (np.abs(x) < 2.0 ** 451)  # noqa: E731
    ok = inside(fa) & inside(fb) & (np.abs(fc) < 2.0 ** 900)
    x, y, z = a[ok], b[ok], c[ok]
    got = E._fma_f64_step(x, y, z, E._f64_split(x), E._f64_split(y), mode, p.default_nan, prop)
    assert np.array_equal(got, exact(x, y, z))
    if regime in ("normal", "special"):
        assert ok.sum() > n // 2      # the direct tier is exercised
    # broadcast operands, as the chain passes them ([M, 1] column times [1, N] row)
    A, Bm = a[:64].reshape(64, 1), b[64:80].reshape(1, 16)
    C = c[:1024].reshape(64, 16)
    got = E._fma_f64_step(A, Bm, C, E._f64_factor(A), E._f64_factor(Bm), mode, p.default_nan, prop)
    assert np.array_equal(got, exact(np.broadcast_to(A, (64, 16)), np.broadcast_to(Bm, (64, 16)), C))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("creg", ["normal", "extreme"])
def test_f64_chain_is_the_exact_fma_chain(mode, creg, monkeypatch):
    """dot_terms' f64 chain, direct and scaled steps mixed (per k a regime; accumulators
    near the top of the range), == fma_f64 step by step with sm_90's NaN rule."""
    from formal.numerics.sm90 import F64_CHAIN as p

    rng = np.random.default_rng({"rn": 5, "rz": 6, "rm": 7, "rp": 8}[mode])
    T, M, N = 30, 4, 3
    regs = ["normal", "normal", "align", "normal", "finite", "normal", "special", "bits", "normal", "extreme"]
    K = len(regs)
    a = np.stack([_f64_codes(rng, r, T * M).reshape(T, M) for r in regs], -1)[:, :, None, :]
    b = np.stack([_f64_codes(rng, r, T * N).reshape(T, N) for r in regs], -1)[:, None, :, :]
    c = _f64_codes(rng, creg, T * M * N).reshape(T, M, N)
    tiers = []
    step = E._fma_f64_step
    monkeypatch.setattr(E, "_fma_f64_step", lambda *x: tiers.append(x[3][3] is None) or step(*x))
    got = dot_terms(a, b, c, atype="f64", btype="f64", ctype="f64", dtype="f64", rounding=mode)
    assert (creg == "normal") == any(tiers) and not all(tiers)    # both tiers ran where the data allow
    acc = c
    for k in range(K):
        A, Bk = (np.ascontiguousarray(np.broadcast_to(x[..., k], c.shape)) for x in (a, b))
        r = E.fma_f64(decode(A, "f64"), decode(Bk, "f64"), decode(acc, "f64"), mode, p.default_nan)
        acc = E.f64_nan_select(p, r, {"a": A, "b": Bk, "c": acc})
    assert np.array_equal(got, acc)


@pytest.mark.parametrize("xt,yt,out", [("f32", "f32", "f32"), ("f16", "f16", "f16"), ("f16", "f32", "f32"),
                                       ("f32", "f16", "f16")])
@pytest.mark.parametrize("nan_code", [None, 0x7FFF_FFFF])
def test_float_final_add_is_the_exact_rounding(xt, yt, out, nan_code):
    from formal.vectors.regimes import random_elements

    rng = np.random.default_rng(7)
    xs, ys = [], []
    for regime in REGIMES:
        xs.append(random_elements(rng, xt, 3000, regime))
        ys.append(random_elements(rng, yt, 3000, regime))
    x = np.concatenate(xs).astype(get_format(xt).np_container)
    y = np.concatenate(ys).astype(get_format(yt).np_container)
    y[:500] = convert(x[:500] ^ (1 << (get_format(xt).bits - 1)), xt, yt, "rn")   # exact cancellations
    nc = None if nan_code is None else (nan_code if out == "f32" else 0x7E00)
    got = E.add_rounded(x, xt, y, yt, out, "rn", nan_code=nc)
    tx, ty = E.B.value_terms(decode(x, xt)), E.B.value_terms(decode(y, yt))
    want = E.B.exact_round([tx, ty], get_format(out), "rn", overflow="ieee", nan_code=nc, zero_sign="ieee")
    assert np.array_equal(got, want)


FORMS = [
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "mma.sync.aligned.m16n8k16.row.col.f16.e5m2.e5m2.f16",
    "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64.rz",
    "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64.rn",
    "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc",
    "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32",
    "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32",
]


@pytest.mark.parametrize("op", FORMS)
@pytest.mark.parametrize("regime", ["normal", "bits", "special"])
def test_register_level_matches_the_scalar_reference(op, regime):
    """evaluate() (every fast path) == dot_scalar (Fractions), element by element."""
    f = parse(op)
    inp = random_inputs(f, 2, regime, 11)
    sel = 0 if f.is_sparse else None
    d = evaluate(f, inp["a"], inp["b"], inp["c"], e=inp.get("e"), sel=sel, arch="sm_90")
    D = layout.unpack(f, "d", d)
    B = layout.unpack(f, "b", inp["b"])
    C = layout.unpack(f, "c", inp["c"])
    M, N, K = f.mnk
    kw = dict(atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, arch="sm_90", satfinite=f.satfinite,
              bitop=f.bitop, rounding=f.rounding, kind=f.kind, shape=f.mnk, sparse=f.is_sparse)
    if f.is_sparse:
        vals, kidx = metadata.gather_terms(f, inp["a"], np.asarray(inp["e"], np.uint32).reshape(2, 32), sel)
    else:
        A = layout.unpack(f, "a", inp["a"])
    rng = np.random.default_rng(0)
    for t in range(2):
        for i, j in {(int(x), int(y)) for x, y in zip(rng.integers(0, M, 24), rng.integers(0, N, 24))}:
            if f.is_sparse:
                a_t, b_t = vals[t, i], B[t, kidx[t, i], j]
            else:
                a_t, b_t = A[t, i, :], B[t, :, j]
            want = dot_scalar(list(a_t), list(b_t), C[t, i, j], **kw)
            assert int(D[t, i, j]) == want, (op, regime, t, i, j)


# ---------------------------------------------------------------------------
# The float64 FMA (fma_f64_codes / the chain step) against the exact references, edge-heavy
# ---------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# exponent fields: subnormal/zero (0), the bottom and top of the normal range, around 1.0,
# Inf/NaN (2047), and the bands where products underflow or overflow
_EXP = st.one_of(st.sampled_from([0, 1, 2, 53, 54, 511, 512, 1022, 1023, 1024, 1535, 1536, 2045, 2046, 2047]),
                 st.integers(0, 60), st.integers(960, 1090), st.integers(1980, 2047), st.integers(0, 2047))
# significands: zero, one, all ones, the quiet bit, a few high bits (exact products, ties), a few low bits
_MANT = st.one_of(st.sampled_from([0, 1, 2, (1 << 52) - 1, 1 << 51, (1 << 51) + 1, (1 << 52) - 2]),
                  st.integers(0, 63).map(lambda m: m << 46), st.integers(0, 63), st.integers(0, (1 << 52) - 1))
_CODE = st.builds(lambda s, e, m: (s << 63) | (e << 52) | m, st.integers(0, 1), _EXP, _MANT)


@st.composite
def _fma_triple(draw):
    """(a, b, c) codes; c is free, or placed against a*b: its negation a few codes away
    (cancellation, exact zeros), half an ulp of it (ties), or far below it (sticky only)."""
    a, b = draw(_CODE), draw(_CODE)
    how = draw(st.sampled_from(["free", "free", "cancel", "tie", "sticky"]))
    if how == "free":
        return a, b, draw(_CODE)
    with np.errstate(all="ignore"):
        p = np.float64(np.uint64(a).view(np.float64)) * np.float64(np.uint64(b).view(np.float64))
        if how == "cancel":
            c = int((-p).view(np.uint64)) + draw(st.integers(-3, 3))
        elif how == "tie":
            h = np.spacing(np.abs(p)) / 2 * draw(st.sampled_from([1.0, -1.0, 1 - 2.0 ** -52, 1 + 2.0 ** -52]))
            c = int(np.float64(h).view(np.uint64))
        else:
            c = int(np.float64(np.ldexp(p, -draw(st.integers(54, 1200)))).view(np.uint64))
    return a, b, c & ((1 << 64) - 1)


@settings(max_examples=300, deadline=None)
@given(triples=st.lists(_fma_triple(), min_size=1, max_size=48), mode=st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_float64_fma_is_the_exact_fma(triples, mode):
    """fma_f64_codes (scaled float64 FMA) == fma_f64 (Python integers) == fma1 (Fractions),
    every element, every rounding mode; and one chain step with the NaN rule == fma_f64 + rule."""
    from formal.numerics.reference import decode1, fma1

    nan = 0x7FF8000000000123
    a, b, c = (np.array(x, np.uint64) for x in zip(*triples))
    got = E.fma_f64_codes(a, b, c, mode, nan)
    want = E.fma_f64(decode(a, "f64"), decode(b, "f64"), decode(c, "f64"), mode, nan)
    assert np.array_equal(got, want), [(hex(int(x)), hex(int(y)), hex(int(z)), hex(int(g)), hex(int(w)))
                                       for x, y, z, g, w in zip(a, b, c, got, want) if g != w][:3]
    frac = [fma1(decode1(x, "f64"), decode1(y, "f64"), decode1(z, "f64"), mode, nan) for x, y, z in triples]
    assert [int(x) for x in got] == frac
    p = FmaChain(nan_rule="propagate")
    step = E._fma_f64_step(a, b, c, E._f64_factor(a), E._f64_factor(b), mode, p.default_nan,
                           tuple(reversed(p.nan_priority)))
    rule = E.f64_nan_select(p, E.fma_f64(decode(a, "f64"), decode(b, "f64"), decode(c, "f64"), mode, p.default_nan),
                            {"a": a, "b": b, "c": c})
    assert np.array_equal(step, rule)
    # the direct tier (no scaling) on the elements inside its ranges
    fa, fb, fc = (x.view(np.float64) for x in (a, b, c))
    inside = lambda x: (np.abs(x) >= 2.0 ** -450) & (np.abs(x) < 2.0 ** 451)  # noqa: E731
    ok = inside(fa) & inside(fb) & (np.abs(fc) < 2.0 ** 900)
    if ok.any():
        x, y, z = a[ok], b[ok], c[ok]
        got = E._fma_f64_step(x, y, z, E._f64_split(x), E._f64_split(y), mode, nan)
        assert np.array_equal(got, want[ok])
