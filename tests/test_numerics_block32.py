"""The float32 product path of the block FMA (issue 14) against the float64 path it
replaces and the scalar Fraction reference, bit for bit.

``product_terms`` forms f16 (and bf16 / tf32 when the data's exponents allow) products as
exact float32 numbers with int16 exponents, and ``_window_sum_f32`` truncates and sums
them in float32 / int32 (the exactness argument is in their docstrings).  Here every arch
model's f16 / bf16 block record, and variants of it (floor truncation, unpinned
subnormals, normalised products, c after the window, other roundings, IEEE zero signs),
run on edge-heavy inputs (subnormals, zeros of both signs, the largest exponents, NaN /
Inf, exact cancellation, exponent spread) with the float32 path on and off; a sample of
outputs is checked against ``reference.chain1``.  The GEMM chunking (whole tile rows)
is checked against an unchunked run.
"""
from __future__ import annotations

import numpy as np
import pytest

import formal
from formal.numerics import block as B
from formal.numerics import engine as E
from formal.numerics import from_float64
from formal.numerics.archs import MODELS, get_model
from formal.numerics.formats import decode, get_format
from formal.numerics.params import BlockFMA
from formal.numerics.reference import _decode_in, chain1, decode1


def _codes(rng, fmt, shape, special_rate=0.0):
    """Edge-heavy codes of a float format: per element one of subnormal / zero, smallest
    and largest exponents, near one, random bits; NaN / Inf at ``special_rate``."""
    f = get_format(fmt)
    m, ew, bias = f.mantissa, f.exponent, f.bias
    sign = rng.integers(0, 2, shape).astype(np.uint64) << np.uint64(f.bits - 1)
    frac = rng.integers(0, 1 << m, shape).astype(np.uint64)
    field = np.select(
        [(k := rng.integers(0, 6, shape)) == 0, k == 1, k == 2, k == 3, k == 4],
        [np.zeros(shape), np.ones(shape), np.full(shape, (1 << ew) - 2),
         rng.integers(bias - 4, bias + 4, shape), rng.integers(1, (1 << ew) - 1, shape)],
        rng.integers(0, (1 << ew) - 1, shape)).astype(np.uint64)
    zero = rng.random(shape) < 0.05
    codes = sign | np.where(zero, 0, (field << np.uint64(m)) | frac)
    if special_rate:
        sp = rng.random(shape) < special_rate
        codes = np.where(sp, sign | (np.uint64((1 << ew) - 1) << np.uint64(m)) | (frac & np.uint64(3)), codes)
    return codes.astype(f.np_container)


def _inputs(rng, at, ct, rows, K):
    a = _codes(rng, at, (rows, K))
    b = _codes(rng, at, (rows, K))
    q = rows // 4
    # exact cancellation: each odd k repeats the even k before it with b negated
    a[:q, 1::2] = a[:q, 0::2]
    b[:q, 1::2] = b[:q, 0::2] ^ np.asarray(1 << (get_format(at).bits - 1), b.dtype)
    # moderate rows (the bf16 float32 path needs moderate exponents): values near one
    a[q:2 * q] = from_float64(rng.standard_normal((q, K)) * 4.0 ** rng.integers(-3, 4, (q, K)), at)
    b[q:2 * q] = from_float64(rng.standard_normal((q, K)), at)
    # a few rows with NaN / Inf
    a[2 * q:2 * q + q // 4] = _codes(rng, at, (q // 4, K), special_rate=0.1)
    c = _codes(rng, ct, (rows,), special_rate=0.02)
    c[q:2 * q] = from_float64(rng.standard_normal(q), ct)
    return a, b, c


def _run(a, b, c, p, at, ct, dt, *, f32: bool, monkeypatch):
    ctx = dict(atype=at, btype=at, ctype=ct, dtype=dt, key=f"{at}.{dt}", K=a.shape[-1], kind=None,
               stype=None, scale_vec=None)
    with monkeypatch.context() as mp:
        if not f32:
            mp.setattr(B, "_range32", lambda factors: None)
        return np.asarray(E._run_block(a, b, c, None, None, p, ctx))


def _model_records():
    """(model name, record, atype, ctype, dtype) of every f16 / bf16 block path."""
    for name, model in MODELS.items():
        for at, ct, dt in (("f16", "f32", "f32"), ("f16", "f16", "f16"), ("bf16", "f32", "f32")):
            try:
                _, p = model.path(at, at, ct, dt, None, scaled=False, shape=(16, 8, 16))
            except Exception:  # noqa: BLE001 - the model has no such path
                continue
            if isinstance(p, BlockFMA):
                yield name, p, at, ct, dt


def _records():
    """One test case per distinct record (models that share a record share its case)."""
    out = {}
    for name, p, at, ct, dt in _model_records():
        out.setdefault((p, at, ct, dt), []).append(name)
    return [pytest.param(*k, id="+".join(v) + f"-{k[1]}.{k[2]}.{k[3]}") for k, v in out.items()]


RECORDS = _records()


def _variants(p: BlockFMA):
    yield p
    yield p.but(truncation="floor")
    yield p.but(pin_subnormals=False, pin_c=False)
    yield p.but(normalise_products=True)
    yield p.but(c_entry="after")
    yield p.but(rounding="rn", zero_sign="ieee", rounded_zero_sign="sum")
    yield p.but(rounding="rm", zero_sign="ieee", minexp=None)


def test_every_models_f16_and_bf16_records_are_tested():
    names = {n for n, *_ in _model_records()}
    assert {"sm_70", "sm_80", "sm_89", "sm_90", "sm_100", "sm_120"} <= names
    tested = {tuple(r.values) for r in RECORDS}
    assert all((p, at, ct, dt) in tested for _, p, at, ct, dt in _model_records())
    assert any(r.values[1] == "bf16" for r in RECORDS)


@pytest.mark.parametrize("p,at,ct,dt", RECORDS)
def test_float32_path_is_the_float64_path_and_the_reference(p, at, ct, dt, monkeypatch):
    rng = np.random.default_rng(abs(hash((at, ct, dt, p.n, p.F))) % (1 << 32))
    K = 16
    a, b, c = _inputs(rng, at, ct, 1200, K)
    used = []
    real = B._window_sum_f32
    monkeypatch.setattr(B, "_window_sum_f32", lambda *x: used.append(1) or real(*x))
    for i, q in enumerate(_variants(p)):
        new = _run(a, b, c, q, at, ct, dt, f32=True, monkeypatch=monkeypatch)
        old = _run(a, b, c, q, at, ct, dt, f32=False, monkeypatch=monkeypatch)
        assert np.array_equal(new, old), (q, np.flatnonzero(new != old)[:5])
        # the moderate rows alone (bf16 takes the float32 path on such data only)
        sl = slice(300, 600)
        used.clear()
        mod = _run(a[sl], b[sl], c[sl], q, at, ct, dt, f32=True, monkeypatch=monkeypatch)
        assert used or q.normalise_products or q.truncation == "none"
        assert np.array_equal(mod, old[sl])
        # the scalar reference on a sample of every kind of row
        for r in list(range(0, 1200, 53)):
            av = [_decode_in(int(x), at, q) for x in a[r]]
            bv = [_decode_in(int(x), at, q) for x in b[r]]
            want = chain1(av, bv, decode1(int(c[r]), ct), q, ct, dt)
            assert int(new[r]) == want, (q, r)


def test_the_float32_path_is_taken_where_it_applies():
    f16 = decode(np.array([0x7BFF, 0x0001, 0x3C00, 0x0000], np.uint16), "f16")   # max, min subnormal, 1, 0
    assert B._range32([f16, f16]) is not None                  # every f16 product
    d = decode(np.array([0x3F80, 0x4000, 0x0000], np.uint16), "bf16")   # 1, 2, 0: moderate
    assert B._range32([d, d]) == (0, 2, 16)                     # from the data's exponents
    tiny = decode(np.array([0x0001, 0x3F80], np.uint16), "bf16")    # 2**-133: its square underflows float32
    assert B._range32([tiny, tiny]) is None
    huge = decode(np.array([0x7F7F, 0x3F80], np.uint16), "bf16")    # ~2**128: overflows it
    assert B._range32([huge, d]) is None
    t = B.product_terms([B.unpin_subnormals(decode(np.array([[0x3F80, 0x4000]], np.uint16), "f16")),
                         decode(np.array([[0x3C00, 0x4000]], np.uint16), "f16")])
    assert t.range32 is not None and t.val.dtype == np.float32 and t.e.dtype == np.int16


@pytest.mark.parametrize("chunk", [1 << 12, 1 << 14])
def test_gemm_chunked_by_tile_rows_is_unchunked(chunk, monkeypatch):
    op = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    rng = np.random.default_rng(7)
    A = _codes(rng, "f16", (64, 48))
    Bm = _codes(rng, "f16", (48, 128))
    C = _codes(rng, "f32", (64, 128))
    whole = formal.evaluate_gemm(A, Bm, C, op)
    with monkeypatch.context() as mp:
        mp.setattr(E, "CHUNK_TERMS", chunk)
        assert np.array_equal(formal.evaluate_gemm(A, Bm, C, op), whole)
    # and the matrix form, chunked along its inner axis
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32", arch="sm_90", shape=(16, 8, 16))
    a3, b3, c3 = _codes(rng, "f16", (40, 16, 16)), _codes(rng, "f16", (40, 16, 8)), _codes(rng, "f32", (40, 16, 8))
    whole = E.mma_matrices(a3, b3, c3, **kw)
    with monkeypatch.context() as mp:
        mp.setattr(E, "CHUNK_TERMS", chunk)
        assert np.array_equal(E.mma_matrices(a3, b3, c3, **kw), whole)


def _rounding_cases(rng, n):
    """(neg, mag, lsb) around every float32 boundary: ties, subnormals, overflow, zeros."""
    nb = rng.integers(0, 54, n)
    mag = (rng.integers(0, 1 << 62, n, dtype=np.int64) >> (62 - nb)).astype(np.int64)
    # ties and near-ties at the float32 rounding position of 24- to 30-bit magnitudes
    t = rng.random(n) < 0.3
    w = rng.integers(25, 31, n)
    tie = ((rng.integers(1 << 23, 1 << 24, n) << (w - 24)) + (1 << (w - 25)) + rng.integers(-1, 2, n))
    mag = np.where(t, tie, mag)
    top = rng.choice([-160, -150, -149, -127, -126, -125, -1, 0, 100, 126, 127, 128, 129], n) + rng.integers(-2, 3, n)
    lsb = top - np.maximum(1, np.frexp(mag.astype(np.float64))[1]) + 1
    lsb = np.where(rng.random(n) < 0.02, rng.integers(-1100, 1000, n), lsb)
    return rng.random(n) < 0.5, mag, lsb.astype(np.int64)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("overflow", ["ieee", "inf", "satfinite"])
def test_binary32_encode_through_float_is_the_integer_encode(mode, overflow, monkeypatch):
    from formal.numerics import formats as Fm
    rng = np.random.default_rng(11)
    neg, mag, lsb = _rounding_cases(rng, 40000)
    nan, inf = rng.random(mag.size) < 0.01, rng.random(mag.size) < 0.01
    for kw in (dict(), dict(ftz=True), dict(nan=nan, inf=inf), dict(nan=nan, nan_code=0x7FC00000)):
        used = []
        real = Fm._encode_binary32
        monkeypatch.setattr(Fm, "_encode_binary32", lambda *x: used.append(1) or real(*x))
        # in-range rows take the float path; the rest (lsb far out) the integer one
        ok = (lsb >= -1022) & (lsb <= 969)
        fast = Fm.encode(neg[ok], mag[ok], lsb[ok], "f32", mode, overflow=overflow,
                         **{k: (v[ok] if isinstance(v, np.ndarray) else v) for k, v in kw.items()})
        assert used and fast is not None
        monkeypatch.setattr(Fm, "_is_binary32", lambda f: False)
        slow = Fm.encode(neg[ok], mag[ok], lsb[ok], "f32", mode, overflow=overflow,
                         **{k: (v[ok] if isinstance(v, np.ndarray) else v) for k, v in kw.items()})
        monkeypatch.undo()
        assert np.array_equal(fast, slow), (kw, np.flatnonzero(fast != slow)[:5])


def test_binary32_decode_from_float_bits_is_the_arithmetic_decode():
    from formal.numerics import formats as Fm
    rng = np.random.default_rng(5)
    fields = np.arange(256, dtype=np.uint64) << np.uint64(23)
    u = np.concatenate([rng.integers(0, 1 << 32, 100000, dtype=np.uint64),
                        fields, fields | np.uint64(1), fields | np.uint64(0x7FFFFF),      # every exponent
                        fields | np.uint64(1 << 31), fields | np.uint64((1 << 31) | 0x400000)]).astype(np.uint32)
    fast, ref = Fm.decode(u, "f32"), Fm._decode_arith(u, Fm.get_format("f32"))
    assert fast._bits32 is not None
    v, w = np.asarray(fast.val), np.asarray(ref.val)
    assert np.array_equal(v, w) and np.array_equal(np.signbit(v), np.signbit(w))
    assert np.array_equal(fast.ealign, ref.ealign)
    assert fast.has_special() and not Fm.decode(u[:5] & np.uint32(0x3FFFFFFF), "f32").has_special()
    for name in Fm.Decoded._NAMES:       # the other fields: the arithmetic decode itself
        assert np.array_equal(getattr(Fm.decode(u, "f32"), name), getattr(ref, name)), name
