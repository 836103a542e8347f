"""The block FMA of a tensor core, vectorised (numerics.md §2), plus exact rounding.

Reading guide (sm_90 f16 -> f32, ``mma.sync.m16n8k16``; the numbers are the sm_90
parameters of :mod:`formal.numerics.sm90`)::

    inputs   a_k, b_k (k = 0..15) in f16, c in f32
    step 1   specials: NaN if a NaN is present, or Inf*0, or +Inf and -Inf meet; else an
             Inf present -> that Inf.                                  (_specials)
    step 2   decode without normalising: x = sig * 2**(e - 10), e pinned at -14 for
             subnormals.                                               (formats.decode)
    step 3   exact products p_k = sig_a*sig_b * 2**(e_a + e_b - 20); alignment exponent
             e_a + e_b even when sig_a*sig_b >= 2**21; zero products take no part.
                                                                       (product_terms)
    step 4   c is an addend like the products, aligned by its own f32 field exponent
             (an f16 c on the f16-accumulator path: its f16 field exponent, so a
             subnormal f16 c is pinned at -14).                       (c_terms)
    step 5   E = max(all alignment exponents); E = max(E, minexp = -133).
    step 6   every addend is cut to the grid 2**(E - 25): m_k = floor(|v_k| / 2**(E-25)),
             then signed (truncation toward zero, per term).
    step 7   S = sum of the m_k, an exact integer (int64).
    step 8   D = round(S * 2**(E - 25)) into f32 with RZ; gradual underflow; overflow
             gives +-Inf even in RZ.                                   (formats.encode)
             A zero D is +0, whether S = 0 or S != 0 rounds to zero. (_zero_sign,
             _positive_rounded_zeros)
    step 9   K > n: blocks of n consecutive k; block j+1 takes block j's rounded D as c.
                                                                       (chain)

All arrays carry the K (term) axis FIRST, ``[K, *batch]``: reductions over axis 0 are
plain element-wise passes, which is what makes numpy fast here.  Steps 6-7 run on exact
float64 values whenever every significand fits in 53 bits (all formats but f64):
``trunc(v * 2**(F-E))`` is exactly the per-term truncation, and the sum stays an exact
integer below 2**53 (:func:`_window_sum_float`); otherwise in int64.  Products that are
exact float32 numbers (every f16 product; bf16 ones on moderate data: :func:`_range32`)
run in float32 / int16 / int32 instead, half the memory traffic
(:func:`_window_sum_f32`).
"""
from __future__ import annotations

from .xp import fused, np, on_host

from .formats import ZERO_EXP, Decoded, Format, bitlen, decode, encode, get_format
from .params import BlockFMA

#: alignment exponent given to zero terms: far below any real exponent, so a zero
#: never wins the max of step 5 and is shifted out entirely in step 6.
NEG_E = ZERO_EXP


class Terms:
    """Addends, term axis first: value_k = (-1)**neg_k * mag_k * 2**(e_k - fb).

    ``e`` is the *alignment* exponent (NEG_E for zero terms).  The value is held either
    as integers (``neg``, ``mag``: int64, or Python ints for f64 products) or as exact
    float64 numbers ``val`` (whenever the significands fit in 53 bits); the other form
    is derived on demand.  nan/pinf/ninf are per-term special flags, or None when the
    whole batch has no special value (fast path).
    """

    def __init__(self, neg=None, mag=None, e=None, fb: int = 0, nan=None, pinf=None, ninf=None, *, val=None,
                 range32=None, factors=None, shape=None):
        self._neg, self._mag, self._val = neg, mag, val
        self._e, self.fb = e, fb
        self.nan, self.pinf, self.ninf = nan, pinf, ninf
        #: (lo, hi, bits) when ``val`` is float32 (and ``e`` int16): every nonzero term has
        #: lo <= e <= hi and a significand below 2**bits (see :func:`_window_sum_f32`)
        self.range32 = range32
        #: float32 products kept as their two factors [(e16, val32), ...] (K-first, broadcast
        #: to ``shape``): e and val are their sum / product, formed only if a step asks;
        #: the exponent maximum and the window read the factors directly (one fused kernel
        #: each on a GPU, see :func:`_max_exp2`, :func:`_trunc_sum2`)
        self._factors, self._shape = factors, shape

    @property
    def e(self):
        if self._e is None and self._factors is not None:
            (ea, _), (eb, _) = self._factors
            self._e = np.broadcast_to(ea + eb, self._shape)
        return self._e

    @e.setter
    def e(self, v):
        self._e = v

    def emax(self):
        """max over the terms (axis 0) of the alignment exponents."""
        if self._e is None and self._factors is not None:
            (ea, _), (eb, _) = self._factors
            return np.broadcast_to(_max_exp2(ea, eb), self._shape[1:])
        return self.e[0] if self.K == 1 else np.max(self.e, axis=0)

    @property
    def neg(self):
        if self._neg is None:
            self._neg = np.signbit(self.val)
        return self._neg

    @neg.setter
    def neg(self, v):
        self._neg = v

    @property
    def mag(self):
        if self._mag is None:
            self._mag = np.ldexp(np.abs(self.val), self.fb - np.asarray(self.e, np.int64)).astype(np.int64)
        return self._mag

    @property
    def val(self):
        """Exact values, float64 (float32 when ``range32``); only valid when :meth:`float_ok`."""
        if self._val is None and self._factors is not None:
            (_, va), (_, vb) = self._factors
            self._val = np.broadcast_to(va * vb, self._shape)
        if self._val is None:
            v = np.ldexp(np.asarray(self._mag, np.float64), np.asarray(self.e, np.int64) - self.fb)
            self._val = np.where(self._neg, -v, v)
        return self._val

    def float_ok(self) -> bool:
        if self._val is not None or self._factors is not None:
            return True
        m = np.asarray(self._mag)
        return m.dtype != object and (m.size == 0 or int(m.max()) < (1 << 53))

    def nonzero(self):
        return (self.val != 0) if (self._val is not None or self._factors is not None) else (np.asarray(self._mag) != 0)

    def take(self, idx) -> "Terms":
        if isinstance(idx, slice):
            sl = lambda x: None if x is None else x[idx]  # noqa: E731
        else:
            idx = np.asarray(idx)
            sl = lambda x: None if x is None else np.take(x, idx, axis=0)  # noqa: E731
        fac = shape = None
        if self._factors is not None:
            fac = [(sl(e), sl(v)) for e, v in self._factors]
            shape = np.broadcast_shapes(*[e.shape for e, _ in fac], self._shape[1:])
        return Terms(sl(self._neg), sl(self._mag), sl(self._e), self.fb, sl(self.nan), sl(self.pinf),
                     sl(self.ninf), val=sl(self._val), range32=self.range32, factors=fac, shape=shape)

    @property
    def K(self) -> int:
        return self._shape[0] if self._e is None and self._factors is not None else self.e.shape[0]

    @property
    def batch_shape(self):
        return self._shape[1:] if self._e is None and self._factors is not None else self.e.shape[1:]


# ---------------------------------------------------------------------------
# Building terms
# ---------------------------------------------------------------------------

def unpin_subnormals(d: Decoded) -> Decoded:
    """Give subnormal elements the exponent of their leading one (value unchanged)."""
    f = d.fmt
    if f.cls != "float":
        return d
    sub = (d.sig != 0) & (d.sig < (1 << f.mantissa))
    if not np.any(sub):
        return d
    nb = bitlen(d.sig)
    sh = np.where(sub, f.mantissa + 1 - nb, 0)
    return Decoded(f, d.neg, d.sig << sh, d.exp - sh, d.nan, d.inf, d.zero)


def _special_flags(ds: list[Decoded]):
    """Per-element flags of a product of factors: (nan, inf) before sign."""
    nan = np.zeros((), bool)
    anyinf = np.zeros((), bool)
    anyzero = np.zeros((), bool)
    for d in ds:
        nan = nan | d.nan
        anyinf = anyinf | d.inf
        anyzero = anyzero | d.zero
    nan = nan | (anyinf & anyzero)
    inf = anyinf & ~nan
    return nan, inf


def _range32(factors: list[Decoded]):
    """(lo, hi, bits) when the products of these factors are exact float32 numbers, else None.

    A nonzero factor is sig * 2**(e - m) with 1 <= sig < 2**(m+1) and e in its ``erange``
    [r_lo, r_hi]; it is a *normal* float32 number when m + 1 <= 24, r_lo - m >= -126 and
    r_hi + 1 <= 127.  A nonzero product is sig * 2**(e - fb) with sig < 2**bits
    (bits = the sum of the widths m + 1), e in [lo, hi] (the sums of the ranges), so
    |p| in [2**(lo - fb), 2**(hi - fb + bits)): one float32 multiply is exact when
    bits <= 24, lo - fb >= -126 and hi - fb + bits <= 127.  No float32 subnormal ever
    occurs (so a flush-to-zero device computes the same).  A factor with no nonzero
    element makes every product zero; it adds [0, 0].  f16 always qualifies (the format's
    range); bf16 / tf32 when the data's exponents are moderate (a pass over the factors,
    which are a small fraction of the products).
    """
    if any(d.fmt.cls != "float" for d in factors) or sum(d.fmt.mantissa + 1 for d in factors) > 24:
        return None
    for data in (False, True):     # the formats' ranges (f16), else the data's (bf16, tf32)
        lo = hi = bits = fb = 0
        for d in factors:
            m = d.fmt.mantissa
            r = d.erange(data)
            r = (0, 0) if r is None else r
            if r[0] - m < -126 or r[1] + 1 > 127:
                break
            lo, hi, bits, fb = lo + r[0], hi + r[1], bits + m + 1, fb + m
        else:
            if lo - fb >= -126 and hi - fb + bits <= 127:
                return lo, hi, bits
    return None


def _wide_products(factors: list[Decoded], e, fb: int, shape) -> Terms:
    """Products of more than 53 significant bits, as int64 or Python-int magnitudes."""
    mv = lambda x: np.asarray(x)  # noqa: E731
    objects = any(np.asarray(d.sig).dtype == object for d in factors)
    sig_bits = sum(int(np.max(d.sig)).bit_length() if np.size(d.sig) else 0 for d in factors)
    it = object if (objects or sig_bits > 62) else np.int64
    mag = neg = None
    for d in factors:
        sg = mv(np.asarray(d.sig).astype(it))
        mag = sg if mag is None else mag * sg
        neg = mv(d.neg) if neg is None else neg ^ mv(d.neg)
    return Terms(np.broadcast_to(neg, shape), np.broadcast_to(mag, shape), e, fb)


def product_terms(factors: list[Decoded]) -> Terms:
    """Exact products of several decoded factors ([..., K] each, broadcastable).

    Returns K-first Terms whose alignment exponent is the sum of the factors' field
    exponents (numerics.md §2 step 3): a product keeps the exponent ``e_a + e_b`` even
    when its significand product is >= 2 (see :func:`fix_normalised_exponent` for the
    normalised alternative).  Products whose significands fit in 24 bits and whose range
    fits float32 (:func:`_range32`: every f16 product) are formed as exact float32 values
    with int16 exponents (half the memory traffic); other ones of at most 53 bits as exact
    float64 values (one multiply per product); wider ones (f64) as Python integers.
    """
    # K-first *contiguous* factor arrays: the broadcast products then come out in C order,
    # so the reductions over K run over whole rows (fast) rather than strided K-vectors
    factors = [d.kfirst() for d in factors]
    mv = lambda x: np.asarray(x)  # noqa: E731
    fb = sum(d.fmt.mantissa for d in factors)
    objects = any(d.wide() for d in factors)
    narrow = not objects and sum(d.fmt.mantissa + 1 for d in factors) <= 53
    r32 = _range32(factors) if narrow else None
    shape = np.broadcast_shapes(*[mv(d.e16 if r32 else d.ealign).shape for d in factors])
    if r32 and len(factors) == 2:
        # zero / special factors carry E16_ZERO: the product's sum is far below any real one
        terms = Terms(fb=fb, range32=r32, factors=[(mv(d.e16), mv(d.val32)) for d in factors], shape=shape)
    elif r32:
        e = val = None
        for d in factors:
            e = mv(d.e16) if e is None else e + mv(d.e16)
            val = mv(d.val32) if val is None else val * mv(d.val32)
        terms = Terms(e=np.broadcast_to(e, shape), fb=fb, val=np.broadcast_to(val, shape), range32=r32)
    else:
        e = val = None
        for d in factors:
            # zero and special factors carry ZERO_EXP, so the product's sum is far below any real one
            ex = mv(d.ealign.astype(np.int32, copy=False))
            e = ex if e is None else e + ex
            if narrow:
                val = mv(d.val) if val is None else val * mv(d.val)
        e = np.broadcast_to(e, shape)
        terms = Terms(e=e, fb=fb, val=np.broadcast_to(val, shape)) if narrow else _wide_products(factors, e, fb, shape)
    if any(d.has_special() for d in factors):
        nan, inf = _special_flags([Decoded(d.fmt, mv(d.neg), mv(d.sig), mv(d.exp), mv(d.nan), mv(d.inf),
                                           mv(d.zero)) for d in factors])
        neg = None
        for d in factors:
            neg = mv(d.neg) if neg is None else neg ^ mv(d.neg)
        nan = np.broadcast_to(nan, shape)
        inf = np.broadcast_to(inf, shape)
        terms.nan, terms.pinf, terms.ninf = nan, inf & ~neg, inf & neg
    return terms


def fix_normalised_exponent(t: Terms) -> Terms:
    """Alignment exponent = the product's leading one (the "normalised products" hypothesis).

    Value is kept: every magnitude is renormalised to W = fb + 2 bits, so that
    value = mag' * 2**(e' - (W - 1)) with e' the leading-one exponent.
    """
    mag = np.asarray(t.mag, np.int64)
    W = t.fb + 2
    nb = bitlen(mag)
    nz = mag != 0
    e = np.where(nz, t.e + nb - 1 - t.fb, NEG_E)
    mag = np.where(nz, mag << np.clip(W - nb, 0, 63), 0)
    return Terms(t.neg, mag, e, W - 1, t.nan, t.pinf, t.ninf)


def value_terms(d: Decoded) -> Terms:
    """One addend per element (e.g. c), as K=1 Terms: [1, *shape]."""
    ex = lambda x: np.asarray(x)[None]  # noqa: E731
    if d.fmt.mantissa < 53:
        # exact float64 values; neg (the sign bit of val, zeros and specials included: their
        # val is a zero of their sign) and mag (|val| scaled back: 0 for zeros and specials,
        # whose e is ZERO_EXP) are derived from it only if some step asks
        t = Terms(e=ex(d.ealign), fb=d.fmt.mantissa, val=ex(d.val))
    else:
        t = Terms(ex(d.neg), ex(d.sig), ex(d.ealign), d.fmt.mantissa)
    if d.has_special():
        t.nan, t.pinf, t.ninf = ex(d.nan), ex(d.inf & ~d.neg), ex(d.inf & d.neg)
    return t


def c_terms(c_codes, ctype: str, p: BlockFMA) -> Terms:
    """The accumulator input as an addend: read as an f32 when ``p.c_as_f32`` (so its
    alignment exponent is its f32 field exponent, pinned at -126), else with its own
    format's field exponent (an f16 c pinned at -14).  ``pin_c = False``: a subnormal c
    aligns at its leading one instead.  ``pin_subnormals`` concerns A/B only."""
    f = get_format(ctype)
    d = decode(c_codes, f)
    if p.c_as_f32 and f.name != "f32" and f.is_float:
        d = decode(encode(d.neg, d.sig, d.lsb, "f32", "rn", nan=d.nan, inf=d.inf), "f32")
    if not p.pin_c:
        d = unpin_subnormals(d)
    return value_terms(d)


# ---------------------------------------------------------------------------
# Steps 1 and 5-8
# ---------------------------------------------------------------------------

def _any0(x):
    return np.any(x, axis=0)


def _specials(groups: list[Terms], shape):
    """Step 1: per-output (nan, inf, inf_negative) of a set of addend groups."""
    nan = np.zeros(shape, bool)
    pinf = np.zeros(shape, bool)
    ninf = np.zeros(shape, bool)
    have = False
    for g in groups:
        if g.nan is None:
            continue
        have = True
        nan |= _any0(g.nan)
        pinf |= _any0(g.pinf)
        ninf |= _any0(g.ninf)
    if not have:
        return None
    nan |= pinf & ninf
    return nan, (pinf | ninf) & ~nan, ninf


def _zero_sign(groups: list[Terms], S, rule: str, mode: str):
    """Sign of an exact-zero result: +0, or the IEEE rule."""
    if rule == "positive":
        return np.zeros(S.shape, bool)
    all_zero = np.ones(S.shape, bool)
    all_neg = np.ones(S.shape, bool)
    any_neg = np.zeros(S.shape, bool)
    for g in groups:
        all_zero &= ~_any0(g.nonzero())
        all_neg &= np.all(g.neg, axis=0)
        any_neg |= _any0(g.neg)
    rm = mode == "rm"
    # IEEE 754 §6.3: a sum of zeros of one sign keeps it; mixed signs or an exact
    # cancellation give +0, except -0 when rounding toward -Inf
    return np.where(all_zero, all_neg | (rm & any_neg), rm)


def _positive_rounded_zeros(codes, S, out: Format, rule: str):
    """``rounded_zero_sign``: a nonzero sum S that rounds to a zero result gives +0
    ("positive"), or keeps the sign of S ("sum", IEEE 754)."""
    if rule == "sum" or not out.signed:
        return codes
    if rule != "positive":
        raise ValueError(f"rounded_zero_sign {rule!r}")
    codes = np.asarray(codes)
    mag = np.asarray((1 << (out.bits - 1)) - 1, codes.dtype)
    hit = ((codes & mag) == 0) & np.asarray(S != 0, bool)
    return np.where(hit, codes & mag, codes) if np.any(hit) else codes


def block(groups: list[Terms], p: BlockFMA, out, *, mode: str | None = None) -> np.ndarray:
    """One block FMA (steps 1, 5-8) over addend groups (products, c).  Returns codes."""
    out = get_format(out)
    mode = mode or p.rounding
    shape = np.broadcast_shapes(*[g.batch_shape for g in groups])
    sp = _specials(groups, shape)                                    # step 1
    if p.truncation == "none":
        return exact_round(groups, out, mode, overflow=p.overflow, nan_code=p.nan_bits,
                           zero_sign=p.zero_sign, frac_bits=p.out_frac, ftz=p.subnormal_output == "ftz",
                           specials=sp, rounded_zero_sign=p.rounded_zero_sign)
    F = p.F
    E = None                                                         # step 5
    for g in groups:
        ge = g.emax() if g.K else np.full(shape, NEG_E)
        E = ge if E is None else np.maximum(E, ge)
    E = np.broadcast_to(E, shape).astype(np.int64, copy=False)
    if p.minexp is not None:
        E = np.maximum(E, p.minexp)
    if all(g.float_ok() for g in groups):                            # steps 6-7
        S = _window_sum_float(groups, E, F, p.truncation)
    else:
        S = _window_sum_int(groups, E, F, p.truncation)
    neg = S < 0                                                      # step 8
    zero = S == 0
    if p.zero_sign != "positive" and np.any(zero):
        neg = np.where(zero, _zero_sign(groups, S, p.zero_sign, mode), neg)
    nan = inf = None
    if sp is not None:
        nan, inf, ninf = sp
        neg = np.where(inf, ninf, neg)
    codes = encode(neg, np.abs(S), E - F, out, mode, frac_bits=p.out_frac, overflow=p.overflow,
                   ftz=p.subnormal_output == "ftz", nan=nan, inf=inf, nan_code=p.nan_bits)
    return _positive_rounded_zeros(codes, S, out, p.rounded_zero_sign)


def _window_sum_float(groups: list[Terms], E, F: int, truncation: str):
    """Steps 6-7 with exact float64 arithmetic: m = trunc(v * 2**(F-E)), S = sum(m).

    Exact because every v is a float64 with <= 53 significant bits, scaling by a power
    of two is exact (a result small enough to lose bits is below 1 and truncates to 0 or,
    for floor, -1 either way), each m is an integer below 2**(F+3) and their sum stays
    below 2**53.  ``trunc`` is truncation toward zero = per-term magnitude truncation.
    float32 groups (``range32``) take :func:`_window_sum_f32` where it applies.
    """
    if truncation not in ("magnitude", "floor"):
        raise ValueError(f"truncation {truncation!r}")
    scale = None
    S = None
    for g in groups:
        if not g.K:
            continue
        s = _window_sum_f32(g, E, F, truncation) if g.range32 else None
        if s is None:
            if scale is None:
                scale = np.ldexp(1.0, F - np.maximum(E, -900))   # E < -900 only when every addend is 0
            # (a float32 val is promoted to float64, exactly)
            if g.K == 1 and on_host():      # one addend (c): no sum
                s = (np.trunc if truncation == "magnitude" else np.floor)(g.val[0] * scale).astype(np.int64)
            else:
                s = (_trunc_sum64 if truncation == "magnitude" else _floor_sum64)(g.val, scale).astype(np.int64)
        S = s if S is None else S + s
    if S is None:
        return np.zeros(E.shape, np.int64)
    return np.broadcast_to(S, E.shape).astype(np.int64, copy=False)


def _window_sum_f32(g: Terms, E, F: int, truncation: str):
    """Steps 6-7 of one float32 group (``g.range32 = (lo, hi, bits)``), or None where the
    bounds below do not hold (the caller then runs the float64 path).

    A nonzero term is v = sig * 2**(e - fb), 1 <= sig < 2**bits, lo <= e <= hi, e <= E.
    The scale 2**(F - E) is applied with E clamped to [lo, Ehi], Ehi = hi - fb + bits + F:
    below lo no term is nonzero (every nonzero one has e <= E), so any scale gives the
    same zeros; above Ehi every |v| * 2**(F - E) is below 1, with or without the clamp,
    so trunc gives 0 and floor gives -1 for a negative term either way.  With the clamp
    the scale lies in [2**(fb - bits - hi), 2**(F - lo)] and every scaled nonzero term in
    [2**(lo - hi - bits), 2**(F + bits - fb)): all normal float32 numbers when the checks
    below pass, so the multiply is exact (a power of two), and so are trunc / floor and
    the cast to int32 (|m| < 2**(F + bits - fb) <= 2**30).  The K terms sum in int64
    (products kept as factors: :func:`_trunc_sum2`), or in int32 when
    K * (2**(F + bits - fb) - 1) < 2**31 (every partial sum is bounded the same way):
    exact either way.
    """
    lo, hi, bits = g.range32
    top = F + bits - g.fb                    # |m| < 2**top
    Ehi = hi - g.fb + bits + F
    if F - Ehi < -126 or F - lo > 127 or lo - hi - bits < -126 or top > 30:
        return None
    scale = _scale32(E, lo, Ehi, F)
    if g._val is None and g._factors is not None:
        (_, va), (_, vb) = g._factors
        if on_host():
            acc = np.int32 if g.K * ((1 << top) - 1) < (1 << 31) else np.int64
            s = _window_sum2_host(va, vb, scale, truncation == "floor", acc)
        else:
            s = (_floor_sum2 if truncation == "floor" else _trunc_sum2)(va, vb, scale)
        return np.broadcast_to(s, E.shape).astype(np.int64, copy=False)
    m = np.empty(np.broadcast_shapes(g.val.shape, scale.shape), np.int32)
    if truncation == "floor":
        x = g.val * scale
        np.floor(x, out=m, casting="unsafe")
    else:   # the cast into the int32 output truncates toward zero: one pass, no float temporary
        np.multiply(g.val, scale, out=m, casting="unsafe")
    acc = np.int32 if g.K * ((1 << top) - 1) < (1 << 31) else np.int64
    return np.sum(m, axis=0, dtype=acc).astype(np.int64)


# Fused steps of the float32 path (one kernel each on a GPU, see xp.fused).  Products of
# two factors: their exponents add, their values multiply exactly (_range32); the cast to
# int32 truncates toward zero (exact: |m| < 2**30, see _window_sum_f32); the sums are int64.

@fused
def _scale32(E, lo, hi, F):
    """2**(F - clip(E, lo, hi)) as float32 (exact: a normal float32 by _window_sum_f32's checks)."""
    return np.ldexp(np.float32(1.0), (F - np.clip(E, lo, hi)).astype(np.int32))


@fused
def _trunc_sum64(v, scale):
    return np.sum(np.trunc(v * scale), axis=0)


@fused
def _floor_sum64(v, scale):
    return np.sum(np.floor(v * scale), axis=0)


@fused
def _max_exp2(ea, eb):
    return np.max(ea + eb, axis=0)


@fused
def _trunc_sum2(va, vb, scale):
    return np.sum((va * vb * scale).astype(np.int32), axis=0)


@fused
def _floor_sum2(va, vb, scale):
    return np.sum(np.floor(va * vb * scale).astype(np.int32), axis=0)


def _window_sum2_host(va, vb, scale, floor: bool, acc):
    """_trunc_sum2 / _floor_sum2 on the host, one k at a time into reused buffers (each
    [batch] slice stays in cache; the same exact products, casts and integer sum)."""
    K = max(va.shape[0], vb.shape[0])
    shape = np.broadcast_shapes(va.shape[1:], vb.shape[1:], scale.shape)
    t = np.empty(shape, np.float32)
    m = np.empty(shape, np.int32)
    s = np.zeros(shape, acc)
    for k in range(K):
        np.multiply(va[min(k, va.shape[0] - 1)], vb[min(k, vb.shape[0] - 1)], out=t)
        if floor:
            np.multiply(t, scale, out=t)
            np.floor(t, out=t)
            m[...] = t
        else:    # the cast into the int32 buffer truncates toward zero
            np.multiply(t, scale, out=m, casting="unsafe")
        s += m
    return s


def _window_sum_int(groups: list[Terms], E, F: int, truncation: str):
    """Steps 6-7 in int64 (for addends with more than 53 significant bits)."""
    S = np.zeros(E.shape, np.int64)
    for g in groups:
        if not g.K:
            continue
        pre = max(0, F - g.fb)
        extra = max(0, g.fb - F)
        sh = np.clip((E - np.asarray(g.e, np.int64)) + extra, 0, 63)
        mag = np.asarray(g.mag, np.int64) << pre
        if truncation == "magnitude":
            m = mag >> sh
            m = np.where(g.neg, -m, m)
        elif truncation == "floor":
            m = np.where(g.neg, -mag, mag) >> sh
        else:
            raise ValueError(f"truncation {truncation!r}")
        S += np.sum(m, axis=0, dtype=np.int64)
    return S


def block_after(prod: Terms, c: Terms, p: BlockFMA, out) -> np.ndarray:
    """``c_entry = "after"``: window over the products only, then c added exactly, one rounding."""
    out = get_format(out)
    shape = np.broadcast_shapes(prod.batch_shape, c.batch_shape)
    sp = _specials([prod, c], shape)
    F = p.F
    E = np.broadcast_to(prod.emax(), shape).astype(np.int64, copy=False)
    if p.minexp is not None:
        E = np.maximum(E, p.minexp)
    if prod.float_ok():
        S = _window_sum_float([prod], E, F, p.truncation)
    else:
        S = _window_sum_int([prod], E, F, p.truncation)
    # the truncated product sum as one addend with fb = F, alignment exponent E
    allz = _zero_sign([prod], S, p.zero_sign, p.rounding)  # sign if the products are all zero
    st = Terms(np.where(S == 0, allz, S < 0)[None], np.abs(S)[None], np.where(S == 0, NEG_E, E)[None], F)
    return exact_round([st, c], out, p.rounding, overflow=p.overflow, nan_code=p.nan_bits,
                       zero_sign=p.zero_sign, frac_bits=p.out_frac, ftz=p.subnormal_output == "ftz",
                       specials=sp, rounded_zero_sign=p.rounded_zero_sign)


# ---------------------------------------------------------------------------
# Exact sums (reference semantics, f64 FMA, IEEE adds)
# ---------------------------------------------------------------------------

def exact_sum(groups: list[Terms]):
    """Exact signed sum of all addends: returns (S, L) with value = S * 2**L.

    S is int64 when every output's span fits in 62 bits (the common case), else a numpy
    object array of Python ints.  Zero terms are ignored.
    """
    shape = np.broadcast_shapes(*[g.batch_shape for g in groups])
    BIG = 1 << 40
    L = np.full(shape, BIG, np.int64)
    top = np.full(shape, -BIG, np.int64)
    nterms = 0
    obj = any(np.asarray(g.mag).dtype == object for g in groups)
    for g in groups:
        nterms += g.K
        mag = np.asarray(g.mag)
        nz = mag != 0
        lsb = np.asarray(g.e, np.int64) - g.fb
        if g.K:   # (CuPy's min/max have no `initial`: empty groups are skipped instead)
            L = np.minimum(L, np.min(np.where(nz, lsb, BIG), axis=0))
        if not obj:
            t = lsb + bitlen(mag)
            if g.K:
                top = np.maximum(top, np.max(np.where(nz, t, -BIG), axis=0))
    L = np.where(L == BIG, 0, L)
    budget = 62 - int(nterms).bit_length()
    if not obj and np.all(top - L <= budget):
        S = np.zeros(shape, np.int64)
        for g in groups:
            sh = np.where(np.asarray(g.mag) != 0, np.asarray(g.e, np.int64) - g.fb - L, 0)
            v = np.asarray(g.mag, np.int64) << sh
            np.negative(v, out=v, where=np.broadcast_to(g.neg, v.shape))
            S += np.sum(v, axis=0)
        return S, L
    S = np.zeros(shape, dtype=object)
    S[...] = 0
    for g in groups:
        mag = np.asarray(g.mag)
        nz = mag != 0
        sh = np.asarray(np.where(nz, np.asarray(g.e, np.int64) - g.fb - L, 0)).astype(object)
        v = np.asarray(np.asarray(mag, dtype=object) << sh, dtype=object)
        v = np.asarray(np.where(np.broadcast_to(g.neg, v.shape), -v, v), dtype=object)
        S = np.asarray(S + np.add.reduce(v, axis=0), dtype=object)
    return S, L


def exact_round(groups: list[Terms], out: Format, mode: str, *, overflow: str = "ieee",
                nan_code=None, zero_sign: str = "ieee", frac_bits=None, ftz=False,
                specials="compute", rounded_zero_sign: str = "sum") -> np.ndarray:
    """Exact sum of all addends rounded once into ``out`` (IEEE specials)."""
    out = get_format(out)
    shape = np.broadcast_shapes(*[g.batch_shape for g in groups])
    sp = _specials(groups, shape) if specials == "compute" else specials
    S, L = exact_sum(groups)
    if S.dtype == object:
        neg = np.asarray(S < 0).astype(bool)
        mag = np.asarray(np.where(neg, -S, S), dtype=object)
        zero = np.asarray(S == 0).astype(bool)
    else:
        neg, mag, zero = S < 0, np.abs(S), S == 0
    if np.any(zero):
        neg = np.where(zero, _zero_sign(groups, np.zeros(shape), zero_sign, mode), neg)
    nan = inf = None
    if sp is not None:
        nan, inf, ninf = sp
        neg = np.where(inf, ninf, neg)
    codes = encode(neg, mag, L, out, mode, frac_bits=frac_bits, overflow=overflow, ftz=ftz,
                   nan=nan, inf=inf, nan_code=nan_code)
    return _positive_rounded_zeros(codes, ~zero, out, rounded_zero_sign)


# ---------------------------------------------------------------------------
# Step 9: chaining blocks
# ---------------------------------------------------------------------------

def chain(prod: Terms, c_codes, ctype: str, dtype: str, p: BlockFMA) -> np.ndarray:
    """Run consecutive blocks of ``p.n`` terms; block j+1 takes block j's output as c."""
    K = prod.K
    n = p.n or K
    c = c_terms(c_codes, ctype, p)
    if p.normalise_products:
        prod = fix_normalised_exponent(prod)
    out = None
    starts = range(0, max(K, 1), n)
    for i, k0 in enumerate(starts):
        part = prod.take(slice(k0, min(K, k0 + n)))
        if p.c_entry == "after" and i == 0:
            out = block_after(part, c, p, dtype)
        else:
            out = block([part, c], p, dtype)
        if k0 + n < K:
            c = c_terms(out, dtype, p)
    return out
