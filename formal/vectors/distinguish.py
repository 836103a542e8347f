"""Inputs on which two arithmetic models differ, found by structured search and reduced.

A *model* here is anything :func:`eval_terms` can run on one output element's terms:
an architecture name (``"sm_90"``), an :class:`~formal.numerics.params.ArchModel`
(a parameter variant, e.g. a hypothesis silicon refuted), or a :class:`Mutant` (an
architecture plus an input transform, for mechanisms the parameter records do not
name: flushing one operand's subnormals, a c kept with fewer bits).

:func:`search` draws candidate dot products (a [Ka], b [Ka], c) from input *regimes*
built to reach each mechanism (:data:`REGIMES`: tiny products with c = 0 near the
accumulator floor, terms a few binades under c, cancellation, terms spread over k
(blocks, fp8 groups), overflow, isolated subnormals, several NaN/Inf sources, integer
bounds, raw bits), evaluates both models on the whole batch (numpy), and
:func:`reduce` turns each difference into a minimal witness: c dropped where possible,
then terms zeroed one at a time while the models still differ (delta debugging),
then remaining factors replaced by 1 where that keeps the difference.

:func:`mechanisms` lists, for a form and its reference model, the known wrong
variants, one per mechanism (the accumulator floor, round-to-nearest vs truncation,
the fp8 emulation's k mod 4 groups and its late c, the NaN rule, c precision,
per-operand subnormal flushing, saturation, the window width / block size) plus,
for sm_90, every alternative that silicon refuted (:func:`formal.numerics.fit.sm90_alternatives`).
The coverage model ``mechanisms`` (:mod:`formal.vectors.coverage`) places the reduced
witnesses; ``ptx-formal audit --identify`` uses :func:`search` between architecture
models.  Everything is seeded: the same arguments give the same witnesses.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..catalog import Form
from ..numerics.formats import decode, get_format

# ------------------------------------------------------------------------------------------
# models


@dataclass(frozen=True)
class Mutant:
    """An architecture model run on transformed inputs (a wrong model of one mechanism)."""

    name: str
    arch: Any = "sm_90"
    transform: Callable | None = None    # (form, a [T,K], b [T,K], c [T]) -> (a, b, c)

    def __str__(self) -> str:
        return self.name


def model_name(m) -> str:
    return m.name if hasattr(m, "name") else str(m)


def eval_terms(form: Form, model, a, b, c) -> np.ndarray:
    """D of a batch of output elements: a, b [T, Ka] (the evaluator's term order), c [T]."""
    from ..numerics import dot_terms
    from .draft import numerics_kw, unit_scale

    a = np.asarray(a, np.uint64)
    b = np.asarray(b, np.uint64)
    c = np.asarray(c, np.uint64)
    arch = model
    if isinstance(model, Mutant):
        arch = model.arch
        if model.transform is not None:
            a, b, c = model.transform(form, a.copy(), b.copy(), c.copy())
    kw = numerics_kw(form, arch)
    if form.block_scale:
        kw["scale_a"] = kw["scale_b"] = np.full(a.shape, unit_scale(form), np.uint8)
    return np.asarray(dot_terms(a, b, c, **kw)).astype(np.uint64)


def supports(form: Form, model) -> bool:
    """The model has an arithmetic path for the form."""
    from ..numerics.archs import get_model

    from ..evaluate import check_available

    arch = model.arch if isinstance(model, Mutant) else model
    try:
        check_available(form, arch)              # the instruction exists on that target (a model: its base's)
        m = get_model(arch)
        m.path(form.atype, form.btype, form.c_type, form.dtype, form.kind, scaled=bool(form.block_scale),
               shape=form.mnk)
        return True
    except Exception:
        return False


def same_record(form: Form, m1, m2) -> bool:
    """Both architecture models serve the form with the same parameters (evidence aside):
    no input can tell them apart."""
    from dataclasses import fields, is_dataclass

    from ..numerics.archs import get_model

    if isinstance(m1, Mutant) or isinstance(m2, Mutant):
        return False

    def rec(m):
        _, p = get_model(m).path(form.atype, form.btype, form.c_type, form.dtype, form.kind,
                                 scaled=bool(form.block_scale), shape=form.mnk)
        return p

    def strip(p):
        if not is_dataclass(p):
            return p
        return tuple((f.name, strip(getattr(p, f.name))) for f in fields(p) if f.name != "evidence")

    return strip(rec(m1)) == strip(rec(m2))


# ------------------------------------------------------------------------------------------
# element encodings

def _fmt(t):
    return get_format(t)


@functools.lru_cache(maxsize=None)
def _codes(t: str) -> tuple:
    """(mantissa, sign shift or None, ignored low bits) as uint64, and the NaN codes that a
    normal encoding can hit (formats whose all-ones exponent holds finite values, e4m3):
    the per-call constants of :func:`_enc` and :func:`_normal` (this search calls them per row)."""
    f = _fmt(t)
    sign = np.uint64(f.field_bits - 1) if f.signed else None
    return np.uint64(f.mantissa), sign, np.uint64(f.ignored_low_bits), tuple(np.uint64(c) for c in f.nan_codes())


def _enc(t: str, neg, efield, frac) -> np.ndarray:
    m, sign, low, _ = _codes(t)
    v = (np.asarray(efield, np.uint64) << m) | np.asarray(frac, np.uint64)
    if sign is not None:
        v = v | (np.asarray(neg, np.uint64) << sign)
    return v << low


def _clip(x, lo: int, hi: int):
    """np.clip for int64 arrays (the same values, a fraction of its call overhead)."""
    return np.minimum(np.maximum(x, lo), hi)


def _normal(rng, t: str, e, n: int, neg=None, rich: bool = True) -> np.ndarray:
    """n normal encodings of t at unbiased exponents e (clipped to the format's range)."""
    f = _fmt(t)
    e = _clip(np.asarray(e, np.int64), f.emin, f.emax)
    m = f.mantissa
    frac = rng.integers(0, 1 << m, n, dtype=np.uint64) if (rich and m) else np.zeros(n, np.uint64)
    if neg is None:
        neg = rng.integers(0, 2, n) if f.signed else np.zeros(n, np.int64)
    out = _enc(t, neg, e + f.bias, frac)
    # formats whose all-ones exponent holds finite values (e4m3): avoid the NaN codes
    nans = _codes(t)[3]
    if nans:
        x = out >> _codes(t)[2]
        bad = x == nans[0]
        for c in nans[1:]:
            bad |= x == c
        out[bad] &= ~np.uint64(1 << f.ignored_low_bits)
    if f.ignored_low_bits and rich:
        out |= rng.integers(0, 1 << f.ignored_low_bits, n, dtype=np.uint64)   # tf32: junk in the dropped bits
    return out


def _split_exp(rng, ta: str, tb: str, target) -> tuple[np.ndarray, np.ndarray]:
    """Exponents (ea, eb) with ea + eb close to target, each in its format's normal range."""
    fa, fb = _fmt(ta), _fmt(tb)
    target = np.asarray(target, np.int64)
    lo = np.maximum(fa.emin, target - fb.emax)
    hi = np.minimum(fa.emax, target - fb.emin)
    hi = np.maximum(hi, lo)
    ea = lo + (rng.random(target.shape) * (hi - lo + 1)).astype(np.int64)
    ea = _clip(ea, fa.emin, fa.emax)
    eb = _clip(target - ea, fb.emin, fb.emax)
    return ea, eb


def _subnormal(rng, t: str, n: int) -> np.ndarray:
    f = _fmt(t)
    if not f.subnormal or f.mantissa == 0:
        return np.zeros(n, np.uint64)
    frac = rng.integers(1, 1 << f.mantissa, n, dtype=np.uint64)
    neg = rng.integers(0, 2, n) if f.signed else np.zeros(n, np.int64)
    return _enc(t, neg, 0, frac)


def _special(rng, t: str, n: int) -> np.ndarray:
    """NaNs (random payloads and signs where the format has them), Infs, signed zeros."""
    from .elements import inf_code, nan_codes, neg_zero

    f = _fmt(t)
    pool = [c for _, c in nan_codes(t)]
    if f.nan == "ieee":
        m, ones = f.mantissa, (1 << f.exponent) - 1
        pay = rng.integers(1, 1 << m, 8, dtype=np.uint64)
        pool += [int(x) for x in _enc(t, rng.integers(0, 2, 8), ones, pay)]
    ic = inf_code(t)
    if ic is not None:
        pool += [ic, inf_code(t, True)]
    pool += [0, neg_zero(t)]
    if not pool:
        return np.zeros(n, np.uint64)
    return np.asarray(pool, np.uint64)[rng.integers(0, len(pool), n)]


# ------------------------------------------------------------------------------------------
# regimes: batches of candidate dot products


def _frame(form: Form, T: int):
    from .draft import dims

    *_, Ka = dims(form)
    return np.zeros((T, Ka), np.uint64), np.zeros((T, Ka), np.uint64), np.zeros(T, np.uint64), Ka


def _positions(rng, T: int, Ka: int, kmax: int = 4) -> list[np.ndarray]:
    ks = rng.integers(1, min(kmax, Ka) + 1, T)
    return [rng.permutation(Ka)[:k] for k in ks]


def _out_emin(form: Form) -> int:
    return _fmt(form.dtype).emin if _fmt(form.dtype).cls == "float" else 0


def _fill(rng, form, A, B, pos, target_fn):
    for t, p in enumerate(pos):
        tgt = target_fn(t, len(p))
        ea, eb = _split_exp(rng, form.atype, form.btype, tgt)
        A[t, p] = _normal(rng, form.atype, ea, len(p))
        B[t, p] = _normal(rng, form.btype, eb, len(p), neg=np.zeros(len(p), np.int64))


def regime_tiny_c0(form: Form, rng, T: int):
    """c = +-0 and tiny products near the output's smallest exponents (the accumulator floor)."""
    A, B, C, Ka = _frame(form, T)
    lo = _out_emin(form) - 45
    pos = _positions(rng, T, Ka)
    base = rng.integers(lo, _out_emin(form) + 3, T)
    _fill(rng, form, A, B, pos, lambda t, k: base[t] + rng.integers(-3, 4, k))
    from .elements import neg_zero

    C[:] = np.where(rng.random(T) < 0.5, 0, neg_zero(form.c_type))
    return A, B, C


def regime_under_c(form: Form, rng, T: int):
    """c normal, products 0..40 binades below it (window width, truncation vs rounding, c precision)."""
    A, B, C, Ka = _frame(form, T)
    fc = _fmt(form.c_type)
    hi = min(fc.emax - 2, 12)
    ec = rng.integers(min(max(fc.emin + 2, -12), hi), hi + 1, T)
    C[:] = _normal(rng, form.c_type, ec, T)
    pos = _positions(rng, T, Ka)
    _fill(rng, form, A, B, pos, lambda t, k: ec[t] - rng.integers(0, 41, k))
    return A, B, C


def regime_near(form: Form, rng, T: int):
    """Terms and c within a few binades of each other, rich significands (rounding bits)."""
    A, B, C, Ka = _frame(form, T)
    e0 = rng.integers(-4, 5, T)
    fc = _fmt(form.c_type)
    C[:] = np.where(rng.random(T) < 0.3, 0, _normal(rng, form.c_type, e0 + rng.integers(-3, 4, T), T))
    pos = _positions(rng, T, Ka, kmax=6)
    _fill(rng, form, A, B, pos, lambda t, k: e0[t] + rng.integers(-3, 4, k))
    del fc
    return A, B, C


def regime_cancel(form: Form, rng, T: int):
    """A large term cancelled by another (or by c), leaving small terms and the rounding of the rest."""
    A, B, C, Ka = _frame(form, T)
    for t in range(T):
        p = rng.permutation(Ka)[:min(Ka, int(rng.integers(2, 5)))]
        big = int(rng.integers(0, 10))
        ea, eb = _split_exp(rng, form.atype, form.btype, np.array([big]))
        a0 = _normal(rng, form.atype, ea, 1, neg=np.array([0]))
        b0 = _normal(rng, form.btype, eb, 1, neg=np.array([0]))
        A[t, p[0]], B[t, p[0]] = a0[0], b0[0]
        f = _fmt(form.atype)
        sign = np.uint64(1 << (f.field_bits - 1 + f.ignored_low_bits)) if f.signed else np.uint64(0)
        if len(p) > 1 and rng.random() < 0.6:
            A[t, p[1]], B[t, p[1]] = a0[0] ^ sign, b0[0]           # an exact cancellation
            rest = p[2:]
        else:
            rest = p[1:]
            C[t] = _normal(rng, form.c_type, np.array([big]), 1, neg=np.array([1]))[0]
        if len(rest):
            ea, eb = _split_exp(rng, form.atype, form.btype, big - rng.integers(1, 30, len(rest)))
            A[t, rest] = _normal(rng, form.atype, ea, len(rest))
            B[t, rest] = _normal(rng, form.btype, eb, len(rest))
    return A, B, C


def regime_spread(form: Form, rng, T: int):
    """Terms at many k (different blocks and fp8 groups), exponents from a few levels, signs mixed."""
    A, B, C, Ka = _frame(form, T)
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    top = min(fa.emax + fb.emax - 1, 8)
    for t in range(T):
        k = int(rng.integers(2, min(Ka, 8) + 1))
        p = rng.permutation(Ka)[:k]
        lv = top - np.array([0, 2, 6, 12, 24])[rng.integers(0, 5, k)]
        ea, eb = _split_exp(rng, form.atype, form.btype, lv)
        A[t, p] = _normal(rng, form.atype, ea, k)
        B[t, p] = _normal(rng, form.btype, eb, k)
    C[:] = np.where(rng.random(T) < 0.5, 0, _normal(rng, form.c_type, rng.integers(-6, 7, T), T))
    return A, B, C


def regime_overflow(form: Form, rng, T: int):
    """Products and c near the top of the output's range, mostly of one sign."""
    A, B, C, Ka = _frame(form, T)
    fd, fc = _fmt(form.dtype), _fmt(form.c_type)
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    top = min(fd.emax, fa.emax + fb.emax + 1) if fd.cls == "float" else 0
    pos = _positions(rng, T, Ka, kmax=8)
    for t, p in enumerate(pos):
        ea, eb = _split_exp(rng, form.atype, form.btype, top - rng.integers(0, 3, len(p)))
        neg = np.zeros(len(p), np.int64) if rng.random() < 0.7 else rng.integers(0, 2, len(p))
        A[t, p] = _normal(rng, form.atype, ea, len(p), neg=neg)
        B[t, p] = _normal(rng, form.btype, eb, len(p), neg=np.zeros(len(p), np.int64))
    ec = np.minimum(top, fc.emax) - rng.integers(0, 3, T)
    C[:] = np.where(rng.random(T) < 0.5, 0, _normal(rng, form.c_type, ec, T, neg=np.zeros(T, np.int64)))
    return A, B, C


def regime_subnormal(form: Form, rng, T: int):
    """One operand's subnormals, alone: the other factor large enough to show the product; c = 0
    (or a subnormal c with no products)."""
    A, B, C, Ka = _frame(form, T)
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    for t in range(T):
        which = "abc"[t % 3]
        k = int(rng.integers(1, min(Ka, 3) + 1))
        p = rng.permutation(Ka)[:k]
        if which == "a":
            A[t, p] = _subnormal(rng, form.atype, k)
            B[t, p] = _normal(rng, form.btype, rng.integers(max(fb.emax - 4, fb.emin), fb.emax + 1, k), k)
        elif which == "b":
            B[t, p] = _subnormal(rng, form.btype, k)
            A[t, p] = _normal(rng, form.atype, rng.integers(max(fa.emax - 4, fa.emin), fa.emax + 1, k), k)
        else:
            C[t] = _subnormal(rng, form.c_type, 1)[0]
            if rng.random() < 0.5:     # a tiny product beside it
                ea, eb = _split_exp(rng, form.atype, form.btype, np.array([_fmt(form.c_type).emin - 2]))
                A[t, p[0]] = _normal(rng, form.atype, ea, 1)[0]
                B[t, p[0]] = _normal(rng, form.btype, eb, 1)[0]
    return A, B, C


def regime_special(form: Form, rng, T: int):
    """Two or three NaN / Inf / zero sources in one dot product (a, b, c), distinct payloads."""
    A, B, C, Ka = _frame(form, T)
    pos = _positions(rng, T, Ka, kmax=4)
    _fill(rng, form, A, B, pos, lambda t, k: rng.integers(-2, 3, k))
    C[:] = _normal(rng, form.c_type, rng.integers(-2, 3, T), T)
    for t, p in enumerate(pos):
        n = int(rng.integers(2, 4))
        for _ in range(n):
            where = "abc"[int(rng.integers(0, 3))]
            if where == "c":
                C[t] = _special(rng, form.c_type, 1)[0]
            else:
                j = p[int(rng.integers(0, len(p)))]
                if where == "a":
                    A[t, j] = _special(rng, form.atype, 1)[0]
                else:
                    B[t, j] = _special(rng, form.btype, 1)[0]
    return A, B, C


def _pow2(rng, t: str, e, n: int) -> np.ndarray:
    """n powers of two of format t at exponents e (subnormal ones below emin), random signs."""
    f = _fmt(t)
    e = np.asarray(e, np.int64)
    out = _normal(rng, t, e, n, rich=False)
    if f.subnormal and f.mantissa:
        sub = e < f.emin
        sh = _clip(f.mantissa - (f.emin - e), 0, f.mantissa - 1)
        neg = rng.integers(0, 2, n) if f.signed else np.zeros(n, np.int64)
        out = np.where(sub, _enc(t, neg, 0, np.uint64(1) << sh.astype(np.uint64)), out)
    return out


def _pow2_1(rng, t: str, e: int) -> int:
    """``int(_pow2(rng, t, np.array([e]), 1)[0])`` in Python integers: the same draws from
    rng (one sign, then the subnormal branch's sign; a scalar draw takes the same bits as a
    size-1 one), without the array overhead."""
    f = _fmt(t)
    m, _, _, nans = _codes(t)
    m = int(m)
    low, sign = f.ignored_low_bits, f.field_bits - 1

    def enc(neg: int, efield: int, frac: int) -> int:
        return (((efield << m) | frac) | ((neg << sign) if f.signed else 0)) << low

    e = int(e)
    neg = int(rng.integers(0, 2)) if f.signed else 0
    out = enc(neg, min(max(e, f.emin), f.emax) + f.bias, 0)
    if nans and (out >> low) in {int(c) for c in nans}:
        out &= ~(1 << low)
    if f.subnormal and m:
        neg = int(rng.integers(0, 2)) if f.signed else 0
        if e < f.emin:
            out = enc(neg, 0, 1 << min(max(m - (f.emin - e), 0), m - 1))
    return out


def regime_pow2(form: Form, rng, T: int):
    """Powers of two (and c = 0 or a power of two): sums that sit exactly on a rounding
    boundary or tie, plus a term far below that only some models keep."""
    A, B, C, Ka = _frame(form, T)
    fa, fb, fc = _fmt(form.atype), _fmt(form.btype), _fmt(form.c_type)
    lo = _out_emin(form)
    for t in range(T):
        k = int(rng.integers(1, min(Ka, 4) + 1))
        p = rng.permutation(Ka)[:k]
        centre = int(rng.integers(lo - 30, lo + 14)) if rng.random() < 0.6 else int(rng.integers(-6, 7))
        tg = centre - rng.integers(0, 30, k) * (rng.random(k) < 0.5)
        ea, eb = _split_exp(rng, form.atype, form.btype, tg)
        ea = np.where(rng.random(k) < 0.15, fa.emin - rng.integers(1, max(fa.mantissa, 1) + 1, k), ea)
        A[t, p] = _pow2(rng, form.atype, ea, k)
        B[t, p] = _pow2(rng, form.btype, eb, k)
        if rng.random() < 0.5:
            C[t] = _pow2_1(rng, form.c_type, centre + int(rng.integers(-2, 3)))
            if rng.random() < 0.2:
                C[t] = _pow2_1(rng, form.c_type, fc.emin - int(rng.integers(1, fc.mantissa + 1)))
        elif rng.random() < 0.5:
            from .elements import neg_zero

            C[t] = neg_zero(form.c_type)
    del fb
    return A, B, C


def _pow2_product(rng, form: Form, e: int) -> tuple[int, int] | None:
    """(a, b) powers of two whose product is 2**e (subnormal factors allowed), or None."""
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    lo_a, lo_b = fa.emin - (fa.mantissa if fa.subnormal else 0), fb.emin - (fb.mantissa if fb.subnormal else 0)
    lo, hi = max(lo_a, e - fb.emax), min(fa.emax, e - lo_b)
    if lo > hi:
        return None
    ea = int(rng.integers(lo, hi + 1))
    eb = e - ea
    return _pow2_1(rng, form.atype, ea), _pow2_1(rng, form.btype, eb)


def _pos_only(t: str, code: int) -> int:
    f = _fmt(t)
    return code & ~((1 << (f.field_bits - 1 + f.ignored_low_bits)) if f.signed else 0)


def _product_range(form: Form) -> tuple[int, int]:
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    lo = fa.emin - (fa.mantissa if fa.subnormal else 0) + fb.emin - (fb.mantissa if fb.subnormal else 0)
    return lo, fa.emax + fb.emax


def grid_hints(form: Form, arch="sm_90") -> list[int]:
    """Exponents where a model's grids sit for this form: the accumulator floor's and c's
    truncation grid (minexp - F, emin(c) - F), the output's half ulp at its smallest
    exponent; a tiny term there is kept by one model and dropped by another."""
    from ..numerics.archs import get_model

    out = set()
    fo, fc = _fmt(form.dtype), _fmt(form.c_type)
    if fo.cls == "float":
        out.add(fo.emin - fo.mantissa - 1)
    try:
        _, p = get_model(arch).path(form.atype, form.btype, form.c_type, form.dtype, form.kind,
                                    scaled=bool(form.block_scale), shape=form.mnk)
    except Exception:
        p = None
    inner = getattr(p, "hmma", None) or getattr(p, "inner", None) or p
    F = getattr(inner, "F", None)
    if F:
        if getattr(inner, "minexp", None) is not None:
            out.add(inner.minexp - F)
        if fc.cls == "float":
            out.add(fc.emin - F)
    return sorted(x + d for x in out for d in (-2, -1, 0, 1))


def regime_tie(form: Form, rng, T: int):
    """A sum on a rounding tie or boundary of the output (or of the accumulator's grid), and
    one or two tiny terms far below that decide it -- if a model keeps them (floor, window,
    truncation, rounding, c alignment).  The leading term is a product or c."""
    from .elements import neg_zero

    A, B, C, Ka = _frame(form, T)
    fo, fc = _fmt(form.dtype), _fmt(form.c_type)
    plo, phi = _product_range(form)
    hints = grid_hints(form)
    for t in range(T):
        r = rng.random()
        if r < 0.25:
            lead = int(rng.integers(fo.emin - fo.mantissa, fo.emin))         # the output's subnormals
        elif r < 0.5:
            lead = int(rng.integers(fo.emin, fo.emin + 12))
        else:
            lo, hi = max(plo + 8, -30), min(phi, 30)
            lead = int(rng.integers(lo, hi + 1)) if lo <= hi else phi
        u = max(lead, fo.emin) - fo.mantissa - (0 if rng.random() < 0.5 else int(rng.integers(1, 4)))
        terms = []                     # (exponent, negative)
        c_lead = rng.random() < 0.35
        if not c_lead:
            terms.append((lead, False))
        if rng.random() < 0.7:
            terms.append((u - 1, bool(rng.random() < 0.3)))
        for _ in range(int(rng.integers(1, 3))):
            if hints and rng.random() < 0.5:
                e = int(hints[int(rng.integers(0, len(hints)))])
            else:
                e = u - 1 - int(rng.integers(1, 41))
            if e < plo:
                e = plo + int(rng.integers(0, 4))
            terms.append((e, bool(rng.random() < 0.5)))
        _place_terms(rng, form, A, B, t, terms, Ka)
        if c_lead:
            ce = max(lead, fc.emin - (fc.mantissa if fc.subnormal else 0))
            C[t] = _pos_only(form.c_type, _pow2_1(rng, form.c_type, ce))
        else:
            C[t] = 0 if rng.random() < 0.7 else neg_zero(form.c_type)
    return A, B, C


def _place_terms(rng, form: Form, A, B, t: int, terms, Ka: int, normal: bool = False) -> None:
    """Products of power-of-two exponents ``e`` (negated where asked) at random k of case t;
    ``normal``: of two normal factors wherever the formats reach e."""
    pos = rng.permutation(Ka)[:len(terms)]
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    for (e, neg), j in zip(terms, pos):
        if normal and fa.emin + fb.emin <= e <= fa.emax + fb.emax:
            ea, eb = _split_exp(rng, form.atype, form.btype, np.array([e]))
            ab = _pow2_1(rng, form.atype, int(ea[0])), _pow2_1(rng, form.btype, int(eb[0]))
        else:
            ab = _pow2_product(rng, form, e)
        if ab is None:
            continue
        x, y = _pos_only(form.atype, ab[0]), _pos_only(form.btype, ab[1])
        if neg:
            f = _fmt(form.atype)
            x |= (1 << (f.field_bits - 1 + f.ignored_low_bits)) if f.signed else 0
        A[t, j], B[t, j] = x, y


def _ref_block(form: Form, arch="sm_90"):
    from ..numerics.archs import get_model

    try:
        _, p = get_model(arch).path(form.atype, form.btype, form.c_type, form.dtype, form.kind,
                                    scaled=bool(form.block_scale), shape=form.mnk)
    except Exception:
        return None
    inner = getattr(p, "hmma", None) or getattr(p, "inner", None) or p
    return inner if hasattr(inner, "minexp") else None


def regime_floor(form: Form, rng, T: int):
    """c = +-0 and every term below the accumulator's floor: a leading power of two just under
    the floor (on the output's grid), maybe a half ulp, and a tiny term at the floor's
    truncation grid -- kept by the reference, dropped by a coarser floor (or the reverse)."""
    from .elements import neg_zero

    A, B, C, Ka = _frame(form, T)
    blk = _ref_block(form)
    fo = _fmt(form.dtype)
    plo, _ = _product_range(form)
    if blk is None or blk.minexp is None or fo.cls != "float":
        return A, B, C
    lo_out = fo.emin - fo.mantissa
    for t in range(T):
        if rng.random() < 0.4:
            _floor_gap(rng, form, A, B, C, t, Ka, blk, lo_out, plo)
            continue
        lead = max(blk.minexp - int(rng.integers(0, 9)), lo_out)
        terms = [(lead, False)]
        if rng.random() < 0.5:
            terms.append((max(lead, fo.emin) - fo.mantissa - 1, False))         # half an output ulp
        for _ in range(int(rng.integers(1, 3))):
            terms.append((max(blk.minexp - blk.F + int(rng.integers(-2, 3)), plo), bool(rng.random() < 0.5)))
        _place_terms(rng, form, A, B, t, terms, Ka)
        C[t] = 0 if rng.random() < 0.7 else neg_zero(form.c_type)
    return A, B, C


def _floor_gap(rng, form: Form, A, B, C, t: int, Ka: int, blk, lo_out: int, plo: int) -> None:
    """Case t: every term below the floor, the sum on an output boundary (an odd number of the
    output's smallest units, plus half a unit when it rounds to nearest), and one negative term
    between a floorless grid and the floor's grid (or on the floor's grid): only a model without
    (or with a lower) floor keeps it (or only the reference, not a coarser floor), and it moves
    the result down one unit."""
    lead = int(rng.integers(lo_out, max(blk.minexp, lo_out + 1)))
    terms = [(lead, False)]
    if lead > lo_out:
        terms.append((lo_out, False))                     # an odd unit count: a tie does not round to it
    if blk.rounding == "rn":
        terms.append((lo_out - 1, False))                 # half a unit: the tie
    lo = max(lead - blk.F, plo)
    hi = blk.minexp - blk.F            # at hi the floor keeps it and a coarser one (+1) does not
    if lo <= hi:
        terms.append((int(rng.integers(lo, hi + 1)), True))
    # normal factors where they reach: a product's alignment exponent is then its own (a
    # subnormal factor aligns at its format's emin, far above the value, and would set E)
    _place_terms(rng, form, A, B, t, terms, Ka, normal=True)
    C[t] = 0


def regime_zeros(form: Form, rng, T: int):
    """Exact zeros: signed-zero factors, c = +-0, exact cancellations."""
    from .elements import neg_zero

    A, B, C, Ka = _frame(form, T)
    za, zb, zc = neg_zero(form.atype), neg_zero(form.btype), neg_zero(form.c_type)
    for t in range(T):
        k = int(rng.integers(1, min(Ka, 4) + 1))
        p = rng.permutation(Ka)[:k]
        A[t, p] = _normal(rng, form.atype, rng.integers(-3, 4, k), k)
        B[t, p] = np.where(rng.random(k) < 0.5, zb, 0)
        A[t, p] = np.where(rng.random(k) < 0.2, za, A[t, p])
        if k >= 2 and rng.random() < 0.5:     # x*y - x*y
            x = _normal(rng, form.atype, rng.integers(-3, 4, 1), 1)[0]
            y = _normal(rng, form.btype, rng.integers(-3, 4, 1), 1)[0]
            f = _fmt(form.atype)
            A[t, p[0]], B[t, p[0]] = x, y
            A[t, p[1]], B[t, p[1]] = x ^ np.uint64(1 << (f.field_bits - 1 + f.ignored_low_bits)), y
        C[t] = zc if rng.random() < 0.6 else 0
        if rng.random() < 0.3:          # every product -0 (the untouched ones would be +0)
            f = _fmt(form.atype)
            A[t] = _normal(rng, form.atype, rng.integers(-3, 4, Ka), Ka, neg=np.ones(Ka, np.int64))
            B[t] = 0
            C[t] = zc
    return A, B, C


def regime_zero_big(form: Form, rng, T: int):
    """An exact zero A or B element times a large other factor, beside smaller real terms and c
    (or a tiny c alone): a model that gives a zero an exponent (-126, or its format's emin) lets
    the zero product set the alignment and truncate the real terms; the reference drops it."""
    from .elements import neg_zero

    A, B, C, Ka = _frame(form, T)
    fa, fb, fc = _fmt(form.atype), _fmt(form.btype), _fmt(form.c_type)
    plo, _ = _product_range(form)
    for t in range(T):
        k = int(rng.integers(1, min(Ka, 5) + 1))
        p = rng.permutation(Ka)[:k]
        j = int(p[0])
        zero_a = rng.random() < 0.5
        fz, fbig, tbig = (fa, fb, form.btype) if zero_a else (fb, fa, form.atype)
        ebig = int(rng.integers(max(fbig.emax - 10, fbig.emin), fbig.emax + 1))
        big = _normal(rng, tbig, np.array([ebig]), 1)[0]
        zero = np.uint64(neg_zero(form.atype if zero_a else form.btype) if rng.random() < 0.3 else 0)
        A[t, j], B[t, j] = (zero, big) if zero_a else (big, zero)
        top = ebig + (-126 if rng.random() < 0.5 else fz.emin)      # where such a model puts E
        rest = p[1:]
        if len(rest):
            tg = np.maximum(top - rng.integers(1, 45, len(rest)), plo)
            ea, eb = _split_exp(rng, form.atype, form.btype, tg)
            A[t, rest] = _normal(rng, form.atype, ea, len(rest))
            B[t, rest] = _normal(rng, form.btype, eb, len(rest))
        r = rng.random()
        if r < 0.3 and fc.subnormal and fc.mantissa:
            C[t] = _subnormal(rng, form.c_type, 1)[0]
        elif r < 0.7:
            C[t] = _normal(rng, form.c_type, np.array([top - int(rng.integers(0, 45))]), 1)[0]
    return A, B, C


def regime_bits(form: Form, rng, T: int):
    """Raw random encodings on a few terms."""
    A, B, C, Ka = _frame(form, T)
    wa, wb, wc = (_fmt(t).bits for t in (form.atype, form.btype, form.c_type))
    for t, p in enumerate(_positions(rng, T, Ka, kmax=Ka)):
        A[t, p] = rng.integers(0, 1 << wa, len(p), dtype=np.uint64)
        B[t, p] = rng.integers(0, 1 << wb, len(p), dtype=np.uint64)
    C[:] = rng.integers(0, 1 << min(wc, 63), T, dtype=np.uint64)
    return A, B, C


def regime_int(form: Form, rng, T: int):
    """Integer terms at their extremes and c near +-2**31 (wrap, saturation)."""
    A, B, C, Ka = _frame(form, T)
    fa, fb = _fmt(form.atype), _fmt(form.btype)
    for t in range(T):
        k = int(rng.integers(1, Ka + 1))
        p = rng.permutation(Ka)[:k]
        for X, f, w in ((A, fa, fa.bits), (B, fb, fb.bits)):
            ext = np.array([f.int_max, f.int_min, f.int_max - 1, 1, -1 if f.signed else 0])
            v = ext[rng.integers(0, len(ext), k)]
            X[t, p] = (v & ((1 << w) - 1)).astype(np.uint64)
        hi = (1 << 31) - 1
        cv = [hi - int(rng.integers(0, 1 << 16)), -(1 << 31) + int(rng.integers(0, 1 << 16)),
              int(rng.integers(-(1 << 31), 1 << 31))][t % 3]
        C[t] = cv & 0xFFFFFFFF
    return A, B, C


REGIMES: dict[str, Callable] = {
    "tiny_c0": regime_tiny_c0, "under_c": regime_under_c, "near": regime_near, "cancel": regime_cancel,
    "spread": regime_spread, "overflow": regime_overflow, "subnormal": regime_subnormal,
    "special": regime_special, "pow2": regime_pow2, "tie": regime_tie, "floor": regime_floor, "zeros": regime_zeros, "bits": regime_bits,
    "int": regime_int, "zero_big": regime_zero_big,
}


def regimes_for(form: Form) -> list[str]:
    if _fmt(form.dtype).cls != "float" or _fmt(form.atype).cls != "float":
        return ["int", "bits"] if form.atype != "b1" else ["bits"]
    return [r for r in REGIMES if r != "int"]


# ------------------------------------------------------------------------------------------
# search and reduction


@dataclass
class Witness:
    """One output element's terms on which the models differ (reduced)."""

    a: list[int]
    b: list[int]
    c: int
    d: dict[str, int] = field(default_factory=dict)     # model name -> D bits
    regime: str = ""

    @property
    def terms(self) -> int:
        return sum(1 for x, y in zip(self.a, self.b) if x or y)

    def to_dict(self) -> dict:
        return {"a": [hex(x) for x in self.a], "b": [hex(x) for x in self.b], "c": hex(self.c),
                "terms": self.terms, "d": {k: hex(v) for k, v in self.d.items()}, "regime": self.regime}


def differ_mask(form: Form, m1, m2, A, B, C) -> np.ndarray:
    return eval_terms(form, m1, A, B, C) != eval_terms(form, m2, A, B, C)


def reduce(form: Form, fails: Callable, a, b, c, simplify: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """Fewest non-zero terms that still fail: ``fails(A [T,K], B [T,K], C [T]) -> bool [T]``.

    Greedy delta debugging over single elements: c -> +0 first, then each term (a_k, b_k)
    -> (0, 0), then each remaining factor alone -> 0, then factors -> 1 (readability)."""
    from .elements import one

    a = np.array(a, np.uint64)
    b = np.array(b, np.uint64)
    c = int(c)
    if c and fails(a[None], b[None], np.array([0], np.uint64))[0]:
        c = 0

    def step(cands: list[tuple[np.ndarray, np.ndarray, int]]):
        if not cands:
            return None
        ok = fails(np.stack([x[0] for x in cands]), np.stack([x[1] for x in cands]),
                   np.array([x[2] for x in cands], np.uint64))
        i = np.flatnonzero(ok)
        return cands[int(i[0])] if len(i) else None

    while True:    # drop whole terms
        cands = []
        for k in np.flatnonzero((a != 0) | (b != 0)):
            a2, b2 = a.copy(), b.copy()
            a2[k] = b2[k] = 0
            cands.append((a2, b2, c))
        got = step(cands)
        if got is None:
            break
        a, b, c = got
    if simplify:
        for X, t in ((b, form.btype), (a, form.atype)):     # a factor -> 1 where it keeps the failure
            u = one(t)
            for k in np.flatnonzero(X != 0):
                if X[k] == u:
                    continue
                a2, b2 = a.copy(), b.copy()
                (b2 if X is b else a2)[k] = u
                got = step([(a2, b2, c)])
                if got is not None:
                    a, b, c = got
                    X = b if X is b else a
    return a, b, c


class Pool:
    """Candidate dot products per regime for one form, drawn once and shared by every
    model pair (each model's outputs on them are cached too)."""

    def __init__(self, form: Form, rng: np.random.Generator, size: int = 512):
        self.form, self.rng, self.size = form, rng, size
        self.cands: dict[str, tuple] = {}
        self.outs: dict[tuple, np.ndarray] = {}

    def get(self, regime: str):
        if regime not in self.cands:
            self.cands[regime] = REGIMES[regime](self.form, self.rng, self.size)
        return self.cands[regime]

    def out(self, model, regime: str) -> np.ndarray:
        key = (model if isinstance(model, str) else id(model), regime)     # variant names can repeat
        if key not in self.outs:
            self.outs[key] = eval_terms(self.form, model, *self.get(regime))
        return self.outs[key]


def search(form: Form, m1, m2, rng: np.random.Generator | None = None, regimes: list[str] | None = None,
           want: int = 2, pool: Pool | None = None, apart=()) -> list[Witness]:
    """Up to ``want`` reduced witnesses on which m1 and m2 differ (one per regime first).
    ``apart``: models that m2 must differ from too (a witness that tells a variant from the
    reference *and* from its sibling variants, so that a failure is blamed on the right one)."""
    pool = pool or Pool(form, rng if rng is not None else np.random.default_rng(0))
    out: list[Witness] = []
    seen: set = set()
    allr = regimes_for(form)
    regimes = [r for r in (regimes or ()) if r in allr] + [r for r in allr if r not in (regimes or ())]
    n1, n2 = model_name(m1), model_name(m2)

    def fails(A, B, C):
        d2 = eval_terms(form, m2, A, B, C)
        ok = eval_terms(form, m1, A, B, C) != d2
        for x in apart:
            ok &= eval_terms(form, x, A, B, C) != d2
        return ok

    for r in regimes:                          # every regime drawn, in this order (the pool's rng)
        pool.get(r)
    hits = {}

    def hit(r):                                # evaluated when first needed: the search often ends early
        if r not in hits:
            d2 = pool.out(m2, r)
            ok = pool.out(m1, r) != d2
            for x in apart:
                ok &= pool.out(x, r) != d2
            hits[r] = np.flatnonzero(ok)
        return hits[r]

    for rank in range(4):                      # round robin over regimes: variety
        for r in regimes:
            if rank >= len(hit(r)):
                continue
            A, B, C = pool.get(r)
            i = hits[r][rank]
            a, b, c = reduce(form, fails, A[i], B[i], C[i])
            key = (tuple(int(x) for x in a), tuple(int(x) for x in b), c)
            if key in seen:
                continue
            seen.add(key)
            d1 = int(eval_terms(form, m1, a[None], b[None], [c])[0])
            d2 = int(eval_terms(form, m2, a[None], b[None], [c])[0])
            out.append(Witness([int(x) for x in a], [int(x) for x in b], int(c), {n1: d1, n2: d2}, r))
            if len(out) >= want:
                return out
    return out


# ------------------------------------------------------------------------------------------
# mechanisms: known wrong variants of a reference model


def _flush(op: str):
    def tr(form, a, b, c):
        t = {"a": form.atype, "b": form.btype, "c": form.c_type}[op]
        x = {"a": a, "b": b, "c": c}[op]
        d = decode(x.reshape(-1), t)
        f = _fmt(t)
        sub = (~d.zero & ~d.nan & ~d.inf & (d.sig < (1 << f.mantissa))).reshape(x.shape)
        sign = np.uint64(1 << (f.field_bits - 1 + f.ignored_low_bits)) if f.signed else np.uint64(0)
        x[sub] &= sign                                  # +-0, the sign kept
        return a, b, c
    return tr


def _coarse_c(keep: int):
    def tr(form, a, b, c):
        f = _fmt(form.c_type)
        drop = f.mantissa - keep
        if drop > 0:
            d = decode(c.reshape(-1), form.c_type)
            fin = (~d.nan & ~d.inf).reshape(c.shape)
            mask = np.uint64(((1 << 64) - 1) ^ (((1 << drop) - 1) << f.ignored_low_bits))
            c[fin] &= mask
        return a, b, c
    return tr


@dataclass(frozen=True)
class Mechanism:
    point: str                 # coverage point, e.g. "mech:acc_floor"
    what: str                  # one line: what the wrong variant does
    variant: Any               # ArchModel | Mutant
    regimes: tuple = ()


def mechanisms(form: Form, arch="sm_90") -> list[Mechanism]:
    """Known wrong variants of ``arch`` for this form, one per mechanism (and the silicon
    alternatives for sm_90).  Only variants that change the form's path are listed."""
    from ..numerics.archs import get_model
    from ..numerics.params import BlockFMA, Emulated, FmaChain, FmaPipe, IntegerDot, Narrowed

    ref = get_model(arch)
    try:
        key, p = ref.path(form.atype, form.btype, form.c_type, form.dtype, form.kind,
                          scaled=bool(form.block_scale), shape=form.mnk)
    except Exception:
        return []
    out: list[Mechanism] = []

    def add(point, what, variant, regimes=()):
        out.append(Mechanism(point, what, variant, tuple(regimes)))

    def blk(**kw):
        if isinstance(p, BlockFMA):
            return ref.with_path(key, p.but(**kw), f"{ref.name}[{key}:" + ",".join(f"{k}={v}" for k, v in kw.items()) + "]")
        if isinstance(p, Emulated):
            return ref.with_path(key, p.but(hmma=p.hmma.but(**kw)),
                                 f"{ref.name}[{key} hmma:" + ",".join(f"{k}={v}" for k, v in kw.items()) + "]")
        if isinstance(p, Narrowed):
            return ref.with_path(key, p.but(inner=p.inner.but(**kw)),
                                 f"{ref.name}[{key} inner:" + ",".join(f"{k}={v}" for k, v in kw.items()) + "]")
        return None

    inner = p.hmma if isinstance(p, Emulated) else (p.inner if isinstance(p, Narrowed) else p)
    fd = _fmt(form.dtype)
    if isinstance(inner, BlockFMA):
        acc_emin = _fmt(p.via if isinstance(p, Narrowed) else form.dtype).emin
        if inner.minexp is not None and inner.minexp < acc_emin:
            add("mech:acc_floor", f"a zero c sits at the accumulator's emin {acc_emin} (floor {inner.minexp} "
                                  f"coarsened)", blk(minexp=acc_emin), ("floor", "tiny_c0", "tie"))
        if inner.minexp is not None:      # the floor exactly: one binade either way, or none at all
            for d in (1, -1):
                add("mech:acc_floor", f"floor {inner.minexp + d} instead of {inner.minexp}",
                    blk(minexp=inner.minexp + d), ("floor", "tie"))
            add("mech:acc_floor", f"no floor on the common exponent (the reference floors it at {inner.minexp})",
                blk(minexp=None), ("floor", "tiny_c0", "tie"))
        if inner.zero_factor_exp is None:
            # a zero A/B element given an exponent takes part in the alignment: 0 x 2**127 sets E and
            # truncates the real terms (MMA-Sim's Hopper model: -126; also the format's own emin)
            fin = p.via if isinstance(p, Emulated) else form.atype
            for z in dict.fromkeys((-126, _fmt(fin).emin)):
                add("mech:zero_align", f"an exact zero A/B element takes part in the alignment with exponent {z} "
                                       f"(the reference drops zero products)",
                    blk(zero_factor_exp=z), ("zero_big",))
        flip = {"rz": "rn", "rn": "rz"}.get(inner.rounding)
        if flip:
            add("mech:rounding", f"the block rounds {flip.upper()} instead of {inner.rounding.upper()}",
                blk(rounding=flip), ("near", "tie", "under_c", "cancel"))
        if inner.truncation == "magnitude":
            add("mech:rounding", "addends rounded to nearest into the window instead of truncated",
                blk(truncation="none"), ("tie", "under_c", "near"))
        if inner.n and inner.n > 4 and not isinstance(p, Emulated):
            add("mech:block_size", f"blocks of {inner.n // 2} terms instead of {inner.n}", blk(n=inner.n // 2),
                ("spread", "cancel"))
        add("mech:window", f"the alignment window keeps {inner.F - 1} bits instead of {inner.F}",
            blk(F=inner.F - 1), ("tie", "under_c", "near"))
        if inner.c_entry == "window" and not isinstance(p, Emulated):
            add("mech:c_entry", "c added after the window (not truncated with the products)",
                blk(c_entry="after"), ("tie", "under_c"))
        if inner.overflow == "inf" and fd.inf:
            add("mech:overflow", "an overflowing sum saturates to the largest finite value",
                blk(overflow="satfinite"), ("overflow",))
        if inner.zero_sign == "positive":
            add("mech:zero_sign", "an exact-zero sum keeps IEEE's sign", blk(zero_sign="ieee"), ("zeros",))
    if isinstance(p, Emulated):
        K = form.mnk[2] // (2 if form.is_sparse else 1)
        one = ((K, (tuple(range(K)),)),)
        add("mech:fp8_groups", "one block over all k (no k mod 4 grouping)", ref.with_path(key, p.but(groups=one),
            f"{ref.name}[{key}:one group]"), ("spread", "overflow", "cancel", "pow2"))
        add("mech:fp8_groups", "one native block over all k, c in the window (no emulation)",
            ref.with_path(key, p.hmma.but(n=None), f"{ref.name}[{key}:native block]"), ("spread", "cancel", "tie"))
        half = ((K, (tuple(range(K // 2)), tuple(range(K // 2, K)))),)
        add("mech:fp8_groups", "k split in halves (k < K/2, then the rest) instead of k mod 4",
            ref.with_path(key, p.but(groups=half), f"{ref.name}[{key}:halves]"), ("spread", "overflow", "cancel", "pow2"))
        if p.c_add != "window":
            add("mech:fp8_late_c", "c added inside the first HMMA (truncated) instead of last in RN",
                ref.with_path(key, p.but(c_add="window"), f"{ref.name}[{key}:c in window]"), ("tie", "under_c", "near"))
            add("mech:rounding", "the final c add rounds RZ instead of RN",
                ref.with_path(key, p.but(c_add="rz"), f"{ref.name}[{key}:c add rz]"), ("under_c", "near"))
    if isinstance(p, Narrowed):
        flip = {"rz": "rn", "rn": "rz"}.get(p.rounding)
        if flip:
            add("mech:rounding", f"the narrowing conversion rounds {flip.upper()}",
                ref.with_path(key, p.but(rounding=flip), f"{ref.name}[{key}:narrow {flip}]"), ("near", "under_c"))
    if isinstance(p, FmaChain):
        if p.nan_rule == "propagate":
            for pri in (("a", "b", "c"), ("c", "b", "a"), ("a", "c", "b")):
                if pri != tuple(p.nan_priority):
                    add("mech:nan_precedence", f"NaN priority {','.join(pri)} instead of "
                                               f"{','.join(p.nan_priority)}",
                        ref.with_path(key, p.but(nan_priority=pri), f"{ref.name}[{key}:nan {''.join(pri)}]"),
                        ("special",))
        add("mech:fma_order", "k descending", ref.with_path(key, p.but(order="descending"),
                                                            f"{ref.name}[{key}:descending]"), ("cancel", "spread"))
    if isinstance(p, FmaPipe):
        add("mech:fma_order", "k descending", ref.with_path(key, p.but(groups=tuple(g[::-1] for g in p.groups[::-1])),
                                                            f"{ref.name}[{key}:descending]"), ("cancel", "spread"))
    if isinstance(p, IntegerDot) and form.satfinite:
        add("mech:satfinite", "saturation at every step instead of on the final sum",
            ref.with_path(key, p.but(saturation="per_step"), f"{ref.name}[{key}:per-step sat]"), ("int",))
    # input transforms
    if _fmt(form.atype).cls == "float":
        for op, t in (("a", form.atype), ("b", form.btype), ("c", form.c_type)):
            f = _fmt(t)
            if f.subnormal and f.mantissa:
                add(f"mech:subnormal_flush:{op}", f"subnormal {op} flushed to zero",
                    Mutant(f"{ref.name}+flush {op} subnormals", ref, _flush(op)), ("subnormal",))
        fc = _fmt(form.c_type)
        if fc.mantissa > 7:
            keep = fc.mantissa // 2
            add("mech:c_precision", f"c keeps {keep} of its {fc.mantissa} fraction bits",
                Mutant(f"{ref.name}+c cut to {keep} bits", ref, _coarse_c(keep)), ("under_c", "near"))
    # silicon: every alternative the H100 refuted (sm_90 and sm_100 share the records)
    if ref.name in ("sm_90", "sm_100"):
        from ..numerics.fit import sm90_alternatives

        for name, alt in sm90_alternatives().get(key, {}).items():
            if not same_record(form, ref, alt):
                where = "the H200 (wgmma run)" if key.endswith("@m64") else "the H100"
                add(f"silicon:{key}:{name}", f"refuted on {where}: {name}", alt, ())
    # keep only variants that really change this form's path
    return [m for m in out if m.variant is not None and (isinstance(m.variant, Mutant)
                                                        or not same_record(form, ref, m.variant))]
