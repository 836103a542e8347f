"""Matrix-level arithmetic models.

* vectorised ``dot_terms`` == scalar Fraction ``dot_scalar`` on random inputs, for every
  path, every architecture model and the alternative hypotheses (parameter variants);
* integer paths == numpy int64 products with wrap / saturation;
* ``exact`` == the Fraction sum rounded once (rounding written here, independently);
* f64 FMA == Fraction FMA for every rounding mode incl. subnormals/overflow, and == numpy
  float64 where the product is exact;
* the sm_90 model reproduces the hand-computed predictions of numerics.md §9, and each
  alternative hypothesis gives the alternative bits listed there.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal.numerics import (MODELS, SOURCES, UnsupportedPath, dot_scalar, dot_terms, fma_f64, get_model,
                             mma_matrices, mma_scalar)
from formal.numerics import formats as F
from formal.numerics.params import mod4_groups
from formal.numerics.probes import PROBES, by_id

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# ---------------------------------------------------------------------------
# Random encodings with a bias toward the interesting cases
# ---------------------------------------------------------------------------


def gen_codes(rng, fmt: str, shape, flavour: str):
    f = F.get_format(fmt)
    n = int(np.prod(shape))
    if f.cls == "bit":
        return rng.integers(0, 2, shape).astype(np.uint8)
    if f.cls == "int":
        if fmt == "s32":
            v = rng.integers(-2**31, 2**31, n)
            if flavour != "raw":  # near the ends of the range
                v = np.where(rng.random(n) < 0.5, 2**31 - 1 - rng.integers(0, 3000, n), v)
            return (v & 0xFFFFFFFF).astype(np.uint32).reshape(shape)
        return rng.integers(0, 1 << f.bits, shape).astype(f.np_container)
    ib = f.ignored_low_bits
    fb = f.field_bits
    if flavour == "raw":
        c = rng.integers(0, 2**63, n, dtype=np.uint64) >> np.uint64(64 - f.bits if f.bits < 64 else 0)
        if f.bits == 64:
            c = c | (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63))
        return c.astype(f.np_container).reshape(shape)
    width = 2 if flavour == "cancel" else 6
    ef = rng.integers(max(0, f.bias - width), min((1 << f.exponent) - 1, f.bias + width + 1), n).astype(np.uint64)
    frac = rng.integers(0, 1 << f.mantissa, n, dtype=np.uint64) if f.mantissa else np.zeros(n, np.uint64)
    if flavour == "cancel":  # few significant bits -> exact cancellations happen
        frac &= np.uint64(((1 << f.mantissa) - 1) & ~((1 << max(0, f.mantissa - 2)) - 1))
    sign = rng.integers(0, 2, n).astype(np.uint64) if f.signed else np.zeros(n, np.uint64)
    c = (sign << np.uint64(fb - 1)) | (ef << np.uint64(f.mantissa)) | frac
    if flavour == "special":
        pick = rng.random(n)
        top = (1 << f.exponent) - 1
        specials = [0, 1, (1 << f.mantissa) - 1, f.maxfin_code]                     # 0, subnormals, max
        if f.inf:
            specials.append(top << f.mantissa)
        if f.nan_code >= 0:
            specials.append(f.nan_code)
        sp = np.array(specials, np.uint64)[rng.integers(0, len(specials), n)]
        sp |= (rng.integers(0, 2, n).astype(np.uint64) << np.uint64(fb - 1)) if f.signed else np.uint64(0)
        c = np.where(pick < 0.25, sp, c)
        c = np.where((pick >= 0.25) & (pick < 0.35), 0, c)
    c = c << np.uint64(ib)
    if ib:  # random junk in the ignored tf32 bits
        c |= rng.integers(0, 1 << ib, n).astype(np.uint64)
    return c.astype(f.np_container).reshape(shape)


def check_vs_scalar(seed, flavour, at, bt, ct, dt, K, arch, nout=12, **kw):
    rng = np.random.default_rng(seed)
    A = gen_codes(rng, at, (nout, K), flavour)
    B = gen_codes(rng, bt, (nout, K), flavour)
    C = gen_codes(rng, ct, (nout,), flavour)
    extra = {}
    if kw.get("stype"):
        st_ = kw["stype"]
        sA = gen_codes(rng, st_, (nout, K // 16 or 1), "narrow" if flavour != "special" else "special")
        sB = gen_codes(rng, st_, (nout, K // 16 or 1), "narrow" if flavour != "special" else "special")
        bs = K // sA.shape[1]
        extra = dict(scale_a=np.repeat(sA, bs, axis=1), scale_b=np.repeat(sB, bs, axis=1))
    D = dot_terms(A, B, C, atype=at, btype=bt, ctype=ct, dtype=dt, arch=arch, **kw, **extra)
    for i in range(nout):
        ex = {k: v[i] for k, v in extra.items()}
        want = dot_scalar(A[i], B[i], C[i], atype=at, btype=bt, ctype=ct, dtype=dt, arch=arch, **kw, **ex)
        assert int(D[i]) == want, (arch if isinstance(arch, str) else arch.name, i, hex(int(D[i])), hex(want),
                                   [hex(int(x)) for x in A[i]], [hex(int(x)) for x in B[i]], hex(int(C[i])))


FLAVOURS = st.sampled_from(["raw", "narrow", "cancel", "special"])
SEEDS = st.integers(0, 2**32 - 1)

# (atype, btype, ctype, dtype, K, extra kwargs)
FLOAT_PATHS = [
    ("f16", "f16", "f32", "f32", 16, {}), ("f16", "f16", "f32", "f32", 8, {}), ("f16", "f16", "f16", "f16", 16, {}),
    ("f16", "f16", "f16", "f32", 4, {}), ("bf16", "bf16", "f32", "f32", 16, {}), ("tf32", "tf32", "f32", "f32", 8, {}),
    ("tf32", "tf32", "f32", "f32", 4, {}), ("e4m3", "e5m2", "f32", "f32", 32, {}), ("e5m2", "e5m2", "f16", "f16", 32, {}),
    ("e4m3", "e4m3", "f32", "f32", 16, {}),
    # m8n8k4 .f16: on sm_90 a shape-specific FmaPipe record (FP32 FMA-pipe code), elsewhere the blocks
    ("f16", "f16", "f32", "f32", 4, {"shape": (8, 8, 4)}), ("f16", "f16", "f16", "f32", 4, {"shape": (8, 8, 4)}),
    ("f16", "f16", "f16", "f16", 4, {"shape": (8, 8, 4)}),
    # wmma on sm_90 (run3): an f16 D from an f32 C is the f32 block then F2FP (Narrowed, key "f16.f16@c=f32"),
    # an f32 D from an f16 C the f32 block; m16n16k8 tf32 is two k=4 blocks (key "tf32.f32@m16n16k8")
    ("f16", "f16", "f32", "f16", 16, {"shape": (16, 16, 16)}), ("f16", "f16", "f16", "f32", 16, {"shape": (32, 8, 16)}),
    ("tf32", "tf32", "f32", "f32", 8, {"shape": (16, 16, 8)}),
    # wgmma (M = 64) fp8: the native QGMMA block (keys "f8.f32@m64", "f8.f16@m64")
    ("e4m3", "e5m2", "f32", "f32", 32, {"shape": (64, 8, 32)}), ("e5m2", "e5m2", "f16", "f16", 32, {"shape": (64, 8, 32)}),
]
ARCHS = ["sm_90", "exact", "sm_70", "sm_80", "sm_89", "sm_100", "sm_120"]
CASES = [(p, a) for p in FLOAT_PATHS for a in ARCHS
         if all(t in MODELS[a].input_types for t in p[:2])]


def _case_id(p, a):
    shape = p[5].get("shape")
    return f"{a}-{p[0]}x{p[1]}-{p[2]}-{p[3]}-k{p[4]}" + (f"-m{shape[0]}n{shape[1]}k{shape[2]}" if shape else "")


def test_every_sm90_path_key_is_in_the_scalar_comparison():
    """Each record of the sm_90 model is reached by some FLOAT_PATHS case (or a dedicated test)."""
    sm90 = MODELS["sm_90"]
    reached = {sm90.path(at, bt, ct, dt, shape=kw.get("shape"))[0] for at, bt, ct, dt, _, kw in FLOAT_PATHS}
    dedicated = {"f64", "int", "b1"}   # test_vectorised_equals_scalar_f64, test_integer_paths_*, b1 tests
    assert set(sm90.paths) <= reached | dedicated, set(sm90.paths) - reached - dedicated


@pytest.mark.parametrize("path,arch", CASES, ids=[_case_id(p, a) for p, a in CASES])
@settings(max_examples=8, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_float(path, arch, seed, flavour):
    at, bt, ct, dt, K, kw = path
    check_vs_scalar(seed, flavour, at, bt, ct, dt, K, arch, **kw)


SUB_BYTE = [("e2m1", "e2m1"), ("e3m2", "e2m3"), ("e2m3", "e4m3")]


@pytest.mark.parametrize("arch", ["sm_120", "exact"])
@pytest.mark.parametrize("ab", SUB_BYTE)
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_f8f6f4(arch, ab, seed, flavour):
    check_vs_scalar(seed, flavour, ab[0], ab[1], "f32", "f32", 32, arch, kind="kind::f8f6f4")


@pytest.mark.parametrize("arch", ["sm_120", "exact"])
@pytest.mark.parametrize("combo", [("e2m1", "ue8m0", "kind::mxf4nvf4", 64), ("e2m1", "ue4m3", "kind::mxf4nvf4", 64),
                                   ("e4m3", "ue8m0", "kind::mxf8f6f4", 32)])
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_block_scaled(arch, combo, seed, flavour):
    t, s, kind, K = combo
    check_vs_scalar(seed, flavour, t, t, "f32", "f32", K, arch, kind=kind, stype=s, scale_vec="4X")


SM90 = MODELS["sm_90"]
VARIANTS = [
    ("f16.f32", dict(truncation="floor")), ("f16.f32", dict(truncation="none")),
    ("f16.f32", dict(normalise_products=True)), ("f16.f32", dict(c_entry="after")),
    ("f16.f32", dict(zero_sign="ieee")), ("f16.f32", dict(pin_subnormals=False)),
    ("f16.f32", dict(overflow="ieee", subnormal_output="ftz")), ("f16.f32", dict(n=4, minexp=None, F=23)),
    ("f16.f16", dict(c_as_f32=True)), ("f16.f16", dict(rounded_zero_sign="sum")),
    ("f16.f16", dict(pin_c=False, zero_sign="ieee")), ("bf16.f32", dict(pin_c=False, rounded_zero_sign="sum")),
    ("f16.f16", dict(rounding="rz", overflow="satfinite")),
    ("bf16.f32", dict(out_frac=13, F=13, rounding="rn")), ("tf32.f32", dict(tf32_conversion="rn")),
    ("tf32.f32", dict(tf32_nan="keep", zero_sign="ieee")),
    ("f16.f32", dict(zero_factor_exp=-126)), ("bf16.f32", dict(zero_factor_exp=-126)),
    ("f16.f16", dict(zero_factor_exp=-14)), ("tf32.f32", dict(zero_factor_exp=-126, minexp=None)),
    ("f16.f16", dict(minexp=None)),
]
_TYPES = {"f16.f32": ("f16", "f32", 16), "f16.f16": ("f16", "f16", 16), "bf16.f32": ("bf16", "f32", 16),
          "tf32.f32": ("tf32", "f32", 8)}


@pytest.mark.parametrize("key,over", VARIANTS, ids=[f"{k}-{'-'.join(o)}" for k, o in VARIANTS])
@settings(max_examples=8, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_hypotheses(key, over, seed, flavour):
    m = SM90.replace_path(key, **over)
    t, acc, K = _TYPES[key]
    check_vs_scalar(seed, flavour, t, t, acc, acc, K, m)


def tiny_codes(rng, fmt: str, shape, lo: int, hi: int):
    """Random-sign encodings with exponents in [lo, hi] (subnormals where below emin):
    products of two of them land near the bottom of the output's range."""
    f = F.get_format(fmt)
    n = int(np.prod(shape))
    e = rng.integers(lo, hi + 1, n)
    frac = rng.integers(0, 1 << f.mantissa, n)
    frac[rng.random(n) < 0.7] = 0             # powers of two: ties and exact cancellations happen
    v = np.ldexp(1.0 + frac / (1 << f.mantissa), e) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if fmt == "tf32":
        return F.from_float64(v, "f32", "rz").reshape(shape)
    return F.from_float64(v, fmt, "rz").reshape(shape)


# (atype, acc, exponent range of a/b, exponent range of c)
TINY = [("f16", "f16", (-20, -10), (-24, -15)), ("bf16", "f32", (-80, -70), (-149, -127)),
        ("tf32", "f32", (-80, -70), (-149, -127))]


@pytest.mark.parametrize("t,acc,ab,cr", TINY, ids=[f"{t}-{acc}" for t, acc, _, _ in TINY])
@pytest.mark.parametrize("over", [{}, dict(rounded_zero_sign="sum"), dict(pin_c=False), dict(c_as_f32=True),
                                  dict(zero_sign="ieee", rounded_zero_sign="sum", pin_c=False)],
                         ids=["sm_90", "signed-rounded-zero", "c-unpinned", "c-as-f32", "ieee-all"])
@settings(max_examples=10, deadline=None)
@given(seed=SEEDS)
def test_vectorised_equals_scalar_near_zero(t, acc, ab, cr, over, seed):
    """Sums at the bottom of the output range: nonzero sums that round to zero (their sign)
    and subnormal c (its alignment exponent), vectorised == scalar for the model and variants."""
    key = f"{t}.{acc}"
    m = SM90.replace_path(key, **over) if over else SM90
    rng = np.random.default_rng(seed)
    K = 16 if t != "tf32" else 8
    n = 64
    A = tiny_codes(rng, t, (n, K), *ab)
    B = tiny_codes(rng, t, (n, K), *ab)
    C = tiny_codes(rng, acc, (n,), *cr)
    A[rng.random((n, K)) < 0.5] = 0          # fewer terms: more exact and near-exact cancellations
    C[rng.random(n) < 0.3] = 0
    D = dot_terms(A, B, C, atype=t, btype=t, ctype=acc, dtype=acc, arch=m)
    for i in range(n):
        want = dot_scalar(A[i], B[i], C[i], atype=t, btype=t, ctype=acc, dtype=acc, arch=m)
        assert int(D[i]) == want, (i, hex(int(D[i])), hex(want))
    sign = 1 << (F.get_format(acc).bits - 1)
    if m is SM90 or not over.get("rounded_zero_sign"):
        assert not any(int(x) == sign for x in D), "the sm_90 HMMA blocks never return -0 here"


def test_rounded_zero_sign_rule_by_hand():
    """f16 accumulator: -2^-26 is a nonzero window sum (E = -21, grid 2^-46) that rounds to zero
    (below 2^-25): +0 under the model, -0 when the zero keeps the sum's sign; an exact
    cancellation is +0 under both.  bf16 -> f32: -2^-150 truncates (RZ) to zero likewise."""
    h = lambda v, t="f16": int(F.from_float64(np.float64(v), t))  # noqa: E731
    alt16 = SM90.replace_path("f16.f16", rounded_zero_sign="sum")
    kw = dict(atype="f16", btype="f16", ctype="f16", dtype="f16")
    a = np.array([h(-2.0 ** -12)], np.uint16)
    b = np.array([h(2.0 ** -14)], np.uint16)
    assert int(dot_terms(a, b, np.uint16(0x8000), arch="sm_90", **kw)) == 0x0000
    assert int(dot_terms(a, b, np.uint16(0x8000), arch=alt16, **kw)) == 0x8000
    a2 = np.array([h(1.0), h(-1.0)], np.uint16)
    b2 = np.array([h(1.0), h(1.0)], np.uint16)
    assert int(dot_terms(a2, b2, np.uint16(0), arch=alt16, **kw)) == 0x0000
    kwb = dict(atype="bf16", btype="bf16", ctype="f32", dtype="f32")
    ab = np.array([h(-2.0 ** -75, "bf16")], np.uint16)
    bb = np.array([h(2.0 ** -75, "bf16")], np.uint16)
    altb = SM90.replace_path("bf16.f32", rounded_zero_sign="sum")
    assert int(dot_terms(ab, bb, np.uint32(0x80000000), arch="sm_90", **kwb)) == 0x00000000
    assert int(dot_terms(ab, bb, np.uint32(0x80000000), arch=altb, **kwb)) == 0x80000000


def test_subnormal_c_alignment_by_hand():
    """R16 (f16 accumulator): c = 2^-23 read as an f16 aligns at -14, as an f32 at -23.
    R32 (bf16 -> f32): c = 2^-133 aligns at -126 (pinned) or -133 (its leading one)."""
    p16 = SM90.paths["f16.f16"]
    assert p16.c_as_f32 is False and p16.pin_c is True and p16.rounded_zero_sign == "positive"
    from formal.numerics import block as Bk
    t = Bk.c_terms(np.array([0x0002], np.uint16), "f16", p16)
    assert int(t.e[0, 0]) == -14
    t = Bk.c_terms(np.array([0x0002], np.uint16), "f16", p16.but(c_as_f32=True))
    assert int(t.e[0, 0]) == -23
    t = Bk.c_terms(np.array([0x0002], np.uint16), "f16", p16.but(pin_c=False))
    assert int(t.e[0, 0]) == -23
    pb = SM90.paths["bf16.f32"]
    c = np.array([0x00010000], np.uint32)     # 2^-133
    assert int(Bk.c_terms(c, "f32", pb).e[0, 0]) == -126
    assert int(Bk.c_terms(c, "f32", pb.but(pin_c=False)).e[0, 0]) == -133


EMU_VARIANTS = [dict(c_add="window"), dict(groups=((32, (tuple(range(16)), tuple(range(16, 32)))),)),
                dict(c_add="rz")]


@pytest.mark.parametrize("over", EMU_VARIANTS)
@pytest.mark.parametrize("dt", ["f32", "f16"])
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_emulation_variants(over, dt, seed, flavour):
    key = "f8." + dt
    m = SM90.with_path(key, SM90.paths[key].but(**over))
    check_vs_scalar(seed, flavour, "e4m3", "e5m2", dt, dt, 32, m)


NARROWED_VARIANTS = [dict(rounding="rz"), dict(nan_bits=None), dict(inner=SM90.paths["f16.f32"].but(n=8)),
                     dict(inner=SM90.paths["f16.f32"].but(rounding="rn", zero_sign="ieee"), rounding="rm")]


@pytest.mark.parametrize("over", NARROWED_VARIANTS, ids=["rz", "canonical-nan", "inner-n8", "inner-rn-rm"])
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_narrowed_variants(over, seed, flavour):
    """wmma f16 D from an f32 C (sm_90 key "f16.f16@c=f32"): hypotheses of the Narrowed record."""
    key = "f16.f16@c=f32"
    m = SM90.with_path(key, SM90.paths[key].but(**over))
    check_vs_scalar(seed, flavour, "f16", "f16", "f32", "f16", 16, m)


@pytest.mark.parametrize("scale_mode", ["window", "block_exact"])
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_scale_modes(scale_mode, seed, flavour):
    m = MODELS["sm_120"].replace_path("scaled.f32", scale_mode=scale_mode)
    check_vs_scalar(seed, flavour, "e2m1", "e2m1", "f32", "f32", 64, m, kind="kind::mxf4nvf4", stype="ue4m3",
                    scale_vec="4X")


@pytest.mark.parametrize("rounding", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("variant", [{}, dict(order="descending"), dict(c_first=False), dict(nan_rule="canonical"),
                                     dict(nan_priority=("a", "c", "b"), c_first=False),
                                     dict(default_nan=0x7FF8000000000000)])
@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS)
def test_vectorised_equals_scalar_f64(rounding, variant, seed, flavour):
    m = SM90.replace_path("f64", **variant) if variant else "sm_90"
    check_vs_scalar(seed, flavour, "f64", "f64", "f64", "f64", 4, m, nout=8, rounding=rounding)


@settings(max_examples=6, deadline=None)
@given(seed=SEEDS, flavour=FLAVOURS, rounding=st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_exact_f64_vs_scalar(seed, flavour, rounding):
    check_vs_scalar(seed, flavour, "f64", "f64", "f64", "f64", 8, "exact", nout=8, rounding=rounding)


# ---------------------------------------------------------------------------
# Integer paths against numpy int64
# ---------------------------------------------------------------------------

INT_FORMS = [("s8", "s8", 32), ("s8", "u8", 16), ("u8", "u8", 32), ("u4", "s4", 64), ("s4", "s4", 32)]


@pytest.mark.parametrize("at,bt,K", INT_FORMS)
@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "exact"])
@settings(max_examples=10, deadline=None)
@given(seed=SEEDS, satfinite=st.booleans(), near=st.booleans())
def test_integer_paths_equal_int64_matmul(at, bt, K, arch, seed, satfinite, near):
    rng = np.random.default_rng(seed)
    T, M, N = 3, 16, 8
    fa, fb = F.get_format(at), F.get_format(bt)
    A = rng.integers(0, 1 << fa.bits, (T, M, K)).astype(np.uint8)
    B = rng.integers(0, 1 << fb.bits, (T, K, N)).astype(np.uint8)
    cv = rng.integers(-2**31, 2**31, (T, M, N))
    if near:  # push the exact sum across +-2^31
        cv = np.where(rng.random((T, M, N)) < 0.5, 2**31 - 1 - rng.integers(0, 5000, (T, M, N)),
                      -2**31 + rng.integers(0, 5000, (T, M, N)))
    C = (cv & 0xFFFFFFFF).astype(np.uint32)
    sign = lambda x, f: np.where(f.signed & (x >= (1 << (f.bits - 1))), x.astype(np.int64) - (1 << f.bits), x)  # noqa
    exact = cv + np.matmul(sign(A, fa).astype(np.int64), sign(B, fb).astype(np.int64))
    want = np.clip(exact, -2**31, 2**31 - 1) if satfinite else exact
    want = (want & 0xFFFFFFFF).astype(np.uint32)
    D = mma_matrices(A, B, C, atype=at, btype=bt, ctype="s32", dtype="s32", arch=arch, satfinite=satfinite)
    assert D.dtype == np.uint32 and np.array_equal(D, want)


@pytest.mark.parametrize("op", ["and", "xor"])
def test_b1_popc(op):
    rng = np.random.default_rng(5)
    T, M, N, K = 4, 16, 8, 256
    A = rng.integers(0, 2, (T, M, K)).astype(np.uint8)
    B = rng.integers(0, 2, (T, K, N)).astype(np.uint8)
    cv = rng.integers(-2**31, 2**31, (T, M, N))
    cv[0, 0, 0] = 2**31 - 1                         # wraps on any set bit
    C = (cv & 0xFFFFFFFF).astype(np.uint32)
    bits = (A[:, :, None, :] & np.swapaxes(B, 1, 2)[:, None]) if op == "and" else \
        (A[:, :, None, :] ^ np.swapaxes(B, 1, 2)[:, None])
    want = ((cv + bits.sum(-1).astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32)
    D = mma_matrices(A, B, C, atype="b1", btype="b1", ctype="s32", dtype="s32", bitop=op)
    assert np.array_equal(D, want)


# ---------------------------------------------------------------------------
# exact == Fraction sum rounded once (rounding written here)
# ---------------------------------------------------------------------------

def frac_value(code, fmt):
    d = F.decode(np.array([code], dtype=F.get_format(fmt).np_container), fmt)
    if d.nan[0] or d.inf[0]:
        return None
    v = Fraction(int(d.sig[0])) * Fraction(2) ** int(d.lsb[0])
    return -v if d.neg[0] else v


def rne(v: Fraction, p: int, emin: int, emax: int):
    """Round-to-nearest-even of v to p fraction bits, exponent range [emin, emax]; None = overflow."""
    if v == 0:
        return Fraction(0)
    s = -1 if v < 0 else 1
    x = abs(v)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    e = max(e, emin)
    q = x / Fraction(2) ** (e - p)
    n = q.numerator // q.denominator
    r = q - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2):
        n += 1
    y = n * Fraction(2) ** (e - p)
    if y >= Fraction(2) ** (emax + 1):
        return None
    return s * y


@pytest.mark.parametrize("at,ct,K", [("f16", "f32", 16), ("bf16", "f32", 16), ("e4m3", "f32", 32),
                                     ("f16", "f16", 16), ("e2m1", "f32", 32)])
@settings(max_examples=10, deadline=None)
@given(seed=SEEDS, flavour=st.sampled_from(["raw", "narrow", "cancel"]))
def test_exact_is_fraction_sum_rounded_once(at, ct, K, seed, flavour):
    rng = np.random.default_rng(seed)
    A = gen_codes(rng, at, (10, K), flavour)
    B = gen_codes(rng, at, (10, K), flavour)
    C = gen_codes(rng, ct, (10,), flavour)
    D = dot_terms(A, B, C, atype=at, btype=at, ctype=ct, dtype=ct, arch="exact")
    fo = F.get_format(ct)
    for i in range(10):
        vals = [frac_value(int(x), at) for x in A[i]] + [frac_value(int(y), at) for y in B[i]]
        cval = frac_value(int(C[i]), ct)
        if any(v is None for v in vals) or cval is None:
            continue
        total = cval + sum(frac_value(int(A[i, k]), at) * frac_value(int(B[i, k]), at) for k in range(K))
        r = rne(total, fo.mantissa, fo.emin, fo.emax)
        got = frac_value(int(D[i]), ct)
        if r is None:
            assert got is None  # overflow -> Inf under round-to-nearest
        else:
            assert got == r


# ---------------------------------------------------------------------------
# f64 FMA
# ---------------------------------------------------------------------------

def dec64(x):
    return F.decode(np.asarray(x, np.float64).view(np.uint64), "f64")


def fma_frac(a, b, c, mode):
    """Independent Fraction FMA with directed rounding (finite, non-overflowing cases)."""
    v = Fraction(a) * Fraction(b) + Fraction(c)
    if v == 0:
        return None
    s = -1 if v < 0 else 1
    x = abs(v)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    e = max(e, -1022)
    q = x / Fraction(2) ** (e - 52)
    n = q.numerator // q.denominator
    r = q - n
    up = {"rn": r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2), "rz": False,
          "rm": r > 0 and s < 0, "rp": r > 0 and s > 0}[mode]
    return s * (n + up) * Fraction(2) ** (e - 52)


@settings(max_examples=200, deadline=None)
@given(a=st.floats(allow_nan=False, allow_infinity=False, width=64),
       b=st.floats(allow_nan=False, allow_infinity=False, width=64),
       c=st.floats(allow_nan=False, allow_infinity=False, width=64),
       mode=st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_fma_f64_vs_fraction(a, b, c, mode):
    got = F.to_float64(fma_f64(dec64([a]), dec64([b]), dec64([c]), mode), "f64")[0]
    want = fma_frac(a, b, c, mode)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if want is None:
        assert got == 0
    elif abs(want) > Fraction(np.finfo(np.float64).max):
        # overflow: rn -> Inf; rz -> max; rm/rp by direction
        big = float(np.finfo(np.float64).max)
        exp = {"rn": np.inf, "rz": big, "rm": big if exact > 0 else np.inf,
               "rp": np.inf if exact > 0 else big}[mode]
        assert abs(got) == exp and np.sign(got) == np.sign(float(exact > 0) - 0.5)
    else:
        assert Fraction(got) == want


def test_fma_f64_hand_cases():
    f = lambda a, b, c, m="rn": F.to_float64(fma_f64(dec64([a]), dec64([b]), dec64([c]), m), "f64")[0]  # noqa
    # (1+2^-52)(1-2^-52) - 1 = -2^-104 exactly: an FMA keeps it, a separate multiply would give 0
    assert f(1 + 2**-52, 1 - 2**-52, -1.0) == -(2.0**-104)
    # subnormal result: 2^-1074 is the smallest; 2^-1075 ties to even (0), a bit more rounds up
    assert f(2.0**-538, 2.0**-537, 0.0) == 0.0                     # 2^-1075: tie -> 0 (even)
    assert f(2.0**-538, 2.0**-537, 0.0, "rp") == 2.0**-1074
    assert f(3 * 2.0**-538, 2.0**-537, 0.0) == 2 * 2.0**-1074     # 3*2^-1075 = 1.5 ulp -> 2 ulp (even)
    assert f(3 * 2.0**-539, 2.0**-537, 0.0) == 2.0**-1074         # 0.75 ulp -> 1 ulp
    # signed zeros (IEEE 754 6.3): x - x = +0 (rn), -0 (rm); -0 + -0 = -0
    assert np.signbit(f(1.0, 1.0, -1.0, "rm")) and not np.signbit(f(1.0, 1.0, -1.0, "rn"))
    assert np.signbit(f(-0.0, 1.0, -0.0)) and not np.signbit(f(-0.0, 1.0, 0.0))
    # overflow per mode
    big = float(np.finfo(np.float64).max)
    assert f(big, 2.0, 0.0) == np.inf and f(big, 2.0, 0.0, "rz") == big
    assert f(-big, 2.0, 0.0, "rp") == -big and f(-big, 2.0, 0.0, "rm") == -np.inf
    # specials
    assert np.isnan(f(np.inf, 0.0, 1.0)) and np.isnan(f(np.inf, 1.0, -np.inf)) and f(np.inf, -1.0, 5.0) == -np.inf


def test_fma_f64_exact_products_match_numpy_add():
    """Where a*b is exact in binary64 (few significant bits), fma(a,b,c) = fl(a*b + c)."""
    rng = np.random.default_rng(7)
    a = rng.integers(-2**20, 2**20, 5000) * 2.0 ** rng.integers(-600, 600, 5000)
    b = rng.integers(-2**20, 2**20, 5000) * 2.0 ** rng.integers(-300, 300, 5000)
    c = rng.standard_normal(5000) * 2.0 ** rng.integers(-900, 900, 5000)
    ok = np.isfinite(a * b) & (np.abs(a * b) > 2.0**-1000)
    a, b, c = a[ok], b[ok], c[ok]
    got = F.to_float64(fma_f64(dec64(a), dec64(b), dec64(c)), "f64")
    assert np.array_equal(got, a * b + c)


# ---------------------------------------------------------------------------
# numerics.md §9: hand-computed predictions of the sm_90 model and its alternatives
# ---------------------------------------------------------------------------

# (probe id, hypothesis) -> bits, transcribed from the table of numerics.md §9
NOTES_ALTERNATIVES = {
    ("A", "F=26"): 0x3F800001, ("B", "floor (two's complement)"): 0x3F7FFFFF,
    ("B", "RZ of the exact sum"): 0x3F7FFFFF, ("C", "RNE"): 0x3F800001, ("D9", "n=8"): 0x40000000,
    ("E1", "late c"): 0x32800000, ("E2", "late c"): 0x33000000, ("F", "normalised products"): 0x00000000,
    ("G", "no clamp"): 0x000001FF, ("H1", "IEEE RZ (max finite)"): 0x7F7FFFFF,
    ("H2", "IEEE RZ (max finite)"): 0x7F7FFFFF, ("H3", "exact sum"): 0x3F800000, ("P", "RZ"): 0x3C00,
    ("R", "true exponents"): 0x33800080, ("K1", "RN conversion"): 0x3F802000,
    ("M1", "native fp8 block"): 0x00000000, ("M2", "sequential 16+16"): 0x33800000,
    ("M3", "native fp8 block"): 0x00000000, ("S2i", "IEEE zero signs"): 0x00000000,
    ("S2ii", "IEEE zero signs"): 0x00000000, ("S2iii", "IEEE zero signs"): 0x80000000,
    ("I2", "per-step saturation"): 2**31 - 1 - 16129, ("D64", "descending"): 0x0,
    ("D64", "exact sum"): 0x4000000000000000,
}


@pytest.mark.parametrize("probe", [p for p in PROBES if p.notes_expect is not None], ids=lambda p: p.id)
def test_probe_sm90_prediction_matches_hand_computation(probe):
    assert probe.predictions()["sm_90"] == probe.notes_expect


@pytest.mark.parametrize("key", sorted(NOTES_ALTERNATIVES), ids=lambda k: f"{k[0]}-{k[1]}")
def test_probe_alternative_predictions(key):
    pid, hyp = key
    assert by_id(pid).predictions()[hyp] == NOTES_ALTERNATIVES[key]


def test_probes_well_formed_and_mostly_decisive():
    ids = [p.id for p in PROBES]
    assert len(ids) == len(set(ids))
    decisive = [p.id for p in PROBES if p.decisive()]
    assert len(decisive) >= 0.7 * len(PROBES)
    for p in PROBES:
        assert next(iter(p.hypotheses)) == "sm_90"
        A, B, C = p.matrices()
        M, N, K = p.mnk
        assert A.shape == (M, K) and B.shape == (K, N) and C.shape == (M, N)
        D = p.expected_d()
        assert D.shape == (M, N) and int(D[0, 0]) == p.predictions()["sm_90"]
        d = p.to_dict()
        assert d["predictions"]["sm_90"] == hex(p.predictions()["sm_90"])


def test_probe_full_d_other_outputs_are_c():
    """Outputs other than D[0][0] see only zero products: D = C there (here +0)."""
    p = by_id("A")
    D = p.expected_d()
    assert int(D[0, 0]) == 0x3F800000 and not D.ravel()[1:].any()


# ---------------------------------------------------------------------------
# Model structure and specific behaviours
# ---------------------------------------------------------------------------

def test_models_registry():
    for name in ("sm_90", "exact", "sm_70", "sm_80", "sm_89", "sm_100", "sm_120"):
        m = MODELS[name]
        assert m.name == name and m.evidence and m.sources
        assert all(s in SOURCES for s in m.sources)
        for key, p in m.paths.items():
            assert p.evidence, (name, key)
    assert get_model("sm_90a") is MODELS["sm_90"]
    with pytest.raises(UnsupportedPath):
        dot_terms(np.zeros(32, np.uint8), np.zeros(32, np.uint8), np.uint32(0), atype="e4m3", btype="e4m3",
                  ctype="f32", dtype="f32", arch="sm_80")
    with pytest.raises(UnsupportedPath):
        dot_terms(np.zeros(32, np.uint8), np.zeros(32, np.uint8), np.uint32(0), atype="e2m1", btype="e2m1",
                  ctype="f32", dtype="f32", arch="sm_90")


def enc(v, t):
    return F.from_float64(np.asarray(v, np.float64), t)


def test_sm80_chains_two_8_blocks_and_sm90_one_16_block():
    # c = 1+2^-23, k0: 1*1, k9: 2^-23: one 16-term block keeps 2+2^-22; 8-term blocks lose 2^-23 twice
    a = np.zeros(16); b = np.zeros(16)
    a[0] = b[0] = 1.0; a[9] = 2.0**-12; b[9] = 2.0**-11
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32")
    c = enc(1 + 2.0**-23, "f32")
    assert int(dot_terms(enc(a, "f16"), enc(b, "f16"), c, arch="sm_90", **kw)) == 0x40000001
    assert int(dot_terms(enc(a, "f16"), enc(b, "f16"), c, arch="sm_80", **kw)) == 0x40000000
    assert int(dot_terms(enc(a, "f16"), enc(b, "f16"), c, arch="exact", **kw)) == 0x40000001


def test_sm89_fp8_output_keeps_13_fraction_bits():
    rng = np.random.default_rng(9)
    A = enc(rng.standard_normal((200, 32)), "e4m3")
    B = enc(rng.standard_normal((200, 32)), "e4m3")
    C = enc(rng.standard_normal(200), "f32")
    D = dot_terms(A, B, C, atype="e4m3", btype="e4m3", ctype="f32", dtype="f32", arch="sm_89")
    assert not np.any(D & np.uint32(0x3FF))
    # the emulated sm_90 path adds c with a full-precision FADD: low bits survive
    D90 = dot_terms(A, B, C, atype="e4m3", btype="e4m3", ctype="f32", dtype="f32", arch="sm_90")
    assert np.any(D90 & np.uint32(0x3FF))


def test_mma_matrices_matches_per_element_and_scalar():
    rng = np.random.default_rng(10)
    T, M, N, K = 2, 16, 8, 16
    A = enc(rng.standard_normal((T, M, K)), "bf16")
    B = enc(rng.standard_normal((T, K, N)), "bf16")
    C = enc(rng.standard_normal((T, M, N)), "f32")
    kw = dict(atype="bf16", btype="bf16", ctype="f32", dtype="f32")
    D = mma_matrices(A, B, C, **kw)
    assert D.shape == (T, M, N) and D.dtype == np.uint32
    S = np.array(mma_scalar(A.tolist(), B.tolist(), C.tolist(), **kw), dtype=np.uint32)
    assert np.array_equal(D, S)
    assert int(D[1, 3, 5]) == int(dot_terms(A[1, 3], B[1, :, 5], C[1, 3, 5], **kw))


def test_large_batch_chunking_consistent():
    rng = np.random.default_rng(11)
    T = 700  # > one chunk
    A = enc(rng.standard_normal((T, 16, 16)), "f16")
    B = enc(rng.standard_normal((T, 16, 8)), "f16")
    C = enc(rng.standard_normal((T, 16, 8)), "f32")
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32")
    D = mma_matrices(A, B, C, **kw)
    D2 = np.concatenate([mma_matrices(A[i:i + 1], B[i:i + 1], C[i:i + 1], **kw) for i in range(0, T, 97)])
    assert np.array_equal(D[::97], D2)


def test_fp8_emulation_groups_are_k_mod_4():
    g = MODELS["sm_90"].paths["f8.f32"].groups_for(32)
    assert g == mod4_groups(32)
    assert g[0][:6] == (0, 1, 4, 5, 8, 9) and len(g[0]) == len(g[1]) == 16


def test_nan_and_inf_semantics_sm90():
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32", arch="sm_90")
    z = np.zeros(16, np.uint16)
    a = z.copy(); a[0] = 0x7C00      # +Inf
    b = z.copy(); b[0] = 0x3C00      # 1
    assert int(dot_terms(a, b, np.uint32(0x3F800000), **kw)) == 0x7F800000
    b[0] = 0                          # Inf * 0
    assert int(dot_terms(a, b, np.uint32(0), **kw)) == 0x7FFFFFFF
    b[0] = 0x3C00
    assert int(dot_terms(a, b, np.uint32(0xFF800000), **kw)) == 0x7FFFFFFF   # +Inf + -Inf
    assert int(dot_terms(z, z, np.uint32(0x7FC00001), **kw)) == 0x7FFFFFFF   # NaN c
    # f16 accumulator: canonical 0x7FFF
    assert int(dot_terms(a, z, np.uint16(0), atype="f16", btype="f16", ctype="f16", dtype="f16")) == 0x7FFF


def test_fit_decide_and_score():
    from formal.numerics.fit import decide, score

    v = {x.probe: x for x in decide({"A": 0x3F800001, "C": 0x3F800000, "M2": 0x33800000})}
    assert v["A"].survivors == ["F=26"] and not v["A"].model_ok
    assert v["C"].model_ok and v["C"].survivors == ["sm_90"]
    assert set(v["M2"].survivors) == {"sequential 16+16", "even/odd"}
    # a full D whose other outputs are not +0 is flagged
    D = by_id("P").expected_d().copy()
    D[3, 3] = 0x3C00
    (verdict,) = decide({"P": D})
    assert verdict.model_ok and "<other outputs differ>" in verdict.predictions
    # score: the sm_80 model disagrees with sm_90-generated data, sm_90 does not
    rng = np.random.default_rng(12)
    A = enc(rng.standard_normal((20, 16, 16)) * 2.0 ** rng.integers(-8, 8, (20, 16, 16)), "f16")
    B = enc(rng.standard_normal((20, 16, 8)), "f16")
    C = enc(rng.standard_normal((20, 16, 8)), "f32")
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32")
    D = mma_matrices(A, B, C, arch="sm_90", **kw)
    s = score(A, B, C, D, {"sm_90": "sm_90", "sm_80": "sm_80"}, **kw)
    assert s["sm_90"] == 0 and s["sm_80"] > 0


# ---------------------------------------------------------------------------
# The fast binary64 FMA (float64 error-free transformations) against the exact ones
# ---------------------------------------------------------------------------

def _f64_batch(rng, n, kind):
    u = lambda lo, hi: rng.integers(lo, hi, n).astype(np.uint64)  # noqa: E731
    if kind == "bits":
        return rng.integers(0, 2**64, n, dtype=np.uint64)
    lo, hi = {"near": (1023 - 60, 1023 + 60), "tiny": (0, 120), "huge": (1900, 2047), "wide": (0, 2047)}[kind]
    m = rng.integers(0, 2**52, n, dtype=np.uint64)
    if rng.random() < 0.5:   # short significands: exact products, ties and cancellations
        m &= np.uint64(~((1 << 40) - 1) & (2**52 - 1))
    return (u(0, 2) << np.uint64(63)) | (u(lo, hi) << np.uint64(52)) | m


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_fast_fma_f64_equals_exact(mode):
    from formal.numerics.engine import fma_f64_codes

    rng = np.random.default_rng({"rn": 1, "rz": 2, "rm": 3, "rp": 4}[mode])
    kinds = ["bits", "near", "tiny", "huge", "wide"]
    specials = np.array([0, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000001, 1,
                         0x000FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF, 0x0010000000000000], np.uint64)
    n = 3000
    for ka in kinds:
        for kc in kinds:
            a, b, c = _f64_batch(rng, n, ka), _f64_batch(rng, n, ka if rng.random() < 0.5 else "near"), \
                _f64_batch(rng, n, kc)
            pick = rng.random((3, n)) < 0.05
            a, b, c = (np.where(pk, specials[rng.integers(0, len(specials), n)], x) for pk, x in zip(pick, (a, b, c)))
            with np.errstate(all="ignore"):   # c close to -a*b: cancellations
                pr = a.view(np.float64) * b.view(np.float64)
                c = np.where(rng.random(n) < 0.3, (-pr).view(np.uint64), c)
            fast = fma_f64_codes(a, b, c, mode, 0x7FF8000000000123)
            exact = fma_f64(F.decode(a, "f64"), F.decode(b, "f64"), F.decode(c, "f64"), mode, 0x7FF8000000000123)
            bad = np.flatnonzero(fast != exact)
            assert not len(bad), (mode, ka, kc, [hex(int(x[bad[0]])) for x in (a, b, c, fast, exact)])


@settings(max_examples=150, deadline=None)
@given(a=st.floats(allow_nan=False, allow_infinity=False, width=64),
       b=st.floats(allow_nan=False, allow_infinity=False, width=64),
       c=st.floats(allow_nan=False, allow_infinity=False, width=64),
       mode=st.sampled_from(["rn", "rz", "rm", "rp"]))
def test_fast_fma_f64_vs_fraction(a, b, c, mode):
    from formal.numerics.engine import fma_f64_codes

    codes = [np.array([x]).view(np.uint64) for x in (a, b, c)]
    got = fma_f64_codes(*codes, mode)
    want = fma_f64(*(F.decode(x, "f64") for x in codes), mode)
    assert int(got[0]) == int(want[0])


# ---------------------------------------------------------------------------
# sm_90 paths pinned by silicon (H100 run1; tests/test_numerics_hw_data.py has the data)
# ---------------------------------------------------------------------------

def test_m8n8k4_f16_runs_on_the_fma_pipe_only_with_its_shape():
    sm90 = MODELS["sm_90"]
    assert sm90.path("f16", "f16", "f32", "f32", shape=(8, 8, 4))[0] == "f16.f32@m8n8k4"
    assert sm90.path("f16", "f16", "f16", "f16", shape=(8, 8, 4))[0] == "f16.f16@m8n8k4"
    assert sm90.path("f16", "f16", "f32", "f32", shape=(16, 8, 16))[0] == "f16.f32"
    assert sm90.path("f16", "f16", "f32", "f32")[0] == "f16.f32"
    # 2^-25 + 1 - 1 (k = 0, 1, 2): the FFMA chain rounds 1 + 2^-25 to 1; the tensor-core block keeps 2^-25
    a = enc([2.0**-13, 1.0, -1.0, 0.0], "f16")
    b = enc([2.0**-12, 1.0, 1.0, 0.0], "f16")
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32")
    assert int(dot_terms(a, b, np.uint32(0), shape=(8, 8, 4), **kw)) == 0
    assert int(dot_terms(a, b, np.uint32(0), **kw)) == 0x33000000
    # f16 D: g0 = a0 b0 + a1 b1 and g1 = a2 b2 + a3 b3, each rounded in f32, then (c + g0) + g1, RNE to f16.
    # products 1, 2^-11, 2^-24, 2^-24: g1 = 2^-23 exactly lifts 1 + 2^-11 above the f16 tie -> 1 + 2^-10;
    # one f32 chain would lose each 2^-24 (ties to even) and give 1 + 2^-11 -> 1.0 (tie to even)
    a = enc([1.0, 2.0**-11, 2.0**-12, 2.0**-12], "f16")
    b = enc([1.0, 1.0, 2.0**-12, 2.0**-12], "f16")
    kw16 = dict(atype="f16", btype="f16", ctype="f16", dtype="f16", shape=(8, 8, 4))
    assert int(dot_terms(a, b, enc(0.0, "f16"), **kw16)) == 0x3C01
    chain = MODELS["sm_90"].with_path("f16.f16@m8n8k4", MODELS["sm_90"].paths["f16.f16@m8n8k4"].but(
        groups=((0, 1, 2, 3),)))
    assert int(dot_terms(a, b, enc(0.0, "f16"), arch=chain, **kw16)) == 0x3C00


def test_fp8_k16_is_two_hmma1688_over_k_mod_4():
    g = MODELS["sm_90"].paths["f8.f32"].groups_for(16)
    assert g == mod4_groups(16) and g[0] == (0, 1, 4, 5, 8, 9, 12, 13)


def test_f64_nan_rule_sm90():
    kw = dict(atype="f64", btype="f64", ctype="f64", dtype="f64", arch="sm_90")
    z = np.zeros(4, np.uint64)
    one = 0x3FF0000000000000
    a = z.copy(); a[0] = 0x7FF0000000000123            # signalling NaN in a
    b = z.copy(); b[0] = 0xFFF8000000000456            # quiet NaN in b: b wins
    assert int(dot_terms(a, b, np.uint64(0), **kw)) == 0xFFF8000000000456
    b[0] = one
    assert int(dot_terms(a, b, np.uint64(0), **kw)) == 0x7FF8000000000123          # a's, quieted
    assert int(dot_terms(a, b, np.uint64(0x7FF4000000000789), **kw)) == 0x7FFC000000000789   # c beats a
    a[0] = 0x7FF0000000000000; b[0] = 0                 # Inf * 0: the negative default NaN
    assert int(dot_terms(a, b, np.uint64(one), **kw)) == 0xFFF8000000000000
    a[1] = 0x7FF8000000000ABC; b[1] = one               # ... which then beats a later a NaN
    assert int(dot_terms(a, b, np.uint64(0), **kw)) == 0xFFF8000000000000
