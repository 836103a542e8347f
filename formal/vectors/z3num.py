"""Z3 encodings of element formats and of one output element's arithmetic.

Two users:

* the coverage solver (:mod:`formal.vectors.coverage`) asks for element encodings whose *exact*
  dot product has a property ("a product whose exponent forces a shift of at least 24
  against c", "a sum that cancels to exactly zero", "an exact result that is subnormal");
* the symbolic auditor (:mod:`formal.vectors.audit`) needs the reference model of one output
  element as a Z3 term, to search for an input on which a user's Z3 model differs.

Everything is bit-vectors over the raw encodings.  Widths, biases and special encodings
come from ``specs/formats.toml`` through :func:`formal.numerics.formats.get_format`;
the reference arithmetic follows the parameter records of :mod:`formal.numerics.params`
step by step (the numpy implementation is :mod:`formal.numerics.block`; the two are
cross-checked on random inputs in ``tests/test_audit_symbolic.py``).

Encodings provided:

``IntegerDot``  exact, wrap or ``.satfinite`` (final clamp or per step)   any K
``Popc``        c + popc(a AND/XOR b), wrap                                any K
``BlockFMA``    steps 1-9 of numerics.md §2 (chained blocks, c read as f32,
                truncation magnitude/floor, RZ/RN/RM/RP, overflow inf/ieee,
                zero sign, gradual or flushed subnormal output)            any K
others (f64 FMA chains, the fp8 emulation, sm_90's m8n8k4 .f16 FMA pipe, block scaling)
raise :class:`NoEncoding`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Sequence

import z3

from ..numerics.formats import Format, get_format

#: width of signed exponent arithmetic
EW = 20
#: alignment exponent of a zero term (far below every real exponent; fits EW bits)
NEG_E = -(1 << (EW - 3))


@contextmanager
def fresh_context():
    """Build and solve in a new Z3 context, then restore the old one.

    Z3's search depends on the terms that already exist in its context (their ids order
    its heuristics), so a query answered in the shared context depends on every query
    asked before it in the process.  Solver-built vectors must be a pure function of
    their inputs: each query gets its own context.  (Terms made inside must not leak out.)
    """
    old = z3.z3._main_ctx
    z3.z3._main_ctx = z3.Context()
    try:
        yield
    finally:
        z3.z3._main_ctx = old


class NoEncoding(NotImplementedError):
    """The reference path has no Z3 encoding here (the audit reports Unknown)."""


def bv(v: int, w: int) -> z3.BitVecRef:
    return z3.BitVecVal(v, w)


def _fit(x: z3.BitVecRef, w: int, signed: bool = False) -> z3.BitVecRef:
    n = x.size()
    if n == w:
        return x
    if n < w:
        return z3.SignExt(w - n, x) if signed else z3.ZeroExt(w - n, x)
    return z3.Extract(w - 1, 0, x)


def bitlen(x: z3.BitVecRef) -> z3.BitVecRef:
    """Position of the leading one plus one (0 for 0), as an EW-bit value."""
    out = bv(0, EW)
    for i in range(x.size()):
        out = z3.If(z3.Extract(i, i, x) == 1, bv(i + 1, EW), out)
    return out


def smax(a, b):
    return z3.If(a > b, a, b)


# ---------------------------------------------------------------------------------------
# one element

class Elem:
    """Z3 view of one element encoding (``bits`` wide, right-aligned, as the evaluator takes it).

    Float formats: ``sign``, ``efield``, ``frac``, the classes ``nan/inf/zero/sub/normal``,
    ``sig`` (significand with the implicit bit) and ``exp`` (field exponent, unbiased,
    pinned at emin for subnormals and zeros): value = (-1)**sign * sig * 2**(exp - mantissa).
    Integer formats: ``ivalue(width)``.  tf32 keeps its 32-bit container; its 13 low bits
    are not part of the value (``field``).
    """

    def __init__(self, fmt, name: str | None = None, var: z3.BitVecRef | None = None):
        self.f: Format = get_format(fmt)
        self.bits = self.f.bits
        self.bv = var if var is not None else z3.BitVec(name or "x", self.bits)
        if self.bv.size() != self.bits:
            raise ValueError(f"{self.f.name} needs a {self.bits}-bit vector, got {self.bv.size()}")

    # ---- raw fields
    @property
    def field(self) -> z3.BitVecRef:
        f = self.f
        if f.ignored_low_bits:
            return z3.Extract(f.bits - 1, f.ignored_low_bits, self.bv)
        return self.bv

    @property
    def is_float(self) -> bool:
        return self.f.cls == "float"

    @property
    def sign(self) -> z3.BoolRef:
        f = self.f
        if not f.signed:
            return z3.BoolVal(False)
        fb = f.field_bits
        return z3.Extract(fb - 1, fb - 1, self.field) == 1

    @property
    def efield(self) -> z3.BitVecRef:
        m, e = self.f.mantissa, self.f.exponent
        return z3.Extract(m + e - 1, m, self.field)

    @property
    def frac(self) -> z3.BitVecRef | None:
        m = self.f.mantissa
        return z3.Extract(m - 1, 0, self.field) if m else None

    @property
    def mag(self) -> z3.BitVecRef:
        """The encoding without its sign bit."""
        f = self.f
        n = f.field_bits - (1 if f.signed else 0)
        return z3.Extract(n - 1, 0, self.field)

    # ---- classes
    @property
    def nan(self) -> z3.BoolRef:
        f = self.f
        if f.nan == "ieee":
            return z3.And(self.efield == (1 << f.exponent) - 1, self.frac != 0)
        codes = f.nan_codes()
        if not codes:
            return z3.BoolVal(False)
        return z3.Or([self.field == c for c in codes])

    @property
    def inf(self) -> z3.BoolRef:
        f = self.f
        if not f.inf:
            return z3.BoolVal(False)
        fr = self.frac
        return z3.And(self.efield == (1 << f.exponent) - 1, fr == 0 if fr is not None else True)

    @property
    def special(self) -> z3.BoolRef:
        return z3.Or(self.nan, self.inf)

    @property
    def finite(self) -> z3.BoolRef:
        return z3.Not(self.special)

    @property
    def zero(self) -> z3.BoolRef:
        if not self.is_float:
            return self.bv == 0
        return z3.And(self.mag == 0, z3.Not(self.nan))

    @property
    def sub(self) -> z3.BoolRef:
        fr = self.frac
        if fr is None or not self.f.subnormal:
            return z3.BoolVal(False)
        return z3.And(self.efield == 0, fr != 0)

    @property
    def normal(self) -> z3.BoolRef:
        return z3.And(self.finite, z3.Not(self.zero), z3.Not(self.sub))

    # ---- value
    def sig(self, width: int | None = None) -> z3.BitVecRef:
        """Significand with the implicit bit (0 for zeros and specials)."""
        f = self.f
        m = f.mantissa
        w = width or (m + 1)
        fr = self.frac
        hid = bv(1 << m, m + 1)
        frx = z3.ZeroExt(1, fr) if fr is not None else bv(0, 1)
        s = z3.If(self.efield == 0, frx, frx | hid) if f.subnormal else frx | hid
        s = z3.If(z3.Or(self.special, self.zero), bv(0, m + 1), s)
        return _fit(s, w)

    @property
    def exp(self) -> z3.BitVecRef:
        """Field exponent (EW-bit signed), pinned at emin for subnormals and zeros."""
        f = self.f
        ef = z3.ZeroExt(EW - f.exponent, self.efield)
        e = ef - bv(f.bias, EW)
        if f.subnormal:
            e = z3.If(self.efield == 0, bv(f.emin, EW), e)
        return e

    def ivalue(self, width: int) -> z3.BitVecRef:
        """Integer formats: the value, sign- or zero-extended to ``width`` bits."""
        return _fit(self.bv, width, signed=self.f.signed)


def elems(fmt, prefix: str, n: int) -> list[Elem]:
    return [Elem(fmt, f"{prefix}{i}") for i in range(n)]


def in_window(x: Elem, lo: int, hi: int) -> z3.BoolRef:
    """A finite value that is zero or has its field exponent in [lo, hi]."""
    return z3.And(x.finite, z3.Or(x.zero, z3.And(x.exp >= lo, x.exp <= hi)))


# ---------------------------------------------------------------------------------------
# exact sums (coverage queries)

def scaled_term(mag: z3.BitVecRef, lsb: z3.BitVecRef, neg: z3.BoolRef, L: int, W: int):
    """(-1)**neg * mag * 2**(lsb - L) as a W-bit two's complement value.

    The caller guarantees lsb >= L and that the result fits (see :func:`exact_dot`).
    """
    sh = lsb - bv(L, EW)
    v = _fit(mag, W) << _fit(sh, W)
    return z3.If(neg, -v, v)


def _sig_lsb(x: Elem, keep: int | None, width: int):
    """(significand, exponent of its unit) with only ``keep`` fraction bits (the caller has
    constrained the lower ones to zero), so that sums need fewer bits."""
    m = x.f.mantissa
    drop = max(0, m - keep) if keep is not None else 0
    sig = x.sig(m + 1)
    if drop:
        sig = z3.LShR(sig, drop)
    return _fit(sig, width), x.exp - bv(m - drop, EW), m + 1 - drop


def exact_terms(a: Sequence[Elem], b: Sequence[Elem], c: Elem | None, L: int, W: int,
                keep_ab: int | None = None, keep_c: int | None = None):
    """The addends of sum(a_i * b_i) + c as W-bit signed values t with value = t * 2**L.

    Returns (terms, side conditions): the side conditions say that every addend's lowest
    bit is at or above 2**L and that it fits, so that the terms and their sum are exact;
    add them to the solver.  ``keep_ab``/``keep_c``: the number of fraction bits the
    elements may use (the caller constrains the rest to zero).  Floats only.
    """
    terms = []
    side = []
    for x, y in zip(a, b):
        sx = x.f.mantissa + 1 if keep_ab is None else min(x.f.mantissa, keep_ab) + 1
        sy = y.f.mantissa + 1 if keep_ab is None else min(y.f.mantissa, keep_ab) + 1
        sw = sx + sy
        gx, lx, _ = _sig_lsb(x, keep_ab, sw)
        gy, ly, _ = _sig_lsb(y, keep_ab, sw)
        mag = gx * gy
        lsb = lx + ly
        nz = z3.Not(z3.Or(x.zero, y.zero))
        side.append(z3.Implies(nz, z3.And(lsb >= L, lsb - L + sw <= W - 2 - len(a))))
        terms.append(z3.If(nz, scaled_term(mag, lsb, z3.Xor(x.sign, y.sign), L, W), bv(0, W)))
    if c is not None:
        sc = c.f.mantissa + 1 if keep_c is None else min(c.f.mantissa, keep_c) + 1
        g, lsb, _ = _sig_lsb(c, keep_c, sc)
        side.append(z3.Implies(z3.Not(c.zero), z3.And(lsb >= L, lsb - L + sc <= W - 2 - len(a))))
        terms.append(z3.If(c.zero, bv(0, W), scaled_term(g, lsb, c.sign, L, W)))
    return terms, side


def exact_dot(a: Sequence[Elem], b: Sequence[Elem], c: Elem | None, L: int, W: int,
              keep_ab: int | None = None, keep_c: int | None = None):
    """Exact value of sum(a_i * b_i) + c as (S, side conditions): value = S * 2**L (W-bit signed)."""
    terms, side = exact_terms(a, b, c, L, W, keep_ab, keep_c)
    S = bv(0, W)
    for t in terms:
        S = S + t
    return S, side


def sabs(x: z3.BitVecRef) -> z3.BitVecRef:
    return z3.If(x < 0, -x, x)


def int_product(x: Elem, y: Elem, W: int) -> z3.BitVecRef:
    """x * y for integer elements, multiplied at the width the product needs, then widened to W."""
    pw = x.bits + y.bits + 1
    return _fit(x.ivalue(pw) * y.ivalue(pw), W, signed=True)


def int_dot(a: Sequence[Elem], b: Sequence[Elem], c: Elem | None, W: int = 48, bitop: str | None = None):
    """Exact integer sum(a_i * b_i) + c (or c + popc(a op b) for b1) as a W-bit signed value."""
    S = c.ivalue(W) if c is not None else bv(0, W)
    for x, y in zip(a, b):
        if x.f.cls == "bit":
            bit = (x.bv & y.bv) if bitop == "and" else (x.bv ^ y.bv)
            S = S + z3.ZeroExt(W - 1, bit)
        else:
            S = S + int_product(x, y, W)
    return S


# ---------------------------------------------------------------------------------------
# rounding into a format (mirrors formal.numerics.formats.encode)

def encode(neg: z3.BoolRef, mag: z3.BitVecRef, X: z3.BitVecRef, fmt, mode: str, *,
           overflow: str = "ieee", frac_bits: int | None = None, ftz: bool = False,
           nan: z3.BoolRef | None = None, inf: z3.BoolRef | None = None,
           nan_code: int | None = None) -> z3.BitVecRef:
    """Round (-1)**neg * mag * 2**X once into ``fmt`` (a float format); returns its encoding.

    ``mag`` unsigned, ``X`` an EW-bit signed exponent.  Same parameters and meaning as
    :func:`formal.numerics.formats.encode` (modes rn, rz, rm, rp).
    """
    f = get_format(fmt)
    m = f.mantissa
    P = m if frac_bits is None else int(frac_bits)
    W = mag.size() + P + 4
    M = _fit(mag, W)
    nb = bitlen(mag)
    top = X + nb - bv(1, EW)
    e = smax(top, bv(f.emin, EW))
    sh = e - bv(P, EW) - X                           # bits to drop (may be negative)
    shp = z3.If(sh > 0, sh, bv(0, EW))
    shn = z3.If(sh < 0, -sh, bv(0, EW))
    kept = z3.LShR(M, _fit(shp, W))
    rem = M - (kept << _fit(shp, W))
    R = z3.If(sh < 0, M << _fit(shn, W), kept)
    inexact = rem != 0
    in_range = z3.And(sh >= 1, sh <= W - 1)
    half = bv(1, W) << _fit(z3.If(sh >= 1, sh - 1, bv(0, EW)), W)
    if mode == "rn":
        inc = z3.And(in_range, z3.Or(z3.UGT(rem, half), z3.And(rem == half, z3.Extract(0, 0, R) == 1)))
    elif mode == "rz":
        inc = z3.BoolVal(False)
    elif mode == "rm":
        inc = z3.And(inexact, neg)
    elif mode == "rp":
        inc = z3.And(inexact, z3.Not(neg))
    else:
        raise NoEncoding(f"rounding mode {mode!r}")
    R = R + z3.If(inc, bv(1, W), bv(0, W))
    carry = z3.LShR(R, P + 1) != 0
    R = z3.If(carry, z3.LShR(R, 1), R)
    e = e + z3.If(carry, bv(1, EW), bv(0, EW))
    normal = z3.UGE(R, bv(1 << P, W))
    e = z3.If(e > f.emax + 1, bv(f.emax + 1, EW), e)
    CW = max(W, EW) + 2
    eb = _fit(e + bv(f.bias, EW), CW, signed=True)
    Rc = _fit(R, CW)
    code = z3.If(normal, (eb << m) + ((Rc - (1 << P)) << (m - P)), Rc << (m - P))
    if not f.subnormal or ftz:
        code = z3.If(normal, code, bv(0, CW))
    maxfin = f.maxfin_code & ~((1 << (m - P)) - 1)
    ovf = z3.UGT(code, bv(maxfin, CW))
    infc = f.inf_code if f.inf else -1
    if overflow == "satfinite":
        big = bv(maxfin, CW)
    elif overflow == "inf" or mode == "rn":
        big = bv(infc, CW) if infc >= 0 else None
    elif mode == "rz":
        big = bv(maxfin, CW)
    elif mode == "rm":
        big = z3.If(neg, bv(infc, CW), bv(maxfin, CW)) if infc >= 0 else None
    else:
        big = z3.If(neg, bv(maxfin, CW), bv(infc, CW)) if infc >= 0 else None
    if big is None:
        raise NoEncoding(f"overflow into {f.name}, a format without Inf")
    code = z3.If(ovf, big, code)
    if inf is not None:
        code = z3.If(inf, bv(f.inf_code if f.inf else maxfin, CW), code)
    fb = f.field_bits
    out = _fit(code, fb)
    if f.signed:
        out = out | z3.If(neg, bv(1 << (fb - 1), fb), bv(0, fb))
    if f.ignored_low_bits:
        out = z3.Concat(out, bv(0, f.ignored_low_bits))
    if nan is not None:
        ncode = f.nan_code << f.ignored_low_bits if nan_code is None else int(nan_code)
        out = z3.If(nan, bv(ncode, f.bits), out)
    return out


# ---------------------------------------------------------------------------------------
# reference models of one output element

def _specials(factors: list[tuple[Elem, Elem]], adds: list[Elem]):
    """Step 1: (nan, inf, inf_is_negative) of a set of products and addends."""
    nan, pinf, ninf = [], [], []
    for x, y in factors:
        nan += [x.nan, y.nan, z3.And(x.inf, y.zero), z3.And(x.zero, y.inf)]
        pi = z3.And(z3.Or(x.inf, y.inf), z3.Not(z3.Or(x.nan, y.nan, x.zero, y.zero)))
        s = z3.Xor(x.sign, y.sign)
        pinf.append(z3.And(pi, z3.Not(s)))
        ninf.append(z3.And(pi, s))
    for c in adds:
        nan.append(c.nan)
        pinf.append(z3.And(c.inf, z3.Not(c.sign)))
        ninf.append(z3.And(c.inf, c.sign))
    p, n = z3.Or(pinf), z3.Or(ninf)
    isnan = z3.Or(z3.Or(nan), z3.And(p, n))
    return isnan, z3.And(z3.Or(p, n), z3.Not(isnan)), n


def _as_f32(c: Elem):
    """(sig, alignment exponent, fraction bits) of c read as an f32 (its true exponent)."""
    f = c.f
    if f.name == "f32":
        return c.sig(24), c.exp, 23
    if f.cls != "float" or f.exponent > 8 or f.mantissa > 23:
        raise NoEncoding(f"c of type {f.name} read as f32")
    m = f.mantissa
    s = c.sig(m + 1)
    nb = bitlen(s)
    # normalise: every value of a narrower format is a normal f32
    sh = bv(m + 1, EW) - nb
    sig = _fit(s, 24) << _fit(sh + bv(23 - m, EW), 24)
    return sig, c.exp - sh, 23


def block_fma(a: Sequence[Elem], b: Sequence[Elem], c: Elem, p, dtype: str) -> z3.BitVecRef:
    """The BlockFMA of :class:`formal.numerics.params.BlockFMA` (all K, chained blocks)."""
    if p.normalise_products or p.c_entry != "window" or p.truncation not in ("magnitude", "floor"):
        raise NoEncoding("BlockFMA variant (normalise_products / c_entry / truncation) without an encoding")
    if not p.pin_subnormals or not getattr(p, "pin_c", True):
        raise NoEncoding("BlockFMA with pin_subnormals=False or pin_c=False")
    if getattr(p, "zero_factor_exp", None) is not None:
        raise NoEncoding("BlockFMA with zero_factor_exp (zero products in the alignment)")
    for x in list(a) + list(b):
        if x.f.name not in ("f16", "bf16", "tf32"):
            raise NoEncoding(f"BlockFMA input type {x.f.name}")
    if getattr(p, "tf32_conversion", "truncate") != "truncate" or getattr(p, "tf32_nan", "blind") != "blind":
        if any(x.f.name == "tf32" for x in a):
            raise NoEncoding("tf32 conversion other than truncate/blind")
    K = len(a)
    n = p.n or K
    out = None
    cc = c
    for k0 in range(0, max(K, 1), n):
        ks = range(k0, min(K, k0 + n))
        out = _one_block([a[k] for k in ks], [b[k] for k in ks], cc, p, dtype)
        if k0 + n < K:
            cc = Elem(dtype, var=out)
    return out


def _one_block(a, b, c: Elem, p, dtype: str) -> z3.BitVecRef:
    F = p.F
    K = len(a)
    W = F + 4 + (K + 1).bit_length() + 2
    isnan, isinf, ninf = _specials(list(zip(a, b)), [c])
    if p.c_as_f32:
        csig, cexp, cfb = _as_f32(c)
    else:
        csig, cexp, cfb = c.sig(), c.exp, c.f.mantissa
    terms = []   # (nonzero, mag, e, fb, neg)
    for x, y in zip(a, b):
        sw = x.f.mantissa + y.f.mantissa + 2
        mag = _fit(x.sig(sw), sw) * _fit(y.sig(sw), sw)
        nz = z3.And(x.finite, y.finite, z3.Not(x.zero), z3.Not(y.zero))
        terms.append((nz, mag, x.exp + y.exp, x.f.mantissa + y.f.mantissa, z3.Xor(x.sign, y.sign)))
    terms.append((z3.And(c.finite, z3.Not(c.zero)), csig, cexp, cfb, c.sign))
    E = bv(p.minexp if p.minexp is not None else NEG_E, EW)
    for nz, _, e, _, _ in terms:
        E = z3.If(z3.And(nz, e > E), e, E)
    S = bv(0, W)
    for nz, mag, e, fb, neg in terms:
        pre, extra = max(0, F - fb), max(0, fb - F)
        sh = E - e + bv(extra, EW)
        v = _fit(mag, W) << pre
        if p.truncation == "magnitude":
            mterm = z3.LShR(v, _fit(sh, W))
            mterm = z3.If(neg, -mterm, mterm)
        else:  # floor
            mterm = z3.If(neg, -v, v) >> _fit(sh, W)
        S = S + z3.If(nz, mterm, bv(0, W))
    neg = S < 0
    zero = S == 0
    if p.zero_sign == "positive":
        zneg = z3.BoolVal(False)
    else:
        # IEEE 754-2019 §6.3 (as formal.numerics.block._zero_sign): zeros of one sign keep
        # it; mixed zero signs or a cancellation give +0, -0 under rm
        allz = z3.And([z3.Not(nz) for nz, *_ in terms])
        alln = z3.And([t[4] for t in terms])
        rm = p.rounding == "rm"
        anyn = z3.Or([t[4] for t in terms]) if rm else z3.BoolVal(False)
        zneg = z3.If(allz, z3.Or(alln, anyn), z3.BoolVal(rm))
    neg = z3.If(zero, zneg, neg)
    neg = z3.If(isinf, ninf, neg)
    r = encode(neg, sabs(S), E - bv(F, EW), dtype, p.rounding, overflow=p.overflow,
               frac_bits=p.out_frac, ftz=p.subnormal_output == "ftz", nan=isnan, inf=isinf,
               nan_code=p.nan_bits)
    if getattr(p, "rounded_zero_sign", "sum") == "positive":   # a nonzero sum that rounds to zero: +0
        nb = get_format(dtype).bits
        r = z3.If(z3.And(z3.Not(zero), z3.Extract(nb - 2, 0, r) == 0), bv(0, nb), r)
    return r


def integer_dot(a, b, c: Elem, p, satfinite: bool) -> z3.BitVecRef:
    """IntegerDot: exact, then wrap to 32 bits or clamp (``saturation`` final / per_step)."""
    W = 64
    lo, hi = bv(-(1 << 31), W), bv((1 << 31) - 1, W)
    clamp = lambda x: z3.If(x < lo, lo, z3.If(x > hi, hi, x))  # noqa: E731
    if satfinite and p.saturation == "per_step":
        S = c.ivalue(W)
        for x, y in zip(a, b):
            S = clamp(S + int_product(x, y, W))
        return z3.Extract(31, 0, S)
    S = int_dot(a, b, c, W)
    if satfinite:
        S = clamp(S)
    return z3.Extract(31, 0, S)


def popc_dot(a, b, c: Elem, bitop: str) -> z3.BitVecRef:
    return z3.Extract(31, 0, int_dot(a, b, c, 48, bitop=bitop))


def reference_element(form, arch: str = "sm_90"):
    """A function (a: list[Elem], b: list[Elem], c: Elem) -> d encoding for ``form``'s path.

    Raises :class:`NoEncoding` when the path of ``arch`` has no encoding here.
    """
    from ..numerics import get_model
    from ..numerics.params import BlockFMA, IntegerDot, Popc

    model = get_model(arch)
    key, p = model.path(form.atype, form.btype, form.c_type, form.dtype, form.kind,
                        scaled=bool(form.block_scale), shape=form.mnk)
    if isinstance(p, IntegerDot):
        return lambda a, b, c: integer_dot(a, b, c, p, bool(form.satfinite))
    if isinstance(p, Popc):
        return lambda a, b, c: popc_dot(a, b, c, form.bitop)
    if isinstance(p, BlockFMA):
        return lambda a, b, c: block_fma(a, b, c, p, form.dtype)
    raise NoEncoding(f"{model.name} path {key!r} ({type(p).__name__}) has no Z3 encoding")
