"""wmma.load / wmma.store memory semantics, compiled from ``specs/wmma_memory.toml``.

Everything PTX-specific (dimensions, leading dimension, element index, element size,
alignment and stride rules, state spaces) is read from the spec; this module only
evaluates those formulas two independent ways -- with Python integers (enumeration) and
as Z3 bit-vector terms -- and insists that both agree.

Worked example (the ISA's own, 9.7.14.4.2)::

    >>> r = check_access("wmma.load.a.sync.aligned.row.m16n16k16.f16", ptr=0x1000, stride=24)
    >>> r.legal, r.violations[0].rule, r.violations[0].witness["ld"]
    (False, 'align.row_start', 1)
    >>> legal_strides("wmma.load.a.sync.aligned.row.m16n16k16.f16", ptr_align=32).text
    'stride ≡ 0 (mod 16), stride ≥ 16'

Bit-vectors are :data:`WIDTH` bits wide: 8 * ptr needs 67 bits and ld * stride * elem_bits
43, so no term can wrap; ptr < 2**64 and stride < 2**32 are asserted as domain
constraints.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np
import z3

from .. import catalog as cat
from ..catalog import BadArgument, Form
from ..expr import Formula
from ..specdata import load_spec
from .results import PROVED, REFUTED, UNKNOWN, Result, check_negation, model_value

WIDTH = 80
PTR_LIMIT = 1 << 64
STRIDE_LIMIT = 1 << 32
READINGS = ("registers", "elements")


# ----------------------------------------------------------------------------------
# spec

@dataclass(frozen=True)
class _Layout:
    layout: str
    ld: Formula
    pos: Formula
    ld_size: Formula
    n_ld: Formula
    index: Formula
    section: str


@dataclass(frozen=True)
class _Rule:
    id: str
    kind: str
    holds: Formula
    forall: str | None
    message: str
    section: str
    text: str


@dataclass(frozen=True)
class MemorySpec:
    raw: dict
    dims: dict[str, tuple[str, str]]
    layouts: dict[str, _Layout]
    element_bits: dict[str, int]
    address: dict[str, Formula]
    fragment_bytes: dict[str, Formula]
    default_reading: str
    rules: tuple[_Rule, ...]
    alignment_example: Formula
    spaces: dict[str, dict]
    windows: tuple[str, ...]
    errata: tuple[dict, ...]

    def rule(self, rid: str) -> _Rule:
        for r in self.rules:
            if r.id == rid:
                return r
        raise KeyError(rid)

    def erratum(self, eid: str) -> dict:
        for e in self.errata:
            if e["id"] == eid:
                return e
        raise KeyError(eid)


@lru_cache(maxsize=1)
def spec() -> MemorySpec:
    d = load_spec("wmma_memory")
    layouts = {}
    for e in d["layout"]:
        layouts[e["layout"]] = _Layout(e["layout"], Formula(e["ld"]), Formula(e["pos"]), Formula(e["ld_size"]),
                                       Formula(e["n_ld"]), Formula(e["index"]), e.get("section", d["section"]))
    addr = {k: Formula(v) for k, v in d["address"].items() if k != "section"}
    fb = {k: Formula(v) for k, v in d["fragment_bytes"].items() if k not in ("section", "default")}
    rules = tuple(_Rule(r["id"], r["kind"], Formula(r["holds"]), r.get("forall"), r["message"], r["section"], r["text"])
                  for r in d["rule"])
    return MemorySpec(d, {k: (v["rows"], v["cols"]) for k, v in d["dims"].items()}, layouts,
                      {k: int(v) for k, v in d["element_bits"].items()}, addr, fb,
                      d["fragment_bytes"].get("default", "registers"), rules,
                      Formula(d["alignment_example"]["holds"]),
                      {s["space"]: s for s in d["space"]}, tuple(d["windows"]["names"]), tuple(d.get("erratum", ())))


# ----------------------------------------------------------------------------------
# the memory view of one form

@dataclass(frozen=True)
class MemoryView:
    """What a wmma.load/.store form does to memory, with every quantity from the specs."""

    form: Form
    matrix: str          # a, b, c (loads) or d (store)
    etype: str
    layout: str          # row | col
    space: str           # '' (generic), global, shared, shared::cta
    rows: int
    cols: int
    ld_size: int         # elements per instance of the leading dimension
    n_ld: int            # instances of the leading dimension
    elem_bits: int
    regs: int
    reg_bits: int
    elems_per_reg: int
    default_stride: int

    @property
    def opcode(self) -> str:
        return self.form.opcode

    @property
    def ld_name(self) -> str:
        return "row" if self.layout == "row" else "column"

    def frag_bytes(self, reading: str | None = None) -> int:
        reading = reading or spec().default_reading
        if reading not in spec().fragment_bytes:
            raise BadArgument(f"unknown reading {reading!r} of 'fragment size'; known: {', '.join(spec().fragment_bytes)}")
        return int(spec().fragment_bytes[reading].eval(self.base_env()))

    def base_env(self) -> dict[str, int]:
        return {"rows": self.rows, "cols": self.cols, "ld_size": self.ld_size, "n_ld": self.n_ld,
                "elem_bits": self.elem_bits, "regs": self.regs, "reg_bits": self.reg_bits,
                "default_stride": self.default_stride}

    def env(self, ptr, stride, frag_bytes: int, **more) -> dict[str, Any]:
        e: dict[str, Any] = dict(self.base_env(), ptr=ptr, stride=stride, frag_bytes=frag_bytes)
        e.update(more)
        for k in ("first_byte", "end_byte"):
            e[k] = spec().address[k].eval(e)
        return e

    # -- addresses ---------------------------------------------------------------
    def index(self, row, col, stride):
        return spec().layouts[self.layout].index.eval({"row": row, "col": col, "stride": stride})

    def ld_pos(self, row, col) -> tuple[Any, Any]:
        lay = spec().layouts[self.layout]
        env = {"row": row, "col": col}
        return lay.ld.eval(env), lay.pos.eval(env)

    def address(self, row: int, col: int, ptr: int = 0, stride: int | None = None) -> dict[str, int]:
        """Index, byte, bit-in-byte and bit address of element (row, col)."""
        stride = self.default_stride if stride is None else stride
        idx = int(self.index(row, col, stride))
        env = dict(self.base_env(), ptr=ptr, stride=stride, index=idx)
        out = {"index": idx}
        for k in ("byte", "bit_in_byte", "bit", "bit_msb_first"):
            out[k] = int(spec().address[k].eval(env))
        return out

    def cells(self) -> list[tuple[int, int]]:
        """Every (row, col), ordered by (instance of the leading dimension, position)."""
        out = [(r, c) for r in range(self.rows) for c in range(self.cols)]
        return sorted(out, key=lambda rc: tuple(int(x) for x in self.ld_pos(*rc)))

    def footprint_elements(self, stride: int | None = None) -> int:
        """Element slots from the base pointer to the end of the last instance."""
        stride = self.default_stride if stride is None else stride
        return (self.n_ld - 1) * stride + self.ld_size

    def describe(self) -> dict:
        return {"opcode": self.opcode, "matrix": self.matrix, "type": self.etype, "layout": self.layout,
                "space": self.space or "generic", "rows": self.rows, "cols": self.cols,
                "leading_dimension": self.ld_name, "ld_size": self.ld_size, "n_ld": self.n_ld,
                "elem_bits": self.elem_bits, "regs": self.regs, "reg_bits": self.reg_bits,
                "default_stride": self.default_stride,
                "fragment_bytes": {r: self.frag_bytes(r) for r in READINGS},
                "index": str(spec().layouts[self.layout].index)}


def _form_of(opcode: str | Form) -> Form:
    form = opcode if isinstance(opcode, Form) else cat.parse(opcode)
    if form.family not in ("wmma.load", "wmma.store"):
        raise BadArgument(f"{form.opcode} is not a wmma.load or wmma.store form (memory semantics apply to those only)")
    if not cat.is_documented(form):
        why = cat.legality(form).reasons
        raise BadArgument(f"{form.opcode} is not a documented wmma form: {why[0].message if why else 'no syntax block matches'}")
    return form


@lru_cache(maxsize=None)
def _view(form: Form) -> MemoryView:
    sp = spec()
    etype = {"a": form.atype, "b": form.btype, "c": form.ctype, "d": form.dtype}[form.matrix]
    m, n, k = form.mnk
    dimv = {"m": m, "n": n, "k": k}
    rname, cname = sp.dims[form.matrix]
    rows, cols = dimv[rname], dimv[cname]
    lay = sp.layouts[form.layout]
    env = {"rows": rows, "cols": cols}
    op = form.operands["r"]
    if etype not in sp.element_bits:
        raise BadArgument(f"no memory element size for .{etype} in specs/wmma_memory.toml")
    return MemoryView(form, form.matrix, etype, form.layout, form.space or "", rows, cols,
                      int(lay.ld_size.eval(env)), int(lay.n_ld.eval(env)), sp.element_bits[etype],
                      op.count, op.reg_bits, op.elems_per_reg, int(cat.default_stride(form)))


def memory_view(opcode: str | Form) -> MemoryView:
    """The memory view of a documented wmma.load/.store form (BadArgument otherwise)."""
    return _view(_form_of(opcode))


def memory_forms(target: str | None = None, ptx: str | None = None) -> list[MemoryView]:
    fs = cat.forms(target, ptx, "wmma")
    return [memory_view(f) for f in fs if f.family in ("wmma.load", "wmma.store")]


# ----------------------------------------------------------------------------------
# Z3 helpers

def _bv(name: str) -> z3.BitVecRef:
    return z3.BitVec(name, WIDTH)


@lru_cache(maxsize=65536)
def _val_cached(x: int) -> z3.BitVecRef:
    return z3.BitVecVal(x, WIDTH)


def _val(x: int) -> z3.BitVecRef:
    # cached: the same few constants (sizes, strides) go into every query
    return _val_cached(int(x))


def _zenv(view: MemoryView, ptr, stride, frag_bytes: int, **more) -> dict:
    e: dict[str, Any] = {k: _val(v) for k, v in view.base_env().items()}
    e["ptr"] = ptr if isinstance(ptr, z3.ExprRef) else _val(ptr)
    e["stride"] = stride if isinstance(stride, z3.ExprRef) else _val(stride)
    e["frag_bytes"] = _val(frag_bytes)
    for k, v in more.items():
        e[k] = v if isinstance(v, z3.ExprRef) else _val(v)
    for k in ("first_byte", "end_byte"):
        e[k] = spec().address[k].z3(e, WIDTH)
    return e


def _as_bool(t) -> z3.BoolRef:
    return t if isinstance(t, z3.BoolRef) else (t != 0)


def rule_z3(view: MemoryView, rule: _Rule, ptr, stride, frag_bytes: int, ld=None) -> z3.BoolRef:
    """The rule's `holds` formula as a Z3 Boolean (for one instance `ld` when the rule is per-instance)."""
    more = {"ld": ld} if ld is not None else {}
    return _as_bool(rule.holds.z3(_zenv(view, ptr, stride, frag_bytes, **more), WIDTH))


def rule_all_z3(view: MemoryView, rule: _Rule, ptr, stride, frag_bytes: int) -> z3.BoolRef:
    """The rule for every instance of the leading dimension (unrolled: n_ld <= 32)."""
    if rule.forall == "ld":
        return z3.And(*[rule_z3(view, rule, ptr, stride, frag_bytes, ld) for ld in range(view.n_ld)])
    return rule_z3(view, rule, ptr, stride, frag_bytes)


def legal_z3(view: MemoryView, ptr, stride, frag_bytes: int, rules: Sequence[str] | None = None) -> z3.BoolRef:
    """Conjunction of the spec's rules (all of them unless `rules` names some)."""
    sel = [r for r in spec().rules if rules is None or r.id in rules]
    return z3.And(*[rule_all_z3(view, r, ptr, stride, frag_bytes) for r in sel])


def _rule_py(view: MemoryView, rule: _Rule, ptr: int, stride: int, frag_bytes: int, ld: int | None = None) -> bool:
    more = {"ld": ld} if ld is not None else {}
    return bool(rule.holds.eval(view.env(ptr, stride, frag_bytes, **more)))


def legal_np(view: MemoryView, ptr: np.ndarray, stride: np.ndarray, frag_bytes: int,
             rules: Sequence[str] | None = None) -> np.ndarray:
    """:func:`legal_py` on whole int64 arrays of pointers and strides at once (the same formulas,
    evaluated elementwise: the enumeration cross-checks run one call per form, not one per point)."""
    ptr, stride = np.broadcast_arrays(np.asarray(ptr, np.int64), np.asarray(stride, np.int64))
    ok = np.ones(ptr.shape, bool)
    for r in spec().rules:
        if rules is not None and r.id not in rules:
            continue
        for ld in (range(view.n_ld) if r.forall == "ld" else (None,)):
            more = {"ld": ld} if ld is not None else {}
            ok &= np.asarray(r.holds.eval(view.env(ptr, stride, frag_bytes, **more)), bool)
    return ok


def legal_py(view: MemoryView, ptr: int, stride: int, frag_bytes: int, rules: Sequence[str] | None = None) -> bool:
    if not any("ld" in spec().address[k].names for k in ("first_byte", "end_byte")):
        # the address terms do not depend on the instance: one environment for every rule and
        # instance (the same values as one view.env per formula, built once)
        e = view.env(ptr, stride, frag_bytes)
        for r in spec().rules:
            if rules is not None and r.id not in rules:
                continue
            for ld in (range(view.n_ld) if r.forall == "ld" else (None,)):
                if ld is None:
                    e.pop("ld", None)
                else:
                    e["ld"] = ld
                if not r.holds.eval(e):
                    return False
        return True
    for r in spec().rules:
        if rules is not None and r.id not in rules:
            continue
        if r.forall == "ld":
            if not all(_rule_py(view, r, ptr, stride, frag_bytes, ld) for ld in range(view.n_ld)):
                return False
        elif not _rule_py(view, r, ptr, stride, frag_bytes):
            return False
    return True


# ----------------------------------------------------------------------------------
# check_access

@dataclass
class Violation:
    rule: str
    kind: str
    message: str
    section: str
    text: str
    witness: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class AccessResult:
    opcode: str
    ptr: int
    stride: int
    stride_given: bool
    default_stride: int
    reading: str
    frag_bytes: int
    footprint: tuple[int, int]          # [first byte, end byte)
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked_by: list[str] = field(default_factory=list)
    view: MemoryView | None = None

    @property
    def legal(self) -> bool:
        return not self.violations

    def __bool__(self) -> bool:
        return self.legal

    def to_dict(self) -> dict:
        return {"opcode": self.opcode, "legal": self.legal, "ptr": self.ptr, "ptr_hex": hex(self.ptr),
                "stride": self.stride, "stride_given": self.stride_given, "default_stride": self.default_stride,
                "reading": self.reading, "fragment_bytes": self.frag_bytes,
                "footprint": {"first_byte": self.footprint[0], "end_byte": self.footprint[1]},
                "violations": [v.to_dict() for v in self.violations], "notes": self.notes,
                "checked_by": self.checked_by,
                "form": self.view.describe() if self.view else None}

    def text(self) -> str:
        v = self.view
        lines = [self.opcode]
        s = f"stride {self.stride}" + ("" if self.stride_given else f" (omitted: default {self.default_stride})")
        lines.append(f"  {'LEGAL' if self.legal else 'UNDEFINED BEHAVIOUR'}: ptr {hex(self.ptr)}, {s}, "
                     f"fragment size {self.frag_bytes} bytes ({self.reading} reading)")
        if v is not None:
            lines.append(f"  {v.rows}x{v.cols} .{v.etype}, {v.layout}-major: element (row, col) at index "
                         f"{spec().layouts[v.layout].index}, {v.elem_bits} bits each; "
                         f"bytes [{hex(self.footprint[0])}, {hex(self.footprint[1])})")
        for x in self.violations:
            lines.append(f"  - [{x.rule}] {x.message}  [PTX ISA {x.section}]")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


def _check_int(name: str, x: Any, limit: int | None) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise BadArgument(f"{name} must be an integer, got {x!r}")
    x = int(x)
    if x < 0:
        raise BadArgument(f"{name} must be non-negative, got {x}")
    if limit is not None and x >= limit:
        raise BadArgument(f"{name} {hex(x)} does not fit in {limit.bit_length() - 1} bits")
    return x


def _first_misaligned(view: MemoryView, rule: _Rule, ptr: int, stride: int, fb: int) -> tuple[int | None, int | None]:
    """(by enumeration, by Z3) the smallest instance index whose start violates `rule`."""
    enum = next((ld for ld in range(view.n_ld) if not _rule_py(view, rule, ptr, stride, fb, ld)), None)
    ld = _bv("ld")
    o = z3.Optimize()
    o.add(z3.ULT(ld, _val(view.n_ld)), z3.Not(rule_z3(view, rule, ptr, stride, fb, ld)))
    h = o.minimize(ld)
    r = o.check()
    if r == z3.sat:
        zz = model_value(o.model(), ld)
    elif r == z3.unsat:
        zz = None
    else:  # pragma: no cover - constant problem; z3 does not give up on it
        raise RuntimeError(f"z3 could not decide {rule.id} for {view.opcode}")
    del h
    return enum, zz


def overlap_witness(view: MemoryView, stride: int) -> tuple[dict | None, dict | None]:
    """Two distinct cells at the same element index (enumeration, Z3), smallest index first.

    Cells are ordered by (instance, position); the witness is the pair with the smallest
    shared index and, among those, the smallest second instance.
    """
    # enumeration
    seen: dict[int, tuple[int, int]] = {}
    hits = []
    for (r, c) in view.cells():
        i = int(view.index(r, c, stride))
        if i in seen:
            hits.append((i, int(view.ld_pos(r, c)[0]), seen[i], (r, c)))
        else:
            seen[i] = (r, c)
    enum = None
    if hits:
        i, _, a, b = min(hits)
        enum = {"index": i, "cells": [list(a), list(b)]}
    # Z3: the enumeration's pair is an overlap and no pair is smaller in the order
    # (index, second instance, second position, first instance) -- two plain satisfiability
    # queries; the lexicographic optimum is the same pair (index, instance and position fix a
    # cell), and only where they fail does the optimiser (slower) give Z3's own minimum
    r1, c1, r2, c2, i1, l1, p1, l2, p2, cons = _overlap_terms(view, stride)
    key = (i1, l2, p2, l1)
    if enum is None:
        s = z3.Solver()
        s.add(*cons)
        if s.check() == z3.unsat:
            return enum, None
    else:
        (ra, ca), (rb, cb) = enum["cells"]
        pin = [r1 == _val(ra), c1 == _val(ca), r2 == _val(rb), c2 == _val(cb)]
        s = z3.Solver()
        s.add(*cons, *pin)
        if s.check() == z3.sat:
            m = s.model()
            found = [model_value(m, t) for t in key]
            below = z3.Solver()
            below.add(*cons, _lex_less(key, found))
            if below.check() == z3.unsat:
                return enum, {"index": found[0],
                              "cells": [[model_value(m, r1), model_value(m, c1)], [model_value(m, r2), model_value(m, c2)]]}
    return enum, _overlap_witness_optimize(view, stride)


def _overlap_terms(view: MemoryView, stride: int):
    """Z3 terms of two cells (r1, c1) and (r2, c2), their indices, instances and positions, and
    the constraints: both in range, same index, the second later in (instance, position) order."""
    lay = spec().layouts[view.layout]
    r1, c1, r2, c2 = (_bv(n) for n in ("r1", "c1", "r2", "c2"))
    st = _val(stride)
    i1 = lay.index.z3({"row": r1, "col": c1, "stride": st}, WIDTH)
    i2 = lay.index.z3({"row": r2, "col": c2, "stride": st}, WIDTH)
    l1 = lay.ld.z3({"row": r1, "col": c1}, WIDTH)
    p1 = lay.pos.z3({"row": r1, "col": c1}, WIDTH)
    l2 = lay.ld.z3({"row": r2, "col": c2}, WIDTH)
    p2 = lay.pos.z3({"row": r2, "col": c2}, WIDTH)
    cons = [z3.ULT(r1, _val(view.rows)), z3.ULT(c1, _val(view.cols)), z3.ULT(r2, _val(view.rows)),
            z3.ULT(c2, _val(view.cols)), i1 == i2, z3.Or(z3.ULT(l1, l2), z3.And(l1 == l2, z3.ULT(p1, p2)))]
    return r1, c1, r2, c2, i1, l1, p1, l2, p2, cons


def _lex_less(terms, values) -> z3.BoolRef:
    """terms < values in lexicographic (unsigned) order."""
    (t, v), rest = (terms[0], values[0]), (terms[1:], values[1:])
    if not rest[0]:
        return z3.ULT(t, _val(v))
    return z3.Or(z3.ULT(t, _val(v)), z3.And(t == _val(v), _lex_less(*rest)))


def _overlap_witness_optimize(view: MemoryView, stride: int) -> dict | None:
    """Z3's own lexicographic minimum (nested minimisations): the reference for the faster queries."""
    r1, c1, r2, c2, i1, l1, p1, l2, p2, cons = _overlap_terms(view, stride)
    o = z3.Optimize()
    o.add(*cons)
    # the second cell is the one found later in (instance, position) order, as in the enumeration
    o.minimize(i1)
    o.minimize(l2)
    o.minimize(p2)
    o.minimize(l1)
    zz = None
    if o.check() == z3.sat:
        m = o.model()
        zz = {"index": model_value(m, i1),
              "cells": [[model_value(m, r1), model_value(m, c1)], [model_value(m, r2), model_value(m, c2)]]}
    return zz


def _space_checks(view: MemoryView, points_to: str | None) -> tuple[list[Violation], list[str]]:
    sp = spec()
    ent = sp.spaces[view.space]
    allowed = list(ent["points_to"])
    out: list[Violation] = []
    notes: list[str] = []
    if points_to is None:
        if view.space == "":
            notes.append("generic addressing: the address must point to the .global or .shared window "
                         "(pass points_to / --points-to to check it)")
        return out, notes
    if points_to not in sp.windows:
        raise BadArgument(f"unknown state-space window {points_to!r}; known: {', '.join(sp.windows)}")
    if points_to not in allowed:
        rid = "space.generic_target" if view.space == "" else "space.window"
        msg = (f"a generic address into the .{points_to} window" if view.space == ""
               else f"a {ent['name']} access through an address in the .{points_to} window")
        out.append(Violation(rid, "space", f"{msg}: {ent['name']} accesses may only reach {', '.join('.' + a for a in allowed)}",
                             ent["section"], "wmma.load operation may be used only with .global and .shared spaces and "
                             "with generic addressing, where the address points to .global or .shared space.",
                             {"points_to": points_to}))
        if points_to == "shared::cluster":
            notes.append("ambiguous in the text (erratum generic-shared-cluster): " + sp.erratum("generic-shared-cluster")["question"])
    return out, notes


def _fragment_size(view, reading: str, fragment_bytes) -> tuple[str, int]:
    """(reading, fragment size in bytes): the reading's size, or an explicit ``fragment_bytes``."""
    if fragment_bytes is None:
        return reading, view.frag_bytes(reading)
    fb = _check_int("fragment_bytes", fragment_bytes, None)
    if fb == 0:
        raise BadArgument("fragment_bytes must be positive")
    return f"fragment_bytes={fb}", fb


def check_access(opcode: str | Form, ptr: int | Sequence[int], stride: int | Sequence[int] | None = None, *,
                 reading: str | None = None, fragment_bytes: int | None = None,
                 points_to: str | None = None) -> AccessResult:
    """Is ``[ptr], stride`` a defined memory access for this wmma.load/.store form?

    ``stride=None`` means the operand is omitted (the default stride).  ``ptr``/``stride``
    may also be 32 per-thread values (checks the uniformity rule).  ``reading`` picks the
    meaning of "fragment size" (``registers``, the ISA example's, or ``elements``);
    ``fragment_bytes`` overrides it with a number.  ``points_to`` names the window a
    generic address falls in (``global``, ``shared``, ``local``, ...).

    Every rule is decided by enumeration and by Z3; a disagreement raises RuntimeError.
    A violation names its rule and a witness: the first misaligned instance of the leading
    dimension, or two cells at the same address when the stride is below the default.
    """
    view = memory_view(opcode)
    sp = spec()
    uniform_v: list[Violation] = []
    vals = {}
    for nm, x, lim in (("ptr", ptr, PTR_LIMIT), ("stride", stride, None)):
        if x is not None and not isinstance(x, (int, np.integer)) and isinstance(x, Sequence):
            xs = [_check_int(nm, v, lim) for v in x]
            if len(xs) != 32:
                raise BadArgument(f"{nm} must be one value or 32 per-thread values, got {len(xs)}")
            bad = next((i for i, v in enumerate(xs) if v != xs[0]), None)
            if bad is not None:
                u = sp.raw["uniform"]
                uniform_v.append(Violation("uniform.operands", "uniform", f"{nm} differs between threads: lane 0 has "
                                           f"{hex(xs[0]) if nm == 'ptr' else xs[0]}, lane {bad} has {hex(xs[bad]) if nm == 'ptr' else xs[bad]}",
                                           u["section"], u["text"], {"operand": nm, "lanes": [0, bad]}))
            vals[nm] = xs[0]
        else:
            vals[nm] = None if x is None else _check_int(nm, x, lim)
    ptr_v = vals["ptr"]
    if ptr_v is None:
        raise BadArgument("ptr is required")
    stride_given = vals["stride"] is not None
    stride_v = vals["stride"] if stride_given else view.default_stride
    reading, fb = _fragment_size(view, reading or sp.default_reading, fragment_bytes)
    env = view.env(ptr_v, stride_v, fb)
    res = AccessResult(view.opcode, ptr_v, stride_v, stride_given, view.default_stride, reading, fb,
                       (int(env["first_byte"]), int(env["end_byte"])), list(uniform_v), view=view,
                       checked_by=["enumeration", "z3"])
    for rule in sp.rules:
        if rule.forall == "ld":
            enum, zz = _first_misaligned(view, rule, ptr_v, stride_v, fb)
            if enum != zz:
                raise RuntimeError(f"internal: enumeration ({enum}) and Z3 ({zz}) disagree on {rule.id} for {view.opcode}")
            if enum is not None:
                start_bit = 8 * ptr_v + enum * stride_v * view.elem_bits
                w = {"ld": enum, "leading_dimension": view.ld_name, "start_byte": start_bit // 8,
                     "start_bit_in_byte": start_bit % 8, "required_multiple": fb}
                start = hex(start_bit // 8) + (f"+{start_bit % 8} bits" if start_bit % 8 else "")
                msg = rule.message.format(ld=enum, ldname=view.ld_name, start=start, start_bit=start_bit,
                                          frag_bytes=fb)
                res.violations.append(Violation(rule.id, rule.kind, msg, rule.section, rule.text, w))
        else:
            py = _rule_py(view, rule, ptr_v, stride_v, fb)
            zs = z3.Solver()
            zs.add(z3.Not(rule_z3(view, rule, ptr_v, stride_v, fb)))
            zr = zs.check()
            if py != (zr == z3.unsat):
                raise RuntimeError(f"internal: enumeration and Z3 disagree on {rule.id} for {view.opcode}")
            if not py:
                w: dict = {"stride": stride_v, "default_stride": view.default_stride}
                if rule.id == "stride.min":
                    enum, zz = overlap_witness(view, stride_v)
                    if enum != zz:
                        raise RuntimeError(f"internal: overlap witness differs: enumeration {enum}, Z3 {zz}")
                    if enum is not None:
                        w["same_address"] = enum["cells"]
                        w["index"] = enum["index"]
                msg = rule.message.format(stride=stride_v, default_stride=view.default_stride)
                if "same_address" in w:
                    (a, b) = w["same_address"]
                    msg += f"; e.g. (row, col) = ({a[0]}, {a[1]}) and ({b[0]}, {b[1]}) are both element {w['index']}"
                res.violations.append(Violation(rule.id, rule.kind, msg, rule.section, rule.text, w))
    sv, notes = _space_checks(view, points_to)
    res.violations += sv
    res.notes += notes
    # does the verdict depend on the reading of "fragment size"?
    if fragment_bytes is None:
        rule = sp.rule("align.row_start")
        mine = all(_rule_py(view, rule, ptr_v, stride_v, fb, ld) for ld in range(view.n_ld))
        for other in READINGS:
            if other == reading:
                continue
            ofb = view.frag_bytes(other)
            theirs = all(_rule_py(view, rule, ptr_v, stride_v, ofb, ld) for ld in range(view.n_ld))
            if theirs != mine:
                res.notes.append(f"the alignment verdict depends on the reading of 'fragment size' (erratum fragment-size): "
                                 f"{'aligned' if theirs else 'misaligned'} under the '{other}' reading ({ofb} bytes)")
                if stride_v == view.default_stride and not mine:
                    res.notes.append("this is the default stride itself (a contiguous matrix): erratum default-stride-misaligned")
        if view.etype == "f64" and view.matrix in ("c", "d"):
            theirs = all(_rule_py(view, rule, ptr_v, stride_v, 8, ld) for ld in range(view.n_ld))
            if theirs != mine:
                res.notes.append("the alignment verdict depends on erratum f64-accumulator-registers: "
                                 f"{'aligned' if theirs else 'misaligned'} with the fragment table's single .f64 register (8 bytes)")
    if stride_given and stride_v >= 1 << 31 and stride_v < STRIDE_LIMIT:
        res.notes.append("stride >= 2^31: negative (undefined behaviour) if the 32-bit operand is read as signed "
                         "(erratum stride-signedness)")
    return res


# ----------------------------------------------------------------------------------
# legal strides as a set

@dataclass
class StrideSet:
    opcode: str
    base: str                      # "ptr ≡ 0 (mod A)" or "ptr = P"
    ptr_align: int | None
    ptr: int | None
    reading: str
    frag_bytes: int
    default_stride: int
    empty: bool
    modulus: int | None = None     # legal strides: s % modulus == 0 and minimum <= s < 2**32
    minimum: int | None = None
    witness: dict | None = None    # empty: a pointer that no stride can make legal
    proofs: list[Result] = field(default_factory=list)
    cross_check: dict | None = None

    @property
    def text(self) -> str:
        if self.empty:
            return "no stride is legal"
        return f"stride ≡ 0 (mod {self.modulus}), stride ≥ {self.minimum}"

    def contains(self, s: int) -> bool:
        return (not self.empty) and s % self.modulus == 0 and self.minimum <= s < STRIDE_LIMIT

    def to_dict(self) -> dict:
        return {"opcode": self.opcode, "base": self.base, "ptr_align": self.ptr_align, "ptr": self.ptr,
                "reading": self.reading, "fragment_bytes": self.frag_bytes, "default_stride": self.default_stride,
                "empty": self.empty, "modulus": self.modulus, "minimum": self.minimum,
                "smallest_legal": (None if self.empty else self.modulus * math.ceil(self.minimum / self.modulus)),
                "maximum": None if self.empty else STRIDE_LIMIT - 1, "text": self.text, "witness": self.witness,
                "proofs": [p.to_dict() for p in self.proofs], "cross_check": self.cross_check}


_SET_RULES = ("align.row_start", "stride.min", "stride.width")   # footprint overflow is the caller's business


def legal_strides(opcode: str | Form, ptr_align: int | None = None, ptr: int | None = None, *,
                  reading: str | None = None, fragment_bytes: int | None = None,
                  enumerate_strides: int = 2048, enumerate_ptrs: int = 8, timeout_ms: int = 60000) -> StrideSet:
    """The set of strides legal for EVERY pointer that is a multiple of ``ptr_align``
    (or for the one pointer ``ptr``), derived by Z3 and cross-checked by enumeration.

    Derivation: (1) if some admissible pointer misaligns instance 0, no stride helps: the
    set is empty (Z3 proves it for all strides, with a minimal witness pointer); (2) else Z3
    finds the smallest positive stride g satisfying the alignment rule and (3) proves, for
    all admissible pointers and all 32-bit strides s, legal(ptr, s) <=> s % g == 0 and
    s >= default.  The footprint-overflow rule (ptr.width) is left out: the set assumes
    the matrix fits below 2**64.
    """
    view = memory_view(opcode)
    sp = spec()
    if (ptr_align is None) == (ptr is None):
        raise BadArgument("give exactly one of ptr_align (pointer known to be a multiple of it) or ptr")
    if ptr_align is not None:
        ptr_align = _check_int("ptr_align", ptr_align, PTR_LIMIT)
        if ptr_align == 0:
            raise BadArgument("ptr_align must be positive")
    if ptr is not None:
        ptr = _check_int("ptr", ptr, PTR_LIMIT)
    reading, fb = _fragment_size(view, reading or sp.default_reading, fragment_bytes)
    q = _bv("q")
    s = _bv("stride")
    if ptr_align is not None:
        p = ptr_align * q if ptr_align != 1 else q
        dom = [z3.ULT(q, _val(PTR_LIMIT)), z3.ULT(p, _val(PTR_LIMIT))]
        base = f"ptr ≡ 0 (mod {ptr_align})"
    else:
        p = _val(ptr)
        dom = []
        base = f"ptr = {hex(ptr)}"
    sdom = [z3.ULT(s, _val(STRIDE_LIMIT))]
    out = StrideSet(view.opcode, base, ptr_align, ptr, reading, fb, view.default_stride, False)
    align = sp.rule("align.row_start")
    name = f"wmma.strides[{view.opcode}, {base}, {reading}]"

    # (1) can instance 0 be misaligned?  (it does not depend on the stride)
    r0 = rule_z3(view, align, p, _val(0), fb, _val(0))
    o = z3.Optimize()
    o.add(*dom, z3.Not(r0))
    o.minimize(q if ptr_align is not None else _val(0))
    if o.check() == z3.sat:
        m = o.model()
        wp = model_value(m, p) if ptr_align is not None else ptr
        out.empty = True
        out.witness = {"ptr": wp, "ptr_hex": hex(wp), "reason": f"instance 0 (the base pointer) is not a multiple of {fb} bytes"}
        # prove: no stride is legal for that pointer
        pr = check_negation(name + ".empty", f"no 32-bit stride makes ptr {hex(wp)} legal for {view.opcode}",
                            sdom + [legal_z3(view, _val(wp), s, fb, _SET_RULES)], {"stride": s}, timeout_ms)
        out.proofs.append(pr)
    else:
        # (2) smallest positive stride meeting the alignment rule (pointer: any admissible one)
        o = z3.Optimize()
        pick = [z3.ULT(q, _val(PTR_LIMIT)), z3.ULT(p, _val(PTR_LIMIT))] if ptr_align is not None else []
        o.add(*pick, *sdom, z3.UGE(s, _val(1)), rule_all_z3(view, align, p, s, fb))
        o.minimize(s)
        if o.check() != z3.sat:  # pragma: no cover - 8 * frag_bytes always works
            raise RuntimeError(f"internal: no positive stride aligns {view.opcode}")
        g = model_value(o.model(), s)
        out.modulus, out.minimum = g, view.default_stride
        claim = z3.And(z3.URem(s, _val(g)) == 0, z3.UGE(s, _val(view.default_stride)))
        # (3) for all admissible pointers and strides: legal <=> claim
        pr = check_negation(name, f"for every {base} and 32-bit stride s: {view.opcode} is legal <=> "
                                  f"s % {g} == 0 and s >= {view.default_stride}",
                            dom + sdom + [legal_z3(view, p, s, fb, _SET_RULES) != claim],
                            {"ptr": p, "stride": s}, timeout_ms)
        out.proofs.append(pr)
        if not pr.proved:
            out.empty = False
            out.modulus = out.minimum = None
    # enumeration cross-check
    ptrs = [ptr] if ptr is not None else [ptr_align * k for k in range(enumerate_ptrs) if ptr_align * k < PTR_LIMIT]
    bad = []
    for pp in ptrs:
        for ss in range(enumerate_strides):
            got = legal_py(view, pp, ss, fb, _SET_RULES)
            want = out.contains(ss) if not out.empty else False
            if out.empty and pp != (out.witness or {}).get("ptr"):
                continue   # an empty set only claims: some admissible pointer admits no stride
            if got != want:
                bad.append({"ptr": pp, "stride": ss, "legal": got})
                if len(bad) > 5:
                    break
    if out.empty:
        ptrs = [out.witness["ptr"]]
    out.cross_check = {"ptrs": ptrs[:8], "strides": [0, enumerate_strides], "agrees": not bad, "mismatches": bad}
    if bad:
        raise RuntimeError(f"internal: enumeration disagrees with the derived stride set for {view.opcode}: {bad[:3]}")
    return out


# ----------------------------------------------------------------------------------
# per-form obligations about the rules themselves

def prove_align_readings_agree(view: MemoryView, reading: str | None = None, timeout_ms: int = 60000) -> Result:
    """The per-instance rule <=> the worked example's two conditions, for all ptr and stride."""
    fb = view.frag_bytes(reading)
    ptr, s = _bv("ptr"), _bv("stride")
    per_row = rule_all_z3(view, spec().rule("align.row_start"), ptr, s, fb)
    example = _as_bool(spec().alignment_example.z3(_zenv(view, ptr, s, fb), WIDTH))
    res = check_negation(f"wmma.align_readings_agree[{view.opcode}, {reading or spec().default_reading}]",
                         f"for every 64-bit ptr and 32-bit stride: each of the {view.n_ld} {view.ld_name} starts is a "
                         f"multiple of {fb} bytes <=> ptr % {fb} == 0 and stride * {view.elem_bits} bits is a multiple of {fb} bytes",
                         [z3.ULT(ptr, _val(PTR_LIMIT)), z3.ULT(s, _val(STRIDE_LIMIT)), per_row != example],
                         {"ptr": ptr, "stride": s}, timeout_ms)
    # enumeration over a small window of pointers and strides
    pp, ss = np.meshgrid(np.arange(0, 4 * fb + 1, max(1, fb // 4)), np.arange(0, 4 * view.default_stride + 64),
                         indexing="ij")
    a = legal_np(view, pp, ss, fb, ("align.row_start",))
    b = np.broadcast_to(np.asarray(spec().alignment_example.eval(view.env(pp, ss, fb)), bool), a.shape)
    bad = [(int(x), int(y)) for x, y in zip(pp[a != b], ss[a != b])]
    res.cross_check = {"agrees": not bad, "domain": "ptr in [0, 4*F] step F/4, stride in [0, 4*default+64)", "mismatches": bad[:5]}
    return res


def _cell(view: MemoryView, ld, pos) -> tuple[Any, Any]:
    """(row, col) of position `pos` of instance `ld` (the spec's ld/pos are the names row/col)."""
    lay = spec().layouts[view.layout]
    names = (lay.ld.src.strip(), lay.pos.src.strip())
    if sorted(names) != ["col", "row"]:  # pragma: no cover - guards a spec edit this helper cannot follow
        raise RuntimeError(f"layout {view.layout}: ld/pos must be the names row/col, got {names}")
    return (ld, pos) if names[0] == "row" else (pos, ld)


def prove_overlap_iff_below_default(view: MemoryView, timeout_ms: int = 60000) -> Result:
    """Two distinct cells share an element index <=> stride < the leading-dimension size (= default).

    Two quantifier-free halves: (i) stride >= default -> the index map is injective on the
    matrix; (ii) stride < default -> position `stride` of instance 0 and position 0 of
    instance 1 are two in-bounds cells at index `stride`.  The spec's index formula is
    evaluated on unbounded Z3 integers (exact; it only uses + and *): the 80-bit
    bit-vector multiplier of a symbolic row by a symbolic stride does not finish, while
    Z3's nonlinear integer arithmetic proves (i) in well under a second.
    """
    lay = spec().layouts[view.layout]
    r1, c1, r2, c2, s = z3.Ints("r1 c1 r2 c2 stride")

    def idx(r, c):
        # case split on the leading-dimension instance (an in-bounds value, so the split is
        # exact): each case is linear in the stride, which Z3 decides far faster than the
        # nonlinear product of two symbolic integers
        ld, pos = (r, c) if _cell(view, "ld", "pos")[0] == "ld" else (c, r)
        out = None
        for k in reversed(range(view.n_ld)):
            rc = _cell(view, z3.IntVal(k), pos)
            v = lay.index.eval({"row": rc[0], "col": rc[1], "stride": s})
            out = v if out is None else z3.If(ld == k, v, out)
        return out
    inb = lambda r, c: z3.And(r >= 0, c >= 0, r < view.rows, c < view.cols)  # noqa: E731
    sdom = z3.And(s >= 0, s < STRIDE_LIMIT)
    name = f"wmma.overlap_iff_below_default[{view.opcode}]"
    stmt = (f"for every 32-bit stride: two distinct cells of the {view.rows}x{view.cols} matrix share an address "
            f"<=> stride < {view.default_stride} (the default stride)")
    inj = check_negation(name + ".injective", stmt,
                         [sdom, s >= view.default_stride, inb(r1, c1), inb(r2, c2), z3.Or(r1 != r2, c1 != c2),
                          idx(r1, c1) == idx(r2, c2)],
                         {"stride": s, "r1": r1, "c1": c1, "r2": r2, "c2": c2}, timeout_ms)
    (ra, ca), (rb, cb) = _cell(view, z3.IntVal(0), s), _cell(view, z3.IntVal(1), z3.IntVal(0))
    wit = check_negation(name + ".witness", stmt,
                         [sdom, s < view.default_stride, z3.Not(z3.And(inb(ra, ca), inb(rb, cb), idx(ra, ca) == idx(rb, cb)))],
                         {"stride": s}, timeout_ms)
    status = PROVED if (inj.proved and wit.proved) else (REFUTED if REFUTED in (inj.status, wit.status) else UNKNOWN)
    res = Result(name, stmt, status, inj.solver, inj.time_s + wit.time_s, inj.witness or wit.witness,
                 (inj.smt2 or "") + "\n; ---- second half ----\n" + (wit.smt2 or ""), note=inj.note or wit.note)
    rr, cc = np.meshgrid(np.arange(view.rows, dtype=np.int64), np.arange(view.cols, dtype=np.int64), indexing="ij")
    bad = []
    for ss in range(0, 2 * view.default_stride + 8):
        idxs = np.asarray(view.index(rr, cc, ss)).ravel()     # every cell's index at once
        if (len(np.unique(idxs)) < idxs.size) != (ss < view.default_stride):
            bad.append(ss)
    res.cross_check = {"agrees": not bad, "domain": f"stride in [0, {2 * view.default_stride + 8})", "mismatches": bad}
    return res


def prove_default_is_leading_size(view: MemoryView) -> Result:
    """The catalog's default-stride table equals the spec's leading-dimension size (9.7.14.4.2:
    'The default value of the stride is the size of the leading dimension of the matrix')."""
    ok = view.default_stride == view.ld_size
    return Result(f"wmma.default_is_leading_size[{view.opcode}]",
                  f"default stride (table) {view.default_stride} == leading-dimension size {view.ld_size}",
                  PROVED if ok else REFUTED, "enumeration", 0.0,
                  None if ok else {"table": view.default_stride, "leading_dimension_size": view.ld_size},
                  cross_check={"agrees": True, "domain": "one value"})

