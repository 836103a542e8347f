"""Atom-level equivalence: do three operand layouts together compute the instruction's product?

A user's A, B and C/D layouts need not each equal the spec's.  The instruction computes, in the
spec's coordinates, ``D[m][n] = sum_k A[m][k] B[k][n]`` (PTX ISA 9.7.14.5).  If the user's A
puts at the register where the spec has A[m][k] their logical element (pi_M(m), pi_K(k)), their
B puts (pi_K(k), pi_N(n)) where the spec has B[k][n], and their C/D puts (pi_M(m), pi_N(n))
where the spec has D[m][n], then the hardware computes exactly their logical product:

    D_spec[m][n] = sum_k A_log[pi_M m][pi_K k] B_log[pi_K k][pi_N n] = D_log[pi_M m][pi_N n]

for any permutations pi_M, pi_K, pi_N (a sum over k is the same in any order).  Conversely,
with generic values a pairing outside this pattern multiplies the wrong elements.  So
:func:`audit_atom` proves, for each axis (M: rows of A and of C; K: columns of A and rows of B;
N: columns of B and of C), for every two held points p, q of the operands that carry it:

    spec_axis(p) == spec_axis(q)   <=>   user_axis(p) == user_axis(q)

(one relabelling, injective, shared by the operands), plus: the user's layouts hold the same
(lane, register, element) points as the spec's and no two hold the same logical element.  The
user's labels may be any integers (a tile cut out of a whole tensor keeps its coordinates).
Each obligation is decided by Z3 (two symbolic points) and by enumeration of all pairs; a
refutation is the lexicographically smallest pair, found by both.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import prove
from ..layout import Layout, LayoutError, _as_form, fragment

AXES = {"M": (("a", "row"), ("c", "row")), "K": (("a", "col"), ("b", "row")), "N": (("b", "col"), ("c", "col"))}
_LETTER = {"row": 0, "col": 1}


@dataclass
class AtomReport:
    form: str
    results: list                      # prove results, one per obligation
    permutations: dict                 # axis -> list: spec index -> the user's label (when proved)
    given: dict                        # operand -> where the layout came from

    @property
    def status(self) -> str:
        st = [r.status for r in self.results]
        return "refuted" if "refuted" in st else "unknown" if "unknown" in st else "proved"

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "status": self.status, "given": self.given,
                "permutations": self.permutations, "identity": {k: v == list(range(len(v)))
                                                                  for k, v in self.permutations.items()},
                "results": [r.to_dict() for r in self.results]}


def _same_domain(op: str, cand: Layout, spec: Layout, ob: prove.Obligation) -> Any:
    """The user's layout holds exactly the spec's (lane, reg, elem) points (enumeration; both
    domains are finite boxes with a held mask, so this is exact)."""
    t0 = time.perf_counter()
    if (cand.lanes, cand.nregs, cand.epr) != (spec.lanes, spec.nregs, spec.epr):
        return prove.Refuted(ob, {"operand": op, "shape": [cand.lanes, cand.nregs, cand.epr],
                                  "spec_shape": [spec.lanes, spec.nregs, spec.epr]}, "enum", time.perf_counter() - t0)
    hc, hs = cand._full["held"], spec._full["held"]
    bad = np.flatnonzero(hc != hs)
    if bad.size:
        k = int(bad[0])
        f = spec._full
        return prove.Refuted(ob, {"operand": op, "point": {"lane": int(f["lane"][k]), "reg": int(f["reg"][k]),
                                                           "elem": int(f["elem"][k])},
                                  "held_by_user": bool(hc[k]), "held_by_spec": bool(hs[k])}, "enum",
                             time.perf_counter() - t0)
    return prove.Proved(ob, "enum", time.perf_counter() - t0)


def _pair_enum(X: tuple, Y: tuple, same_op: bool):
    """Smallest (p, q) with spec equal XOR user equal, by enumeration of all pairs."""
    (sx, ux, px), (sy, uy, py) = X, Y
    bad = (sx[:, None] == sy[None, :]) != (ux[:, None] == uy[None, :])
    if same_op:
        bad &= np.triu(np.ones_like(bad, dtype=bool), 1)
    hit = np.argwhere(bad)
    if hit.size == 0:
        return None
    i, j = (int(x) for x in hit[0])            # points are in (lane, reg, elem) order: row-major = lex
    return [int(v) for v in px[i]] + [int(v) for v in py[j]]


def _axis_check(ax: str, X: tuple, Y: tuple, lays: dict, specs: dict, opts: prove.Options, ob: prove.Obligation):
    (ox, dx), (oy, dy) = X, Y
    t0 = time.perf_counter()
    same_op = ox == oy and dx == dy
    z = e = None
    if opts.enum:
        def side(o, d):
            f = specs[o].enumerate()
            u = lays[o].enumerate()
            return f[d], u[d], np.stack([f["lane"], f["reg"], f["elem"]], axis=1)
        w = _pair_enum(side(ox, dx), side(oy, dy), same_op)
        e = ("proved", None) if w is None else ("refuted", w)
    if opts.z3:
        z3 = prove._z3()
        p, q = prove._point("p"), prove._point("q")
        ix, iy = _LETTER[dx], _LETTER[dy]
        sp, sq = specs[ox].z3_terms(*p)[ix], specs[oy].z3_terms(*q)[iy]
        up, uq = lays[ox].z3_terms(*p)[ix], lays[oy].z3_terms(*q)[iy]
        cons = [specs[ox].z3_held(*p), specs[oy].z3_held(*q), z3.Xor(sp == sq, up == uq)]
        if same_op:
            cons.append(prove._lt_lex(list(p), list(q)))
        s = prove._solver(opts)
        s.add(*cons)
        v = prove._check(s)
        if v == "unsat":
            z = ("proved", prove._certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
        elif v == "sat":
            m = prove._lexmin(cons, list(p) + list(q), opts)
            z = ("unknown", "z3 could not minimise the witness") if m is None else ("refuted", m)
        else:
            z = ("unknown", f"z3 {v} ({s.reason_unknown()})")
    res = prove._combine(ob, z, e, t0)
    if isinstance(res, prove.Refuted):
        res.witness = _explain(ax, X, Y, res.witness, lays, specs)
    return res


def _explain(ax: str, X: tuple, Y: tuple, w: list, lays: dict, specs: dict) -> dict:
    (ox, dx), (oy, dy) = X, Y
    out = {}
    for tag, o, d, pt in (("p", ox, dx, w[:3]), ("q", oy, dy, w[3:])):
        sc = specs[o].at(*pt)
        uc = lays[o].at(*pt)
        out[tag] = {"operand": o, "lane": pt[0], "reg": pt[1], "elem": pt[2], "i": pt[1] * specs[o].epr + pt[2],
                    "spec_cell": list(sc[:2]), "user_cell": list(uc[:2]) if uc else None}
    sp, sq = out["p"]["spec_cell"][_LETTER[dx]], out["q"]["spec_cell"][_LETTER[dy]]
    up, uq = out["p"]["user_cell"][_LETTER[dx]], out["q"]["user_cell"][_LETTER[dy]]
    a, b = out["p"], out["q"]
    where = lambda t: f"{t['operand']}{t['i']} of lane {t['lane']}"
    if sp == sq:
        out["why"] = (f"the instruction uses {where(a)} and {where(b)} as the same {ax} index ({ax.lower()}={sp}), "
                      f"but the user's layouts give them {ax.lower()}={up} and {ax.lower()}={uq}")
    else:
        out["why"] = (f"the user's layouts give {where(a)} and {where(b)} the same {ax} index ({ax.lower()}={up}), "
                      f"but the instruction uses them as {ax.lower()}={sp} and {ax.lower()}={sq}")
    out["axis"] = ax
    return out


def audit_atom(form_or_opcode, layouts: dict, *, timeout_ms: int = 20000, engine: str = "both",
               given: dict | None = None) -> AtomReport:
    """Prove that layouts for A, B and C/D (``{"a": Layout, "b": ..., "c": ...}``; a missing or
    None operand is the spec's own) compute the instruction's product up to permutations of M,
    K, N shared by the operands.  Returns an :class:`AtomReport` with the permutations."""
    form = _as_form(form_or_opcode)
    if form.family != "mma":
        raise LayoutError(f"{form.opcode}: atom-level equivalence covers dense mma forms "
                          "(sparse A is indexed by the metadata, block-scaled factors are not permuted)")
    specs, lays = {}, {}
    for op in ("a", "b", "c"):
        src = "d" if op == "c" and "c" not in form.operands else op
        specs[op] = fragment(form, src)
        if specs[op].products > 1:
            raise LayoutError(f"{form.opcode}: {specs[op].products} products per warp; atom-level equivalence "
                              "covers one product per warp")
        lays[op] = layouts.get(op) or layouts.get("d" if op == "c" else op) or specs[op]
    unknown = set(layouts) - {"a", "b", "c", "d"}
    if unknown:
        raise LayoutError(f"audit_atom: unknown operand(s) {sorted(unknown)} (a, b, c/d)")
    opts = prove.Options(timeout_ms=timeout_ms, engine=engine)
    res = []
    for op in ("a", "b", "c"):
        ob = prove._mk("atom.domain", f"{form.opcode} {op}", f"the user's {op} holds the spec's (lane, reg, elem) points")
        res.append(_same_domain(op, lays[op], specs[op], ob))
        ob = prove._mk("atom.injective", f"{form.opcode} {op}", f"no two points of the user's {op} hold the same element")
        r = prove.check_injective(lays[op], ob, opts)
        r.obligation = ob
        res.append(r)
    if any(r.status != "proved" for r in res):
        # a layout that does not hold the spec's points (or holds one element twice) has no
        # relabelling to check: its refutation above is the answer
        return AtomReport(form.opcode, res, {}, dict(given or {}))
    for ax, (X, Y) in AXES.items():
        for P, Q in ((X, X), (Y, Y), (X, Y)):
            ob = prove._mk(f"atom.{ax}", f"{form.opcode} {P[0]}.{P[1]} ~ {Q[0]}.{Q[1]}",
                           f"one relabelling of {ax}: {P[0]}'s {P[1]} and {Q[0]}'s {Q[1]} agree with the spec's "
                           f"{ax} index pairwise")
            res.append(_axis_check(ax, P, Q, lays, specs, opts, ob))
    perms = {}
    if all(r.status == "proved" for r in res):
        for ax, ((o, d), _) in AXES.items():
            f = specs[o].enumerate()
            u = lays[o].enumerate()
            n = int(f[d].max()) + 1
            pi = [None] * n
            for s_, u_ in zip(f[d].tolist(), u[d].tolist()):
                pi[s_] = u_
            perms[ax] = pi
    return AtomReport(form.opcode, res, perms, dict(given or {}))


#: the two axes of each operand's (row, col)
OPERAND_AXES = {"a": ("M", "K"), "b": ("K", "N"), "c": ("M", "N"), "d": ("M", "N")}


def relabelling(form_or_opcode, operand: str, layout: Layout, *, timeout_ms: int = 20000) -> AtomReport | None:
    """One operand's layout that differs from the spec's only by relabelling its axes.

    If ``layout`` holds the spec's points and maps them to the spec's cells up to one injective
    relabelling per axis (found by enumeration; e.g. Triton's large-kWidth dot operands, which
    permute K, or the SM75 CuTe atom of CUTLASS 3.0-3.2.0, which permutes M), the proof that it
    computes the instruction's product *with partners relabelled the same way*: audit_atom with
    the other operands the spec's, relabelled by the same permutations.  Whether the real
    partners share the relabelling needs them (:func:`audit_atom`).  None when the layout is
    the spec's own, or no relabelling of the axes makes it the spec's."""
    form = _as_form(form_or_opcode)
    op = "c" if operand == "d" else operand
    if form.family != "mma" or op not in OPERAND_AXES:
        return None
    src = "d" if op == "c" and "c" not in form.operands else op
    spec = fragment(form, src)
    if spec.products > 1 or (layout.lanes, layout.nregs, layout.epr) != (spec.lanes, spec.nregs, spec.epr):
        return None
    if not np.array_equal(layout._full["held"], spec._full["held"]):
        return None
    f, u = spec.enumerate(), layout.enumerate()
    if np.any(u["product"] != 0):
        return None
    perms = {}
    for d, ax in zip(("row", "col"), OPERAND_AXES[op]):
        s, v = f[d], u[d]
        pi = {}
        for a, b in zip(s.tolist(), v.tolist()):
            if pi.setdefault(a, b) != b:
                return None                              # one spec index, two labels: not a relabelling
        if len(set(pi.values())) != len(pi):
            return None                                  # two spec indices, one label
        perms[ax] = pi
    if all(all(k == v for k, v in p.items()) for p in perms.values()):
        return None
    partners = {}
    for o in ("a", "b", "c"):
        if o == op:
            continue
        so = fragment(form, "d" if o == "c" and "c" not in form.operands else o)
        e = so.enumerate()
        rows, cols = e["row"].tolist(), e["col"].tolist()
        rax, cax = OPERAND_AXES[o]
        if rax in perms:
            rows = [perms[rax][r] for r in rows]
        if cax in perms:
            cols = [perms[cax][c] for c in cols]
        recs = list(zip(e["lane"].tolist(), e["reg"].tolist(), e["elem"].tolist(), rows, cols))
        partners[o] = Layout.from_table(recs, like=so, name=f"spec {o} relabelled", params=dict(so.params))
    rep = audit_atom(form, {op: layout, **partners}, timeout_ms=timeout_ms,
                     given={op: "the layout", **{o: "the spec's, relabelled the same way" for o in partners}})
    return rep if rep.status == "proved" else None


def describe_permutation(pi: list) -> str:
    """'identity' or 'spec -> yours 0->0 1->2 ...' (every index)."""
    if pi == list(range(len(pi))):
        return "identity"
    return "spec -> yours " + " ".join(f"{i}->{v}" for i, v in enumerate(pi))
