"""Coverage models for test vectors: named corners of an mma form, and how to hit them.

A *coverage model* (``MODELS``, listed by ``ptx-formal vectors --list-coverage``) is a
named family of corners with a builder that produces warps hitting them.  Each warp
(a :class:`formal.vectors.draft.Draft`) is annotated with the *points* it hits, e.g.
``nan_in:a``, ``align_shift:24``, ``metadata_pair:0x9``, ``selector:1``, and says why it
exists.  After evaluation every case is also annotated with the points it hits by
observation (``nan_out``, ``subnormal_in:c``, ``int_out_max`` ...; see
:func:`formal.vectors.draft.observed_points`), so random vectors are described honestly.

Where a corner is a property of the *exact* arithmetic (a shift of at least 24 bits
against C, an exact zero, an exact result beyond the output's range, an s32 sum just
past 2**31), the inputs are found by Z3 over the element bit encodings
(:mod:`formal.vectors.z3num`), not by luck.  A solver answer that the arithmetic model
must confirm (an output that is subnormal) is checked with the evaluator's own model
before it is kept, and the solver is asked again otherwise.  A corner no case covers is
listed with the reason in the vector file's header (``not_covered``), never silently
dropped: "proved unreachable" only with a proof (an exact bound: f16 products cannot
overflow an f32 accumulator; a complete Z3 query: u8 x u8 sums cannot wrap below
-2**31), otherwise "not found" within the query's slice, or the solver's timeout.
Expected outputs always come from :func:`formal.evaluate` (never hand-written).

Models (name: points)::

    specials       NaN and Inf in each operand           nan_in:X inf_in:X (X = a, b, c)
    invalid        NaN from Inf*0 and Inf-Inf             inf_times_zero inf_minus_inf inf_minus_inf_c
    subnormal      subnormal inputs and outputs           subnormal_in:X subnormal_product subnormal_out
    signed_zero    signed zeros                           neg_zero_in:X zero_sum:*
    alignment      exponent spread (solver)               align_shift:P align_far_sum
    cancellation   catastrophic cancellation (solver)     cancel_exact_zero cancel_catastrophic
    overflow       overflow to Inf (solver)               overflow_out
    fp8            fp8/fp6/fp4 special encodings           fp8_nan:0xNN fp8_max:X fp8_inf fp8_min_subnormal fp8_max_sum
    int_bounds     s32 wrap vs .satfinite (solver)        int_wrap_hi/lo int_sat_hi/lo int_at_max/min int_sat_transient
    b1             b1 all-ones / all-zeros                b1:ones b1:zeros b1:ones_zeros b1:zeros_ones b1:alternating
    metadata       every legal index pair at every chunk  metadata_pair:0xN metadata_mixed metadata_idle_lanes
    selector       every legal sparsity selector          selector:S
    block_scale    scale-factor extremes                  scale:TYPE:0xNN:X
    layout         distinct-value probes of each operand  layout:a layout:b layout:c
    mechanisms     inputs telling the model from each     mech:NAME silicon:PATH:ALT nan_multi
                   known wrong variant (structured search)
    probes         the H100 numerics probes of this form  probe:ID
    random         random warps per input regime          random:REGIME   (``--count N``)
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from ..catalog import Form
from .elements import enc, inf_code, max_finite, max_sub, min_sub, nan_codes, neg_zero, one  # noqa: F401
from ..numerics.formats import get_format

# ------------------------------------------------------------------------------------------
# registry


@dataclass(frozen=True)
class CoverageModel:
    name: str
    summary: str
    points: str
    applies: Callable[[Form], bool]
    build: Callable[["Ctx"], Iterator]
    solver: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "summary": self.summary, "points": self.points, "solver": self.solver}


MODELS: dict[str, CoverageModel] = {}


def _model(name: str, summary: str, points: str, applies, solver: bool = False):
    def deco(fn):
        MODELS[name] = CoverageModel(name, summary, points, applies, fn, solver)
        return fn
    return deco


def list_coverage(form: Form | None = None) -> list[CoverageModel]:
    """Every coverage model, or those that apply to ``form``."""
    return [m for m in MODELS.values() if form is None or m.applies(form)]


def applicable(form: Form) -> list[str]:
    return [m.name for m in list_coverage(form)]


# ------------------------------------------------------------------------------------------
# form predicates

def _fl(t: str | None) -> bool:
    return bool(t) and get_format(t).cls == "float"


def is_float_form(f: Form) -> bool:
    return _fl(f.atype) and _fl(f.dtype)


def is_int_form(f: Form) -> bool:
    return f.dtype == "s32"


def _fp8ish(f: Form) -> bool:
    return any(t in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1") for t in (f.atype, f.btype))


def _has_inf(t: str) -> bool:
    return get_format(t).inf


def _register_level(f: Form) -> bool:
    return f.family in ("mma", "mma.sp") and not f.block_scale


# ------------------------------------------------------------------------------------------
# context

@dataclass
class Ctx:
    """What a builder gets: the form, the model name, seeded randomness, solver bookkeeping."""

    form: Form
    arch: object
    seed: int
    stats: dict = field(default_factory=dict)          # point -> solver record
    not_covered: dict = field(default_factory=dict)    # point -> why no case covers it
    timeout_ms: int = 20000

    def rng(self, name: str) -> np.random.Generator:
        h = hashlib.sha256(f"{self.seed}|{self.form.opcode}|{name}".encode()).digest()
        return np.random.Generator(np.random.PCG64(int.from_bytes(h[:8], "little")))

    def sels(self) -> list:
        return list(self.form.selectors) if self.form.is_sparse else [None]

    def canvas(self, name: str, background: str = "normal", sel=None, nib=None, i: int = 0):
        from .draft import Canvas

        sels = self.sels()
        s = sel if sel is not None else sels[i % len(sels)]
        return Canvas(self.form, self.rng(f"{name}|{i}"), background, sel=s, nib=nib)

    @property
    def arch_name(self) -> str:
        return getattr(self.arch, "name", str(self.arch))


# encodings of a format: formal.vectors.elements (below the vectors package, which uses them too)


def random_normal(rng: np.random.Generator, t: str, n: int = 1) -> list[int]:
    from .regimes import random_elements

    v = random_elements(rng, t, n, "normal", "a") & np.uint64((1 << get_format(t).bits) - 1)
    return [int(x) for x in v]


# ------------------------------------------------------------------------------------------
# solver plumbing

_SOLUTIONS: dict[tuple, tuple] = {}

#: Z3 resource units per millisecond of the nominal per-query timeout (Ctx.timeout_ms)
RLIMIT_PER_MS = 1000


def _key(ctx: Ctx, point: str, k: int) -> tuple:
    f = ctx.form
    _, _, _, _, Ka = _dims(f)
    return (point, f.atype, f.btype, f.c_type, f.dtype, f.satfinite, f.bitop, f.rounding, f.kind, Ka, k,
            ctx.arch_name, ctx.seed)


def _dims(f: Form):
    from .draft import dims

    return dims(f)


def solve(ctx: Ctx, point: str, k: int, build: Callable, want: int = 3,
          check: Callable[[list[int], list[int], int], bool] | None = None, tries: int = 8,
          record: bool = True, complete: bool = False) -> list[tuple]:
    """Find up to ``want`` solutions (a codes, b codes, c code) of the query ``build``.

    ``build(solver) -> (a_elems, b_elems, c_elem)`` adds the constraints.  Each model is
    blocked after use, so the solutions differ.  ``check`` (on the full term vectors) can
    reject a solution (the arithmetic model must confirm it).  Results are cached per type
    signature and recorded in ``ctx.stats[point]``; a point without solutions goes to
    ``ctx.not_covered`` with the reason.  UNSAT proves the point unreachable only when the
    query is ``complete`` (no exponent windows or narrowed significands restrict it);
    otherwise it says "not found in the query's slice".
    """
    import z3

    key = _key(ctx, point, k)
    if key in _SOLUTIONS:
        sols, rec = _SOLUTIONS[key]
        ctx.stats[point] = dict(rec, cached=True)
        if record and not sols:
            ctx.not_covered[point] = rec["reason"]
        return list(sols)
    from .z3num import fresh_context

    t0 = time.perf_counter()
    with fresh_context():   # the answer must not depend on earlier queries
        s = z3.SolverFor("QF_BV")
        s.set("random_seed", int(ctx.seed) & 0x7FFFFFFF)
        # the budget is Z3's deterministic resource count (about 1M units per second here), so a
        # loaded machine gets the same answers; the wall clock only caps a runaway query (10x)
        s.set("rlimit", int(ctx.timeout_ms) * RLIMIT_PER_MS)
        s.set("timeout", int(ctx.timeout_ms) * 10)
        a, b, c = build(s)
        vs = [x for x in list(a) + list(b) + ([c] if c is not None else [])]
        sols: list[tuple] = []
        status = "sat"
        rejected = 0
        n = 0
        while len(sols) < want and n < tries:
            n += 1
            r = s.check()
            if r != z3.sat:
                if not sols and rejected == 0:
                    status = "unsat" if r == z3.unsat else "unknown"
                break
            mdl = s.model()
            val = lambda x: mdl.eval(x.bv, model_completion=True).as_long()  # noqa: E731
            av, bvv = [val(x) for x in a], [val(x) for x in b]
            cv = val(c) if c is not None else 0
            s.add(z3.Or([x.bv != mdl.eval(x.bv, model_completion=True) for x in vs]))
            if check is not None and not check(av, bvv, cv):
                rejected += 1
                continue
            sols.append((av, bvv, cv))
    if not sols and status == "sat":
        status = "rejected" if rejected else "unknown"
    rec = {"status": status, "seconds": round(time.perf_counter() - t0, 4), "solutions": len(sols),
           "rejected_by_model": rejected, "terms": k}
    if status == "unsat" and complete:
        rec["reason"] = (f"proved unreachable (Z3 UNSAT): no {ctx.form.atype} x {ctx.form.btype} + "
                         f"{ctx.form.c_type} inputs reach it")
    elif status == "unsat":
        rec["status"] = status = "unsat-in-slice"
        rec["reason"] = ("not found: Z3 UNSAT within the query's slice (exponent windows, at most "
                         f"{NARROW_A}/{NARROW_C} fraction bits); not a proof that no input reaches it")
    elif not sols:
        rec["reason"] = f"{status}: no solution kept after {n} tries"
    if record and not sols:
        ctx.not_covered[point] = rec["reason"]
    _SOLUTIONS[key] = (tuple(sols), rec)
    ctx.stats[point] = rec
    return sols


def _element_check(ctx: Ctx, k: int, what: str):
    """A check for :func:`solve`: the model's D of the placed terms satisfies ``what``."""
    from .draft import check_output, element, spread

    _, _, _, _, Ka = _dims(ctx.form)
    pos = spread(k, Ka)

    def chk(av, bv, cv) -> bool:
        af = np.zeros(Ka, np.uint64)
        bf = np.zeros(Ka, np.uint64)
        af[pos[:len(av)]] = av
        bf[pos[:len(bv)]] = bv
        return check_output(ctx.form, element(ctx.form, ctx.arch, af, bf, cv), what)
    return chk


def _place_solutions(ctx: Ctx, name: str, point: str, sols: list[tuple], why: str, check: str | None = None,
                     i: int = 0):
    if not sols:
        return []
    cv = ctx.canvas(name, i=i)
    for s, (av, bv, c) in enumerate(sols[:cv.slots]):
        cv.place(s, list(zip(av, bv)), c, point=point, check=check)
    return [cv.draft([point], why)]


#: fraction bits a solver may use in A/B and in C elements of wider formats (f64)
NARROW_A, NARROW_C = 12, 30


def _float_vars(s, f: Form, k: int, awin=None, bwin=None, cwin=None, c_free: bool = True):
    """Element variables for k products and c, finite, exponents in windows (zero allowed)."""
    from . import z3num as Z

    a = Z.elems(f.atype, "a", k)
    b = Z.elems(f.btype, "b", k)
    c = Z.Elem(f.c_type, "c")
    for x, win in [(x, awin) for x in a] + [(x, bwin) for x in b] + [(c, cwin)]:
        fx = x.f
        lo, hi = (win if win is not None else (fx.emin, fx.emax))
        lo, hi = max(lo, fx.emin), min(hi, fx.emax)
        s.add(Z.in_window(x, lo, hi) if lo <= hi else x.zero)
        if fx.ignored_low_bits:
            s.add(Z.z3.Extract(fx.ignored_low_bits - 1, 0, x.bv) == 0)
        # wide significands (f64) keep their top bits only: the multipliers stay small
        keep = NARROW_A if x is not c else NARROW_C
        if fx.mantissa > keep:
            s.add(Z.z3.Extract(fx.mantissa - keep - 1, 0, x.frac) == 0)
    return a, b, c


def _mant(t: str, keep: int) -> int:
    return min(get_format(t).mantissa, keep)


def _lsb_floor(f: Form, awin, bwin, cwin) -> int:
    """The lowest bit any addend can have (exponent windows, narrowed significands)."""
    fa, fb, fc = get_format(f.atype), get_format(f.btype), get_format(f.c_type)
    lo_a = max(awin[0], fa.emin) if awin else fa.emin
    lo_b = max(bwin[0], fb.emin) if bwin else fb.emin
    lo_c = max(cwin[0], fc.emin) if cwin else fc.emin
    return min(lo_a + lo_b - _mant(f.atype, NARROW_A) - _mant(f.btype, NARROW_A), lo_c - _mant(f.c_type, NARROW_C))


def _width(f: Form, awin, bwin, cwin, k: int, L: int) -> int:
    fa, fb, fc = get_format(f.atype), get_format(f.btype), get_format(f.c_type)
    hi_a = min(awin[1], fa.emax) if awin else fa.emax
    hi_b = min(bwin[1], fb.emax) if bwin else fb.emax
    hi_c = min(cwin[1], fc.emax) if cwin else fc.emax
    top = max(hi_a + hi_b + 2, hi_c + 1)
    # (an empty window forces its variables to zero; keep the width sane anyway)
    return max(top - L + k.bit_length() + 6, 2 * NARROW_A + NARROW_C + 16)


def _exact(Z, a, b, c, L, W):
    return Z.exact_dot(a, b, c, L, W, keep_ab=NARROW_A, keep_c=NARROW_C)


# ------------------------------------------------------------------------------------------
# specials: NaN and Inf in each operand

@_model("specials", "NaN and Inf in each operand (every NaN encoding kind, both Inf signs)",
        "nan_in:a nan_in:b nan_in:c inf_in:a inf_in:b inf_in:c", is_float_form)
def build_specials(ctx: Ctx):
    f = ctx.form
    rng = ctx.rng("specials")
    _, _, _, K, Ka = _dims(f)
    k = min(Ka, 4)
    for op, t in (("a", f.atype), ("b", f.btype), ("c", f.c_type)):
        for kind in ("nan", "inf"):
            if kind == "nan":
                variants = nan_codes(t)
            else:
                ic = inf_code(t)
                variants = [] if ic is None else [("+inf", ic), ("-inf", inf_code(t, True))]
            if not variants:
                continue
            cv = ctx.canvas("specials", i=2 * "abc".index(op) + (kind == "inf"))
            labels = []
            for s, (label, code) in enumerate(variants[:cv.slots]):
                a = random_normal(rng, f.atype, k)
                b = random_normal(rng, f.btype, k)
                c = random_normal(rng, f.c_type, 1)[0]
                if op == "a":
                    a[0] = code
                elif op == "b":
                    b[0] = code
                else:
                    c = code
                # a tf32 NaN whose payload is only in the ignored bits reads as Inf (model-defined)
                check = None if label == "payload-in-ignored-bits" else kind
                cv.place(s, list(zip(a, b)), c, point=f"{kind}_in:{op}", check=check)
                labels.append(label)
            yield cv.draft([f"{kind}_in:{op}"], f"{kind.upper()} in {op.upper()} ({', '.join(labels)}), one per "
                                               f"slot D[s,s], other terms normal")


# ------------------------------------------------------------------------------------------
# invalid: Inf*0 and Inf-Inf

def _applies_invalid(f: Form) -> bool:
    return is_float_form(f) and (_has_inf(f.atype) or _has_inf(f.btype))


@_model("invalid", "NaN produced by Inf*0 and by Inf-Inf (two products, or a product against C)",
        "inf_times_zero inf_minus_inf inf_minus_inf_c", _applies_invalid)
def build_invalid(ctx: Ctx):
    f = ctx.form
    rng = ctx.rng("invalid")
    _, _, _, K, Ka = _dims(f)
    za, zb = 0, 0
    cv = ctx.canvas("invalid", i=0)
    s = 0
    if _has_inf(f.atype):
        cv.place(s, [(inf_code(f.atype), zb)], random_normal(rng, f.c_type)[0], "inf_times_zero", "nan"); s += 1
        cv.place(s, [(inf_code(f.atype, True), neg_zero(f.btype))], random_normal(rng, f.c_type)[0],
                 "inf_times_zero", "nan"); s += 1
    if _has_inf(f.btype):
        cv.place(s, [(za, inf_code(f.btype))], random_normal(rng, f.c_type)[0], "inf_times_zero", "nan"); s += 1
    yield cv.draft(["inf_times_zero"], "Inf x 0 in one product (Inf in A or B, +0/-0 partner): D must be NaN")
    # an Inf factor of either sign, and the finite partner
    if _has_inf(f.atype):
        pinf, ninf = (inf_code(f.atype), one(f.btype)), (inf_code(f.atype, True), one(f.btype))
    else:
        pinf, ninf = (one(f.atype), inf_code(f.btype)), (one(f.atype), inf_code(f.btype, True))
    if Ka >= 2:
        cv = ctx.canvas("invalid", i=1)
        cv.place(0, [pinf, ninf], random_normal(rng, f.c_type)[0], "inf_minus_inf", "nan")
        if Ka >= 3:
            mid = (random_normal(rng, f.atype)[0], random_normal(rng, f.btype)[0])
            cv.place(1, [ninf, mid, pinf], 0, "inf_minus_inf", "nan")
        yield cv.draft(["inf_minus_inf"], "+Inf and -Inf products in one dot product: D must be NaN")
    if _has_inf(f.c_type):
        cv = ctx.canvas("invalid", i=2)
        cv.place(0, [pinf], inf_code(f.c_type, True), "inf_minus_inf_c", "nan")
        cv.place(1, [ninf], inf_code(f.c_type), "inf_minus_inf_c", "nan")
        yield cv.draft(["inf_minus_inf_c"], "an Inf product against the opposite Inf in C: D must be NaN")


# ------------------------------------------------------------------------------------------
# subnormal inputs and outputs

@_model("subnormal", "subnormal inputs in each operand, subnormal x subnormal, and exact results that are "
                     "subnormal in the output format (solver, confirmed by the model)",
        "subnormal_in:a subnormal_in:b subnormal_in:c subnormal_product subnormal_out", is_float_form, solver=True)
def build_subnormal(ctx: Ctx):
    from . import z3num as Z

    f = ctx.form
    rng = ctx.rng("subnormal")
    _, _, _, K, Ka = _dims(f)
    k = min(Ka, 4)
    for i, (op, t) in enumerate((("a", f.atype), ("b", f.btype), ("c", f.c_type))):
        if not get_format(t).subnormal or get_format(t).mantissa == 0:
            continue
        cv = ctx.canvas("subnormal", i=i)
        vals = [("min", min_sub(t)), ("max", max_sub(t)), ("-min", min_sub(t, True)), ("-max", max_sub(t, True))]
        for s, (_lab, code) in enumerate(vals[:cv.slots]):
            a = random_normal(rng, f.atype, k)
            b = random_normal(rng, f.btype, k)
            c = 0
            if op == "a":
                a[0] = code
            elif op == "b":
                b[0] = code
            else:
                c = code
                a, b = [0] * k, [0] * k
            cv.place(s, list(zip(a, b)), c, point=f"subnormal_in:{op}")
        yield cv.draft([f"subnormal_in:{op}"], f"subnormal {op.upper()} elements (min, max, both signs); "
                                               + ("products zero so D = c" if op == "c" else "partners normal"))
    fa, fb = get_format(f.atype), get_format(f.btype)
    if fa.subnormal and fb.subnormal and fa.mantissa and fb.mantissa:
        cv = ctx.canvas("subnormal", i=3)
        big_a = max_finite(f.atype)
        cv.place(0, [(min_sub(f.atype), min_sub(f.btype)), (max_sub(f.atype), max_sub(f.btype, True))], 0,
                 "subnormal_product")
        cv.place(1, [(max_sub(f.atype), max_finite(f.btype))], 0, "subnormal_product")
        cv.place(2, [(big_a, min_sub(f.btype))], 0, "subnormal_product")
        yield cv.draft(["subnormal_product"], "subnormal x subnormal products, and subnormal x large "
                                              "(the product is normal; checks subnormal alignment)")
    # exact results in the output's subnormal range (solver)
    fo = get_format(f.dtype)
    fc = get_format(f.c_type)
    t = fo.emin - 3
    variants = [
        ("products", dict(awin=(t // 2 - 6, t // 2 + 6), bwin=(t // 2 - 6, t // 2 + 6), cwin=None, c_zero=True)),
        ("products+c", dict(awin=(t // 2 - 6, t // 2 + 6), bwin=(t // 2 - 6, t // 2 + 6),
                            cwin=(t - 30, t + 30), c_zero=False)),
        ("c", dict(awin=(0, 0), bwin=(0, 0), cwin=(fc.emin, fc.emin), c_zero=False)),
    ]
    kk = min(Ka, 2)
    tried: list[str] = []
    for label, v in variants:
        def build(s, v=v):
            a, b, c = _float_vars(s, f, kk, v["awin"], v["bwin"], v["cwin"] or (fc.emin, fc.emin))
            if v["c_zero"]:
                s.add(c.zero)
            if label == "c":
                for x in a:
                    s.add(x.zero)
                s.add(Z.z3.Not(c.zero))
            else:
                s.add(Z.z3.Or([Z.z3.Not(z) for z in [x.zero for x in a]]))
            L = _lsb_floor(f, v["awin"], v["bwin"], v["cwin"] or (fc.emin, fc.emin))
            W = _width(f, v["awin"], v["bwin"], v["cwin"] or (fc.emin, fc.emin), kk, L) + 8
            S, side = _exact(Z, a, b, None if v["c_zero"] else c, L, W)
            s.add(side)
            thr = fo.emin - L                       # |S| * 2**L < 2**emin  <=>  |S| < 2**(emin - L)
            s.add(S != 0)
            if thr < W - 1:
                s.add(Z.z3.ULT(Z.sabs(S), Z.bv(1 << thr, W)) if thr >= 0 else Z.z3.BoolVal(False))
            return a, b, c
        sols = solve(ctx, f"subnormal_out[{label}]", kk, build, want=3,
                     check=_element_check(ctx, kk, "subnormal"), record=False)
        if sols:
            yield from _place_solutions(ctx, "subnormal_out", "subnormal_out", sols,
                                        f"solver: exact result subnormal in .{f.dtype} (from {label}); the "
                                        f"model's D is subnormal", check="subnormal")
            break
        tried.append(f"{label}: {ctx.stats[f'subnormal_out[{label}]']['status']}")
    else:
        # every addend is a multiple of 2**lsb_min; if that is at least the smallest normal,
        # no non-zero result is subnormal (an exact argument)
        lsb_min = min(fa.emin + fb.emin - fa.mantissa - fb.mantissa, fc.emin - fc.mantissa)
        if lsb_min >= fo.emin:
            ctx.not_covered["subnormal_out"] = (f"proved unreachable: every addend is a multiple of 2**{lsb_min} "
                                                f">= 2**{fo.emin}, the smallest normal .{f.dtype}")
        else:
            ctx.not_covered["subnormal_out"] = "; ".join(tried)


# ------------------------------------------------------------------------------------------
# signed zeros

@_model("signed_zero", "signed zeros: -0 inputs, sums of zeros of either sign, exact cancellation",
        "neg_zero_in:a neg_zero_in:b neg_zero_in:c zero_sum:all_neg zero_sum:mixed zero_sum:cancel",
        is_float_form)
def build_signed_zero(ctx: Ctx):
    f = ctx.form
    rng = ctx.rng("signed_zero")
    _, _, _, K, Ka = _dims(f)
    nza, nzb, nzc = neg_zero(f.atype), neg_zero(f.btype), neg_zero(f.c_type)
    cv = ctx.canvas("signed_zero", i=0)
    # -0 * +x = -0 ; sum of -0 products and c = -0 -> IEEE -0 (the model decides)
    cv.place(0, [(nza, one(f.btype))] * min(Ka, 2), nzc, "zero_sum:all_neg")
    cv.place(1, [(one(f.atype), nzb)], nzc, "zero_sum:all_neg")
    cv.place(2, [(nza, nzb)], nzc, "zero_sum:mixed")                 # -0 * -0 = +0, + (-0)
    cv.place(3, [(nza, one(f.btype))], 0, "zero_sum:mixed")          # -0 + (+0)
    if cv.slots > 4:
        cv.place(4, [], nzc, "zero_sum:all_neg")                  # no products at all: D = c = -0
    yield cv.draft(["zero_sum:all_neg", "zero_sum:mixed"],
                   "sums of signed zeros: every addend -0, and -0 mixed with +0 (IEEE: -0 only when all are -0)")
    if Ka >= 2:
        cv = ctx.canvas("signed_zero", i=1)
        for s in range(min(3, cv.slots)):
            x = random_normal(rng, f.atype)[0]
            y = random_normal(rng, f.btype)[0]
            fx = get_format(f.atype)
            xn = x ^ ((1 << (fx.field_bits - 1)) << fx.ignored_low_bits)     # -x
            cv.place(s, [(x, y), (xn, y)], [0, nzc, nzc][s], "zero_sum:cancel")
        yield cv.draft(["zero_sum:cancel"], "x*y + (-x)*y (+ c = +-0): exact cancellation to zero")


# ------------------------------------------------------------------------------------------
# alignment (solver)

@_model("alignment", "exponent spread that forces alignment loss: a product P..P+2 binades below C (P = "
                     "C's precision) whose shifted-out bits are worth 3/4 of an ulp of C or more, and products "
                     "each below half an ulp of C whose sum exceeds one ulp (solver)",
        "align_shift:P align_far_sum", is_float_form, solver=True)
def build_alignment(ctx: Ctx):
    from . import z3num as Z

    z3 = Z.z3
    f = ctx.form
    fa, fb, fc = get_format(f.atype), get_format(f.btype), get_format(f.c_type)
    P = fc.mantissa + 1
    _, _, _, K, Ka = _dims(f)
    win = (-4, 4)

    cws = (2 * win[0] + P, 2 * win[1] + P + 2)
    Ls = _lsb_floor(f, win, win, cws)
    Ws = _width(f, win, win, cws, 1, Ls) + 4

    def build_shift(s):
        a, b, c = _float_vars(s, f, 1, win, win, cws)
        x, y = a[0], b[0]
        s.add(x.normal, y.normal, c.normal)
        gap = c.exp - (x.exp + y.exp)
        s.add(gap >= P, gap <= P + 2)
        s.add(x.sign == z3.Xor(c.sign, y.sign))        # the product has C's sign
        # the exact sum's two bits below ulp(c) = 2**(ec - mc) are both set (at least 3/4 of an
        # ulp): every round-to-nearest rounds up, whatever the ties and the lower bits; an
        # aligner that drops the shifted-out bits, or a truncating adder, does not
        S, side = _exact(Z, a, b, c, Ls, Ws)
        s.add(side)
        h = c.exp - Z.bv(fc.mantissa + 2 + Ls, Z.EW)   # bit of S worth ulp(c) / 4
        s.add(h >= 0, h < Ws - 3)
        s.add(z3.Extract(1, 0, z3.LShR(Z.sabs(S), Z._fit(h, Ws))) == 3)
        if fa.mantissa:
            s.add(x.frac != 0)
        return a, b, c
    sols = solve(ctx, f"align_shift:{P}", 1, build_shift, want=3)
    yield from _place_solutions(ctx, "align_shift", f"align_shift:{P}", sols,
                                f"solver: product exponent {P}..{P + 2} below C's (a shift of at least {P}); "
                                f"the two bits below C's ulp are both set, so rounding to nearest and "
                                f"truncation differ")
    k = min(Ka, 4)
    if k >= 2:
        # c sits P+2 binades or more above every product
        cwin = (P + 2 + 2 * win[0], P + 2 + 2 * win[1] + 2)
        L = 2 * win[0] - _mant(f.atype, NARROW_A) - _mant(f.btype, NARROW_A)
        W = max(2 * win[1] + 2, cwin[1] - fc.mantissa) - L + k.bit_length() + 8

        def build_far(s):
            a, b, c = _float_vars(s, f, k, win, win, cwin)
            s.add(c.normal)
            for x, y in zip(a, b):
                s.add(x.normal, y.normal)
                s.add(c.exp - (x.exp + y.exp) >= P + 2)
                s.add(x.sign == c.sign, z3.Not(y.sign))          # every product has c's sign
            S, side = _exact(Z, a, b, None, L, W)
            s.add(side)
            ulp = c.exp - Z.bv(fc.mantissa + L, Z.EW)       # ulp(c) = 2**(ec - mc) = 2**L * 2**ulp
            s.add(ulp >= 0, ulp < W - 2)
            s.add(z3.UGE(Z.sabs(S), Z.bv(1, W) << Z._fit(ulp, W)))
            return a, b, c
        sols = solve(ctx, "align_far_sum", k, build_far, want=2)
        yield from _place_solutions(ctx, "align_far_sum", "align_far_sum", sols,
                                    f"solver: {k} products, each at least {P + 2} binades below C (below half "
                                    f"an ulp), whose exact sum exceeds one ulp of C")


# ------------------------------------------------------------------------------------------
# cancellation (solver)

@_model("cancellation", "catastrophic cancellation: products and C that cancel to exactly zero, and to a "
                        "result at least P bits below the largest addend (solver)",
        "cancel_exact_zero cancel_catastrophic", is_float_form, solver=True)
def build_cancellation(ctx: Ctx):
    from . import z3num as Z

    z3 = Z.z3
    f = ctx.form
    fo = get_format(f.dtype)
    _, _, _, K, Ka = _dims(f)
    k = min(Ka, 2)
    win, cwin = (-6, 6), (-10, 10)
    L = _lsb_floor(f, win, win, cwin)
    W = _width(f, win, win, cwin, k, L) + 4

    def common(s):
        a, b, c = _float_vars(s, f, k, win, win, cwin)
        for x, y in zip(a, b):
            s.add(x.normal, y.normal)
        s.add(c.normal)
        if k >= 2:
            s.add(a[0].exp + b[0].exp != a[1].exp + b[1].exp)
        terms, side = Z.exact_terms(a, b, c, L, W, keep_ab=NARROW_A, keep_c=NARROW_C)
        s.add(side)
        S = Z.bv(0, W)
        for t in terms:
            S = S + t
        return a, b, c, S, terms

    def build_zero(s):
        a, b, c, S, _ = common(s)
        s.add(S == 0)
        return a, b, c
    sols = solve(ctx, "cancel_exact_zero", k, build_zero, want=3)
    yield from _place_solutions(ctx, "cancel_exact_zero", "cancel_exact_zero", sols,
                                "solver: non-zero products and C whose exact sum is exactly zero")

    # catastrophic: one product cancels C exactly and a second, tiny one is all that is
    # left, at least p binades (p = output precision) below C: the leading bits of the
    # addends cancel and the result is made of low-order bits a truncating aligner can lose
    p = fo.mantissa + 1
    fa, fb = get_format(f.atype), get_format(f.btype)
    awc, cwc = (-(p // 2 + 8), p // 2 + 8), (-8, min(fa.emax + fb.emax + 1, p + 8))
    Lc = _lsb_floor(f, awc, awc, cwc)
    Wc = _width(f, awc, awc, cwc, k, Lc) + 4

    def build_cat(s):
        a, b, c = _float_vars(s, f, 2, awc, awc, cwc)
        for x, y in zip(a, b):
            s.add(x.normal, y.normal)
        s.add(c.normal)
        (t0, t1, tc), side = Z.exact_terms(a, b, c, Lc, Wc, keep_ab=NARROW_A, keep_c=NARROW_C)
        s.add(side)
        s.add(t0 + tc == 0, t1 != 0)
        e = c.exp - Z.bv(p + Lc, Z.EW)              # |t1| * 2**L < 2**(ec - p)
        s.add(e > 0, e < Wc - 2)
        s.add(z3.ULT(Z.sabs(t1), Z.bv(1, Wc) << Z._fit(e, Wc)))
        return a, b, c
    if Ka < 2:
        return
    sols = solve(ctx, "cancel_catastrophic", 2, build_cat, want=3)
    yield from _place_solutions(ctx, "cancel_catastrophic", "cancel_catastrophic", sols,
                                f"solver: a product cancels C exactly and the non-zero result is a second "
                                f"product at least {p} binades below C (the leading bits cancel)")


# ------------------------------------------------------------------------------------------
# overflow (solver)

@_model("overflow", "exact results beyond the output format's range from finite inputs (solver; proved "
                    "unreachable where no finite inputs can overflow)",
        "overflow_out", is_float_form, solver=True)
def build_overflow(ctx: Ctx):
    from . import z3num as Z

    z3 = Z.z3
    f = ctx.form
    fa, fb, fc, fo = (get_format(t) for t in (f.atype, f.btype, f.c_type, f.dtype))
    _, _, _, K, Ka = _dims(f)
    # |sum| is largest when every addend is the largest finite value: if even that stays
    # below 2**(emax+1), no finite input overflows (exact arithmetic, no solver needed)
    from fractions import Fraction

    def largest(fx) -> Fraction:
        return Fraction(fx.maxfin_code & ((1 << fx.mantissa) - 1) | (1 << fx.mantissa)) * \
            Fraction(2) ** (fx.emax - fx.mantissa)
    thr_v = Fraction(2) ** (fo.emax + 1)
    bound = Ka * largest(fa) * largest(fb) + largest(fc)
    if bound < thr_v:
        ctx.stats["overflow_out"] = {"status": "unsat", "seconds": 0.0, "solutions": 0, "terms": Ka,
                                     "reason": f"bound: |sum| <= {Ka} * max({f.atype}) * max({f.btype}) + "
                                               f"max({f.c_type}) = {float(bound):.6g} < 2**{fo.emax + 1}"}
        ctx.not_covered["overflow_out"] = (f"proved unreachable: the largest finite inputs give |sum| <= "
                                           f"{float(bound):.6g} < 2**{fo.emax + 1}")
        return
    # as few terms as reach the threshold; c only when the products alone cannot
    k = next(j for j in range(1, Ka + 1) if j * largest(fa) * largest(fb) + largest(fc) >= thr_v)
    k = max(k, min(Ka, 2))
    use_c = k * largest(fa) * largest(fb) < thr_v
    # the largest magnitudes live in the top binades: a search there is complete
    awin, bwin = (fa.emax - 3, fa.emax), (fb.emax - 3, fb.emax)
    cwin = (fc.emax - 3, fc.emax) if use_c else None
    L = _lsb_floor(f, awin, bwin, cwin) if use_c else \
        awin[0] + bwin[0] - _mant(f.atype, NARROW_A) - _mant(f.btype, NARROW_A)
    W = _width(f, awin, bwin, cwin, k, L) + 4 if use_c else (awin[1] + bwin[1] + 2) - L + k.bit_length() + 8

    def build(s):
        a, b, c = _float_vars(s, f, k, awin, bwin, cwin or (fc.emin, fc.emin))
        if not use_c:
            s.add(c.zero)
        S, side = _exact(Z, a, b, c if use_c else None, L, W)
        s.add(side)
        thr = fo.emax + 1 - L                 # |S| * 2**L >= 2**(emax+1)
        if thr >= W - 2:
            s.add(z3.BoolVal(False))
        elif thr <= 0:
            s.add(S != 0)
        else:
            s.add(z3.UGE(Z.sabs(S), Z.bv(1 << thr, W)))
        s.add(z3.Or([z3.Not(x.zero) for x in a]))
        return a, b, c
    sols = solve(ctx, "overflow_out", k, build, want=3)
    yield from _place_solutions(ctx, "overflow_out", "overflow_out", sols,
                                f"solver: finite inputs whose exact sum is at least 2**{fo.emax + 1} "
                                f"(beyond .{f.dtype})")


# ------------------------------------------------------------------------------------------
# fp8 / fp6 / fp4 encodings

@_model("fp8", "fp8/fp6/fp4 encodings: every NaN code, the largest finite values, e5m2 Inf, the smallest "
               "subnormal, and sums of largest products that saturate the accumulator",
        "fp8_nan:0xNN fp8_max:a fp8_max:b fp8_inf fp8_min_subnormal fp8_max_sum", _fp8ish)
def build_fp8(ctx: Ctx):
    f = ctx.form
    rng = ctx.rng("fp8")
    _, _, _, K, Ka = _dims(f)
    for i, (op, t) in enumerate((("a", f.atype), ("b", f.btype))):
        fx = get_format(t)
        cv = ctx.canvas("fp8", i=i)
        s = 0
        pts = []
        for code in fx.nan_codes() if fx.nan != "ieee" else [c for _, c in nan_codes(t)]:
            if s >= cv.slots:
                break
            x, y = (code, one(f.btype)) if op == "a" else (one(f.atype), code)
            cv.place(s, [(x, y)], 0, f"fp8_nan:0x{code:02x}", "nan"); s += 1
            pts.append(f"fp8_nan:0x{code:02x}")
        if fx.inf and s + 1 < cv.slots:
            for neg in (False, True):
                x, y = (inf_code(t, neg), one(f.btype)) if op == "a" else (one(f.atype), inf_code(t, neg))
                cv.place(s, [(x, y)], 0, "fp8_inf", "inf"); s += 1
            pts.append("fp8_inf")
        if s < cv.slots:
            x, y = (max_finite(t), one(f.btype)) if op == "a" else (one(f.atype), max_finite(t))
            cv.place(s, [(x, y)], 0, f"fp8_max:{op}"); s += 1
            pts.append(f"fp8_max:{op}")
        if s < cv.slots:
            x, y = (min_sub(t, True), one(f.btype)) if op == "a" else (one(f.atype), min_sub(t, True))
            cv.place(s, [(x, y)], 0, "fp8_min_subnormal"); s += 1
            pts.append("fp8_min_subnormal")
        if pts:
            yield cv.draft(pts, f"special encodings of .{t} in {op.upper()}: "
                                f"NaN codes {[hex(c) for c in fx.nan_codes()] or 'IEEE'}, max finite, "
                                f"min subnormal")
    cv = ctx.canvas("fp8", i=5)
    mx = [(max_finite(f.atype), max_finite(f.btype))] * Ka
    cv.place(0, mx, 0, "fp8_max_sum")
    cv.place(1, [(max_finite(f.atype, True), max_finite(f.btype))] * Ka, max_finite(f.c_type, True), "fp8_max_sum")
    cv.place(2, [(max_finite(f.atype), max_finite(f.btype)), (max_finite(f.atype, True), max_finite(f.btype))] *
             (Ka // 2), 0, "fp8_max_sum")
    yield cv.draft(["fp8_max_sum"], "every product max x max (both signs, and alternating): the accumulator's "
                                    "range and saturation")


# ------------------------------------------------------------------------------------------
# integer bounds (solver)

def _applies_int(f: Form) -> bool:
    return is_int_form(f) and f.family in ("mma", "mma.sp", "wmma.mma", "wgmma")


@_model("int_bounds", "s32 results at both bounds: exact sums just past +-2**31 (wrap, or .satfinite clamp), "
                      "exactly at the bounds, and .satfinite sums that leave the range only in between (solver)",
        "int_wrap_hi int_wrap_lo int_sat_hi int_sat_lo int_at_max int_at_min int_sat_transient",
        _applies_int, solver=True)
def build_int_bounds(ctx: Ctx):
    from . import z3num as Z

    z3 = Z.z3
    f = ctx.form
    _, _, _, K, Ka = _dims(f)
    k = min(Ka, 8)
    W = 48
    # products that are never negative (unsigned x unsigned, b1) cannot take the sum below c:
    # then c + P with P != 0 never reaches -2**31 (an exact argument, no solver needed)
    fa, fb = get_format(f.atype), get_format(f.btype)
    nonneg = f.atype == "b1" or (not fa.signed and not fb.signed)
    hi, lo = (1 << 31) - 1, -(1 << 31)
    sat = bool(f.satfinite)

    def vars_(s):
        a = Z.elems(f.atype, "a", k)
        b = Z.elems(f.btype, "b", k)
        c = Z.Elem(f.c_type, "c")
        return a, b, c

    def prods(a, b):
        return Z.int_dot(a, b, None, W, bitop=f.bitop)

    cases = [("hi", lambda S, P: z3.And(S > hi, S <= hi + (1 << 14), P != 0)),
             ("lo", lambda S, P: z3.And(S < lo, S >= lo - (1 << 14), P != 0)),
             ("at_max", lambda S, P: z3.And(S == hi, P != 0)),
             ("at_min", lambda S, P: z3.And(S == lo, P != 0))]
    for label, cond in cases:
        point = {"hi": "int_sat_hi" if sat else "int_wrap_hi", "lo": "int_sat_lo" if sat else "int_wrap_lo",
                 "at_max": "int_at_max", "at_min": "int_at_min"}[label]

        if nonneg and label in ("lo", "at_min"):
            ctx.stats[point] = {"status": "unsat", "seconds": 0.0, "solutions": 0, "terms": Ka,
                                "reason": "bound: products are never negative"}
            ctx.not_covered[point] = (f"proved unreachable: {f.atype} x {f.btype} products are never negative, "
                                      f"so c + products (not all zero) > -2**31")
            continue

        def build(s, cond=cond):
            a, b, c = vars_(s)
            S = Z.int_dot(a, b, c, W, bitop=f.bitop)
            s.add(cond(S, prods(a, b)))
            return a, b, c
        sols = solve(ctx, point, k, build, want=3, complete=(k == Ka))
        what = {"hi": "just above 2**31-1", "lo": "just below -2**31", "at_max": "exactly 2**31-1",
                "at_min": "exactly -2**31"}[label]
        yield from _place_solutions(ctx, point, point, sols,
                                    f"solver: exact sum {what}, reached by the products (not by C alone)"
                                    + (" -> .satfinite clamps" if sat and label in ("hi", "lo") else
                                       " -> wraps modulo 2**32" if label in ("hi", "lo") else ""))
    if sat and k >= 2 and nonneg:
        ctx.stats["int_sat_transient"] = {"status": "unsat", "seconds": 0.0, "solutions": 0, "terms": Ka,
                                          "reason": "bound: products are never negative"}
        ctx.not_covered["int_sat_transient"] = ("proved unreachable: with products never negative the running "
                                                "sum only grows, so it cannot pass 2**31-1 and come back")
    elif sat and k >= 2:
        def build_t(s):
            a, b, c = vars_(s)
            S = Z.int_dot(a, b, c, W, bitop=f.bitop)
            s.add(S <= hi, S >= hi - (1 << 14))
            pre = c.ivalue(W)
            over = []
            for x, y in zip(a, b):
                pre = pre + Z.int_dot([x], [y], None, W, bitop=f.bitop)
                over.append(pre > hi)
            s.add(z3.Or(over[:-1]))
            return a, b, c
        sols = solve(ctx, "int_sat_transient", k, build_t, want=2, complete=(k == Ka))
        yield from _place_solutions(ctx, "int_sat_transient", "int_sat_transient", sols,
                                    "solver: the running sum (c first, k ascending) passes 2**31-1 and comes back: "
                                    "a final clamp and a per-step clamp differ")


# ------------------------------------------------------------------------------------------
# b1

@_model("b1", "b1 operands all ones, all zeros, one of each, alternating (with .and / .xor + .popc)",
        "b1:ones b1:zeros b1:ones_zeros b1:zeros_ones b1:alternating", lambda f: f.atype == "b1")
def build_b1(ctx: Ctx):
    f = ctx.form
    pats = {"ones": (1, 1), "zeros": (0, 0), "ones_zeros": (1, 0), "zeros_ones": (0, 1)}
    for i, (name, (x, y)) in enumerate(pats.items()):
        cv = ctx.canvas("b1", i=i)
        cv.A[:] = x
        cv.B[:] = y
        yield cv.draft([f"b1:{name}"], f"A all {'ones' if x else 'zeros'}, B all {'ones' if y else 'zeros'} "
                                       f"({f.bitop} + popc), C random")
    cv = ctx.canvas("b1", i=9)
    P, M, Ka = cv.A.shape
    cv.A[:] = (np.arange(Ka)[None, None, :] + np.arange(M)[None, :, None]) % 2
    cv.B[:] = (np.arange(cv.B.shape[1])[None, :, None] % 2)
    yield cv.draft(["b1:alternating"], "alternating bit patterns in A (shifted per row) and B")


# ------------------------------------------------------------------------------------------
# sparse metadata and selectors

@_model("metadata", "every legal metadata index pair (nibble) in every chunk, for every legal selector; mixed "
                    "pairs; lanes that do not contribute metadata holding (legal) junk (a sparse wgmma, whose "
                    "vectors are matrices: the non-zero positions of the dense A those pairs stand for)",
        "metadata_pair:0xN metadata_mixed metadata_idle_lanes",
        lambda f: (f.family == "mma.sp" and not f.block_scale) or (f.family == "wgmma" and f.is_sparse))
def build_metadata(ctx: Ctx):
    from .draft import meta

    f = ctx.form
    fm = meta(f)
    legal = list(fm.legal_nibbles)
    M = f.mnk[0]
    if f.family == "wgmma":      # matrix level: no selector, no metadata registers
        for nib in legal:
            cv = ctx.canvas("metadata", nib=nib, i=nib)
            yield cv.draft([f"metadata_pair:0x{nib:x}"],
                           f"every chunk of every row of A holds its non-zeros at chunk columns {fm.offsets(nib)} "
                           f"(index pair 0b{nib:04b})")
        mixed = np.array(legal)[(np.arange(M)[:, None] + 3 * np.arange(fm.chunks_per_row)[None, :]) % len(legal)]
        cv = ctx.canvas("metadata", nib=mixed, i=100)
        yield cv.draft(["metadata_mixed"], "a different legal index pair per (row, chunk) of A")
        return
    for si, sel in enumerate(ctx.sels()):
        for nib in legal:
            cv = ctx.canvas("metadata", sel=sel, nib=nib, i=nib)
            offs = fm.offsets(nib)
            yield cv.draft([f"metadata_pair:0x{nib:x}", f"selector:{sel}"],
                           f"every chunk of every row uses nibble 0b{nib:04b} (stored elements at chunk columns "
                           f"{offs}), selector {sel}")
        C = fm.chunks_per_row
        mixed = np.array(legal)[(np.arange(M)[:, None] + 3 * np.arange(C)[None, :]) % len(legal)]
        cv = ctx.canvas("metadata", sel=sel, nib=mixed, i=100 + si)
        yield cv.draft(["metadata_mixed", f"selector:{sel}"], f"a different legal nibble per (row, chunk), "
                                                              f"selector {sel}")
        cv = ctx.canvas("metadata", sel=sel, i=200 + si)
        yield cv.draft(["metadata_idle_lanes", f"selector:{sel}"],
                       f"random legal nibbles; lanes that do not contribute metadata under selector {sel} hold "
                       f"legal junk instead of 0", idle_e=True)


@_model("selector", "every legal sparsity selector, with random values and random legal metadata",
        "selector:S", lambda f: f.family == "mma.sp" and not f.block_scale)
def build_selector(ctx: Ctx):
    for sel in ctx.sels():
        for i, bg in enumerate(("normal", "finite" if is_float_form(ctx.form) else "extreme")):
            cv = ctx.canvas("selector", background=bg, sel=sel, i=10 * sel + i)
            yield cv.draft([f"selector:{sel}"], f"selector {sel}: random {bg} values, random legal metadata")


# ------------------------------------------------------------------------------------------
# block scaling

@_model("block_scale", "scale-factor extremes: ue8m0 0x00 (2**-127), 0x7f (1), 0xfe (2**127), 0xff (NaN); "
                       "ue4m3 0x00, 0x01, 0x38 (1), 0x7e (max), 0x7f (NaN)",
        "scale:TYPE:0xNN:a scale:TYPE:0xNN:b", lambda f: bool(f.block_scale))
def build_block_scale(ctx: Ctx):
    f = ctx.form
    st = f.stype
    fs = get_format(st)
    ext = [0x00, 0x7F, 0xFE, 0xFF] if st == "ue8m0" else [0x00, 0x01, 0x38, 0x7E, 0x7F]
    from .draft import unit_scale

    unit = unit_scale(f)
    M, N, K = f.mnk
    nsf = {"1X": 1, "2X": 2, "4X": 4}[f.scale_vec_effective]
    for i, v in enumerate(ext):
        for side in ("a", "b"):
            cv = ctx.canvas("block_scale", i=2 * i + (side == "b"))
            sa = np.full((M, nsf), unit, np.uint8)
            sb = np.full((nsf, N), unit, np.uint8)
            if side == "a":
                sa[:, 0] = v
                sa[::2, -1] = v
            else:
                sb[0, :] = v
                sb[-1, ::2] = v
            d = cv.draft([f"scale:{st}:0x{v:02x}:{side}"],
                         f"scale factor {fs.name} 0x{v:02x} on {side.upper()} (first block of every row/column, "
                         f"and the last block of every other one); other factors 1")
            d.scale_a, d.scale_b = sa, sb
            yield d


# ------------------------------------------------------------------------------------------
# layout probes

def _distinct(t: str, n: int) -> np.ndarray:
    """n encodings of t, as distinct in value as the format allows (positive finite, from 1 up, then signs)."""
    f = get_format(t)
    if f.cls == "bit":
        return (np.arange(n) % 2).astype(np.uint64)
    if f.cls == "int":
        vals = np.arange(1, n + 1) % (f.int_max + 1 - max(f.int_min, 0))
        vals = np.where(vals == 0, 1, vals)
        return (vals & ((1 << f.bits) - 1)).astype(np.uint64)
    start = one(t) >> f.ignored_low_bits
    top = f.maxfin_code
    pool = np.arange(start, top + 1, max(1, (top - start) // max(n, 1)) if top - start > 4 * n else 1,
                     dtype=np.uint64)
    pool = pool[~np.isin(pool, np.array(f.nan_codes(), np.uint64))] if f.nan_codes() else pool
    pool = np.concatenate([pool, pool | np.uint64(1 << (f.field_bits - 1))]) if f.signed else pool
    return (pool[np.arange(n) % len(pool)] << np.uint64(f.ignored_low_bits)).astype(np.uint64)


@_model("layout", "layout probes: one operand holds distinct values and the others select them one by one "
                  "into D, so a misplaced element changes D",
        "layout:a layout:b layout:c", lambda f: f.family in ("mma", "mma.sp", "wgmma") and not f.block_scale)
def build_layout(ctx: Ctx):
    f = ctx.form
    P, M, N, K, Ka = _dims(f)
    one_b, one_a = one(f.btype), one(f.atype)
    zc = 0
    # C probe: A = B = 0, D = C (read through the accumulator path)
    cv = ctx.canvas("layout", background="zero", i=0)
    cv.C[:] = _distinct(f.c_type, P * M * N).reshape(P, M, N)
    yield cv.draft(["layout:c"], "A = B = 0, C distinct: D equals C element by element")
    if f.atype == "b1":
        return
    # A probe: B selects A[m, j] into D[m, n] for j = n + q*N
    nib = meta(f).legal_nibbles[0] if f.is_sparse else None
    nq = min(4, -(-Ka // N))
    for q in range(nq):
        cv = ctx.canvas("layout", background="zero", nib=nib, i=10 + q)
        cv.A[:] = _distinct(f.atype, P * M * Ka).reshape(P, M, Ka)
        ks = cv.kidx(0)
        for n in range(N):
            j = (n + q * N) % Ka
            cv.B[:, ks[j], n] = one_b
        cv.C[:] = zc
        yield cv.draft(["layout:a"], f"A distinct, B one-hot: D[m, n] = A[m, n + {q * N}] "
                                     + ("(through the metadata's k)" if f.is_sparse else ""))
    # B probe: A selects B[k, n] into D[m, n] for k = m + q*M (dense); sparse: via the stored k
    nq = min(4, -(-K // M))
    for q in range(nq):
        cv = ctx.canvas("layout", background="zero", nib=nib, i=20 + q)
        cv.B[:] = _distinct(f.btype, P * K * N).reshape(P, K, N)
        for m in range(M):
            ks = cv.kidx(m)
            j = (m + q * M) % Ka
            cv.A[:, m, j] = one_a
        yield cv.draft(["layout:b"], f"B distinct, A one-hot: D[m, n] = B[k(m), n], k(m) = m + {q * M}"
                                     + (" through the metadata" if f.is_sparse else ""))


def meta(f: Form):
    from .draft import meta as _m

    return _m(f)


# ------------------------------------------------------------------------------------------
# mechanisms: every known wrong variant of the model (silicon findings included) gets inputs
# that tell it apart (formal.vectors.distinguish)

def point_name(s: str) -> str:
    """A point name safe in every vector file format (no spaces, commas or '#')."""
    import re

    return re.sub(r"[^A-Za-z0-9_.:=+\-]+", "_", s).strip("_")


def _applies_mech(f: Form) -> bool:
    return f.family in ("mma", "mma.sp", "wmma.mma", "wgmma") and f.atype != "b1"


@_model("mechanisms", "inputs that tell the model from each known wrong variant, one per mechanism: the "
                      "accumulator floor with c = 0, RN vs truncation on every path, window width, block size, "
                      "c entry and precision, fp8 emulation groups and late c, NaN precedence, zero sign, "
                      "overflow, per-operand subnormal flushing, saturation; for sm_90 every alternative the "
                      "H100 refuted (structured search, witnesses reduced to the fewest terms)",
        "mech:NAME silicon:PATH:ALTERNATIVE nan_multi", _applies_mech)
def build_mechanisms(ctx: Ctx):
    placed = _mechanism_witnesses(ctx)
    # several NaN sources in one dot product (distinct payloads): a precedence rule is visible
    nans = _nan_multi(ctx)
    if nans:
        placed.append(("nan_multi", "two or more NaN sources in one dot product", nans))
    # pack: one witness per slot, as many per warp as fit; every element outside the slots is 0
    cv = None
    used: list[str] = []
    whys: list[str] = []
    n = 0
    for pt, what, ws in placed:
        for w in ws:
            if cv is None:
                cv = ctx.canvas("mechanisms", background="zero", i=n)
                used, whys = [], []
            s = len(cv.targets)
            a = np.asarray(w.a, np.uint64)
            nz = [k for k in range(len(a)) if w.a[k] or w.b[k]]
            cv.place(s, [(w.a[k], w.b[k]) for k in nz], w.c, point=pt, positions=nz)
            if pt not in used:
                used.append(pt)
                whys.append(what)
            if len(cv.targets) >= cv.slots:
                yield cv.draft(used, "reduced inputs that tell the model from: " + "; ".join(whys))
                cv = None
                n += 1
    if cv is not None and cv.targets:
        yield cv.draft(used, "reduced inputs that tell the model from: " + "; ".join(whys))


def _mechanism_witnesses(ctx: Ctx) -> list[tuple[str, str, list]]:
    """(point, what, witnesses) per mechanism, from the structured search.  A pure function of
    (form, arch, seed): cached with the solver's answers (``_SOLUTIONS``, cleared with them) for
    a named arch; an ArchModel object is searched every time."""
    from . import distinguish as X

    f = ctx.form
    key = ("mechanisms", f.opcode, ctx.arch, ctx.seed) if isinstance(ctx.arch, str) else None
    if key is not None and key in _SOLUTIONS:
        placed, stats, missed = _SOLUTIONS[key]
        ctx.stats.update({k: dict(v, cached=True) for k, v in stats.items()})
        ctx.not_covered.update(missed)
        return list(placed)
    pool = X.Pool(f, ctx.rng("mechanisms|pool"))
    placed, stats, missed = [], {}, {}
    for mech in X.mechanisms(f, ctx.arch):
        pt = point_name(mech.point)
        t0 = time.perf_counter()
        try:
            ws = X.search(f, ctx.arch, mech.variant, regimes=list(mech.regimes), pool=pool, want=2)
        except Exception as e:                       # a variant the engine cannot run here
            missed[f"{pt} ({mech.what})"] = f"search failed: {type(e).__name__}: {e}"
            continue
        stats[f"{pt} ({mech.what})"] = {"status": "found" if ws else "not found", "solutions": len(ws),
                                         "terms": [w.terms for w in ws], "seconds": round(time.perf_counter() - t0, 4)}
        if not ws:
            missed[f"{pt} ({mech.what})"] = (f"no input told the model from this variant in "
                                             f"{pool.size} candidates x {len(pool.cands)} regimes "
                                             f"(it may be unobservable on this form)")
            continue
        placed.append((pt, mech.what, ws, mech))
    placed = _separate_siblings(f, ctx.arch, pool, placed)
    ctx.stats.update({k: dict(v) for k, v in stats.items()})
    ctx.not_covered.update(missed)
    if key is not None:
        _SOLUTIONS[key] = (tuple(placed), stats, missed)
    return placed


def _separate_siblings(f: Form, arch, pool, placed: list) -> list:
    """Variants of one mechanism (the floor coarsened, +-1 or absent; a zero's exponent -126 or
    the format's emin) often fail on the same witnesses: a model with one of them would then be
    blamed on whichever comes first.  For every pair no witness tells apart, add one (if any
    candidate does) that tells the variant from the reference and from its sibling."""
    from . import distinguish as X

    out = []
    for pt, what, ws, mech in placed:
        ws = list(ws)
        for pt2, _, _, sib in placed:
            if pt2 != pt or sib is mech:
                continue
            a = np.array([w.a for w in ws], np.uint64)
            b = np.array([w.b for w in ws], np.uint64)
            c = np.array([w.c for w in ws], np.uint64)
            if (X.eval_terms(f, mech.variant, a, b, c) != X.eval_terms(f, sib.variant, a, b, c)).any():
                continue
            try:
                ws += X.search(f, arch, mech.variant, regimes=list(mech.regimes), pool=pool, want=1,
                               apart=(sib.variant,))
            except Exception:                    # a pair the engine cannot run: the plain witnesses stand
                continue
        out.append((pt, what, ws))
    return out


def _nan_multi(ctx: Ctx) -> list:
    """Dot products with two or three NaN sources (a and c, a and b at one k, b and a at two k,
    NaN beside Inf*0), each NaN with its own payload and sign."""
    from .distinguish import Witness

    f = ctx.form
    if not is_float_form(f):
        return []
    _, _, _, _, Ka = _dims(f)
    na, nb, nc = nan_codes(f.atype), nan_codes(f.btype), nan_codes(f.c_type)
    if not (na and nb and nc):
        return []
    pa, pb, pc = na[0][1], nb[-1][1], nc[1 % len(nc)][1]
    xa, xb = one(f.atype), one(f.btype)
    out = []

    def w(terms, c):
        a = [0] * Ka
        b = [0] * Ka
        for k, (x, y) in terms.items():
            a[k], b[k] = x, y
        out.append(Witness(a, b, c))

    w({0: (pa, xb)}, pc)                                   # a and c
    if Ka >= 2:
        w({0: (xa, pb), 1: (pa, xb)}, 0)                   # b at k0, a at k1
        w({0: (pa, pb)}, one(f.c_type))                     # a and b at one k
        w({0: (pa, xb), Ka - 1: (xa, pb)}, pc)             # three sources, far apart
        ic = inf_code(f.atype)
        if ic is not None:
            w({0: (ic, 0), 1: (xa, pb)}, 0)                # Inf*0 and a NaN b
    return out


# ------------------------------------------------------------------------------------------
# the H100 numerics probes: each probe's dot product (formal.numerics.probes, one definition)
# placed in a slot of every form with the probe's types and shape

def _probes_for(f: Form) -> list:
    from ..numerics.probes import PROBES

    out = []
    for p in PROBES:
        pf = p.form
        if (pf["atype"], pf["btype"], pf["ctype"], pf["dtype"]) != (f.atype, f.btype, f.c_type, f.dtype):
            continue
        if p.mnk[2] != f.mnk[2] or f.is_sparse or f.block_scale:
            continue
        if any(pf.get(k) not in (None, getattr(f, k)) for k in ("rounding", "satfinite", "bitop")):
            continue
        out.append(p)
    return out


@_model("probes", "the H100 numerics probes (formal.numerics.probes: floor G158/G159/G16*, window, rounding, "
                  "fp8 emulation M*, NaN rules N64*, FMA-pipe order O4/Z4, ...) of this form's types and K, "
                  "each in its own output element",
        "probe:ID", lambda f: bool(_probes_for(f)))
def build_probes(ctx: Ctx):
    ps = _probes_for(ctx.form)
    cv = None
    n = 0
    ids: list[str] = []
    for p in ps:
        if cv is None:
            cv = ctx.canvas("probes", background="zero", i=n)
            ids = []
        a, b, c = p.codes()
        ks = [k for k in range(len(a)) if int(a[k]) or int(b[k])]
        cv.place(len(cv.targets), [(int(a[k]), int(b[k])) for k in ks], int(c), point=f"probe:{p.id}", positions=ks)
        ids.append(f"probe:{p.id}")
        if len(cv.targets) >= cv.slots:
            yield cv.draft(ids, "H100 numerics probes " + ", ".join(i[6:] for i in ids) + " (formal.numerics.probes)")
            cv = None
            n += 1
    if cv is not None:
        yield cv.draft(ids, "H100 numerics probes " + ", ".join(i[6:] for i in ids) + " (formal.numerics.probes)")


# ------------------------------------------------------------------------------------------
# random

RANDOM_REGIMES = ("bits", "normal", "finite", "align", "extreme", "special")


def random_drafts(ctx: Ctx, count: int) -> list:
    """``count`` random warps, cycling through the input regimes of ``formal.vectors.regimes``
    (and, for sparse forms, the selectors)."""
    from .regimes import random_inputs
    from .draft import Draft, is_matrix_level

    f = ctx.form
    out = []
    sels = ctx.sels()
    rng = ctx.rng("random")
    for i in range(count):
        regime = RANDOM_REGIMES[i % len(RANDOM_REGIMES)]
        seed = int(rng.integers(0, 2**63 - 1))
        if is_matrix_level(f):
            from .draft import Canvas

            cv = Canvas(f, np.random.Generator(np.random.PCG64(seed)), regime)
            d = cv.draft([f"random:{regime}"], f"random {regime} matrices (seed {seed})")
            if f.block_scale:
                M, N, _ = f.mnk
                nsf = {"1X": 1, "2X": 2, "4X": 4}[f.scale_vec_effective]
                r = np.random.Generator(np.random.PCG64(seed + 1))
                lo, hi = (0x70, 0x8F) if f.stype == "ue8m0" else (0x30, 0x48)    # scales near 1
                d.scale_a = r.integers(lo, hi, (M, nsf)).astype(np.uint8)
                d.scale_b = r.integers(lo, hi, (nsf, N)).astype(np.uint8)
            out.append(d)
            continue
        sel = sels[i % len(sels)]
        inp = random_inputs(f, 1, regime, seed)
        regs = {k: v[0] for k, v in inp.items()}
        d = Draft([f"random:{regime}"] + ([f"selector:{sel}"] if sel is not None else []),
                  f"random {regime} registers (formal.vectors.regimes, seed {seed})", sel=sel)
        d.regs = regs
        out.append(d)
    return out
