"""Exact codecs: every float decoder checked two independent ways (ml_dtypes / numpy, and a
Fraction formula written here from the IEEE definitions), encoders against a Fraction
rounding, numpy/ml_dtypes round-to-nearest and hand-computed IEEE values."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formal.numerics import formats as F
from formal.numerics.reference import encode1, value_of

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ML = {
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2, "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn,
    "e2m1": ml_dtypes.float4_e2m1fn, "ue8m0": ml_dtypes.float8_e8m0fnu,
}


def frac_decode(code: int, f: F.Format):
    """Textbook decode written independently of formats.decode: value or 'nan'/'inf'."""
    code >>= f.ignored_low_bits
    w = f.bits - f.ignored_low_bits
    s = (code >> (w - 1)) & 1 if f.signed else 0
    e = (code >> f.mantissa) & ((1 << f.exponent) - 1)
    m = code & ((1 << f.mantissa) - 1)
    top = (1 << f.exponent) - 1
    if f.nan == "ieee" and e == top and m:
        return "nan"
    if isinstance(f.nan, tuple) and code in f.nan:
        return "nan"
    if f.inf and e == top and m == 0:
        return "-inf" if s else "inf"
    if e == 0 and f.subnormal:
        v = Fraction(m, 1 << f.mantissa) * Fraction(2) ** (1 - f.bias)
    else:
        v = (1 + Fraction(m, 1 << f.mantissa)) * Fraction(2) ** (e - f.bias)
    return -v if s else v


def decoded_fraction(d: F.Decoded, i: int):
    if d.nan.flat[i]:
        return "nan"
    if d.inf.flat[i]:
        return "-inf" if d.neg.flat[i] else "inf"
    v = Fraction(int(d.sig.flat[i])) * Fraction(2) ** int(d.lsb.flat[i])
    return -v if d.neg.flat[i] else v


def test_formats_loaded_from_spec():
    fm = F.format_table()
    for name in ("f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue8m0",
                 "ue4m3", "s8", "u8", "s4", "u4", "b1", "s32"):
        assert name in fm
    # derived limits, hand-checked against the IEEE / OCP definitions
    assert F.get_format("f16").maxfin_code == 0x7BFF          # 65504
    assert F.get_format("e4m3").maxfin_code == 0x7E           # 448: 0x7f is NaN
    assert F.get_format("e5m2").maxfin_code == 0x7B           # 57344
    assert F.get_format("e2m1").maxfin_code == 0x7            # 6.0
    assert F.get_format("ue8m0").maxfin_code == 0xFE          # 2^127
    assert F.get_format("f32").emin == -126 and F.get_format("f64").emin == -1022


@pytest.mark.parametrize("name", sorted(ML))
def test_decode_exhaustive_vs_ml_dtypes(name):
    codes = F.all_codes(name)
    got = F.to_float64(codes, name)
    t = ML[name]
    raw = codes.astype(np.uint16 if np.dtype(t).itemsize == 2 else np.uint8)
    want = raw.view(t).astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))  # signed zeros


def _check_fraction(name, stride):
    f = F.get_format(name)
    codes = F.all_codes(name)
    d = F.decode(codes, name)
    for i in range(0, codes.size, stride):
        assert decoded_fraction(d, i) == frac_decode(int(codes[i]), f), hex(int(codes[i]))


@pytest.mark.parametrize("name", ["f16", "bf16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue8m0", "ue4m3"])
def test_decode_vs_fraction(name):
    """Every code of the 8-bit-or-less formats; every 7th code of f16/bf16 (all of them: slow)."""
    _check_fraction(name, 1 if F.get_format(name).field_bits <= 8 else 7)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["f16", "bf16"])
def test_decode_exhaustive_vs_fraction_16bit(name):
    _check_fraction(name, 1)


def test_ue4m3_is_unsigned_e4m3():
    codes = np.arange(128, dtype=np.uint8)
    got = F.to_float64(codes, "ue4m3")
    want = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(got[0x7F]) and got[0x7E] == 448.0


def test_tf32_reads_f32_container_high_19_bits():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    got = F.to_float64(codes, "tf32")
    want = (codes & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    # a NaN whose payload lives only in the dropped 13 bits decodes as Inf (blind truncation)
    assert F.to_float64(np.array([0x7F800001], np.uint32), "tf32")[0] == np.inf


@pytest.mark.parametrize("name,np_t,bits", [("f32", np.float32, 32), ("f64", np.float64, 64)])
def test_decode_wide_vs_numpy(name, np_t, bits):
    rng = np.random.default_rng(2)
    ut = np.uint32 if bits == 32 else np.uint64
    codes = rng.integers(0, 2**63, 20000, dtype=np.uint64)
    codes = (codes ^ (codes << np.uint64(1))).astype(ut)
    edge = [0, 1, (1 << (bits - 1)), (1 << (bits - 1)) | 1]
    codes = np.concatenate([codes, np.array(edge, ut)])
    got = F.to_float64(codes, name)
    want = codes.view(np_t).astype(np.float64)
    assert np.array_equal(got, want, equal_nan=True)
    f = F.get_format(name)
    d = F.decode(codes, name)
    for i in range(0, codes.size, 97):
        assert decoded_fraction(d, i) == frac_decode(int(codes[i]), f)


@pytest.mark.parametrize("name", ["s8", "u8", "s4", "u4", "b1", "s32"])
def test_int_decode(name):
    f = F.get_format(name)
    codes = np.arange(min(1 << f.bits, 4096), dtype=np.uint64)
    v = F.int_values(codes, name)
    lo = -(1 << (f.bits - 1)) if f.signed else 0
    want = np.where((codes >= (1 << (f.bits - 1))) & f.signed, codes.astype(np.int64) - (1 << f.bits),
                    codes.astype(np.int64))
    assert np.array_equal(v, want) and v.min() >= lo


def test_bitlen():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2**63, 5000, dtype=np.int64) >> rng.integers(0, 63, 5000)
    x = np.concatenate([x, [0, 1, 2, 3, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1]]).astype(np.int64)
    assert [int(b) for b in F.bitlen(x)] == [int(v).bit_length() for v in x]


# ---------------------------------------------------------------------------
# Encode
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name,t", [("f16", np.float16), ("f32", np.float32), ("bf16", ml_dtypes.bfloat16),
                                    ("e5m2", ml_dtypes.float8_e5m2), ("e4m3", ml_dtypes.float8_e4m3fn)])
def test_encode_rn_vs_numpy_and_ml_dtypes(name, t):
    rng = np.random.default_rng(4)
    f = F.get_format(name)
    scale = 2.0 ** rng.integers(f.emin - f.mantissa - 3, f.emax + 2, 20000)
    x = rng.standard_normal(20000) * scale
    if name == "e4m3":   # ml_dtypes maps e4m3fn overflow to NaN, as does encode(overflow="ieee")
        pass
    got = F.from_float64(x, name)
    want = x.astype(t)
    wbits = want.view(np.uint32 if f.bits == 32 else np.uint16 if f.bits == 16 else np.uint8)
    gn = np.isnan(F.to_float64(got, name))
    wn = np.isnan(want.astype(np.float64))
    assert np.array_equal(gn, wn)
    assert np.array_equal(got[~gn].astype(np.uint64), wbits[~wn].astype(np.uint64))


def test_encode_hand_computed():
    e = lambda v, fmt, mode="rn", **kw: int(F.from_float64(np.float64(v), fmt, mode, **kw))  # noqa: E731
    # f16: 65504 is max; 65520 is the midpoint to 65536 -> ties-to-even rounds up -> Inf
    assert e(65519.0, "f16") == 0x7BFF and e(65520.0, "f16") == 0x7C00
    assert e(65520.0, "f16", "rz") == 0x7BFF                      # RZ never rounds up to Inf
    assert e(-1e6, "f16", "rm") == 0xFC00 and e(-1e6, "f16", "rp") == 0xFBFF
    assert e(1e6, "f16", "rm") == 0x7BFF and e(1e6, "f16", "rp") == 0x7C00
    assert e(1e6, "f16", "rz", overflow="inf") == 0x7C00
    assert e(1e6, "f16", overflow="satfinite") == 0x7BFF
    # f16 subnormals: 2^-25 is half the smallest subnormal: tie -> even (0); a hair more -> 0x0001
    assert e(2.0**-25, "f16") == 0x0000 and e(2.0**-25 * (1 + 2**-30), "f16") == 0x0001
    assert e(3 * 2.0**-25, "f16") == 0x0002                       # 1.5 ulp -> 2 (even)
    assert e(-(2.0**-26), "f16", "rm") == 0x8001 and e(2.0**-26, "f16", "rp") == 0x0001
    assert e(2.0**-26, "f16", "rz") == 0 and e(-(2.0**-26), "f16", "rz") == 0x8000  # signed zero kept
    # f32: 1 + 2^-24 is a tie -> even (1.0); + 2^-30 -> up
    assert e(1 + 2.0**-24, "f32") == 0x3F800000 and e(1 + 2.0**-24 + 2.0**-30, "f32") == 0x3F800001
    assert e(1 + 2.0**-24, "f32", "rna") == 0x3F800001
    assert e(1 + 2.0**-30, "f32", "rp") == 0x3F800001 and e(-(1 + 2.0**-30), "f32", "rm") == 0xBF800001
    # reduced output precision: an e8m13 accumulator in an f32 container (low 10 bits zero)
    assert int(F.from_float64(np.float64(1 + 2.0**-13 + 2.0**-14), "f32", "rz", frac_bits=13)) == 0x3F800400
    # e4m3: 448 max, 464 is the midpoint to 480 (the NaN slot) -> tie to even = 448; 480 -> NaN
    assert e(464.0, "e4m3") == 0x7E and e(470.0, "e4m3") == 0x7F
    assert e(1000.0, "e4m3", overflow="satfinite") == 0x7E
    # e2m1 has neither Inf nor NaN: overflow saturates to 6.0
    assert e(100.0, "e2m1") == 0x7 and e(-100.0, "e2m1") == 0xF
    # tf32 encodings live in the high 19 bits of an f32 container
    assert int(F.from_float64(np.float64(1 + 2.0**-11), "tf32", "rn")) == 0x3F800000  # tie -> even
    assert int(F.from_float64(np.float64(1 + 2.0**-11 + 2.0**-20), "tf32", "rn")) == 0x3F802000


MODES = ["rn", "rna", "rz", "rm", "rp"]
ENC_FORMATS = ["f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue4m3"]


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(ENC_FORMATS), mode=st.sampled_from(MODES),
       overflow=st.sampled_from(["ieee", "inf", "satfinite"]),
       neg=st.booleans(), mag=st.integers(0, 2**62), lsb=st.integers(-1200, 1100),
       big=st.booleans(), ftz=st.booleans())
def test_encode_vs_fraction_reference(name, mode, overflow, neg, mag, lsb, big, ftz):
    f = F.get_format(name)
    if not big:  # bring the value near the format's range most of the time
        lsb = lsb % (f.emax - f.emin + 2 * f.mantissa + 70) + f.emin - f.mantissa - 40 - mag.bit_length() + 20
    if not f.signed:
        neg = False
    got = int(F.encode(np.array([neg]), np.array([mag], np.int64), np.array([lsb]), name, mode,
                       overflow=overflow, ftz=ftz)[0])
    v = Fraction(mag) * Fraction(2) ** lsb
    want = encode1(-v if neg else v, name, mode, overflow=overflow, ftz=ftz, zero_neg=neg)
    assert got == want


@settings(max_examples=200, deadline=None)
@given(mode=st.sampled_from(MODES), neg=st.booleans(), mag=st.integers(1, 2**300), lsb=st.integers(-1400, 700))
def test_encode_object_magnitudes_sticky(mode, neg, mag, lsb):
    """Python-int magnitudes beyond 64 bits are compressed with a sticky bit: still exact."""
    arr = np.empty(1, dtype=object)
    arr[0] = mag
    got = int(F.encode(np.array([neg]), arr, np.array([lsb]), "f64", mode)[0])
    v = Fraction(mag) * Fraction(2) ** lsb
    assert got == encode1(-v if neg else v, "f64", mode)


def test_encode_round_trip_every_code():
    for name in ["f16", "bf16", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue4m3", "ue8m0"]:
        codes = F.all_codes(name)
        d = F.decode(codes, name)
        back = F.encode(d.neg, d.sig, d.lsb, name, "rn", nan=d.nan, inf=d.inf)
        fin = ~d.nan
        assert np.array_equal(back[fin], codes[fin]), name
        assert np.all(F.decode(back[d.nan], name).nan)


def test_convert_fp8_to_f16_is_exact():
    for name in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"]:
        codes = F.all_codes(name)
        v = F.to_float64(codes, name)
        h = F.convert(codes, name, "f16")
        assert np.array_equal(F.to_float64(h, "f16"), v, equal_nan=True)


def test_reference_value_of_matches_decode():
    for code, want in [(0x3C00, Fraction(1)), (0x0001, Fraction(1, 2**24)), (0x7C00, "+inf"), (0xFC00, "-inf"),
                       (0x7E00, "nan"), (0x8000, Fraction(0))]:
        assert value_of(code, "f16") == want


# ---------------------------------------------------------------------------
# numpy 2.5: Python ints beyond the other operand's dtype in np.where raise OverflowError
# (numpy 2.4 wrapped them silently).  The f64 NaN codes are such ints (0xFFF8... > 2**63):
# the run2 device run (numpy 2.5.2) lost its five f64 order probes to this.
# ---------------------------------------------------------------------------

F64_NEG_QNAN = 0xFFF8000000000000


@pytest.mark.parametrize("nan_code", [F64_NEG_QNAN, 0xFFFFFFFFFFFFFFFF, 0x7FF8000000000001, 0x8000000000000001])
def test_f64_encode_nan_codes_above_int64(nan_code):
    """encode(..., nan_code) returns the exact 64-bit pattern, whatever its top bit."""
    out = F.encode(np.array([False, True, False]), np.array([0, 3, 1]), np.array([0, 0, -1]), "f64",
                   nan=np.array([True, True, False]), nan_code=nan_code)
    assert out.dtype == np.uint64
    assert [int(x) for x in out] == [nan_code, nan_code, 0x3FE0000000000000]


def test_f64_nan_code_paths_of_the_engine():
    """Every engine entry that takes an f64 NaN code: FADD-like add (the "c last" hypothesis),
    the exact and the fast FMA, and a whole f64 MMA chain with the negative default NaN."""
    from formal.numerics import MODELS, add_rounded, dot_terms, fma_f64
    from formal.numerics.engine import fma_f64_codes

    pinf, ninf, one = 0x7FF0000000000000, 0xFFF0000000000000, 0x3FF0000000000000
    got = add_rounded(np.array([pinf], np.uint64), "f64", np.array([ninf], np.uint64), "f64", "f64",
                      nan_code=F64_NEG_QNAN)
    assert int(got[0]) == F64_NEG_QNAN                    # Inf - Inf
    d = F.decode(np.array([pinf, 0, one], np.uint64), "f64")
    z = F.decode(np.array([0, pinf, one], np.uint64), "f64")
    got = fma_f64(d, z, F.decode(np.array([one, one, one], np.uint64), "f64"), "rn", F64_NEG_QNAN)
    assert [int(x) for x in got] == [F64_NEG_QNAN, F64_NEG_QNAN, 0x4000000000000000]   # Inf*0, 0*Inf, 1*1+1
    got = fma_f64_codes(np.array([pinf, one], np.uint64), np.array([0, one], np.uint64),
                        np.array([one, one], np.uint64), "rn", F64_NEG_QNAN)
    assert [int(x) for x in got] == [F64_NEG_QNAN, 0x4000000000000000]
    for variant in ({}, dict(c_first=False), dict(order="descending"), dict(nan_rule="canonical")):
        m = MODELS["sm_90"].replace_path("f64", **variant) if variant else "sm_90"
        a = np.array([[pinf, one, 0, 0]], np.uint64)
        b = np.array([[0, one, 0, 0]], np.uint64)
        out = dot_terms(a, b, np.array([one], np.uint64), atype="f64", btype="f64", ctype="f64", dtype="f64", arch=m)
        want = 0x7FFFFFFFFFFFFFFF if variant.get("nan_rule") == "canonical" else F64_NEG_QNAN
        assert int(out[0]) == want, (variant, hex(int(out[0])))


def test_f64_order_probes_predict():
    """The probes that errored on the device: every hypothesis' prediction computes (exact
    sum, c last and descending chains included)."""
    from formal.numerics.probes import by_id

    for pid in ("D64", "D64c", "D64k16", "D64k8", "D64k4"):
        preds = by_id(pid).predictions()
        assert set(preds) == {"sm_90", "descending", "c last", "exact sum"}
        assert preds["sm_90"] == 0x3FF0000000000000


@pytest.mark.parametrize("name", ["f16", "bf16", "f32", "tf32", "e4m3", "e5m2", "f64"])
def test_encode_with_every_nan_code_width(name):
    """nan_code = the all-ones pattern of the container (the largest int of that width)."""
    f = F.get_format(name)
    allones = (1 << f.bits) - 1
    out = F.encode(np.array([True]), np.array([0]), np.array([0]), name, nan=np.array([True]), nan_code=allones)
    assert int(out[0]) == allones and out.dtype == f.np_container
