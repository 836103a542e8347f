"""Element-level witnesses: which output element is wrong, what feeds it, the smallest
input that still fails, and the fewest mechanisms that explain all failures.

* :func:`failing_elements` -- for every differing D element of every case: the A row,
  B column (in the evaluator's term order; sparse: the stored terms and their logical k)
  and c feeding it, as encodings and decoded values, expected and got bits, and the
  coverage points placed at that element (``background`` when the element was not built
  for a point: it fails as a side effect of its warp).
* :func:`reduce_element` -- delta debugging with the model in the loop: a warp that is
  zero except the element's terms; c dropped, then terms zeroed one at a time, then
  factors replaced by 1, while the model still disagrees with the evaluator there.
* :func:`root_causes` -- a greedy smallest set of known wrong variants
  (:func:`formal.vectors.distinguish.mechanisms`, the other architecture models) whose
  outputs reproduce the failing elements' ``got`` bits; the rest is "unexplained".
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from ..catalog import Form
from ..numerics.formats import decode, get_format, to_float64
from .build import Case, VectorSet
from .draft import Draft, case_draft, dims, is_matrix_level, to_inputs  # noqa: F401

# ------------------------------------------------------------------------------------------
# a case as matrices (the inverse of draft.to_inputs)


def _kidx(form: Form, d: Draft, m: int) -> np.ndarray:
    if not form.is_sparse or d.nib is None:
        return np.arange(d.A.shape[-1])
    from .draft import meta

    fm = meta(form)
    w, s = fm.gran.width, fm.gran.stored
    out = []
    for ch in range(fm.chunks_per_row):
        offs = fm.offsets(int(d.nib[m, ch]))
        out += [ch * w + offs[j] for j in range(s)]
    return np.asarray(out, np.int64)


def element_terms(form: Form, d: Draft, p: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """(a [Ka], b [Ka], c, k [Ka]) feeding D[p, m, n] (b gathered at each term's logical k)."""
    ks = _kidx(form, d, m)        # a matrix-level case's draft has no nibbles: its A is dense
    return d.A[p, m, :].copy(), d.B[p, ks, n].copy(), int(d.C[p, m, n]), ks


def _with_element(form: Form, base: Draft, p, m, n, a, b, c) -> Draft:
    """A warp that is zero except element (p, m, n): its row of A, column of B and c."""
    ks = _kidx(form, base, m)
    A = np.zeros_like(base.A)
    B = np.zeros_like(base.B)
    C = np.zeros_like(base.C)
    A[p, m, :] = a
    B[p, ks, n] = b
    C[p, m, n] = c
    return Draft([], "", A=A, B=B, C=C, nib=base.nib, sel=base.sel, scale_a=base.scale_a, scale_b=base.scale_b)


# ------------------------------------------------------------------------------------------
# element witnesses


@functools.lru_cache(maxsize=1 << 16)
def _val(code: int, t: str) -> Any:
    """The decoded value of one code (memoised: an element's inputs are shared by its row or
    column, and a failing run decodes thousands of elements)."""
    f = get_format(t)
    if f.cls == "float":
        v = float(to_float64(np.array([code], dtype=f.np_container), t)[0])
        return repr(v)
    dd = decode(np.array([code], np.uint64), t)
    return int(dd.sig[0]) * (-1 if dd.neg[0] else 1)


def element_tags(form: Form, a, b, c: int) -> list[str]:
    """Points an element's own inputs hit (not its warp's): NaN/Inf/subnormal/-0 per operand."""
    out = []
    for op, x, t in (("a", a, form.atype), ("b", b, form.btype), ("c", [c], form.c_type)):
        f = get_format(t)
        if f.cls != "float":
            continue
        dd = decode(np.asarray(x, np.uint64), t)
        sub = ~dd.zero & ~dd.nan & ~dd.inf & (dd.sig < (1 << f.mantissa)) if f.subnormal else np.zeros(len(x), bool)
        for name, mask in (("nan_in", dd.nan), ("inf_in", dd.inf), ("subnormal_in", sub)):
            if mask.any():
                out.append(f"{name}:{op}")
    return out


@dataclass
class ElementWitness:
    case: int
    product: int
    row: int
    col: int
    points: list[str]                  # points built at this element, or ["background"] (a case built
                                       #   as a whole, e.g. random, lends all its elements its points)
    tags: list[str]                    # what the element's own inputs hold (nan_in:a ...)
    expected: str
    got: str
    a: dict[int, str]                  # logical k -> encoding (non-zero terms only)
    b: dict[int, str]
    c: str
    values: dict[str, Any] = field(default_factory=dict)   # decoded a, b, c, expected, got
    terms: int = 0
    reduced: dict | None = None         # {"a", "b", "c", "terms", "expected", "got"}
    cause: str | None = None            # the root-cause group it belongs to

    def to_dict(self) -> dict:
        return asdict(self)

    def lines(self) -> list[str]:
        where = f"D[{self.row},{self.col}]" + (f" of product {self.product}" if self.product else "")
        pts = ", ".join(self.points)
        out = [f"case {self.case} {where} [{pts}]" + (f" cause: {self.cause}" if self.cause else "")
               + f": got {self.got} ({self.values.get('got')}), expected {self.expected} ({self.values.get('expected')})"]
        va, vb = self.values.get("a", {}), self.values.get("b", {})
        out.append("    terms: " + ("  ".join(f"k={k}: {self.a[k]} x {self.b[k]} ({va.get(k)} x {vb.get(k)})"
                                              for k in self.a) or "(none)")
                   + f";  c = {self.c} ({self.values.get('c')})")
        if self.reduced and "terms" not in self.reduced:
            out.append(f"    not reduced: {self.reduced.get('note', 'no reduction')}")
        elif self.reduced:
            r = self.reduced
            out.append(f"    reduced to {r['terms']} term(s): " +
                       ("  ".join(f"k={k}: {r['a'][k]} x {r['b'][k]}" for k in r["a"]) or "(none)") +
                       f";  c = {r['c']} -> got {r['got']}, expected {r['expected']}")
        return out


def _hex(v: int, t: str) -> str:
    return f"0x{int(v):0{max(1, -(-get_format(t).bits // 4))}x}"


def _output_matrix(form: Form, case: Case, out) -> np.ndarray:
    from .draft import output_matrix

    if case.level == "matrix":
        return np.asarray(out)[None]
    return output_matrix(form, np.asarray(out))


#: failing elements given witnesses and grouped by cause; beyond it they are only counted
#: (:func:`count_failing`) and reports say the grouping is truncated
ELEMENT_LIMIT = 4000


def count_failing(vs: VectorSet, got: list[np.ndarray]) -> int:
    """How many D elements differ over the whole vector set (no limit, no witnesses)."""
    form = vs.form
    n = 0
    for case, g in zip(vs.cases, got):
        exp = np.asarray(case.expected)
        g = np.asarray(g)
        if g.shape != exp.shape or not (g.astype(np.uint64) != exp.astype(np.uint64)).any():
            continue
        try:
            n += int(np.count_nonzero(_output_matrix(form, case, exp) != _output_matrix(form, case, g)))
        except Exception:
            continue
    return n


def failing_elements(vs: VectorSet, got: list[np.ndarray], limit: int = ELEMENT_LIMIT) -> list[ElementWitness]:
    """Every differing D element (the first ``limit``), with the inputs that feed it."""
    form = vs.form
    out: list[ElementWitness] = []
    for case, g in zip(vs.cases, got):
        exp = np.asarray(case.expected)
        g = np.asarray(g)
        if g.shape != exp.shape or not (g.astype(np.uint64) != exp.astype(np.uint64)).any():
            continue
        try:
            De = _output_matrix(form, case, exp)
            Dg = _output_matrix(form, case, g)
            d = case_draft(form, case)
        except Exception:
            continue
        at = {}
        for t in case.targets:
            at.setdefault((t.get("product", 0), t["row"], t["col"]), []).append(t["point"])
        for p, m, n in np.argwhere(De != Dg):
            p, m, n = int(p), int(m), int(n)
            a, b, c, ks = element_terms(form, d, p, m, n)
            nz = [j for j in range(len(a)) if a[j] or b[j]]
            e, gg = int(De[p, m, n]), int(Dg[p, m, n])
            out.append(ElementWitness(
                case.id, p, m, n, at.get((p, m, n), ["background"] if case.targets else list(case.points)), element_tags(form, a, b, c),
                _hex(e, form.dtype), _hex(gg, form.dtype),
                {int(ks[j]): _hex(a[j], form.atype) for j in nz}, {int(ks[j]): _hex(b[j], form.btype) for j in nz},
                _hex(c, form.c_type),
                {"a": {int(ks[j]): _val(int(a[j]), form.atype) for j in nz},
                 "b": {int(ks[j]): _val(int(b[j]), form.btype) for j in nz},
                 "c": _val(c, form.c_type), "expected": _val(e, form.dtype), "got": _val(gg, form.dtype)},
                len(nz)))
            if len(out) >= limit:
                return out
    return out


# ------------------------------------------------------------------------------------------
# reduction with the model in the loop


def reduce_element(vs: VectorSet, w: ElementWitness, run: Callable, arch) -> dict | None:
    """Fewest terms at element (product, row, col) on which ``run`` (drafts -> outputs, one per
    draft, like the case's expected) still disagrees with the evaluator there."""
    from .distinguish import reduce

    form = vs.form
    case = vs.cases[w.case]
    base = case_draft(form, case)
    a0, b0, c0, ks = element_terms(form, base, w.product, w.row, w.col)
    rng = np.random.default_rng(0)

    def outs(A, B, C):
        drafts = [_with_element(form, base, w.product, w.row, w.col, A[i], B[i], int(C[i])) for i in range(len(A))]
        if case.level == "matrix" and not is_matrix_level(form):
            # matrix-level vectors of an mma form: one product per case (an m8n8k4 .f16 warp holds
            # four), never packed into registers
            inputs = [{"A": dr.A[0], "B": dr.B[0], "C": dr.C[0]} for dr in drafts]
        else:
            inputs = to_inputs(form, drafts, rng)
        exp = evaluate_inputs_level(form, inputs, [case.sel] * len(drafts), arch, case.level)
        got = run(inputs, case)
        e = np.stack([_output_matrix(form, case, x)[w.product, w.row, w.col] for x in exp])
        g = np.stack([_output_matrix(form, case, x)[w.product, w.row, w.col] for x in got])
        return e, g

    def fails(A, B, C):
        e, g = outs(A, B, C)
        return e != g

    try:
        if not fails(a0[None], b0[None], np.array([c0], np.uint64))[0]:
            return {"note": "the element alone does not fail: it fails only with the rest of its warp"}
        a, b, c = reduce(form, fails, a0, b0, c0)
        e, g = outs(a[None], b[None], np.array([c], np.uint64))
    except Exception as ex:     # reduction is a convenience: never hide the witness itself
        if getattr(ex, "abort_audit", False):     # but a model past its time limit ends the audit
            raise
        return {"note": f"not reduced: {type(ex).__name__}: {ex}"}
    nz = [j for j in range(len(a)) if a[j] or b[j]]
    return {"a": {int(ks[j]): _hex(a[j], form.atype) for j in nz}, "b": {int(ks[j]): _hex(b[j], form.btype) for j in nz},
            "c": _hex(c, form.c_type), "terms": len(nz), "expected": _hex(int(e[0]), form.dtype),
            "got": _hex(int(g[0]), form.dtype),
            "values": {"a": {int(ks[j]): _val(int(a[j]), form.atype) for j in nz},
                       "b": {int(ks[j]): _val(int(b[j]), form.btype) for j in nz}, "c": _val(c, form.c_type)}}


def evaluate_inputs_level(form: Form, inputs, sels, arch, level: str):
    from .draft import evaluate_inputs

    if level == "matrix" and not is_matrix_level(form):
        from ..evaluate import evaluate_matrices

        D = evaluate_matrices(form, np.stack([x["A"] for x in inputs]), np.stack([x["B"] for x in inputs]),
                              np.stack([x["C"] for x in inputs]), arch=arch)
        return list(D)
    return evaluate_inputs(form, inputs, sels, arch)


# ------------------------------------------------------------------------------------------
# root causes


def _candidates(form: Form, arch) -> list[tuple[str, str, Any]]:
    """(label, what, model) of every known wrong variant and every other architecture model."""
    from ..numerics.archs import MODELS
    from .coverage import point_name
    from .distinguish import mechanisms, supports

    # labelled as the coverage points that carry them (a cause names the point built for it)
    out = [(point_name(m.point), m.what, m.variant) for m in mechanisms(form, arch)]
    ref = getattr(arch, "name", str(arch))
    for name in MODELS:
        if name != ref and supports(form, name):
            out.append((f"arch:{name}", f"behaves like the {name} model", name))
    return out


def _passing_targets(form: Form, vs: VectorSet, got, drafts: dict):
    """(A, B, C, G) of the elements built for a point on which the model agrees with the
    reference: a variant predicting something else there is contradicted by the model."""
    A, B, C, G = [], [], [], []
    for case, g in zip(vs.cases, got):
        if not case.targets or g is None:
            continue
        exp = np.asarray(case.expected)
        g = np.asarray(g)
        if g.shape != exp.shape:
            continue
        try:
            De = _output_matrix(form, case, exp)
            Dg = _output_matrix(form, case, g)
        except Exception:
            continue
        d = drafts.get(case.id)
        if d is None:
            d = drafts[case.id] = case_draft(form, case)
        for t in case.targets:
            p, m, n = t.get("product", 0), t["row"], t["col"]
            if int(De[p, m, n]) != int(Dg[p, m, n]):
                continue
            a, b, c, _ = element_terms(form, d, p, m, n)
            A.append(a)
            B.append(b)
            C.append(c)
            G.append(int(Dg[p, m, n]))
    if not A:
        return None
    return np.stack(A), np.stack(B), np.array(C, np.uint64), np.array(G, np.uint64)


def root_causes(form: Form, arch, elems: list[ElementWitness], vs: VectorSet | None = None, got=None) -> list[dict]:
    """Greedy smallest set of variants that reproduce the failing elements' bits.

    Each group: {"cause", "what", "elements", "cases", "points"}; elements no variant
    reproduces form the group ``"unexplained"``.  ``got`` (the model's outputs, in case
    order): between variants that reproduce as many failing elements, the one the model's
    *passing* built elements contradict least is named (a coarser floor and no floor can
    fail on the same elements; only the others tell them apart)."""
    from .distinguish import eval_terms

    if not elems or vs is None:
        return []
    A, B, C, G = [], [], [], []
    drafts: dict[int, Draft] = {}
    for w in elems:          # the full term vectors (zeros included) from the vector set
        d = drafts.get(w.case)
        if d is None:
            d = drafts[w.case] = case_draft(form, vs.cases[w.case])
        a, b, c, _ = element_terms(form, d, w.product, w.row, w.col)
        A.append(a)
        B.append(b)
        C.append(c)
        G.append(int(w.got, 16))
    A, B = np.stack(A), np.stack(B)
    C, G = np.array(C, np.uint64), np.array(G, np.uint64)
    cands = _candidates(form, arch)
    passing = _passing_targets(form, vs, got, drafts) if got is not None else None
    expl, wrong = {}, {}
    for label, what, model in cands:
        try:
            out = eval_terms(form, model, A, B, C)
            expl[(label, what)] = out == G
            wrong[(label, what)] = (int((eval_terms(form, model, *passing[:3]) != passing[3]).sum())
                                    if passing is not None else 0)
        except Exception:
            expl.pop((label, what), None)
            continue
    for label, what, hit in _exchanges(form, arch, elems, drafts, G):
        expl[(label, what)] = hit
        wrong[(label, what)] = 0
    left = np.ones(len(elems), bool)
    groups = []
    while left.any() and expl:
        best = max(expl, key=lambda k: (int((expl[k] & left).sum()), -wrong[k]))
        hit = expl[best] & left
        if not hit.any():
            break
        idx = np.flatnonzero(hit)
        groups.append({"cause": best[0], "what": best[1], "elements": int(len(idx)),
                       "cases": sorted({elems[i].case for i in idx}),
                       "points": sorted({p for i in idx for p in elems[i].points})})
        for i in idx:
            elems[i].cause = best[0]
        left &= ~hit
    if left.any():
        idx = np.flatnonzero(left)
        groups.append({"cause": "unexplained", "what": "no known variant reproduces these outputs",
                       "elements": int(len(idx)), "cases": sorted({elems[i].case for i in idx}),
                       "points": sorted({p for i in idx for p in elems[i].points})})
        for i in idx:
            elems[i].cause = "unexplained"
    return groups


#: at most this many failing elements are tried against exchanged operands
EXCHANGE_LIMIT = 2048


def _exchanges(form: Form, arch, elems: list, drafts: dict, G: np.ndarray):
    """Layout causes: (label, what, reproduced [len(elems)]) for "D[m][n] is the reference's
    value for A row m' (B column n') with the element's own c" -- a fragment-layout bug
    exchanging operand rows or columns, which no numeric variant reproduces.  The first
    EXCHANGE_LIMIT failing elements are tried; the exchange is read off the elements exactly
    one other row (column) reproduces, then counts every element it reproduces."""
    from .distinguish import eval_terms

    todo = range(min(len(elems), EXCHANGE_LIMIT))
    out = []
    for op, label in (("a", "layout:a"), ("b", "layout:b")):
        rows, idx, alt = [], [], []
        for i in todo:
            w = elems[i]
            d = drafts[w.case]
            M, N = d.A.shape[1], d.B.shape[2]
            c = int(d.C[w.product, w.row, w.col])
            for o in range(M if op == "a" else N):
                if o == (w.row if op == "a" else w.col):
                    continue
                a, b, _, _ = element_terms(form, d, w.product, o if op == "a" else w.row, w.col if op == "a" else o)
                rows.append((a, b, c))
                idx.append(i)
                alt.append(o)
        if not rows:
            continue
        D = eval_terms(form, arch, np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows]),
                       np.array([r[2] for r in rows], np.uint64))
        match: dict[int, list[int]] = {}
        for i, o, v in zip(idx, alt, D):
            if int(v) == int(G[i]):
                match.setdefault(i, []).append(o)
        hit = np.zeros(len(elems), bool)
        pairs: dict[int, int] = {}
        at = (lambda i: elems[i].row) if op == "a" else (lambda i: elems[i].col)
        for i, os_ in match.items():              # the exchange, read off elements only one row explains
            if len(os_) == 1:
                pairs.setdefault(at(i), os_[0])
        for i, os_ in match.items():              # then every element it explains (ties included)
            hit[i] = pairs.get(at(i)) in os_
        if hit.any():
            what = "A rows exchanged: D row {} computed from A row {}" if op == "a" else \
                   "B columns exchanged: D column {} computed from B column {}"
            shown = sorted(pairs.items())[:6]
            out.append((label, "; ".join(what.format(x, y) for x, y in shown) + (" ..." if len(pairs) > 6 else ""),
                        hit))
    return out


def decide_variants(vs: VectorSet, got: list[np.ndarray], arch="sm_90") -> dict[str, dict]:
    """Observed outputs (a device's) against every known wrong variant, on the elements the
    vectors were built at: per variant how many of those elements it predicts differently
    from what was observed (``refuted_on`` > 0: the observation rules it out) -- the probe
    decision of :mod:`formal.numerics.fit`, for every mechanism the coverage targets."""
    from .distinguish import eval_terms

    form = vs.form
    A, B, C, G = [], [], [], []
    for case, g in zip(vs.cases, got):
        if not case.targets:
            continue
        d = case_draft(form, case)
        Dg = _output_matrix(form, case, g)
        for t in case.targets:
            p, m, n = t.get("product", 0), t["row"], t["col"]
            a, b, c, _ = element_terms(form, d, p, m, n)
            A.append(a)
            B.append(b)
            C.append(c)
            G.append(int(Dg[p, m, n]))
    if not A:
        return {}
    A, B = np.stack(A), np.stack(B)
    C, G = np.array(C, np.uint64), np.array(G, np.uint64)
    out = {}
    for label, what, model in [("reference", f"the {getattr(arch, 'name', arch)} model", arch)] + _candidates(form, arch):
        try:
            pred = eval_terms(form, model, A, B, C)
        except Exception as e:
            out[f"{label} ({what})"] = {"error": f"{type(e).__name__}: {e}"}
            continue
        out[f"{label} ({what})"] = {"elements": int(len(G)), "refuted_on": int((pred != G).sum())}
    return out
