"""Z3 obligations for sparse metadata: Proved / Refuted (minimal witness) / Unknown.

Per (form, selector), with every formula taken from ``specs/metadata.toml``:

``rules-text``   each nibble rule's formula (``idx0 != idx1``, ``idx0 < idx1``, ...) defines
                 exactly the set the ISA lists (``0b0000, 0b0101, ...`` / ``0b0100, 0b1000, ...``).
``word-valid``   for every lane and all 2^32 values of its e: the per-chunk rules, applied
                 at the bits the layout assigns to each (row, chunk), agree with the ISA's
                 value lists applied to the eight nibbles and with the closed-form word
                 predicate (``word_sp`` / ``word_ordered``).
``word-count``   the exact number of legal words of a contributing lane, counted by the
                 solver (each nibble's legal values enumerated, and the word predicate
                 proved equal to the product of those per-nibble sets, so the count is the
                 product), against the spec's combinatorics; a lane that does not
                 contribute accepts all 2^32 words.
``cover``        (lane, nibble) -> (row, chunk) over the lanes read under the selector is a
                 bijection onto the 16 x K/width chunks of A, and a group of four lanes
                 only holds chunks of its own rows g and g+8.
``a-chunks``     (lane, i) -> (row, chunk, j) of the A elements is a bijection onto the
                 16 x K/width x stored slots (row/span from the ISA text, Z3 and enumeration).
``codec``        per granularity and variant: every chunk that fits the granularity has a
                 legal encoding; the encoder that ``compress`` runs (the same code, run on
                 Z3 terms) picks a legal nibble and decoding gives the chunk back; each
                 legal nibble puts its stored elements on distinct columns.
``round-trip``   the whole path for the rows of one group of four lanes, symbolic in every
                 element: encode each chunk, write the nibbles into the lanes' e words and
                 the stored values into the A slots, read them back, decode: equal.

:mod:`.registry` hands these to ``formal.prove`` (``ptx-formal prove``, with an
enumeration engine beside Z3); :func:`obligations` returns :class:`Result` objects directly.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import z3

from ..catalog import Form, forms
from . import codec
from .spec import NIBBLES, FormMeta, Layout, meta

TIMEOUT_MS = 60_000


@dataclass
class Result:
    """Outcome of one obligation: ``proved``, ``refuted`` (with a minimal witness) or ``unknown``."""

    status: str
    obligation: str
    subject: str
    detail: str = ""
    witness: dict | None = None
    seconds: float = 0.0
    solver: str = f"z3 {z3.get_version_string()}"
    smt2: str | None = field(default=None, repr=False)   # the negated query: UNSAT is the proof

    @property
    def proved(self) -> bool:
        return self.status == "proved"

    def to_dict(self, smt2: bool = False) -> dict:
        d = asdict(self)
        if not smt2:
            d.pop("smt2")
        return d

    def __str__(self) -> str:
        s = f"{self.status.upper():8s} {self.obligation:12s} {self.subject}  ({self.seconds * 1000:.0f} ms)"
        if self.detail:
            s += f"\n         {self.detail}"
        if self.witness and self.status != "proved":
            s += f"\n         witness: {self.witness}"
        return s


def _subject(fm: FormMeta, sel: int | None) -> str:
    return fm.form.opcode + (f" sel={sel}" if sel is not None else "")


def _popcount(x: z3.BitVecRef) -> z3.ArithRef:
    return z3.Sum([z3.ZeroExt(8, z3.Extract(i, i, x)) for i in range(x.size())])


def _solver() -> z3.Solver:
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    return s


def _prove(name: str, subject: str, negation: Iterable, minimize: list | None = None,
           witness: Callable[[z3.ModelRef], dict] | None = None, detail: str = "") -> Result:
    """Proved iff ``negation`` is UNSAT; else a witness minimising ``minimize`` in order."""
    t0 = time.perf_counter()
    s = _solver()
    s.add(*negation)
    r = s.check()
    if r == z3.unsat:
        return Result("proved", name, subject, detail, None, time.perf_counter() - t0, smt2=s.to_smt2())
    if r == z3.unknown:
        return Result("unknown", name, subject, f"{detail} (solver: {s.reason_unknown()})", None,
                      time.perf_counter() - t0)
    m = s.model()
    if minimize:
        o = z3.Optimize()
        o.set("timeout", TIMEOUT_MS)
        o.add(*negation)
        for term in minimize:
            o.minimize(term)
        if o.check() == z3.sat:
            m = o.model()
    w = witness(m) if witness else {str(d): str(m[d]) for d in m.decls()}
    return Result("refuted", name, subject, detail, w, time.perf_counter() - t0)


def _val(m: z3.ModelRef, x) -> int:
    return m.eval(x, model_completion=True).as_long()


# ----------------------------------------------------------------------------------
# z3 terms of the spec's formulas

W = 16          # width of index terms (lane, n, row, chunk, bit positions); no overflow below 2^16


def _bool(x) -> z3.BoolRef:
    return x if isinstance(x, z3.BoolRef) else x != 0


def _lay_terms(lay: Layout, lane, n, sel: int):
    env = {"lane": lane, "n": n, "sel": z3.BitVecVal(sel, W)}
    return (_bool(lay.active.z3(env, W)), lay.row.z3(env, W), lay.chunk.z3(env, W), lay.lo.z3(env, W))


def _nib_at(e: z3.BitVecRef, lo: z3.BitVecRef) -> z3.BitVecRef:
    """The 4 bits of the 32-bit e starting at (symbolic) bit lo, as a W-bit term."""
    return z3.ZeroExt(W - 4, z3.Extract(3, 0, z3.LShR(e, z3.ZeroExt(32 - W, lo))))


def _rules_hold(fm: FormMeta, nib: z3.BitVecRef) -> z3.BoolRef:
    env = {"nib": nib, "idx0": nib & 3, "idx1": z3.LShR(nib, 2)}
    return z3.And([_bool(r.require.z3(env, nib.size())) for r in fm.rules])


def text_set(fm: FormMeta) -> set[int]:
    """The nibbles the ISA's lists allow: every listed 'meaningful' set, minus every 'invalid' list."""
    ok = set(range(16))
    for r in fm.rules:
        if r.values is not None:
            ok &= set(r.values)
        if r.invalid is not None:
            ok -= set(r.invalid)
    return ok


# ----------------------------------------------------------------------------------
# obligations

def prove_rules_text(fm: FormMeta) -> Result:
    nib = z3.BitVec("nib", 8)
    subj = f"{fm.gran.id} {fm.variant}"
    res = []
    for r in fm.rules:
        listed = set(r.values) if r.values is not None else set(range(16)) - set(r.invalid or ())
        env = {"nib": nib, "idx0": nib & 3, "idx1": z3.LShR(nib, 2)}
        f = _bool(r.require.z3(env, 8))
        inlist = z3.Or([nib == v for v in sorted(listed)])
        res.append(_prove("rules-text", f"{subj} rule {r.id}", [z3.ULT(nib, 16), f != inlist], [nib],
                          lambda m: {"nibble": f"0b{_val(m, nib):04b}"},
                          detail=f"rule '{r.require.src}' == ISA list {sorted(f'0b{v:04b}' for v in listed)}"))
    bad = [x for x in res if not x.proved]
    out = bad[0] if bad else res[0]
    if not bad:
        out = Result("proved", "rules-text", subj, "; ".join(x.detail for x in res), None,
                     sum(x.seconds for x in res), smt2="\n".join(x.smt2 or "" for x in res))
    return out


def _chunk_pred(fm: FormMeta, e, lane, sel: int, lay: Layout | None = None) -> z3.BoolRef:
    parts = []
    for n in range(NIBBLES):
        act, _row, _ch, lo = _lay_terms(lay or fm.layout, lane, z3.BitVecVal(n, W), sel)
        parts.append(z3.Implies(act, _rules_hold(fm, _nib_at(e, lo))))
    return z3.And(parts)


def _lane_active(fm: FormMeta, lane, sel: int) -> z3.BoolRef:
    return z3.Or([_lay_terms(fm.layout, lane, z3.BitVecVal(n, W), sel)[0] for n in range(NIBBLES)])


def _text_pred(fm: FormMeta, e, lane, sel: int) -> z3.BoolRef:
    ok = sorted(text_set(fm))
    nibs = [z3.Extract(4 * n + 3, 4 * n, e) for n in range(NIBBLES)]
    return z3.Implies(_lane_active(fm, lane, sel), z3.And([z3.Or([x == v for v in ok]) for x in nibs]))


def _word_pred(fm: FormMeta, e, lane, sel: int) -> z3.BoolRef:
    f = fm.gran.word[fm.variant]
    return z3.Implies(_lane_active(fm, lane, sel), _bool(f.z3({"e": e}, 32)))


def prove_word_valid(fm: FormMeta, sel: int) -> Result:
    e, lane = z3.BitVec("e", 32), z3.BitVec("lane", W)
    pc, pt, pw = _chunk_pred(fm, e, lane, sel), _text_pred(fm, e, lane, sel), _word_pred(fm, e, lane, sel)
    neg = [z3.ULT(lane, 32), z3.Or(pc != pt, pc != pw)]

    def wit(m):
        ev = _val(m, e)
        return {"lane": _val(m, lane), "e": f"0x{ev:08x}", "per_chunk_rule": bool(m.eval(pc)),
                "isa_lists": bool(m.eval(pt)), "word_formula": bool(m.eval(pw))}

    return _prove("word-valid", _subject(fm, sel), neg, [lane, _popcount(e)], wit,
                  detail="per-chunk rules at the layout's bits == ISA value lists on 8 nibbles == "
                         f"closed form '{fm.gran.word[fm.variant].src}', for all 2^32 words and all lanes")


def count_words(fm: FormMeta, sel: int) -> Result:
    """Exact count of legal e words of a contributing lane (solver-derived)."""
    t0 = time.perf_counter()
    e, lane = z3.BitVec("e", 32), z3.BitVec("lane", W)
    subj = _subject(fm, sel)
    pred = _chunk_pred(fm, e, lane, sel)
    active = _lane_active(fm, lane, sel)
    fields: list[list[int]] = []
    s = _solver()
    s.add(z3.ULT(lane, 32), active, pred)
    for n in range(NIBBLES):             # each field's projection: every one of its 16 values tried
        x = z3.Extract(4 * n + 3, 4 * n, e)
        vals = []
        for v in range(16):
            r = s.check(x == v)
            if r == z3.unknown:
                return Result("unknown", "word-count", subj, s.reason_unknown(), None, time.perf_counter() - t0)
            if r == z3.sat:
                vals.append(v)
        fields.append(vals)
    # the predicate is the conjunction of per-field memberships (fields partition the 32 bits)
    prod = z3.And([z3.Or([z3.Extract(4 * n + 3, 4 * n, e) == v for v in fields[n]]) for n in range(NIBBLES)])
    s = _solver()
    s.add(z3.ULT(lane, 32), active, pred != prod)
    r1 = s.check()
    s2 = _solver()
    s2.add(z3.ULT(lane, 32), z3.Not(active), z3.Not(pred))      # inactive lanes accept every word
    r2 = s2.check()
    dt = time.perf_counter() - t0
    if z3.unknown in (r1, r2):
        return Result("unknown", "word-count", subj, "decomposition check timed out", None, dt)
    if r1 == z3.sat:
        return Result("refuted", "word-count", subj, "the predicate does not factor over the nibbles",
                      {"e": f"0x{_val(s.model(), e):08x}"}, dt)
    if r2 == z3.sat:
        m = s2.model()
        return Result("refuted", "word-count", subj, "a non-contributing lane rejects a word",
                      {"lane": _val(m, lane), "e": f"0x{_val(m, e):08x}"}, dt)
    count = math.prod(len(f) for f in fields)
    per_chunk = int(fm.gran.combinatorics[fm.variant].eval({}))
    comb = per_chunk ** NIBBLES
    detail = (f"{count} legal words per contributing lane (= {' * '.join(str(len(f)) for f in fields)}); "
              f"combinatorics {per_chunk}^{NIBBLES} = {comb} ({fm.gran.combinatorics[fm.variant].src} per chunk); "
              f"non-contributing lanes: all 2^32")
    w = {"count": count, "combinatorics": comb, "fields": [[f"0b{v:04b}" for v in f] for f in fields]}
    if count != comb or any(set(f) != text_set(fm) for f in fields):
        return Result("refuted", "word-count", subj, detail, w, dt)
    return Result("proved", "word-count", subj, detail, w, dt, smt2=s.to_smt2())


def prove_cover(fm: FormMeta, sel: int, lay: Layout | None = None) -> Result:
    """(lane, nibble) -> (row, chunk) is a bijection onto the chunks; groups hold their own rows."""
    lay = lay or fm.layout
    subj = _subject(fm, sel) + (f" [{lay.id}]" if lay is not fm.layout else "")
    R, C = fm.rows, fm.chunks_per_row
    l1, n1, l2, n2 = (z3.BitVec(x, W) for x in ("lane1", "n1", "lane2", "n2"))
    a1, r1, c1, lo1 = _lay_terms(lay, l1, n1, sel)
    a2, r2, c2, lo2 = _lay_terms(lay, l2, n2, sel)
    dom1 = z3.And(z3.ULT(l1, 32), z3.ULT(n1, NIBBLES), a1)
    dom2 = z3.And(z3.ULT(l2, 32), z3.ULT(n2, NIBBLES), a2)
    t0 = time.perf_counter()
    parts = []
    # in range, and the nibble is the 4-bit field 4n of the word
    parts.append(_prove("cover", subj, [dom1, z3.Or(z3.UGE(r1, R), z3.UGE(c1, C), lo1 != 4 * n1)],
                        [l1, n1], lambda m: {"lane": _val(m, l1), "nibble": _val(m, n1),
                                             "row": _val(m, r1), "chunk": _val(m, c1)},
                        "in range"))
    # injective
    parts.append(_prove("cover", subj, [dom1, dom2, z3.Or(l1 != l2, n1 != n2), r1 == r2, c1 == c2],
                        [l1, n1, l2, n2],
                        lambda m: {"row": _val(m, r1), "chunk": _val(m, c1),
                                   "held_by": [(_val(m, l1), _val(m, n1)), (_val(m, l2), _val(m, n2))]},
                        "injective"))
    # surjective: no (row, chunk) is missed.  Quantifier-free: the enumeration proposes a
    # holder for every chunk, Z3 checks symbolically that each proposed holder is read and
    # really holds that chunk; a chunk without a proposed holder is confirmed by a point query.
    holder = fm.owner_array(sel, lay)                       # [R, C, 2], -1 = none
    missing = np.argwhere(holder[..., 0] < 0)
    row, ch = z3.BitVec("row", W), z3.BitVec("chunk", W)
    if len(missing):
        rr, cc = (int(x) for x in missing[0])
        s = _solver()
        s.add(dom1, r1 == rr, c1 == cc)
        st = s.check()
        status = "refuted" if st == z3.unsat else "unknown"
        surj = Result(status, "cover", subj, "surjective" if st == z3.unsat else
                      "surjective: the enumeration and Z3 disagree", {"row": rr, "chunk": cc, "held_by": None})
    else:
        idx = row * C + ch
        hl = z3.BitVecVal(0, W)
        hn = z3.BitVecVal(0, W)
        for k in range(R * C - 1, -1, -1):
            hl = z3.If(idx == k, z3.BitVecVal(int(holder[k // C, k % C, 0]), W), hl)
            hn = z3.If(idx == k, z3.BitVecVal(int(holder[k // C, k % C, 1]), W), hn)
        a3, r3, c3, _lo3 = _lay_terms(lay, hl, hn, sel)
        dom3 = z3.And(z3.ULT(hl, 32), z3.ULT(hn, NIBBLES), a3)
        surj = _prove("cover", subj, [z3.ULT(row, R), z3.ULT(ch, C), z3.Not(z3.And(dom3, r3 == row, c3 == ch))],
                      [row, ch], lambda m: {"row": _val(m, row), "chunk": _val(m, ch), "held_by": None}, "surjective")
    parts.append(surj)
    # quad-local: group g holds rows g and g + 8 only
    parts.append(_prove("cover", subj, [dom1, (r1 & 7) != z3.LShR(l1, 2)], [l1, n1],
                        lambda m: {"lane": _val(m, l1), "nibble": _val(m, n1), "row": _val(m, r1)},
                        "group-local"))
    bad = [p for p in parts if not p.proved]
    dt = time.perf_counter() - t0
    if bad:
        b = bad[0]
        return Result(b.status, "cover", subj, f"{b.detail} fails", b.witness, dt)
    return Result("proved", "cover", subj,
                  f"(lane, nibble) -> (row, chunk) is a bijection onto {R} x {C} chunks (in range, injective, "
                  f"surjective) and each group of four lanes holds only its rows g, g+8", None, dt,
                  smt2="\n".join(p.smt2 or "" for p in parts))


def prove_a_chunks(fm: FormMeta) -> Result:
    """A elements -> (row, span): spans aligned, in range, owned by one lane; slots by enumeration."""
    import numpy as np

    t0 = time.perf_counter()
    subj = _subject(fm, None)
    a = fm.afrag
    l1, i1, l2, i2 = (z3.BitVec(x, W) for x in ("lane1", "i1", "lane2", "i2"))
    env1, env2 = {"lane": l1, "i": i1}, {"lane": l2, "i": i2}
    r1, f1 = a.row.z3(env1, W), a.firstcol.z3(env1, W)
    r2, f2 = a.row.z3(env2, W), a.firstcol.z3(env2, W)
    d1 = z3.And(z3.ULT(l1, 32), z3.ULT(i1, fm.a_elems))
    d2 = z3.And(z3.ULT(l2, 32), z3.ULT(i2, fm.a_elems))
    p1 = _prove("a-chunks", subj, [d1, z3.Or(z3.UGE(r1, fm.rows), z3.URem(f1, a.span) != 0,
                                             z3.UGT(f1 + a.span, fm.k))],
                [l1, i1], lambda m: {"lane": _val(m, l1), "i": _val(m, i1), "row": _val(m, r1), "firstcol": _val(m, f1)},
                "span in range and chunk-aligned")
    if a.span % fm.gran.width:
        return Result("refuted", "a-chunks", subj, f"span {a.span} is not a whole number of {fm.gran.width}-wide chunks",
                      None, time.perf_counter() - t0)
    p2 = _prove("a-chunks", subj, [d1, d2, l1 != l2, r1 == r2, f1 == f2], [l1, i1, l2, i2],
                lambda m: {"row": _val(m, r1), "firstcol": _val(m, f1),
                           "lanes": [_val(m, l1), _val(m, l2)]}, "each span belongs to one lane")
    dt = time.perf_counter() - t0
    for p in (p1, p2):
        if not p.proved:
            return Result(p.status, "a-chunks", subj, p.detail, p.witness, dt)
    # enumeration: every lane's span holds exactly span/width * stored elements, and the
    # ranked map hits every (row, chunk, j) once
    tab = fm.a_table()
    per = fm.rows * fm.chunks_per_row * fm.gran.stored
    cells = (tab[:, 2] * fm.chunks_per_row + tab[:, 3]) * fm.gran.stored + tab[:, 4]
    counts = np.bincount(cells, minlength=per)
    if len(tab) != per or (counts != 1).any() or (tab[:, 4] >= fm.gran.stored).any():
        bad = int(np.flatnonzero(counts != 1)[0]) if (counts != 1).any() else 0
        return Result("refuted", "a-chunks", subj, "stored slots not hit exactly once",
                      {"slot": bad, "hits": int(counts[bad]) if bad < len(counts) else None}, dt)
    return Result("proved", "a-chunks", subj,
                  f"{len(tab)} A elements -> {fm.rows} x {fm.chunks_per_row} chunks x {fm.gran.stored} slots, "
                  f"a bijection (spans: Z3; ranks: enumeration)", None, time.perf_counter() - t0,
                  smt2=(p1.smt2 or "") + "\n" + (p2.smt2 or ""))


def prove_codec(fm: FormMeta, bits: int = 4) -> Result:
    """Per-chunk encode/decode on symbolic values (``bits`` per element; only != 0 matters)."""
    t0 = time.perf_counter()
    w = fm.gran.width
    subj = f"{fm.gran.id} {fm.variant}"
    xs = [z3.BitVec(f"x{p}", bits) for p in range(w)]
    nz = z3.Sum([z3.If(x != 0, z3.BitVecVal(1 << p, 8), z3.BitVecVal(0, 8)) for p, x in enumerate(xs)])
    rep = codec.representable(fm, nz)
    orders = ["ascending"] + (["descending"] if fm.variant == "sp" and fm.gran.stored > 1 else [])
    parts = []
    for order in orders:
        nib = codec.encode_nibble(fm, nz, order, invalid=0xFF)
        legal = z3.Or([nib == v for v in codec.candidates(fm, order)])
        stored = codec.gather(fm, nib, xs)
        back = codec.place(fm, nib, stored)
        parts.append(_prove("codec", subj, [rep, z3.Or(z3.Not(legal), z3.Or([b != x for b, x in zip(back, xs)]))],
                            [], lambda m: {"chunk": [_val(m, x) for x in xs], "order": order},
                            f"{order}: fits -> legal nibble and decode(encode(x)) == x"))
    # completeness w.r.t. ALL legal nibbles (not just the encoder's choice), and soundness:
    # every legal nibble stores on distinct columns, and what it stores fits the granularity
    some = z3.Or([z3.And([x == 0 for p, x in enumerate(xs) if not (codec.support_mask(fm, v) >> p) & 1])
                  for v in fm.legal_nibbles])
    parts.append(_prove("codec", subj, [rep, z3.Not(some)], [], lambda m: {"chunk": [_val(m, x) for x in xs]},
                        "every chunk that fits has a legal nibble storing it"))
    sound = all(len(set(fm.offsets(v))) == fm.gran.stored and all(0 <= o < w for o in fm.offsets(v))
                and bool(codec.representable(fm, codec.support_mask(fm, v))) for v in fm.legal_nibbles)
    nfit = z3.Not(rep)
    parts.append(_prove("codec", subj, [nfit, some], [], lambda m: {"chunk": [_val(m, x) for x in xs]},
                        "a chunk that does not fit has no legal nibble storing it"))
    dt = time.perf_counter() - t0
    bad = [p for p in parts if not p.proved]
    if bad:
        return Result(bad[0].status, "codec", subj, bad[0].detail, bad[0].witness, dt)
    if not sound:
        return Result("refuted", "codec", subj, "a legal nibble stores two elements on one column", None, dt)
    return Result("proved", "codec", subj, "; ".join(p.detail for p in parts) +
                  "; legal nibbles place stored elements on distinct columns", None, dt,
                  smt2="\n".join(p.smt2 or "" for p in parts))


def prove_round_trip(fm: FormMeta, sel: int, group: int = 0, bits: int = 2) -> Result:
    """compress then decompress is the identity on the two rows of one group of four lanes."""
    t0 = time.perf_counter()
    subj = _subject(fm, sel) + f" group {group}"
    w, s = fm.gran.width, fm.gran.stored
    rows = (group, group + 8)
    X = {(r, k): z3.BitVec(f"a_{r}_{k}", bits) for r in rows for k in range(fm.k)}
    tab = fm.e_table(sel)
    slots = fm.a_slots()
    e_words: dict[int, Any] = {}
    a_slot: dict[tuple[int, int], Any] = {}
    fits = []
    nibs = {}
    for r in rows:
        for c in range(fm.chunks_per_row):
            cols = [X[r, c * w + p] for p in range(w)]
            nz = z3.Sum([z3.If(x != 0, z3.BitVecVal(1 << p, 8), z3.BitVecVal(0, 8)) for p, x in enumerate(cols)])
            fits.append(codec.representable(fm, nz))
            nib = codec.encode_nibble(fm, nz, invalid=0xFF)
            nibs[r, c] = nib
            for j, v in enumerate(codec.gather(fm, nib, cols)):
                lane, i = (int(x) for x in slots[r, c, j])
                a_slot[lane, i] = v
    for lane, _n, r, c, lo in tab:                  # write: each owner lane ORs its nibbles in
        if r in rows:
            term = z3.ZeroExt(28, z3.Extract(3, 0, nibs[int(r), int(c)])) << int(lo)
            e_words[int(lane)] = e_words.get(int(lane), z3.BitVecVal(0, 32)) | term
    eq = []
    for r in rows:                                  # read back and decode
        for c in range(fm.chunks_per_row):
            own = tab[(tab[:, 2] == r) & (tab[:, 3] == c)]
            lane, lo = int(own[0, 0]), int(own[0, 4])
            nib = z3.ZeroExt(4, z3.Extract(int(lo) + 3, int(lo), e_words[lane]))
            stored = [a_slot[int(slots[r, c, j, 0]), int(slots[r, c, j, 1])] for j in range(s)]
            back = codec.place(fm, nib, stored)
            eq += [b == X[r, c * w + p] for p, b in enumerate(back)]
    res = _prove("round-trip", subj, [z3.And(fits), z3.Not(z3.And(eq))], [],
                 lambda m: {"rows": {r: [_val(m, X[r, k]) for k in range(fm.k)] for r in rows}},
                 f"symbolic rows {rows[0]}, {rows[1]} ({2 * fm.k} elements): encode, write e and A slots, read, decode")
    res.seconds = time.perf_counter() - t0
    return res


# ----------------------------------------------------------------------------------
# the family

def obligations(form: Form | str | FormMeta, sel: int | None = None, round_trip: bool = True) -> list[Result]:
    """Every obligation for one form (all legal selectors unless ``sel`` is given)."""
    fm = form if isinstance(form, FormMeta) else meta(form)
    sels = [sel] if sel is not None else list(fm.selectors)
    out = [prove_rules_text(fm), prove_codec(fm), prove_a_chunks(fm)]
    for s_ in sels:
        out += [prove_word_valid(fm, s_), count_words(fm, s_), prove_cover(fm, s_)]
        if round_trip:
            out.append(prove_round_trip(fm, s_))
    return out


def metadata_classes(target: str | None = None, ptx: str | None = None) -> dict[tuple, list[Form]]:
    """Sparse forms grouped by metadata semantics (same spec entries, K, packing, selectors)."""
    out: dict[tuple, list[Form]] = {}
    for f in forms(target, ptx, "mma.sp"):
        out.setdefault(meta(f).key, []).append(f)
    return out


def all_obligations(round_trip: bool = True) -> list[Result]:
    """The family over the whole catalog: one run per metadata class (members listed in ``detail``)."""
    res = []
    for _key, members in metadata_classes().items():
        for r in obligations(members[0], round_trip=round_trip):
            if len(members) > 1:
                r.detail += f"  [covers {len(members)} forms of this class]"
            res.append(r)
    return res


# ----------------------------------------------------------------------------------
# the enumeration engine: the same claims decided by numpy over every point, where the
# domain is small (nibbles: 16 values; chunks: 2^width non-zero patterns; layouts: 256
# (lane, nibble) points).  ``None`` = agrees, else a witness dict.  The 2^32-word
# enumeration of ``word-valid`` / ``word-count`` is formal.metadata.scan (slow test,
# benchmark): too slow for every proof run.

def enum_rules_text(fm: FormMeta) -> dict | None:
    for r in fm.rules:
        listed = set(r.values) if r.values is not None else set(range(16)) - set(r.invalid or ())
        for v in range(16):
            if r.holds(v) != (v in listed):
                return {"rule": r.id, "nibble": f"0b{v:04b}"}
    return None


def enum_cover(fm: FormMeta, sel: int, lay: Layout | None = None) -> dict | None:
    import numpy as np

    tab = fm.e_table(sel, lay)
    R, C = fm.rows, fm.chunks_per_row
    for lane, n, r, c, lo in tab:
        if not (0 <= r < R and 0 <= c < C) or lo != 4 * n:
            return {"lane": int(lane), "nibble": int(n), "row": int(r), "chunk": int(c)}
        if (r & 7) != lane >> 2:
            return {"lane": int(lane), "nibble": int(n), "row": int(r)}
    cells = tab[:, 2] * C + tab[:, 3]
    counts = np.bincount(cells, minlength=R * C)
    if (counts != 1).any():
        bad = int(np.flatnonzero(counts != 1)[0])
        return {"row": bad // C, "chunk": bad % C, "held": int(counts[bad])}
    return None


def enum_codec(fm: FormMeta) -> dict | None:
    """Every non-zero pattern of a chunk (values 1..width at the non-zero columns)."""
    w = fm.gran.width
    orders = ["ascending"] + (["descending"] if fm.variant == "sp" and fm.gran.stored > 1 else [])
    for nz in range(1 << w):
        xs = [(p + 1) if nz >> p & 1 else 0 for p in range(w)]
        fits = bool(codec.representable(fm, nz))
        has = any(not (nz & ~codec.support_mask(fm, v)) for v in fm.legal_nibbles)
        if fits != has:
            return {"chunk": xs, "fits": fits, "some legal nibble stores it": has}
        if not fits:
            continue
        for order in orders:
            nib = codec.encode_nibble(fm, nz, order, invalid=-1)
            if nib not in codec.candidates(fm, order):
                return {"chunk": xs, "order": order, "nibble": nib}
            if list(codec.place(fm, nib, codec.gather(fm, nib, xs))) != xs:
                return {"chunk": xs, "order": order, "nibble": f"0b{nib:04b}"}
    return None


def enum_word_halves(fm: FormMeta, sel: int) -> dict | None:
    """Partial: every 16-bit half of a contributing lane's word, the other half legal or not."""
    import numpy as np

    from .scan import predicate

    lane = int(fm.e_table(sel)[0, 0])
    chunk, word = predicate(fm, sel, lane, "chunk"), predicate(fm, sel, lane, "word")
    fill = min(fm.legal_nibbles) * 0x1111
    half = np.arange(1 << 16, dtype=np.uint32)
    for other in (fill, 0):
        for e in (half | np.uint32(other << 16), (half << np.uint32(16)) | np.uint32(other)):
            a, b = chunk(e), word(e)
            if (a != b).any():
                i = int(np.flatnonzero(a != b)[0])
                return {"lane": lane, "e": f"0x{int(e[i]):08x}", "per_chunk_rule": bool(a[i]), "word_formula": bool(b[i])}
    return None
