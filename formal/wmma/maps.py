"""wmma fragment maps as observations with provenance, and their proved properties.

PTX leaves the wmma fragment map unspecified (9.7.14.4.1).  What is known is observed:
third-party reverse engineering (``specs/observed/wmma_third_party.toml``, evidence
``third-party-empirical``) and this project's own probe on an H100
(``specs/observed/wmma_sm90*.json``, evidence ``silicon``, produced by
:mod:`formal.hw.wmma_probe`).

A :class:`FragmentMap` is a table ``(lane, element) -> set of (row, col)``; ``element`` is
``reg * elems_per_reg + e`` (``e`` = position inside the register, lowest bits first).  A
load map holds one cell per slot; a store map may in principle write several.

Properties (each a :class:`~formal.wmma.results.Result`, decided by Z3 over the table and
cross-checked by enumeration):

* :func:`prove_covers`            every cell of the matrix is held by some slot
* :func:`prove_injective`         no cell is held twice (refuted, with the first duplicate
                                  pair, for .f16 A/B: 16 elements per lane, 8 distinct)
* :func:`prove_half_duplicates`   element i and i + n/2 of every lane hold the same cell
* :func:`prove_periodic`          element i and i + p of every lane hold the same cell (4 copies)
* :func:`prove_same_map`          two maps agree slot by slot (row vs col layout, load.c vs
                                  store.d, f16 vs f32 accumulators, two spaces or strides;
                                  :func:`prefix` for the .f16 vs .bf16 multiplicands)
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np
import z3

from ..expr import Formula
from ..specdata import load_spec, spec_dir
from .results import PROVED, REFUTED, Result, check_negation, model_value

LANES = 32


@dataclass
class FragmentMap:
    """One observed fragment map with where it comes from."""

    id: str
    archs: tuple[str, ...]
    evidence: str                 # third-party-empirical | silicon | hypothetical
    provenance: dict
    shape: str
    matrix: str                   # a, b, c (load) or d (store)
    types: tuple[str, ...]
    layout: str                   # row | col | any
    kind: str                     # load | store
    rows: int
    cols: int
    elements: int                 # per lane
    slots: list[list[tuple[tuple[int, int], ...]]]   # [lane][element] -> cells
    elems_per_reg: int = 1
    extra: dict = field(default_factory=dict)

    # -- views ---------------------------------------------------------------------
    @property
    def n_slots(self) -> int:
        return LANES * self.elements

    def single(self) -> np.ndarray:
        """[lane, element] -> cell index row * cols + col (-1: no cell, -2: several cells)."""
        out = np.full((LANES, self.elements), -1, dtype=np.int64)
        for l in range(LANES):
            for i in range(self.elements):
                cs = self.slots[l][i]
                if len(cs) == 1:
                    out[l, i] = cs[0][0] * self.cols + cs[0][1]
                elif len(cs) > 1:
                    out[l, i] = -2
        return out

    def cell(self, idx: int) -> tuple[int, int]:
        return divmod(int(idx), self.cols)

    def multiplicity(self) -> np.ndarray:
        """[row, col] -> number of slots holding that cell."""
        m = np.zeros((self.rows, self.cols), dtype=np.int64)
        for l in range(LANES):
            for i in range(self.elements):
                for (r, c) in self.slots[l][i]:
                    m[r, c] += 1
        return m

    def summary(self) -> dict:
        mult = self.multiplicity()
        per_lane = [len({c for i in range(self.elements) for c in self.slots[l][i]}) for l in range(LANES)]
        return {"id": self.id, "archs": list(self.archs), "evidence": self.evidence, "shape": self.shape,
                "matrix": self.matrix, "types": list(self.types), "layout": self.layout, "kind": self.kind,
                "rows": self.rows, "cols": self.cols, "elements_per_lane": self.elements,
                "distinct_cells_per_lane": sorted(Counter(per_lane).items()),
                "multiplicity_histogram": sorted(Counter(mult.reshape(-1).tolist()).items()),
                "provenance": self.provenance}


# ----------------------------------------------------------------------------------
# loading

def _dims(shape: str, matrix: str) -> tuple[int, int]:
    m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[matrix]


def from_formulas(id: str, shape: str, matrix: str, elements: int, row: str, col: str, **kw) -> FragmentMap:
    """A map given by row/col formulas over (lane, i), enumerated for every slot."""
    rows, cols = _dims(shape, matrix)
    lane = np.repeat(np.arange(LANES), elements)
    i = np.tile(np.arange(elements), LANES)
    r = np.asarray(Formula(row).eval({"lane": lane, "i": i})) * np.ones_like(lane)
    c = np.asarray(Formula(col).eval({"lane": lane, "i": i})) * np.ones_like(lane)
    slots = [[((int(r[l * elements + e]), int(c[l * elements + e])),) for e in range(elements)] for l in range(LANES)]
    for (rr, cc) in ((int(a), int(b)) for a, b in zip(r, c)):
        if not (0 <= rr < rows and 0 <= cc < cols):
            raise ValueError(f"{id}: formula gives cell ({rr}, {cc}) outside the {rows}x{cols} matrix")
    return FragmentMap(id, tuple(kw.pop("archs", ())), kw.pop("evidence", "hypothetical"), kw.pop("provenance", {}),
                       shape, matrix, tuple(kw.pop("types", ())), kw.pop("layout", "any"), kw.pop("kind", "load"),
                       rows, cols, elements, slots, **kw)


_EPR = {"f16": 2, "bf16": 2, "s8": 4, "u8": 4, "s4": 8, "u4": 8, "b1": 32}


@lru_cache(maxsize=1)
def third_party() -> tuple[FragmentMap, ...]:
    d = load_spec("observed/wmma_third_party")
    out = []
    for e in d["map"]:
        src = dict(d["source"][e["source"]])
        prov = {"source": e["source"], "repo": src["repo"], "file": e["file"], "function": e["function"],
                "files": src["files"], "assumption": src["assumption"], "arch_note": src["arch_note"],
                "also_in": src.get("also_in", ""), "ptx_section": d["ptx_section"],
                "formula": {"row": e["row"], "col": e["col"]}}
        layouts = ["row", "col"] if e["layout"] == "any" else [e["layout"]]
        for lay in layouts:
            out.append(from_formulas(e["id"] + (f".{lay}" if e["layout"] == "any" else ""), e["shape"], e["matrix"],
                                     int(e["elements"]), e["row"], e["col"], archs=tuple(e["archs"]),
                                     evidence=d["evidence"], provenance=prov, types=tuple(e["types"]), layout=lay,
                                     kind="load", elems_per_reg=_EPR.get(e["types"][0], 1)))
    return tuple(out)


def observed_files() -> list[Path]:
    """The silicon map files of specs/observed/ (JSON files with a "maps" list)."""
    out = []
    for p in sorted((spec_dir() / "observed").glob("wmma_sm*.json")):
        head = p.read_text()[:4096]
        if '"maps"' in head or '"maps":' in p.read_text():
            out.append(p)
    return out


def load_observed_json(path: str | Path) -> list[FragmentMap]:
    """Maps decoded from a probe run (formal.hw.wmma_probe.decode_* output format)."""
    doc = json.loads(Path(path).read_text())
    meta = doc.get("meta", {})
    out = []
    for m in doc["maps"]:
        E, cols = m["elements"], m["cols"]
        slots = [[tuple() for _ in range(E)] for _ in range(LANES)]
        for k, cell in enumerate(m["cells"]):
            if cell >= 0:               # one cell (the common case, written out: files hold ~100k slots)
                slots[k // E][k % E] = (divmod(int(cell), cols),)
            else:
                cs = [int(x) for x in m.get("multi", {}).get(str(k), [])]
                slots[k // E][k % E] = tuple(divmod(int(x), cols) for x in cs)
        prov = {"device": meta.get("device"), "run": meta.get("run"), "opcode": m["opcode"], "variant": m.get("variant"),
                "space": m.get("space"), "pointer_window": m.get("pointer_window"), "stride": m.get("stride"),
                "stride_operand": m.get("stride_operand"), "memory_packing": meta.get("memory_packing"),
                "anomalies": m.get("anomalies", {}), "variants": m.get("variants", []), "file": str(path)}
        out.append(FragmentMap(m["id"], tuple(meta.get("archs", ["sm_90"])), meta.get("evidence", "silicon"), prov,
                               m["shape"], m["matrix"], (m["type"],), m["layout"], m["kind"], m["rows"], m["cols"],
                               m["elements"], slots, m["elems_per_reg"]))
    return out


def all_maps() -> list[FragmentMap]:
    out = list(third_party())
    for p in observed_files():
        out += load_observed_json(p)
    return out


def find(maps: Iterable[FragmentMap], **kw) -> list[FragmentMap]:
    res = []
    for m in maps:
        ok = True
        for k, v in kw.items():
            mv = getattr(m, k)
            if k in ("types", "archs"):
                ok &= v in mv
            else:
                ok &= mv == v
        if ok:
            res.append(m)
    return res


# ----------------------------------------------------------------------------------
# Z3 over a table

def _lut(m: FragmentMap, s):
    """The table as a Z3 term: cell index of slot `s` (16-bit; 0xFFFF for 'no cell').

    An If-chain over the concrete slots: Z3 decides lookups at a symbolic slot far faster
    this way than through a chain of array stores.
    """
    # The same term as folding z3.If(s == k, BitVecVal(v), e), built through the C API: the
    # Python wrappers' type checks and coercions cost 3x the construction itself.
    ctx, srt = s.ctx, z3.BitVecSort(16, s.ctx)
    ref, sa = ctx.ref(), s.as_ast()
    consts: dict[int, z3.BitVecRef] = {}

    def const(v: int) -> z3.BitVecRef:
        if v not in consts:
            consts[v] = z3.BitVecVal(v, srt)
        return consts[v]

    e = const(0xFFFF)
    for k, v in enumerate(m.single().reshape(-1).tolist()):
        cond = z3.BoolRef(z3.Z3_mk_eq(ref, sa, z3.BitVecVal(k, srt).as_ast()), ctx)
        e = z3.BitVecRef(z3.Z3_mk_ite(ref, cond.as_ast(), const(int(v) & 0xFFFF).as_ast(), e.as_ast()), ctx)
    return e


def _slot(m: FragmentMap, s: int) -> dict:
    lane, i = divmod(int(s), m.elements)
    reg, e = divmod(i, m.elems_per_reg)
    cells = list(m.slots[lane][i])
    return {"lane": lane, "element": i, "reg": reg, "elem_in_reg": e, "cells": [list(c) for c in cells]}


def _need_single(m: FragmentMap) -> None:
    if (m.single() == -2).any():
        raise ValueError(f"{m.id}: some slot holds several cells; the Z3 table view needs one cell per slot")


def prove_covers(m: FragmentMap) -> Result:
    """Every (row, col) of the matrix is held by at least one slot (minimal uncovered cell if not)."""
    _need_single(m)
    c = z3.BitVec("cell", 16)
    held = [z3.BitVecVal(int(v) & 0xFFFF, 16) != c for v in m.single().reshape(-1)]
    o = z3.Optimize()
    o.add(z3.ULT(c, z3.BitVecVal(m.rows * m.cols, 16)), *held)
    o.minimize(c)
    name = f"wmma.map.covers[{m.id}]"
    stmt = f"every cell of the {m.rows}x{m.cols} matrix is held by some (lane, element) of {m.id}"
    t0 = time.perf_counter()
    r = o.check()
    dt = time.perf_counter() - t0
    res = Result(name, stmt, PROVED if r == z3.unsat else (REFUTED if r == z3.sat else "unknown"), "z3", dt)
    if r == z3.sat:
        res.witness = {"uncovered": list(m.cell(model_value(o.model(), c)))}
    mult = m.multiplicity()
    unc = np.argwhere(mult == 0)
    res.cross_check = {"agrees": (len(unc) == 0) == (r == z3.unsat) and
                       (len(unc) == 0 or res.witness["uncovered"] == [int(unc[0][0]), int(unc[0][1])]),
                       "uncovered": int(len(unc))}
    return res


def prove_injective(m: FragmentMap) -> Result:
    """No cell is held by two slots; refuted with the smallest duplicated cell and its slots."""
    _need_single(m)
    tab = m.single().reshape(-1)
    c = z3.BitVec("cell", 16)
    o = z3.Optimize()
    o.add(z3.ULT(c, z3.BitVecVal(m.rows * m.cols, 16)),
          z3.PbGe([(z3.BitVecVal(int(v) & 0xFFFF, 16) == c, 1) for v in tab], 2))
    o.minimize(c)
    t0 = time.perf_counter()
    r = o.check()
    dt = time.perf_counter() - t0
    name = f"wmma.map.injective[{m.id}]"
    res = Result(name, f"no cell is held by two (lane, element) slots of {m.id}",
                 PROVED if r == z3.unsat else (REFUTED if r == z3.sat else "unknown"), "z3", dt)
    mult = m.multiplicity().reshape(-1)
    dup = np.flatnonzero(mult > 1)
    zcell = None
    if r == z3.sat:
        zcell = model_value(o.model(), c)
        holders = [_slot(m, k) for k in np.flatnonzero(tab == zcell)]
        res.witness = {"cell": list(m.cell(zcell)), "held_by": holders}
    res.cross_check = {"agrees": (int(dup[0]) if len(dup) else None) == zcell,
                       "duplicated_cells": int(len(dup)), "max_multiplicity": int(mult.max())}
    return res


def prove_half_duplicates(m: FragmentMap) -> Result:
    """For every lane and i < n/2: element i and element i + n/2 hold the same cell."""
    _need_single(m)
    if m.elements % 2:
        raise ValueError(f"{m.id}: odd number of elements")
    h = m.elements // 2
    lane, i = z3.BitVecs("lane i", 16)
    E = z3.BitVecVal(m.elements, 16)
    s = lane * E + i
    res = check_negation(f"wmma.map.half_duplicates[{m.id}]",
                         f"in {m.id}, element i and element i + {h} of every lane hold the same cell",
                         [z3.ULT(lane, z3.BitVecVal(LANES, 16)), z3.ULT(i, z3.BitVecVal(h, 16)),
                          _lut(m, s) != _lut(m, s + z3.BitVecVal(h, 16))],
                         {"lane": lane, "element": i}, minimize=[lane, i])
    tab = m.single()
    bad = np.argwhere(tab[:, :h] != tab[:, h:])
    res.cross_check = {"agrees": (len(bad) == 0) == res.proved and
                       (res.proved or [int(x) for x in bad[0]] == [res.witness["lane"], res.witness["element"]]),
                       "violations": int(len(bad))}
    res.smt2 = None     # the table is in the witness/cross-check; keep results small
    return res


def prove_periodic(m: FragmentMap, period: int) -> Result:
    """For every lane and i < n - period: element i and element i + period hold the same cell
    (an .f16 A/B fragment of m8n32k16 A / m32n8k16 B holds every cell 4 times: period n/4)."""
    _need_single(m)
    if not 0 < period < m.elements:
        raise ValueError(f"{m.id}: period {period} outside (0, {m.elements})")
    lane, i = z3.BitVecs("lane i", 16)
    E = z3.BitVecVal(m.elements, 16)
    s = lane * E + i
    res = check_negation(f"wmma.map.periodic[{m.id}, {period}]",
                         f"in {m.id}, element i and element i + {period} of every lane hold the same cell",
                         [z3.ULT(lane, z3.BitVecVal(LANES, 16)), z3.ULT(i, z3.BitVecVal(m.elements - period, 16)),
                          _lut(m, s) != _lut(m, s + z3.BitVecVal(period, 16))],
                         {"lane": lane, "element": i}, minimize=[lane, i])
    tab = m.single()
    bad = np.argwhere(tab[:, :-period] != tab[:, period:])
    res.cross_check = {"agrees": (len(bad) == 0) == res.proved and
                       (res.proved or [int(x) for x in bad[0]] == [res.witness["lane"], res.witness["element"]]),
                       "violations": int(len(bad))}
    res.smt2 = None
    return res


def prefix(m: FragmentMap, n: int) -> FragmentMap:
    """The map restricted to the first `n` elements of every lane (id suffixed [:n])."""
    return FragmentMap(f"{m.id}[:{n}]", m.archs, m.evidence, m.provenance, m.shape, m.matrix, m.types, m.layout,
                       m.kind, m.rows, m.cols, n, [list(m.slots[lane][:n]) for lane in range(LANES)], m.elems_per_reg,
                       m.extra)


def prove_same_map(m1: FragmentMap, m2: FragmentMap, what: str = "") -> Result:
    """m1 and m2 hold the same cell in every (lane, element) slot (first differing slot if not)."""
    _need_single(m1)
    _need_single(m2)
    name = f"wmma.map.same[{m1.id} == {m2.id}]"
    stmt = f"{m1.id} and {m2.id} hold the same cell in every slot" + (f" ({what})" if what else "")
    if (m1.rows, m1.cols, m1.elements) != (m2.rows, m2.cols, m2.elements):
        return Result(name, stmt, REFUTED, "shape", 0.0,
                      {"shapes": [[m1.rows, m1.cols, m1.elements], [m2.rows, m2.cols, m2.elements]]},
                      cross_check={"agrees": True})
    s = z3.BitVec("slot", 16)
    o = z3.Optimize()
    o.add(z3.ULT(s, z3.BitVecVal(m1.n_slots, 16)), _lut(m1, s) != _lut(m2, s))
    o.minimize(s)
    t0 = time.perf_counter()
    r = o.check()
    dt = time.perf_counter() - t0
    res = Result(name, stmt, PROVED if r == z3.unsat else (REFUTED if r == z3.sat else "unknown"), "z3", dt)
    diff = np.argwhere(m1.single().reshape(-1) != m2.single().reshape(-1)).reshape(-1)
    if r == z3.sat:
        k = model_value(o.model(), s)
        res.witness = {"slot": _slot(m1, k), "cells": [[list(c) for c in m.slots[k // m.elements][k % m.elements]]
                                                       for m in (m1, m2)]}
        res.cross_check = {"agrees": len(diff) > 0 and int(diff[0]) == k, "differing_slots": int(len(diff))}
    else:
        res.cross_check = {"agrees": len(diff) == 0, "differing_slots": int(len(diff))}
    return res


# ----------------------------------------------------------------------------------
# the property report over every known map

def properties(maps: list[FragmentMap] | None = None) -> list[Result]:
    """Every property of every known map: covers, injective, the period of duplicated
    fragments, row vs col, .f16 vs .bf16 multiplicands, the accumulator types (.f16 / .f32 /
    .s32) against each other, load vs store, the variants of one form, and the same map
    observed by different sources (sm_90 silicon vs the published sm_70/75/80 maps).
    Without `maps`: every known map, computed once per process (about 15 s for the 134 maps)."""
    if maps is None:
        return list(_all_properties(tuple((str(p), p.stat().st_mtime_ns) for p in observed_files())))
    return _properties(list(maps))


@lru_cache(maxsize=1)
def _all_properties(_files_key: tuple) -> tuple[Result, ...]:
    return tuple(_properties(all_maps()))


def _properties(maps: list[FragmentMap]) -> list[Result]:
    out: list[Result] = []
    for m in maps:
        if (m.single() == -2).any():
            continue
        out.append(prove_covers(m))
        inj = prove_injective(m)
        out.append(inj)
        copies, rem = divmod(LANES * m.elements, m.rows * m.cols)
        if not inj.proved and copies > 1 and not rem and m.elements % copies == 0:
            # each cell `copies` times: element i + n/copies repeats element i (half_duplicates for 2 copies)
            out.append(prove_half_duplicates(m) if copies == 2 else prove_periodic(m, m.elements // copies))
    # the same (arch, shape, matrix, type) in both layouts
    groups: dict[tuple, dict[str, FragmentMap]] = {}
    for m in maps:
        for t in m.types:
            key = (m.archs, m.evidence, m.shape, m.matrix, t, m.kind, m.provenance.get("variant"))
            groups.setdefault(key, {})[m.layout] = m
    done: set[tuple[str, str]] = set()
    for key, g in groups.items():
        if "row" in g and "col" in g and (g["row"].id, g["col"].id) not in done:
            done.add((g["row"].id, g["col"].id))
            out.append(prove_same_map(g["row"], g["col"], "same map for .row and .col"))

    def _peer(a: FragmentMap, b: FragmentMap) -> bool:
        return (a is not b and a.archs == b.archs and a.evidence == b.evidence and a.shape == b.shape
                and a.matrix == b.matrix and a.kind == b.kind and a.layout == b.layout
                and a.provenance.get("variant") == b.provenance.get("variant"))
    # accumulator types of one architecture and source: .f16 vs .f32 (both C loads and D stores,
    # both layouts), and .s32 vs .f32 where a shape has both
    for (t1, t2) in (("f16", "f32"), ("s32", "f32")):
        for a in maps:
            if a.matrix in ("c", "d") and t1 in a.types:
                for b in maps:
                    if _peer(a, b) and t2 in b.types:
                        out.append(prove_same_map(a, b, f"{t1} and {t2} accumulators"))
    # .f16 vs .bf16 multiplicands: the .f16 fragment's first n elements (n = the .bf16 fragment's) are the .bf16 map
    for a in maps:
        if a.matrix in ("a", "b") and "f16" in a.types:
            for b in maps:
                if _peer(a, b) and "bf16" in b.types and b.elements <= a.elements:
                    out.append(prove_same_map(prefix(a, b.elements) if b.elements < a.elements else a, b,
                                              f"the .f16 fragment's first {b.elements} elements are the .bf16 map"))
    # the same (shape, matrix, type, layout) observed by different sources (sm_90 silicon vs the
    # published sm_70/75/80 maps): is the map unchanged across architectures?
    for a in maps:
        if a.evidence != "silicon":
            continue
        for b in maps:
            if (b.evidence != "silicon" and b.shape == a.shape and b.matrix == a.matrix and b.kind == a.kind
                    and set(a.types) & set(b.types) and b.layout in (a.layout, "any")):
                out.append(prove_same_map(a, b, f"{','.join(a.archs)} silicon vs {','.join(b.archs)} {b.evidence}"))
    # one form, every probed variant (state space, pointer window, stride): the same map?
    for m in maps:
        vs = m.provenance.get("variants") or []
        if vs:
            bad = [v for v in vs if not v.get("same_as_canonical")]
            out.append(Result(f"wmma.map.variants_agree[{m.id}]",
                              f"{m.id}: the {len(vs)} other probed variants (spaces, windows, strides) hold the same cell "
                              f"in every slot", REFUTED if bad else PROVED, "enumeration", 0.0,
                              {"variants": [{k: v[k] for k in ("opcode", "variant", "stride", "n_differing")} for v in bad]}
                              if bad else None,
                              cross_check={"agrees": True, "variants": [f"{v['opcode']} {v['variant']} stride {v['stride']}"
                                                                        for v in vs]}))
    # load.c vs store.d (silicon observations)
    for ld in maps:
        if ld.kind == "load" and ld.matrix == "c":
            for st in maps:
                if (st.kind == "store" and st.matrix == "d" and st.shape == ld.shape and st.types == ld.types
                        and st.layout == ld.layout and st.archs == ld.archs
                        and st.provenance.get("variant") == ld.provenance.get("variant")
                        and st.provenance.get("space") == ld.provenance.get("space")):
                    out.append(prove_same_map(ld, st, "store map = load map: store(load(X)) = X"))
    return out


def tally(results: list[Result]) -> dict:
    """Counts of the property report by kind (covers, injective, same, ...) and status."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        kind = r.obligation.split("[", 1)[0].removeprefix("wmma.map.")
        c = out.setdefault(kind, {})
        c[r.status] = c.get(r.status, 0) + 1
    return out
