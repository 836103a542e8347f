"""Named encodings of an element format: one, the largest finite, subnormals, infinities,
negative zero, the NaNs worth testing.  Read from ``specs/formats.toml`` through
:mod:`formal.numerics.formats`; used by the coverage models and the vector searches."""

from __future__ import annotations

from ..numerics.formats import get_format



def enc(t: str, neg: bool, efield: int, frac: int) -> int:
    f = get_format(t)
    v = (efield << f.mantissa) | frac
    if neg and f.signed:
        v |= 1 << (f.field_bits - 1)
    return v << f.ignored_low_bits


def one(t: str, neg: bool = False) -> int:
    f = get_format(t)
    if f.cls != "float":
        return ((1 << f.bits) - 1) if (neg and f.signed) else 1
    return enc(t, neg, f.bias, 0)


def max_finite(t: str, neg: bool = False) -> int:
    f = get_format(t)
    v = f.maxfin_code
    if neg and f.signed:
        v |= 1 << (f.field_bits - 1)
    return v << f.ignored_low_bits


def min_sub(t: str, neg: bool = False) -> int:
    return enc(t, neg, 0, 1)


def max_sub(t: str, neg: bool = False) -> int:
    f = get_format(t)
    return enc(t, neg, 0, (1 << f.mantissa) - 1)


def inf_code(t: str, neg: bool = False) -> int | None:
    f = get_format(t)
    if not f.inf:
        return None
    return enc(t, neg, (1 << f.exponent) - 1, 0)


def neg_zero(t: str) -> int:
    f = get_format(t)
    return (1 << (f.field_bits - 1)) << f.ignored_low_bits if f.signed else 0


def nan_codes(t: str) -> list[tuple[str, int]]:
    """(label, code) for the NaN encodings worth testing in format t."""
    f = get_format(t)
    if f.nan == "ieee":
        m, ones = f.mantissa, (1 << f.exponent) - 1
        out = [("quiet", enc(t, False, ones, 1 << (m - 1))), ("quiet-neg", enc(t, True, ones, 1 << (m - 1))),
               ("signalling", enc(t, False, ones, 1)), ("all-ones", enc(t, True, ones, (1 << m) - 1))]
        if f.ignored_low_bits:
            # a NaN whose payload sits only in the bits the format ignores (tf32 in an f32 register)
            out.append(("payload-in-ignored-bits", (ones << (f.mantissa + f.ignored_low_bits)) | 1))
        return out
    return [(f"0x{c:02x}", c) for c in f.nan_codes()]
