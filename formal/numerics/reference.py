"""Scalar reference implementation of the same arithmetic models.

Deliberately simple: one output element at a time, Python ``int`` and
``fractions.Fraction``, no numpy.  It shares nothing with the vectorised path except
the format table (:class:`formal.numerics.formats.Format` fields read from
``specs/formats.toml``) and the parameter records (:mod:`formal.numerics.params`).
Tests assert ``dot_terms == dot_scalar`` on random inputs for every path.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor

from .archs import get_model
from .formats import get_format
from .params import BlockFMA, Emulated, ExactRound, FmaChain, FmaPipe, IntegerDot, Narrowed, Popc


# ---------------------------------------------------------------------------
# Scalar codec
# ---------------------------------------------------------------------------

@dataclass
class Val:
    """A decoded element: kind "fin" | "nan" | "inf"; value = (-1)**neg * mag."""

    kind: str
    neg: bool
    mag: Fraction
    exp: int = 0          # alignment (field) exponent, pinned at emin for subnormals

    @property
    def value(self) -> Fraction:
        return -self.mag if self.neg else self.mag

    @property
    def is_zero(self) -> bool:
        return self.kind == "fin" and self.mag == 0


def floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for x > 0, exactly."""
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    # now 2**(e-1) < n/d < 2**(e+1)
    if e >= 0:
        if n < d << e:
            e -= 1
    else:
        if n << -e < d:
            e -= 1
    return e


def pow2(e: int) -> Fraction:
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def decode1(code: int, fmt) -> Val:
    f = get_format(fmt)
    code = int(code)
    if f.cls in ("int", "bit"):
        v = code & ((1 << f.bits) - 1)
        if f.signed and v >= 1 << (f.bits - 1):
            v -= 1 << f.bits
        return Val("fin", v < 0, Fraction(abs(v)), 0)
    code >>= f.ignored_low_bits
    width = f.bits - f.ignored_low_bits
    code &= (1 << width) - 1
    sign = (code >> (width - 1)) & 1 if f.signed else 0
    magcode = code & ((1 << (width - (1 if f.signed else 0))) - 1)
    m = f.mantissa
    E = magcode >> m
    M = magcode & ((1 << m) - 1)
    ones = (1 << f.exponent) - 1
    if f.nan == "ieee":
        if E == ones and M != 0:
            return Val("nan", bool(sign), Fraction(0))
    elif code in f.nan_codes():
        return Val("nan", bool(sign), Fraction(0))
    if f.inf and E == ones and M == 0:
        return Val("inf", bool(sign), Fraction(0))
    if f.subnormal and E == 0:
        return Val("fin", bool(sign), M * pow2(1 - f.bias - m), 1 - f.bias)
    return Val("fin", bool(sign), ((1 << m) + M) * pow2(E - f.bias - m), E - f.bias)


def _max_finite(f) -> Fraction:
    m = f.mantissa
    if f.nan == "ieee" or f.inf:
        return (2 * (1 << m) - 1) * pow2((1 << f.exponent) - 2 - f.bias - m)
    width = f.bits - f.ignored_low_bits - (1 if f.signed else 0)
    code = (1 << width) - 1
    nans = {c & ((1 << width) - 1) for c in f.nan_codes()}
    while code in nans:
        code -= 1
    return decode1(code, f).mag


def _min_exp(f) -> int:
    return 1 - f.bias if f.subnormal else -f.bias


def _nan_code(f, nan_code=None) -> int:
    if nan_code is not None:
        return int(nan_code)
    m = f.mantissa
    if f.nan == "ieee":
        c = (((1 << f.exponent) - 1) << m) | ((1 << m) - 1)
    elif f.nan_codes():
        width = f.bits - f.ignored_low_bits
        pos = [x for x in f.nan_codes() if not (f.signed and x >> (width - 1))]
        c = max(pos) if pos else max(f.nan_codes())
    else:
        return _encode_mag(False, _max_finite(f), f, "rz", None)
    return c << f.ignored_low_bits


def _encode_mag(neg: bool, x: Fraction, f, mode: str, P) -> int:
    """Encode a finite, in-range magnitude (rounding already done) into bits."""
    m = f.mantissa
    P = m if P is None else P
    width = f.bits - f.ignored_low_bits
    if x == 0:
        code = 0
    else:
        e = max(floor_log2(x), _min_exp(f))
        n = x / pow2(e - P)
        assert n.denominator == 1
        n = n.numerator
        if n >= 1 << P:
            code = ((e + f.bias) << m) | ((n - (1 << P)) << (m - P))
        else:
            code = n << (m - P)
    if neg and f.signed:
        code |= 1 << (width - 1)
    return code << f.ignored_low_bits


def round_value(v: Fraction, f, mode: str, P=None):
    """Round a real to the format's grid (no overflow check). Returns a Fraction."""
    if v == 0:
        return Fraction(0)
    neg = v < 0
    x = -v if neg else v
    P = f.mantissa if P is None else P
    e = max(floor_log2(x), _min_exp(f))
    ulp = pow2(e - P)
    q = x / ulp
    n = floor(q)
    r = q - n
    if mode == "rn":
        up = r > Fraction(1, 2) or (r == Fraction(1, 2) and n % 2 == 1)
    elif mode == "rna":
        up = r >= Fraction(1, 2)
    elif mode == "rz":
        up = False
    elif mode == "rm":
        up = r > 0 and neg
    elif mode == "rp":
        up = r > 0 and not neg
    else:
        raise ValueError(mode)
    y = (n + (1 if up else 0)) * ulp
    return -y if neg else y


def encode1(v, fmt, mode: str = "rn", *, frac_bits=None, overflow: str = "ieee", ftz: bool = False,
            zero_neg: bool = False, nan_code=None) -> int:
    """Round a real (Fraction), or "nan" / "+inf" / "-inf", once into ``fmt``."""
    f = get_format(fmt)
    nanc = _nan_code(f, nan_code)
    P = f.mantissa if frac_bits is None else frac_bits
    maxfin = round_value(_max_finite(f), f, "rz", P)
    if isinstance(v, str):
        if v == "nan":
            return nanc
        neg = v.startswith("-")
        if overflow == "satfinite" or not f.inf:
            if overflow != "satfinite" and f.nan_code >= 0:
                return nanc
            return _encode_mag(neg, maxfin, f, mode, P)
        return _encode_mag(neg, Fraction(0), f, mode, P) | (f.inf_code << f.ignored_low_bits)
    v = Fraction(v)
    if not f.signed and v < 0:
        return nanc
    if v == 0:
        if not f.subnormal:
            return _encode_mag(False, pow2(_min_exp(f)), f, mode, P)
        return _encode_mag(zero_neg and f.signed, Fraction(0), f, mode, P)
    neg = v < 0
    y = round_value(v, f, mode, P)
    ay = -y if neg else y
    if not f.subnormal and ay < pow2(_min_exp(f)):
        ay = pow2(_min_exp(f))
    if ay > maxfin:
        if overflow == "satfinite":
            big = "max"
        elif overflow == "inf" or mode in ("rn", "rna"):
            big = "inf"
        elif mode == "rz":
            big = "max"
        elif mode == "rm":
            big = "inf" if neg else "max"
        else:
            big = "max" if neg else "inf"
        if big == "max":
            return _encode_mag(neg, maxfin, f, mode, P)
        return encode1("-inf" if neg else "+inf", f, mode, frac_bits=frac_bits, overflow="ieee",
                       nan_code=nan_code)
    if ftz and ay < pow2(_min_exp(f)):
        return _encode_mag(neg, Fraction(0), f, mode, P)
    return _encode_mag(neg, ay, f, mode, P)


def value_of(code: int, fmt):
    """Fraction value, or "nan"/"+inf"/"-inf" (for tests)."""
    d = decode1(code, fmt)
    if d.kind == "nan":
        return "nan"
    if d.kind == "inf":
        return "-inf" if d.neg else "+inf"
    return d.value


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def _specials(products, c: Val | None):
    """IEEE-style special outcome of sum(products) + c: None, "nan", "+inf" or "-inf".

    products: tuples of the decoded factors of each term (a, b[, scale_a, scale_b]).
    """
    pos = neg = nan = False
    for factors in products:
        if any(f.kind == "nan" for f in factors):
            nan = True
        elif any(f.kind == "inf" for f in factors):
            if any(f.is_zero for f in factors):
                nan = True
            elif sum(f.neg for f in factors) % 2:
                neg = True
            else:
                pos = True
    if c is not None:
        if c.kind == "nan":
            nan = True
        elif c.kind == "inf":
            if c.neg:
                neg = True
            else:
                pos = True
    if nan or (pos and neg):
        return "nan"
    if pos:
        return "+inf"
    if neg:
        return "-inf"
    return None


def _true_exp(v: Val) -> int:
    return floor_log2(v.mag)


def _f32_field_exp(x: Fraction) -> int:
    """Field exponent of a value when it is held as an f32 (pinned at -126)."""
    return max(floor_log2(x), -126)


def _decode_in(code, t, p) -> Val:
    if t == "tf32":
        conv = getattr(p, "tf32_conversion", "truncate")
        if conv == "rn":
            v = value_of(int(code), "f32")
            code = encode1(v, "tf32", "rn") if not isinstance(v, str) else encode1(v, "tf32")
            return decode1(code, "tf32")
        full = decode1(code, "f32")
        d = decode1(code, "tf32")
        if getattr(p, "tf32_nan", "blind") == "keep" and full.kind == "nan":
            return full
        return d
    return decode1(code, t)


# ---------------------------------------------------------------------------
# The block FMA, one output at a time (numerics.md §2)
# ---------------------------------------------------------------------------

def _zero_result_sign(terms, rule, mode):
    """terms: list of (neg, value) pairs of every addend, including zeros."""
    if rule == "positive":
        return False
    if all(v == 0 for _, v in terms):
        return all(n for n, _ in terms) or (mode == "rm" and any(n for n, _ in terms))
    return mode == "rm"


def block1(products, c: Val, p: BlockFMA, out, *, c_from: str) -> int:
    """One block.  products: list of (neg, value, align_exp) with value a Fraction >= 0
    (zeros included: they only matter for the sign of a zero result) plus the raw
    pairs for specials; c: decoded accumulator input."""
    plist, pairs = products
    sp = _specials(pairs, c)
    if sp is not None:
        return encode1(sp, out, p.rounding, overflow=p.overflow, nan_code=p.nan_bits)
    # c as an addend: its alignment exponent
    if c.mag != 0:
        ce = _f32_field_exp(c.mag) if p.c_as_f32 else c.exp
        if not p.pin_c:   # a subnormal c aligns at its leading one
            ce = min(ce, floor_log2(c.mag))
    addends = [(n, v, e) for (n, v, e) in plist]
    cterm = (c.neg, c.mag, ce if c.mag != 0 else None)
    zero_terms = [(n, v) for (n, v, _) in addends] + [(c.neg, c.mag)]
    if p.c_entry == "after" and c_from == "c":
        window = addends
    else:
        window = addends + [cterm]
    if p.truncation == "none":
        total = sum((-v if n else v) for (n, v, _) in window)
        if window is addends:
            total += c.value
        return _round_out(total, zero_terms, p, out)
    exps = [e for (_, v, e) in window if e is not None]
    E = max(exps) if exps else None
    if p.minexp is not None:
        E = p.minexp if E is None else max(E, p.minexp)
    if E is None:
        total = Fraction(0)
    else:
        unit = pow2(E - p.F)
        S = 0
        for (n, v, e) in window:
            if v == 0:
                continue
            if p.truncation == "magnitude":
                t = floor(v / unit)
                S += -t if n else t
            elif p.truncation == "floor":
                S += floor((-v if n else v) / unit)
            else:
                raise ValueError(p.truncation)
        total = S * unit
    if window is addends:   # c_entry == "after": c added exactly to the truncated sum
        total += c.value
    return _round_out(total, zero_terms, p, out)


def _round_out(total, zero_terms, p: BlockFMA, out) -> int:
    zneg = _zero_result_sign(zero_terms, p.zero_sign, p.rounding) if total == 0 else False
    code = encode1(total, out, p.rounding, frac_bits=p.out_frac, overflow=p.overflow,
                   ftz=p.subnormal_output == "ftz", zero_neg=zneg, nan_code=p.nan_bits)
    f = get_format(out)
    sign = 1 << (f.bits - 1)
    if total != 0 and p.rounded_zero_sign == "positive" and f.signed and code & ~sign == 0:
        code = 0   # a nonzero sum that rounds to zero: +0
    return code


def _product_list(avals, bvals, p: BlockFMA, scales=None):
    """(list of (neg, |value|, alignment exponent) of finite products, factor tuples)."""
    plist = []
    pairs = []
    for i, (x, y) in enumerate(zip(avals, bvals)):
        sc = list(scales[i]) if scales else []
        factors = [x, y] + sc
        pairs.append(tuple(factors))
        if any(f.kind != "fin" for f in factors):
            continue
        neg = False
        v = Fraction(1)
        for f in factors:
            neg ^= f.neg
            v *= f.mag
        if p.pin_subnormals:
            e = x.exp + y.exp
        else:  # subnormal A/B inputs align at their leading one
            e = sum(_true_exp(f) if f.mag != 0 else f.exp for f in (x, y))
        e += sum(f.exp for f in sc)
        if p.normalise_products and v != 0:
            e = floor_log2(v)
        z = getattr(p, "zero_factor_exp", None)
        if v == 0:   # a zero product takes no part in the alignment, unless zeros have an exponent
            e = None if z is None else sum(z if f.mag == 0 else f.exp for f in (x, y)) + sum(f.exp for f in sc)
        plist.append((neg, v, e))
    return plist, pairs


def chain1(avals, bvals, c: Val, p: BlockFMA, ctype, dtype, scales=None) -> int:
    K = len(avals)
    n = p.n or K
    out = None
    c_from = "c"
    for k0 in range(0, max(K, 1), n):
        prods = _product_list(avals[k0:k0 + n], bvals[k0:k0 + n], p,
                              scales[k0:k0 + n] if scales else None)
        out = block1(prods, c, p, dtype, c_from=c_from)
        c = decode1(out, dtype)
        c_from = "chain"
    return out


# ---------------------------------------------------------------------------
# Other paths
# ---------------------------------------------------------------------------

def fma1(a: Val, b: Val, c: Val, mode: str, nan_code=None, fmt="f64") -> int:
    """IEEE fma(a, b, c) with one rounding into ``fmt`` (binary64 by default), by exact rationals."""
    sp = _specials([(a, b)], c)
    if sp is not None:
        return encode1(sp, fmt, mode, nan_code=nan_code)
    prod = a.value * b.value
    total = prod + c.value
    if total == 0:
        if prod == 0 and c.mag == 0:
            pneg = a.neg != b.neg
            zneg = (pneg and c.neg) if (pneg == c.neg) else (mode == "rm")
        else:
            zneg = mode == "rm"
        return encode1(0, fmt, mode, zero_neg=zneg)
    return encode1(total, fmt, mode)


def mul1(a: Val, b: Val, fmt, mode: str = "rn", nan_code=None) -> int:
    """IEEE a * b rounded once (FMUL)."""
    sp = _specials([(a, b)], None)
    if sp is not None:
        return encode1(sp, fmt, mode, nan_code=nan_code)
    return encode1(a.value * b.value, fmt, mode, zero_neg=(a.neg != b.neg))


def convert1(code: int, src, dst, mode: str = "rn", nan_code=None) -> int:
    """IEEE conversion of one encoding between formats (keeps the sign of a zero)."""
    v = decode1(code, src)
    if v.kind != "fin":
        return encode1(_as_real(v), dst, mode, nan_code=nan_code)
    return encode1(v.value, dst, mode, zero_neg=v.neg and v.mag == 0, nan_code=nan_code)


def _fmapipe1(a, b, c, p: FmaPipe, ctx) -> int:
    """sm_90 m8n8k4 .f16 on the FMA pipe (:class:`FmaPipe`), one output."""
    w = p.work
    av = [decode1(x, ctx["atype"]) for x in a]
    bv = [decode1(y, ctx["btype"]) for y in b]
    acc = convert1(c, ctx["ctype"], w)                  # exact (f16 c widened, or f32 as is)
    plus0 = decode1(0, w)
    for g in p.groups:
        k0 = g[0]
        if p.start == "mul":
            part = mul1(av[k0], bv[k0], w, nan_code=p.nan_bits)
        else:
            part = fma1(av[k0], bv[k0], plus0, "rn", p.nan_bits, fmt=w)
        for k in g[1:]:
            part = fma1(av[k], bv[k], decode1(part, w), "rn", p.nan_bits, fmt=w)
        acc = add1(decode1(acc, w), decode1(part, w), w, "rn", nan_code=p.nan_bits)
    if ctx["dtype"] == w:
        return acc
    return convert1(acc, w, ctx["dtype"], "rn", nan_code=p.out_nan_bits)


def _is_nan_code(code: int, fmt) -> bool:
    return decode1(code, fmt).kind == "nan"


def _f64_step(a: int, b: int, acc: int, mode: str, p: FmaChain) -> int:
    """One DMMA step with the record's NaN rule (see :class:`FmaChain`)."""
    if p.nan_rule == "canonical":
        return fma1(decode1(a, "f64"), decode1(b, "f64"), decode1(acc, "f64"), mode, p.nan_bits)
    ops = {"a": a, "b": b, "c": acc}
    for name in p.nan_priority:
        if _is_nan_code(ops[name], "f64"):
            return ops[name] | (1 << 51)
    return fma1(decode1(a, "f64"), decode1(b, "f64"), decode1(acc, "f64"), mode, p.default_nan)


def add1(x: Val, y: Val, out, mode: str, nan_code=None) -> int:
    """IEEE x + y rounded once."""
    sp = None
    if x.kind == "nan" or y.kind == "nan":
        sp = "nan"
    elif x.kind == "inf" and y.kind == "inf":
        sp = "nan" if x.neg != y.neg else ("-inf" if x.neg else "+inf")
    elif x.kind == "inf":
        sp = "-inf" if x.neg else "+inf"
    elif y.kind == "inf":
        sp = "-inf" if y.neg else "+inf"
    if sp is not None:
        return encode1(sp, out, mode, nan_code=nan_code)
    total = x.value + y.value
    if total == 0:
        if x.mag == 0 and y.mag == 0:
            zneg = (x.neg and y.neg) if x.neg == y.neg else mode == "rm"
        else:
            zneg = mode == "rm"
        return encode1(0, out, mode, zero_neg=zneg)
    return encode1(total, out, mode)


def _emulated1(a, b, c, p: Emulated, ctx) -> int:
    via = p.via
    # exact conversion to the emulating format: values are representable, re-decode for exponents
    av = [decode1(encode1(_as_real(decode1(x, ctx["atype"])), via), via) for x in a]
    bv = [decode1(encode1(_as_real(decode1(y, ctx["btype"])), via), via) for y in b]
    dtype = ctx["dtype"]
    if p.c_add == "window":
        d = decode1(c, ctx["ctype"])
    else:
        d = decode1(0, dtype)
    out = None
    for g in p.groups_for(len(a)):
        out = chain1([av[k] for k in g], [bv[k] for k in g], d, p.hmma, None, dtype)
        d = decode1(out, dtype)
    if p.c_add == "window":
        return out
    return add1(d, decode1(c, ctx["ctype"]), dtype, p.c_add, nan_code=p.add_nan_bits)


def _as_real(v: Val):
    if v.kind == "nan":
        return "nan"
    if v.kind == "inf":
        return "-inf" if v.neg else "+inf"
    return v.value


def _exact1(a, b, c, p: ExactRound, ctx, scales=None) -> int:
    key = ctx["key"]
    mode = p.rounding
    if key == "f64" and ctx.get("rounding"):
        mode = ctx["rounding"].lstrip(".")
    av = [_decode_in(x, ctx["atype"], p) for x in a]
    bv = [_decode_in(y, ctx["btype"], p) for y in b]
    cv = decode1(c, ctx["ctype"])
    pairs = [tuple([x, y] + (list(scales[i]) if scales else [])) for i, (x, y) in enumerate(zip(av, bv))]
    sp = _specials(pairs, cv)
    if sp is not None:
        return encode1(sp, ctx["dtype"], mode, nan_code=p.nan_bits)
    total = cv.value
    zero_terms = [(cv.neg, cv.mag)]
    for i, (x, y) in enumerate(zip(av, bv)):
        v = x.value * y.value
        neg = x.neg != y.neg
        if scales:
            for s in scales[i]:
                v *= s.value
                neg ^= s.neg
        total += v
        zero_terms.append((neg, abs(v)))
    zneg = _zero_result_sign(zero_terms, p.zero_sign, mode) if total == 0 else False
    return encode1(total, ctx["dtype"], mode, zero_neg=zneg, nan_code=p.nan_bits)


def _int1(a, b, c, p: IntegerDot, ctx) -> int:
    va = [decode1(x, ctx["atype"]).value for x in a]
    vb = [decode1(y, ctx["btype"]).value for y in b]
    acc = int(decode1(c, ctx["ctype"]).value)
    lo, hi = -(1 << 31), (1 << 31) - 1
    if ctx["satfinite"] and p.saturation == "per_step":
        for x, y in zip(va, vb):
            acc = min(hi, max(lo, acc + int(x * y)))
    else:
        acc += int(sum(x * y for x, y in zip(va, vb)))
        if ctx["satfinite"]:
            acc = min(hi, max(lo, acc))
    return acc & 0xFFFFFFFF


def _popc1(a, b, c, ctx) -> int:
    op = (ctx["bitop"] or "").lstrip(".")
    if op == "and":
        n = sum((int(x) & 1) & (int(y) & 1) for x, y in zip(a, b))
    elif op == "xor":
        n = sum((int(x) & 1) ^ (int(y) & 1) for x, y in zip(a, b))
    else:
        raise ValueError("bitop")
    return (int(decode1(c, ctx["ctype"]).value) + n) & 0xFFFFFFFF


def _scaled_block_exact1(av, bv, scales, c: Val, p: BlockFMA, ctx, bs) -> int:
    K = len(av)
    plist, pairs = [], []
    for k0 in range(0, K, bs):
        total = Fraction(0)
        sa, sb = scales[k0]
        for i in range(k0, min(K, k0 + bs)):
            pairs.append((av[i], bv[i], sa, sb))
            if av[i].kind == "fin" and bv[i].kind == "fin":
                total += av[i].value * bv[i].value
        if sa.kind == "fin" and sb.kind == "fin":
            v = total * sa.value * sb.value
            plist.append((v < 0, abs(v), floor_log2(abs(v)) if v != 0 else None))
    return block1((plist, pairs), c, p.but(n=None), ctx["dtype"], c_from="c")


# ---------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------

def dot_scalar(a, b, c, *, atype, btype, ctype, dtype, arch="sm_90", satfinite=False, bitop=None,
               rounding=None, kind=None, scale_a=None, scale_b=None, stype=None, shape=None,
               sparse=False, scale_vec=None) -> int:
    """One output element of ``dot_terms`` (a, b: sequences of K codes; c: one code)."""
    model = get_model(arch)
    atype, btype, ctype, dtype = (str(t).lstrip(".") for t in (atype, btype, ctype, dtype))
    scaled = scale_a is not None
    key, p = model.path(atype, btype, ctype, dtype, kind, scaled=scaled, shape=shape)
    ctx = dict(atype=atype, btype=btype, ctype=ctype, dtype=dtype, satfinite=satfinite, bitop=bitop,
               rounding=rounding, kind=kind, key=key, stype=stype, scale_vec=scale_vec)
    a = [int(x) for x in a]
    b = [int(y) for y in b]
    c = int(c)
    scales = None
    if scaled:
        scales = [(decode1(int(x), stype), decode1(int(y), stype)) for x, y in zip(scale_a, scale_b)]
    return _run1(a, b, c, p, ctx, scales)


def _run1(a, b, c, p, ctx, scales) -> int:
    """One output of record ``p`` (ctx: the types and instruction qualifiers)."""
    atype, btype, ctype, dtype = ctx["atype"], ctx["btype"], ctx["ctype"], ctx["dtype"]
    key, rounding, kind, stype, scale_vec = ctx["key"], ctx["rounding"], ctx["kind"], ctx["stype"], ctx["scale_vec"]
    scaled = scales is not None
    if isinstance(p, Narrowed):
        # the inner record into p.via, then one IEEE conversion into D (F2FP)
        wide = _run1(a, b, c, p.inner, dict(ctx, dtype=p.via), scales)
        return convert1(wide, p.via, dtype, p.rounding, nan_code=p.nan_bits)
    if isinstance(p, ExactRound):
        if key == "int":
            return _int1(a, b, c, IntegerDot(), ctx)
        if key == "b1":
            return _popc1(a, b, c, ctx)
        return _exact1(a, b, c, p, ctx, scales)
    if isinstance(p, IntegerDot):
        return _int1(a, b, c, p, ctx)
    if isinstance(p, Popc):
        return _popc1(a, b, c, ctx)
    if isinstance(p, FmaChain):
        mode = (rounding or "rn").lstrip(".")
        ks = range(len(a)) if p.order == "ascending" else range(len(a) - 1, -1, -1)
        acc = c if p.c_first else 1 << 63
        for k in ks:
            acc = _f64_step(a[k], b[k], acc, mode, p)
        if not p.c_first:
            if p.nan_rule == "canonical":
                acc = add1(decode1(acc, "f64"), decode1(c, "f64"), "f64", mode, p.nan_bits)
            else:   # the final add as a step whose "a" and "c" are the accumulator and "b" is c
                nans = [x for x in ({"a": acc, "b": c, "c": acc}[n] for n in p.nan_priority)
                        if _is_nan_code(x, "f64")]
                acc = (nans[0] | (1 << 51)) if nans else add1(decode1(acc, "f64"), decode1(c, "f64"), "f64",
                                                              mode, p.default_nan)
        return acc
    if isinstance(p, FmaPipe):
        return _fmapipe1(a, b, c, p, ctx)
    if isinstance(p, Emulated):
        return _emulated1(a, b, c, p, ctx)
    if isinstance(p, BlockFMA):
        av = [_decode_in(x, atype, p) for x in a]
        bv = [_decode_in(y, btype, p) for y in b]
        cv = decode1(c, ctype)
        if scaled and p.scale_mode == "block_exact":
            if scale_vec is None:
                k = (kind or "").lstrip(".").replace("kind::", "")
                scale_vec = {"mxf8f6f4": "1X", "mxf4": "2X"}.get(k, "4X" if stype == "ue4m3" else "2X")
            nvec = int(str(scale_vec).lstrip(".").replace("scale_vec::", "").rstrip("X"))
            bs = max(1, len(a) // nvec)
            return _scaled_block_exact1(av, bv, scales, cv, p, ctx, bs)
        return chain1(av, bv, cv, p, ctype, dtype, scales)
    raise TypeError(type(p))


def mma_scalar(A, B, C, **kw):
    """Dense loop: A [T][M][K], B [T][K][N], C [T][M][N] -> nested lists of codes."""
    sa = kw.pop("scale_a", None)
    sb = kw.pop("scale_b", None)
    out = []
    for t in range(len(A)):
        M, N, K = len(A[t]), len(B[t][0]), len(A[t][0])
        rows = []
        for i in range(M):
            row = []
            for j in range(N):
                extra = {}
                if sa is not None:
                    extra = dict(scale_a=[sa[t][i][k] for k in range(K)],
                                 scale_b=[sb[t][k][j] for k in range(K)])
                row.append(dot_scalar([A[t][i][k] for k in range(K)], [B[t][k][j] for k in range(K)],
                                      C[t][i][j], **kw, **extra))
            rows.append(row)
        out.append(rows)
    return out
