"""Counterexamples for invalid sparse inputs, found by Z3, each concrete and minimal.

Minimal means: the first (row, chunk) and the smallest contributing lane, the fewest
non-zero elements / the fewest metadata bits set, then the smallest values.  For
undefined behaviour a witness also shows *why it matters*: two readings an
implementation could adopt (``specs/metadata.toml`` [[ub_reading]], hypotheses, not PTX
facts) and a concrete A, B with C = 0 where they give different D, computed by a tiny
exact integer dot product.

``not_sparse(form)``                  a dense A that breaks the granularity
``bad_nibble(form, sel, rule)``        a metadata word that breaks one rule
  ``repeated_index``  rule ``distinct``; ``unsorted``  rule ``increasing``
  (::ordered_metadata); ``tf32_value``  rule ``tf32-pair``
``selector_out_of_range(form, sel)``  an illegal selector: uncovered chunks + two readings
``wrong_bits(form, sel, mistake)``    the right index pair written in the wrong bits
                                      (``alternative``: the competing layout hypothesis;
                                      ``swap-rows``: rows g and g+8 exchanged)
``all_witnesses(form, sel)``          every one that applies
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import z3

from ..catalog import BadArgument, Form
from ..expr import Formula
from . import codec
from .proofs import _bool, _popcount, _val, prove_cover
from .spec import NIBBLES, FormMeta, Layout, check_selector, meta, readings
from .storage import NotSparse, compress

N_COLS_B = 8       # the n of every sparse shape (m16n8kK)


@dataclass
class Counterexample:
    kind: str
    opcode: str
    sel: int | None
    summary: str
    where: dict = field(default_factory=dict)          # row, chunk, lane, bits, ...
    inputs: dict = field(default_factory=dict)         # concrete A / e / B
    readings: list[dict] = field(default_factory=list) # id, text, D
    section: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        lines = [f"{self.kind}: {self.summary}" + (f"  [PTX ISA {self.section}]" if self.section else "")]
        for k, v in self.where.items():
            lines.append(f"  {k}: {v}")
        for k, v in self.inputs.items():
            lines.append(f"  {k}: {v}")
        for r in self.readings:
            lines.append(f"  reading {r['id']}: {r['text']}")
            lines.append(f"      D = {r['D']}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------------
# helpers

def small_int_codes(atype: str, values) -> np.ndarray:
    """Encodings of small integers (exact in every A type) as uint64."""
    from ..numerics.formats import from_float64
    from ..specdata import load_spec

    f = load_spec("formats")[atype]
    v = np.asarray(values, dtype=np.int64)
    if f["class"] == "float":
        return np.asarray(from_float64(v.astype(np.float64), atype)).astype(np.uint64)
    bits = int(f["bits"])
    return (v & ((1 << bits) - 1)).astype(np.uint64)


def _min_legal_nibble(fm: FormMeta) -> int:
    return min(fm.legal_nibbles, key=lambda v: (bin(v).count("1"), v))


def _fill_word(fm: FormMeta) -> int:
    v = _min_legal_nibble(fm)
    return sum(v << (4 * n) for n in range(NIBBLES))


def _sel_default(fm: FormMeta, sel: int | None) -> int:
    if sel is None:
        return fm.selectors[0]
    check_selector(fm, sel)
    return sel


def _optimize(constraints: list, objectives: list) -> z3.ModelRef:
    o = z3.Optimize()
    o.set("timeout", 60_000)
    o.add(*constraints)
    for t in objectives:
        o.minimize(t)
    r = o.check()
    if r != z3.sat:
        raise RuntimeError(f"no witness: solver says {r}")
    return o.model()


def _chunk_readings(fm: FormMeta, modes: list[tuple[str, Any]], bits: int = 2):
    """Z3: stored values a_j and a one-hot B column (a 1 at chunk column p) giving different D.

    ``modes``: [(mode, nib_term)] -- each reading places the same stored values with its
    own mode and nibble; with B one-hot at column p and C = 0, D = A[p] (no products, so
    the solver's search stays small).
    """
    s, w = fm.gran.stored, fm.gran.width
    a = [z3.BitVec(f"a{j}", bits) for j in range(s)]
    p = z3.BitVec("p", 8)
    W = bits + 4
    ext = lambda x: z3.ZeroExt(W - bits, x)  # noqa: E731
    ds = []
    for mode, nib in modes:
        cols = codec.place(fm, nib, [ext(x) for x in a], mode)
        ds.append(z3.Sum([z3.If(p == q, c, z3.BitVecVal(0, W)) for q, c in enumerate(cols)]))
    return a, p, ds


def _b_onehot(m: z3.ModelRef, p, w: int) -> list[int]:
    pv = _val(m, p)
    return [1 if q == pv else 0 for q in range(w)]


def _d_of(fm: FormMeta, A_logical: np.ndarray, B: np.ndarray) -> list[list[int]]:
    return (A_logical.astype(np.int64) @ B.astype(np.int64)).tolist()


def _d_rows(D: list[list[int]]) -> dict | str:
    """Only the non-zero rows of D (the rest is 0): {row: [8 values]}."""
    nz = {r: row for r, row in enumerate(D) if any(row)}
    return nz if nz else "all zero"


# ----------------------------------------------------------------------------------
# 1. granularity

def not_sparse(form: Form | str) -> Counterexample:
    """The smallest dense A (fewest non-zeros, first row/chunk) the granularity cannot store."""
    fm = meta(form)
    w = fm.gran.width
    nz = z3.BitVec("nz", 16)
    m = _optimize([z3.ULT(nz, 1 << w), z3.Not(codec.representable(fm, nz))], [_popcount(nz), nz])
    mask = _val(m, nz)
    cols = [p for p in range(w) if mask >> p & 1]
    A = np.zeros((fm.rows, fm.k), dtype=np.uint64)
    one = int(small_int_codes(fm.form.atype, [1])[0])
    A[0, cols] = one
    try:                                       # cross-check: compress must refuse it, same place
        compress(fm.form, A)
        raise AssertionError("compress accepted a matrix the solver says does not fit")
    except NotSparse as e:
        wit = e.witness
    return Counterexample(
        "not-sparse", fm.form.opcode, None,
        f"row 0, chunk 0 (columns 0..{w - 1}) has non-zeros at columns {cols}: granularity {fm.gran.id} "
        f"stores at most {fm.gran.stored} per chunk{' in two pairs' if fm.gran.id == '4:8' else ''}; "
        f"column {wit.extra} is the extra non-zero",
        {"row": 0, "chunk": 0, "columns": cols, "extra": wit.extra, "granularity": fm.gran.id},
        {"A": f"16 x {fm.k} zeros except A[0][{cols}] = 1 (encoding 0x{one:x})"}, [], fm.gran.section)


# ----------------------------------------------------------------------------------
# 2. metadata words

def bad_nibble(form: Form | str, sel: int | None, rule: str) -> Counterexample:
    """A word of the first contributing lane where only the first nibble breaks ``rule``."""
    fm = meta(form)
    sel = _sel_default(fm, sel)
    rules = {r.id: r for r in fm.rules}
    if rule not in rules:
        raise BadArgument(f"rule {rule!r} does not apply to {fm.form.opcode} (its rules: {', '.join(rules)})")
    tab = fm.e_table(sel)
    lane = int(tab[0, 0])
    own = tab[tab[:, 0] == lane]
    n0 = own[np.lexsort((own[:, 3], own[:, 2]))][0]          # the lane's nibble of the smallest (row, chunk)
    lo = int(n0[4])
    # every other nibble holds the legal nibble with the fewest bits set (minimal by
    # enumeration of the 16 values); the solver picks the offending nibble and the data
    fill = _fill_word(fm) & ~(0xF << lo)
    x = z3.BitVec("nib", 8)
    env = {"nib": x, "idx0": x & 3, "idx1": z3.LShR(x, 2)}
    cons = [z3.ULT(x, 16), z3.Not(_bool(rules[rule].require.z3(env, 8)))]
    others = [_bool(r.require.z3(env, 8)) for r in fm.rules if r.id != rule]
    rds = readings(rule)
    if len(rds) < 2:
        raise RuntimeError(f"specs/metadata.toml has no two [[ub_reading]] for rule {rule}")
    a, b, (d1, d2) = _chunk_readings(fm, [(rds[0].mode, x), (rds[1].mode, x)])
    cons.append(z3.ULT(b, fm.gran.width))
    objectives = [_popcount(x), x, z3.Sum([_popcount(y) for y in a]), z3.Sum([z3.ZeroExt(8, y) for y in a]), b]
    try:        # break only this rule where possible (a repeated index also breaks 'increasing')
        m = _optimize(cons + others + [d1 != d2], objectives)
    except RuntimeError:
        m = _optimize(cons + [d1 != d2], objectives)
    nib = x
    v = _val(m, nib)
    word = fill | (v << lo)
    av, bv = [_val(m, x) for x in a], _b_onehot(m, b, fm.gran.width)
    row, ch = int(n0[2]), int(n0[3])
    w = fm.gran.width
    # the concrete instance: every other lane holds the minimal legal word, A is zero but
    # for this chunk's stored values, B has column 0 = b on this chunk's columns
    B = np.zeros((fm.k, N_COLS_B), dtype=np.int64)
    B[ch * w: ch * w + w, 0] = bv
    outs = []
    for rd in rds[:2]:
        A = np.zeros((fm.rows, fm.k), dtype=np.int64)
        A[row, ch * w: ch * w + w] = codec.place(fm, v, av, rd.mode)
        outs.append({"id": rd.id, "text": rd.text, "D": _d_rows(_d_of(fm, A, B))})
    r = rules[rule]
    return Counterexample(
        f"invalid-metadata/{rule}", fm.form.opcode, sel,
        f"lane {lane} e = 0x{word:08x}: bits [{lo + 3}:{lo}] = 0b{v:04b} (row {row}, columns {ch * w}..{ch * w + w - 1}) "
        f"-- {r.describe(v)}; undefined behaviour",
        {"lane": lane, "bits": [lo + 3, lo], "row": row, "chunk": ch, "nibble": f"0b{v:04b}", "rule": rule,
         "other lanes": f"e = 0x{_fill_word(fm):08x} (legal)"},
        {"e[lane]": f"0x{word:08x}", "stored A values (chunk, in register order)": av,
         f"B[{ch * w}..{ch * w + w - 1}][0]": bv, "C": 0},
        outs, r.section)


def repeated_index(form, sel=None) -> Counterexample:
    return bad_nibble(form, sel, "distinct")


def unsorted(form, sel=None) -> Counterexample:
    return bad_nibble(form, sel, "increasing")


def tf32_value(form, sel=None) -> Counterexample:
    return bad_nibble(form, sel, "tf32-pair")


# ----------------------------------------------------------------------------------
# 3. selector

def selector_out_of_range(form: Form | str, sel: int | None = None) -> Counterexample:
    """An illegal selector: which chunks no lane covers, and two readings with different D."""
    fm = meta(form)
    if sel is None:
        sel = next(s for s in range(8) if s not in fm.selectors)
    if sel in fm.selectors:
        raise BadArgument(f"selector {sel} is legal for {fm.form.opcode}")
    cov = prove_cover(fm, sel)
    if cov.proved:
        raise AssertionError(f"selector {sel} is illegal but the layout covers every chunk under it")
    nsel = len(fm.selectors)
    rds = readings("selector")
    w = fm.gran.width
    # the chunk (row 0, chunk 0): under each reading, which lane's e is read (and where)
    sources = []
    for rd in rds[:2]:
        eff = int(rd.effective.eval({"sel": sel, "nsel": nsel}))
        own = fm.owner(eff)[(0, 0)]
        src = int(rd.source.eval({"lane": own[0], "sel": sel, "nsel": nsel}))
        sources.append((eff, src, own[1]))
    if sources[0][1:] == sources[1][1:]:    # e.g. sel = 2^31: both readings land on the group's own lane
        raise BadArgument(f"selector {sel}: the readings {rds[0].id} and {rds[1].id} read the same metadata bits, "
                          f"so no witness tells them apart")
    lo = 4 * sources[0][2]
    n1, n2 = z3.BitVec("nib1", 8), z3.BitVec("nib2", 8)
    legal = lambda x: z3.Or([x == v for v in fm.legal_nibbles])  # noqa: E731
    a, b, (d1, d2) = _chunk_readings(fm, [("literal", n1), ("literal", n2)])
    m = _optimize([legal(n1), legal(n2), d1 != d2, z3.ULT(b, w)],
                  [_popcount(n1) + _popcount(n2), n1, n2, z3.Sum([_popcount(y) for y in a]),
                   z3.Sum([z3.ZeroExt(8, y) for y in a]), b])
    v1, v2 = _val(m, n1), _val(m, n2)
    av, bv = [_val(m, x) for x in a], _b_onehot(m, b, w)
    fill = _fill_word(fm)
    e = np.full(32, fill, dtype=np.uint64)
    e[sources[0][1]] = (fill & ~(0xF << lo)) | (v1 << lo)
    e[sources[1][1]] = (fill & ~(0xF << (4 * sources[1][2]))) | (v2 << (4 * sources[1][2]))
    B = np.zeros((fm.k, N_COLS_B), dtype=np.int64)
    B[0:w, 0] = bv
    outs = []
    for rd, (eff, src, n), v in zip(rds[:2], sources, (v1, v2)):
        A = np.zeros((fm.rows, fm.k), dtype=np.int64)
        A[0, 0:w] = codec.place(fm, v, av)
        outs.append({"id": rd.id, "text": rd.text + f" (here: row 0, chunk 0 read from lane {src} bits "
                                                     f"[{4 * n + 3}:{4 * n}] = 0b{v:04b})",
                     "D": _d_rows(_d_of(fm, A, B))})
    return Counterexample(
        "selector-out-of-range", fm.form.opcode, sel,
        f"selector {sel} is not legal (legal: {list(fm.selectors)}); under the spec's rule no lane supplies "
        f"row {cov.witness['row'] if cov.witness else '?'}, chunk {cov.witness['chunk'] if cov.witness else '?'}: "
        f"undefined behaviour",
        {"uncovered": cov.witness, "legal selectors": list(fm.selectors)},
        {"e": {int(i): f"0x{int(x):08x}" for i, x in enumerate(e) if int(x) != fill},
         "e (all other lanes)": f"0x{fill:08x}", "stored A values of row 0, chunk 0": av,
         f"B[0..{w - 1}][0]": bv, "C": 0},
        outs, "9.7.14.6.1")


# ----------------------------------------------------------------------------------
# 4. the right indices in the wrong bits

def _mistake_layout(fm: FormMeta, mistake: str) -> Layout:
    lay = fm.layout
    if mistake == "alternative":
        if lay.alternative is None:
            from .spec import _spec

            have = [lt.id for _p, lt in _spec()["layout"] if lt.alternative is not None]
            raise BadArgument(f"{fm.form.opcode}: layout {lay.id} has no competing hypothesis "
                              f"(only {', '.join(have)} have one); try 'swap-rows'")
        return lay.alternative
    if mistake == "swap-rows":
        let = dict(lay.row.let)
        return replace(lay, id=lay.id + ".swap-rows", row=Formula(f"({lay.row.src}) ^ 8", let=let),
                       evidence="a mistake: rows g and g+8 exchanged")
    raise BadArgument(f"unknown mistake {mistake!r}: 'alternative' or 'swap-rows'")


def wrong_bits(form: Form | str, sel: int | None = None, mistake: str = "swap-rows") -> Counterexample:
    """Indices written by a wrong layout and read by the spec's: the smallest A that goes wrong."""
    fm = meta(form)
    sel = _sel_default(fm, sel)
    wrong = _mistake_layout(fm, mistake)
    cov = prove_cover(fm, sel, wrong)
    if not cov.proved:
        raise BadArgument(f"the {mistake} layout is not a bijection onto the chunks: {cov.detail}")
    true_own, wrong_own = fm.owner(sel), fm.owner(sel, wrong)
    at = {v: k for k, v in wrong_own.items()}           # (lane, nibble) -> chunk the writer put there
    moved = sorted(rc for rc in true_own if at[true_own[rc]] != rc)
    if not moved:
        raise BadArgument(f"the {mistake} layout equals the spec's under sel={sel}")
    P = moved[0]                                        # hardware decodes P with the nibble written for Q
    Q = at[true_own[P]]
    w = fm.gran.width
    xs = [z3.BitVec(f"x{p}", 4) for p in range(w)]      # chunk P; chunk Q is left zero (minimality)
    nz = z3.Sum([z3.If(x != 0, z3.BitVecVal(1 << p, 8), z3.BitVecVal(0, 8)) for p, x in enumerate(xs)])
    nibP = codec.encode_nibble(fm, nz, invalid=0xFF)
    nibQ = codec.encode_nibble(fm, z3.BitVecVal(0, 8), invalid=0xFF)
    back = codec.place(fm, nibQ, codec.gather(fm, nibP, xs))
    m = _optimize([codec.representable(fm, nz), z3.Or([b != x for b, x in zip(back, xs)])],
                  [_popcount(nz), nz, z3.Sum([_popcount(y) for y in xs]), z3.Sum([z3.ZeroExt(8, y) for y in xs])])
    xv = [_val(m, x) for x in xs]
    vP, vQ = _val(m, nibP), _val(m, nibQ)
    got = [int(m.eval(b, model_completion=True).as_long()) for b in back]
    (r, c) = P
    lane_t, n_t = true_own[P]
    lane_w, n_w = wrong_own[P]
    p_diff = next(p for p in range(w) if xv[p] != got[p])
    B = np.zeros((fm.k, N_COLS_B), dtype=np.int64)
    B[c * w + p_diff, 0] = 1                            # D[r][0] picks the first column that differs
    A_int = np.zeros((fm.rows, fm.k), dtype=np.int64)
    A_int[r, c * w: c * w + w] = xv
    A_hw = np.zeros_like(A_int)
    A_hw[r, c * w: c * w + w] = got
    nz_cols = [c * w + p for p, x in enumerate(xv) if x]
    return Counterexample(
        f"wrong-bits/{mistake}", fm.form.opcode, sel,
        f"A with non-zeros at row {r}, columns {nz_cols}: its indices 0b{vP:04b} were written in lane {lane_w} "
        f"bits [{4 * n_w + 3}:{4 * n_w}] ({wrong.id}), but the hardware reads row {r}, chunk {c} from lane "
        f"{lane_t} bits [{4 * n_t + 3}:{4 * n_t}] ({fm.layout.figure}), which hold 0b{vQ:04b} "
        f"(the indices of row {Q[0]}, chunk {Q[1]})",
        {"row": r, "chunk": c, "written at": [lane_w, [4 * n_w + 3, 4 * n_w]], "read from": [lane_t, [4 * n_t + 3, 4 * n_t]],
         "mistake": wrong.evidence if mistake == "swap-rows" else f"alternative hypothesis: {wrong.why}"},
        {f"A[{r}][{c * w}..{c * w + w - 1}] intended": xv, "as the hardware sees it": got,
         "B": f"one-hot: B[{c * w + p_diff}][0] = 1", "C": 0},
        [{"id": "intended", "text": "D for the intended A", "D": _d_rows(_d_of(fm, A_int, B))},
         {"id": "hardware", "text": "D for what the spec's layout decodes", "D": _d_rows(_d_of(fm, A_hw, B))}],
        fm.layout.section)


# ----------------------------------------------------------------------------------

def all_witnesses(form: Form | str, sel: int | None = None) -> list[Counterexample]:
    fm = meta(form)
    sel = _sel_default(fm, sel)
    out = [not_sparse(fm.form)]
    for r in fm.rules:
        out.append(bad_nibble(fm.form, sel, r.id))
    out.append(selector_out_of_range(fm.form))
    out.append(wrong_bits(fm.form, sel, "swap-rows"))
    if fm.layout.alternative is not None:
        out.append(wrong_bits(fm.form, sel, "alternative"))
    return out
