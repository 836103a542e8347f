"""``specs/metadata.toml`` compiled for one form: granularity, nibble rules, layout, A chunks.

:func:`meta(form)` selects, by the ``forms`` predicates of the spec, the one granularity,
the rules, the one metadata layout and the one A-fragment entry that apply to a sparse
form, and returns a :class:`FormMeta` with everything the rest of the package needs.
It raises :class:`SpecError` when a form matches none or several entries: the spec must
cover every sparse form exactly once (tests check this over the whole catalog).

Enumerations (``e_table``, ``a_table``) evaluate the formulas on numpy arrays; the
same formulas compile to Z3 in :mod:`formal.metadata.proofs`.

Example::

    >>> from formal.catalog import parse
    >>> fm = meta(parse("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"))
    >>> fm.gran.id, fm.layout.id, fm.gran.width, fm.chunks_per_row
    ('2:4', '16bit.m16n8k32', 4, 8)
    >>> fm.owner(sel=0)[9, 5]          # (row 9, chunk 5 = columns 20..23) -> (lane, nibble)
    (5, 5)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from ..catalog import BadArgument, Form, parse
from ..expr import Formula
from ..specdata import load_spec

ORDERED = "sp::ordered_metadata"
VARIANTS = ("sp", ORDERED)
NIBBLES = 8          # 4-bit fields in a 32-bit e register
LANES = 32


class SpecError(ValueError):
    """specs/metadata.toml does not cover a form exactly once."""


class NotSparseForm(BadArgument):
    """A metadata question about a form that is not mma.sp (exit 2 on the CLI)."""


# ----------------------------------------------------------------------------------
# spec entries

@dataclass(frozen=True)
class Granularity:
    id: str
    width: int                     # logical columns per chunk
    stored: int                    # stored elements per chunk
    offset: Formula                # (j, nib) -> column inside the chunk
    representable: Formula         # (nz) -> bool
    word: dict[str, Formula]       # variant -> closed form over e
    combinatorics: dict[str, Formula]
    section: str
    text: str
    figures: str
    reading: str

    def offset_of(self, j, nib):
        return self.offset.eval({"j": j, "nib": nib})


@dataclass(frozen=True)
class Rule:
    id: str
    require: Formula               # over nib, idx0, idx1
    message: str
    section: str
    text: str
    values: tuple[int, ...] | None     # the ISA's list of meaningful values
    invalid: tuple[int, ...] | None    # the ISA's list of invalid values

    def holds(self, nib: int) -> bool:
        return bool(self.require.eval(nib_env(nib)))

    def describe(self, nib: int) -> str:
        env = nib_env(nib)
        return self.message.format(**env)


@dataclass(frozen=True)
class Layout:
    id: str
    selectors: str                 # one | pair | all
    active: Formula                # (lane, sel) -> bool
    row: Formula                   # (lane, n) -> row
    chunk: Formula                 # (lane, n) -> chunk index
    lo: Formula                    # (n) -> lowest bit of the nibble in e
    section: str
    figure: str
    evidence: str
    alternative: "Layout | None" = None
    why: str = ""

    @property
    def confirmed(self) -> bool:
        return self.evidence.startswith("confirmed")


@dataclass(frozen=True)
class AFragment:
    row: Formula                   # (lane, i) -> row
    firstcol: Formula              # (lane, i) -> first logical column of the span
    span: int
    section: str
    figure: str


@dataclass(frozen=True)
class Reading:
    id: str
    applies: str
    text: str
    mode: str | None = None
    effective: Formula | None = None
    source: Formula | None = None


def nib_env(nib):
    """The names a nibble rule may use."""
    return {"nib": nib, "idx0": nib & 3, "idx1": nib >> 2}


def _f(src: Any, let: dict | None = None) -> Formula:
    return Formula(str(src), let=dict(let or {}))


@lru_cache(maxsize=1)
def _spec() -> dict[str, Any]:
    doc = load_spec("metadata")
    grans = []
    for g in doc["granularity"]:
        let = g.get("word_let", {})
        grans.append((Formula(g["forms"]), Granularity(
            g["id"], int(g["width"]), int(g["stored"]), _f(g["offset"]), _f(g["representable"]),
            {"sp": _f(g["word_sp"], let), ORDERED: _f(g["word_ordered"], let)},
            {k: _f(v) for k, v in g["combinatorics"].items()},
            g["section"], g["text"], g.get("figures", ""), g.get("reading", ""))))
    rules = []
    for r in doc["rule"]:
        rules.append((tuple(r["granularity"]), tuple(r["variants"]), Rule(
            r["id"], _f(r["require"]), r["message"], r["section"], r["text"],
            tuple(r["values"]) if "values" in r else None,
            tuple(r["invalid"]) if "invalid" in r else None)))
    layouts = []
    for e in doc["layout"]:
        let = e.get("let", {})
        alt = None
        if "alternative" in e:
            a = e["alternative"]
            alt = Layout(e["id"] + ".alternative", e["selectors"], _f(e["active"], let), _f(a["row"], let),
                         _f(a["chunk"], let), _f(e["lo"], let), e["section"], e["figure"],
                         "alternative hypothesis", None, a.get("why", ""))
        layouts.append((Formula(e["forms"]), Layout(
            e["id"], e["selectors"], _f(e["active"], let), _f(e["row"], let), _f(e["chunk"], let),
            _f(e["lo"], let), e["section"], e["figure"], e["evidence"], alt)))
    afr = []
    for a in doc["a_fragment"]:
        let = a.get("let", {})
        afr.append((Formula(a["forms"]), AFragment(_f(a["row"], let), _f(a["firstcol"], let), int(a["span"]),
                                                   a["section"], a.get("figure", ""))))
    readings = []
    for r in doc.get("ub_reading", []):
        readings.append(Reading(r["id"], r["applies"], r["text"], r.get("mode"),
                                _f(r["effective"]) if "effective" in r else None,
                                _f(r["source"]) if "source" in r else None))
    return {"granularity": grans, "rule": rules, "layout": layouts, "a_fragment": afr, "reading": readings}


def readings(applies: str) -> list[Reading]:
    """The UB readings a witness compares for rule/topic ``applies``."""
    return [r for r in _spec()["reading"] if r.applies == applies]


def _one(kind: str, form: Form, entries):
    env = form.env()
    hits = [e for pred, e in entries if pred.eval(env)]
    if len(hits) != 1:
        raise SpecError(f"specs/metadata.toml: {len(hits)} [[{kind}]] entries match {form.opcode}; need exactly one")
    return hits[0]


# ----------------------------------------------------------------------------------
# per form

@dataclass(frozen=True)
class FormMeta:
    """Everything about one sparse form's metadata (see module docstring)."""

    form: Form
    gran: Granularity
    rules: tuple[Rule, ...]
    layout: Layout
    afrag: AFragment
    a_elems: int                   # A elements per lane
    _cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    # -- sizes -----------------------------------------------------------------------
    @property
    def variant(self) -> str:
        return self.form.sparsity

    @property
    def rows(self) -> int:
        return self.form.m

    @property
    def k(self) -> int:
        return self.form.k

    @property
    def chunks_per_row(self) -> int:
        return self.k // self.gran.width

    @property
    def selectors(self) -> tuple[int, ...]:
        return tuple(self.form.selectors or ())

    @property
    def key(self) -> tuple:
        """Forms with the same key have the same metadata semantics (same spec entries)."""
        op = self.form.operands["a"]
        return (self.gran.id, self.variant, self.layout.id, self.afrag.section, self.k,
                op.count, op.elems_per_reg, op.elem_bits, op.shift, self.selectors)

    # -- rules -------------------------------------------------------------------------
    def nibble_ok(self, nib: int) -> bool:
        return all(r.holds(nib) for r in self.rules)

    def broken_rules(self, nib: int) -> list[Rule]:
        return [r for r in self.rules if not r.holds(nib)]

    @cached_property
    def legal_nibbles(self) -> tuple[int, ...]:
        return tuple(v for v in range(16) if self.nibble_ok(v))

    def offsets(self, nib: int) -> tuple[int, ...]:
        """Columns (inside the chunk) of the stored elements j = 0.. for nibble ``nib``."""
        return tuple(int(self.gran.offset_of(j, nib)) for j in range(self.gran.stored))

    # -- layout enumeration ---------------------------------------------------------------
    def active(self, lane, sel, layout: Layout | None = None):
        lay = layout or self.layout
        return lay.active.eval({"lane": lane, "sel": sel, "n": 0})

    def e_table(self, sel: int, layout: Layout | None = None) -> np.ndarray:
        """Rows (lane, n, row, chunk, lo) for every active lane and nibble (numpy int64 [P, 5])."""
        lay = layout or self.layout
        key = ("e", sel, lay.id, lay.active.src, lay.row.src, lay.chunk.src, lay.lo.src)
        if key not in self._cache:
            lane, n = np.meshgrid(np.arange(LANES), np.arange(NIBBLES), indexing="ij")
            env = {"lane": lane, "n": n, "sel": sel}
            act = np.broadcast_to(np.asarray(lay.active.eval(env), dtype=bool), lane.shape)
            row = np.broadcast_to(lay.row.eval(env), lane.shape)
            ch = np.broadcast_to(lay.chunk.eval(env), lane.shape)
            lo = np.broadcast_to(lay.lo.eval(env), lane.shape)
            tab = np.stack([lane, n, row, ch, lo], axis=-1)[act]
            self._cache[key] = tab.astype(np.int64)
        return self._cache[key]

    def owner(self, sel: int, layout: Layout | None = None) -> dict[tuple[int, int], tuple[int, int]]:
        """(row, chunk) -> (lane, nibble) under selector ``sel`` (only well-formed layouts)."""
        out: dict[tuple[int, int], tuple[int, int]] = {}
        for lane, n, row, ch, _lo in self.e_table(sel, layout):
            out.setdefault((int(row), int(ch)), (int(lane), int(n)))
        return out

    def owner_array(self, sel: int, layout: Layout | None = None) -> np.ndarray:
        """[rows, chunks, 2] (lane, nibble); -1 where no lane covers (row, chunk)."""
        arr = np.full((self.rows, self.chunks_per_row, 2), -1, dtype=np.int64)
        for (r, c), (lane, n) in self.owner(sel, layout).items():
            if 0 <= r < self.rows and 0 <= c < self.chunks_per_row:
                arr[r, c] = (lane, n)
        return arr

    def a_table(self) -> np.ndarray:
        """Rows (lane, i, row, chunk, j, ccol) for every A element (numpy int64 [32 * a_elems, 6])."""
        if "a" not in self._cache:
            lane, i = np.meshgrid(np.arange(LANES), np.arange(self.a_elems), indexing="ij")
            env = {"lane": lane, "i": i}
            row = np.broadcast_to(self.afrag.row.eval(env), lane.shape)
            first = np.broadcast_to(self.afrag.firstcol.eval(env), lane.shape)
            # rank of i among the lane's elements with the same (row, firstcol), in register order
            rank = np.zeros_like(lane)
            for ii in range(self.a_elems):
                same = (row[:, :ii] == row[:, ii:ii + 1]) & (first[:, :ii] == first[:, ii:ii + 1])
                rank[:, ii] = same.sum(axis=1)
            w, s = self.gran.width, self.gran.stored
            chunk = first // w + rank // s
            j = rank % s
            ccol = (first // w) * s + rank
            tab = np.stack([lane, i, row, chunk, j, ccol], axis=-1).reshape(-1, 6)
            self._cache["a"] = tab.astype(np.int64)
        return self._cache["a"]

    def a_slots(self) -> np.ndarray:
        """[rows, chunks, stored, 2] -> (lane, i) of each stored element (-1 if none)."""
        if "slots" not in self._cache:
            arr = np.full((self.rows, self.chunks_per_row, self.gran.stored, 2), -1, dtype=np.int64)
            for lane, i, row, ch, j, _c in self.a_table():
                arr[row, ch, j] = (lane, i)
            self._cache["slots"] = arr
        return self._cache["slots"]


def meta(form: Form | str) -> FormMeta:
    """The metadata spec of a sparse form (an opcode string is parsed)."""
    if isinstance(form, str):
        form = parse(form)
    if not form.is_sparse:
        raise NotSparseForm(f"{form.opcode} is not a sparse mma (mma.sp / mma.sp::ordered_metadata): it has no metadata")
    return _meta(form)


@lru_cache(maxsize=None)
def _meta(form: Form) -> FormMeta:
    s = _spec()
    gran = _one("granularity", form, s["granularity"])
    rules = tuple(r for grans, variants, r in s["rule"] if gran.id in grans and form.sparsity in variants)
    if not rules:
        raise SpecError(f"specs/metadata.toml: no [[rule]] for granularity {gran.id} / {form.sparsity}")
    layout = _one("layout", form, s["layout"])
    afrag = _one("a_fragment", form, s["a_fragment"])
    op = form.operands["a"]
    return FormMeta(form, gran, rules, layout, afrag, op.count * op.elems_per_reg)


def check_selector(fm: FormMeta, sel: int) -> None:
    """Raise BadArgument unless ``sel`` is a legal selector of the form."""
    if sel not in fm.selectors:
        raise BadArgument(f"selector {sel} is not legal for {fm.form.opcode}: legal values {list(fm.selectors)} "
                          f"(PTX ISA 9.7.14.6.1; any other value is undefined behaviour)")
