"""Fragment layouts: finite maps ``(lane, reg, elem) -> (row, col[, product])``.

A warp-level matrix instruction spreads each matrix operand over the registers of the 32
lanes of a warp.  The PTX ISA writes the spreading as formulas over ``%laneid`` and the
element index ``i`` of the fragment ``a0, a1, ...`` (9.7.14.5.x, 9.7.14.6.2.x, 9.7.14.3).
``specs/fragments_mma{,_sp}.toml`` keeps those formulas, one entry per family of forms,
and this module turns them into :class:`Layout` objects::

    >>> lay = fragment("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "a")
    >>> lay.rows, lay.cols, lay.nregs, lay.epr, lay.elem_bits
    (16, 16, 4, 2, 16)
    >>> lay.at(lane=5, reg=1, elem=0)          # a2 of lane 5: groupID 1 + 8, col 2
    (9, 2, 0)

A :class:`Layout` is one map, over the domain ``lane < lanes, reg < nregs, elem < epr``
(optionally narrowed by an ``active`` predicate: the block-scale factors are read from
two lanes of four and from selected bytes only).

A warpgroup layout (``wgmma``, PTX ISA 9.7.15.5.1.1) has one more input dimension, the warp
in the warpgroup, as Triton's LinearLayout has: ``(warp, lane, reg, elem) -> (row, col)``
with ``warps = 4``.  Its domain is the 128 threads of the warpgroup, ``thread = 32 * warp +
lane`` (``Layout.lanes`` counts threads: 128; ``Layout.warp_lanes`` is 32); formulas see
``warp``, ``lane`` (the lane inside its warp) and ``thread``, and register files are
``[T, 128, nregs]``::

    >>> lay = fragment("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "d")
    >>> lay.warps, lay.lanes, lay.nregs, lay.rows, lay.cols
    (4, 128, 4, 64, 8)
    >>> lay.at(lane=5, reg=2, elem=0, warp=1)  # d2 of warp 1 lane 5: row 16 + 1 + 8, col 2
    (25, 2, 0)  It compiles three ways from one source:

* :meth:`Layout.enumerate` - every point at once (numpy), for tables, pack/unpack and the
  enumeration half of every proof;
* :meth:`Layout.z3_terms` - Z3 bit-vector terms, for the solver half of every proof
  (``formal.prove``);
* :meth:`Layout.describe` - the formulas as text (sympy for pretty printing).

Element ``e`` of register ``reg`` is PTX element ``i = reg * epr + elem`` and sits at bits
``[bit_lo, bit_lo + value_bits)`` with ``bit_lo = elem * elem_bits + shift`` (the
[convention] of the spec file).  :func:`unpack` and :func:`pack` move whole warps of
register files to and from matrices (vectorised; the evaluator's hot path).

Layouts can also be built from a user's formulas (:meth:`Layout.from_formulas`), a Python
function (:meth:`Layout.from_function`), a table (:meth:`Layout.from_table`) or a CuTe
thread-value layout (``formal.transform.cute``), and audited against the spec with
:func:`formal.prove.audit_layout`.

The module knows no PTX facts: every formula, matrix shape and element count comes from
``specs/``; register widths and containers come from the catalog (``specs/formats.toml``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import catalog as cat
from .expr import Formula, FormulaError
from .specdata import load_spec

SPEC_FILES = ("fragments_mma", "fragments_mma_sp", "fragments_wgmma")
# The operand whose element type selects an entry's `type` axis.
OPERAND_TYPE_AXIS = {"a": "atype", "b": "btype", "c": "ctype", "d": "dtype",
                     "scale_a": "stype", "scale_b": "stype"}
LAYOUT_OPERANDS = ("a", "b", "c", "d", "scale_a", "scale_b", "e")
# families whose fragments the spec gives as formulas (wmma's are unspecified by PTX)
LAYOUT_FAMILIES = ("mma", "mma.sp", "wgmma")
Z3_WIDTH = 16      # bits of every Z3 term: indices stay below 2**12; enumeration cross-checks overflow


class LayoutError(cat.BadArgument):
    """A layout that cannot be built or resolved (bad input; exit code 2 in the CLI)."""


class SpecError(ValueError):
    """A malformed entry in specs/fragments_*.toml (a defect of the spec, not of the input)."""


# =========================================================================================
# The Layout object


@lru_cache(maxsize=None)
def _formula(src: str, let: tuple[tuple[str, str], ...] = ()) -> Formula:
    """Parse once: formulas are immutable in use, and the catalog compiles the same ones
    thousands of times."""
    return Formula(src, dict(let))


def _canon_let(let: Mapping[str, str] | Sequence[tuple[str, str]] | None) -> tuple[tuple[str, str], ...]:
    if not let:
        return ()
    items = let.items() if isinstance(let, Mapping) else let
    return tuple((str(k), str(v)) for k, v in items)


class Layout:
    """A finite map (lane, reg, elem) -> (row, col, product), from formulas or from a table.

    Attributes (the API other modules use):

    ``rows, cols``        the matrix the map lands in (per product)
    ``nregs, epr``        registers per lane and elements per register
    ``lanes``             threads in the domain (32; 128 for a warpgroup layout)
    ``warps``, ``warp_lanes``  warps in the domain (1; 4 for wgmma) and lanes per warp (32)
    ``products``          independent products a warp computes (4 for m8n8k4 .f16)
    ``elem_bits``         container bits of one element; ``value_bits`` bits of the value
    ``shift``             the value's offset inside its container; ``reg_bits`` 32 or 64
    ``elements``          elements per lane (``nregs * epr`` for a well-formed layout)
    ``params``            instruction immediates the map was built for (scale selectors)
    ``name``, ``source``  where it comes from (spec entry id and PTX section)
    """

    def __init__(self, rows: int, cols: int, nregs: int, epr: int, *, lanes: int | None = None, warps: int = 1,
                 products: int = 1,
                 elem_bits: int = 32, value_bits: int | None = None, shift: int = 0, reg_bits: int = 32,
                 elements: int | None = None,
                 row: str | None = None, col: str | None = None, product: str | None = None,
                 active: str | None = None, let=None, params: Mapping[str, int] | None = None,
                 index: str = "reg * epr + elem", bit_lo: str = "elem * container + shift",
                 table: Mapping[str, np.ndarray] | None = None,
                 name: str = "", source: str = "", entry: "Entry | None" = None, operand: str | None = None):
        if lanes is None:
            lanes = 32 * warps if isinstance(warps, (int, np.integer)) and not isinstance(warps, bool) else 32
        for k, v in (("rows", rows), ("cols", cols), ("nregs", nregs), ("epr", epr), ("lanes", lanes),
                     ("warps", warps), ("products", products), ("elem_bits", elem_bits), ("reg_bits", reg_bits)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 1:
                raise LayoutError(f"layout {k} must be a positive integer, got {v!r}")
        self.rows, self.cols, self.nregs, self.epr = int(rows), int(cols), int(nregs), int(epr)
        self.lanes, self.products, self.warps = int(lanes), int(products), int(warps)
        if self.lanes % self.warps:
            raise LayoutError(f"layout lanes ({self.lanes}) must be a multiple of warps ({self.warps})")
        self.warp_lanes = self.lanes // self.warps
        self.elem_bits, self.reg_bits, self.shift = int(elem_bits), int(reg_bits), int(shift)
        self.value_bits = int(value_bits) if value_bits is not None else self.elem_bits
        self.elements = int(elements) if elements is not None else self.nregs * self.epr
        self.params = dict(params or {})
        self.name, self.source, self.entry, self.operand = name, source, entry, operand
        self.index_src, self.bit_lo_src = str(index), str(bit_lo)
        self.let = _canon_let(let)
        self._table = None
        if table is not None:
            self._table = {k: np.asarray(v) for k, v in table.items()}
            shape = (self.lanes, self.nregs, self.epr)
            for k in ("row", "col", "product", "held"):
                if k not in self._table:
                    raise LayoutError(f"table layout needs array {k!r}")
                if self._table[k].shape != shape:
                    raise LayoutError(f"table array {k!r} has shape {self._table[k].shape}, expected {shape}")
            self.row_src = self.col_src = self.product_src = self.active_src = None
        else:
            if row is None or col is None:
                raise LayoutError("a formula layout needs both row and col")
            if self.products > 1 and product is None:
                raise LayoutError("a layout with several products needs a product formula")
            self.row_src, self.col_src = str(row), str(col)
            self.product_src = str(product) if product is not None else "0"
            self.active_src = str(active) if active not in (None, "") else None
            try:
                self._f_row = _formula(self.row_src, self.let)
                self._f_col = _formula(self.col_src, self.let)
                self._f_product = _formula(self.product_src, self.let)
                self._f_active = _formula(self.active_src, self.let) if self.active_src else None
                self._f_index = _formula(self.index_src)
                self._f_bit_lo = _formula(self.bit_lo_src)
            except FormulaError as e:
                raise LayoutError(str(e)) from None
            known = {"lane", "warp", "thread", "reg", "elem", "i", "epr", "container", "shift",
                     "elements"} | set(self.params)
            for f in (self._f_row, self._f_col, self._f_product, self._f_active):
                if f is not None and f.names - known:
                    raise LayoutError(f"unbound name(s) {sorted(f.names - known)} in formula {f.src!r}")

    # ------------------------------------------------------------------------------- constructors
    @classmethod
    def from_formulas(cls, row: str, col: str, *, product: str | None = None, active: str | None = None,
                      let=None, like: "Layout | None" = None, **dims) -> "Layout":
        """A layout from formulas over ``lane``, ``i`` (or ``reg``, ``elem``).

        ``like`` copies the domain and packing of another layout (usually the spec's);
        keyword arguments override them (``rows``, ``cols``, ``nregs``, ``epr``, ...).
        """
        kw = _dims_of(like) if like is not None else {}
        kw.update(dims)
        if like is not None and "params" not in dims:
            kw["params"] = dict(like.params)
        return cls(row=row, col=col, product=product, active=active, let=let, **_need_dims(kw))

    @classmethod
    def from_table(cls, entries, *, like: "Layout | None" = None, **dims) -> "Layout":
        """A layout from a table: records with keys lane, reg, elem (or i), row, col[, product].

        ``entries`` is an iterable of dicts or tuples ``(lane, reg, elem, row, col[, product])``.
        A warpgroup layout (``warps > 1``) takes records with ``warp`` and ``lane`` (the lane in
        its warp) or ``thread``, or tuples ``(warp, lane, reg, elem, row, col)`` or ``(thread, reg,
        elem, row, col)``.
        Points missing from the table are not held (the layout is partial there).  A point
        listed twice with different images is bad input.
        """
        kw = _dims_of(like) if like is not None else {}
        kw.update(dims)
        kw = _need_dims(kw)
        warps = int(kw.get("warps", 1))
        lanes, nregs, epr = kw.get("lanes", 32 * warps), kw["nregs"], kw["epr"]
        wl = lanes // max(1, warps)
        shape = (lanes, nregs, epr)
        arr = {k: np.zeros(shape, dtype=np.int64) for k in ("row", "col", "product")}
        held = np.zeros(shape, dtype=bool)
        for n, rec in enumerate(entries):
            if isinstance(rec, Mapping):
                r = {str(k).strip().lower(): v for k, v in rec.items()}
                try:
                    if warps > 1 and "thread" in r and r["thread"] not in (None, ""):
                        lane = int(r["thread"])
                    elif warps > 1:
                        w_, l_ = int(r["warp"]), int(r["lane"])
                        if not (0 <= w_ < warps and 0 <= l_ < wl):
                            raise LayoutError(f"table record {n}: (warp {w_}, lane {l_}) is outside "
                                              f"{warps} warps x {wl} lanes")
                        lane = w_ * wl + l_
                    else:
                        lane = int(r["lane"])
                    if "reg" in r and r["reg"] not in (None, ""):
                        reg, elem = int(r["reg"]), int(r.get("elem", 0) or 0)
                    else:
                        ii = int(r["i"])
                        reg, elem = divmod(ii, epr)
                    row, col = int(r["row"]), int(r["col"])
                    prod = int(r.get("product", 0) or 0)
                except (KeyError, ValueError, TypeError) as e:
                    raise LayoutError(f"table record {n}: needs integer lane, reg+elem (or i), row, col: {e}") from None
            else:
                t = tuple(int(x) for x in rec)
                if warps > 1:         # (warp, lane, reg, elem, row, col) or (thread, reg, elem, row, col)
                    if len(t) not in (5, 6):
                        raise LayoutError(f"table record {n}: expected (warp, lane, reg, elem, row, col) or "
                                          f"(thread, reg, elem, row, col), got {rec!r}")
                    if len(t) == 6:
                        if not (0 <= t[0] < warps and 0 <= t[1] < wl):
                            raise LayoutError(f"table record {n}: (warp {t[0]}, lane {t[1]}) is outside "
                                              f"{warps} warps x {wl} lanes")
                        t = (t[0] * wl + t[1],) + t[2:]
                if len(t) not in (5, 6):
                    raise LayoutError(f"table record {n}: expected (lane, reg, elem, row, col[, product]), got {rec!r}")
                lane, reg, elem, row, col = t[:5]
                prod = t[5] if len(t) == 6 else 0
            if not (0 <= lane < lanes and 0 <= reg < nregs and 0 <= elem < epr):
                raise LayoutError(f"table record {n}: point (lane {lane}, reg {reg}, elem {elem}) is outside "
                                  f"the domain {lanes} lanes x {nregs} registers x {epr} elements")
            if held[lane, reg, elem] and (arr["row"][lane, reg, elem], arr["col"][lane, reg, elem],
                                          arr["product"][lane, reg, elem]) != (row, col, prod):
                raise LayoutError(f"table record {n}: (lane {lane}, reg {reg}, elem {elem}) is listed twice "
                                  f"with different cells")
            held[lane, reg, elem] = True
            arr["row"][lane, reg, elem], arr["col"][lane, reg, elem], arr["product"][lane, reg, elem] = row, col, prod
        arr["held"] = held
        kw.pop("let", None)
        return cls(table=arr, **kw)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, like: "Layout | None" = None, **dims) -> "Layout":
        """A layout from a Python function ``fn(lane, reg, elem) -> (row, col[, product])``
        (a warpgroup layout: ``fn(warp, lane, reg, elem) -> (row, col)``).

        ``fn`` may return ``None`` for a point it does not hold.  It is called once per
        point of the domain.
        """
        kw = _need_dims({**(_dims_of(like) if like is not None else {}), **dims})
        warps = int(kw.get("warps", 1))
        lanes = kw.get("lanes", 32 * warps)
        wl = lanes // warps
        recs = []
        for th in range(lanes):
            for reg in range(kw["nregs"]):
                for elem in range(kw["epr"]):
                    out = fn(th // wl, th % wl, reg, elem) if warps > 1 else fn(th, reg, elem)
                    if out is None:
                        continue
                    out = tuple(int(x) for x in out)
                    recs.append(((th // wl, th % wl) if warps > 1 else (th,)) + (reg, elem) + out)
        return cls.from_table(recs, **kw)

    # ------------------------------------------------------------------------------- identity
    @property
    def is_table(self) -> bool:
        return self._table is not None

    def packing(self) -> dict[str, Any]:
        return {"elem_bits": self.elem_bits, "value_bits": self.value_bits, "shift": self.shift,
                "reg_bits": self.reg_bits, "epr": self.epr, "bit_lo": self.bit_lo_src}

    def _dims_tuple(self) -> dict[str, Any]:
        d = {"rows": self.rows, "cols": self.cols, "nregs": self.nregs, "epr": self.epr, "lanes": self.lanes,
             "products": self.products, "elements": self.elements}
        if self.warps > 1:          # absent for one warp: the keys of warp layouts stay what they were
            d["warps"] = self.warps
        return d

    @cached_property
    def map_key(self) -> str:
        """Content hash of the map (formulas or table, domain, codomain, params), not of the packing."""
        d: dict[str, Any] = dict(self._dims_tuple(), params=sorted(self.params.items()), index=self.index_src)
        if self._table is not None:
            h = hashlib.sha256()
            for k in ("row", "col", "product", "held"):
                h.update(np.ascontiguousarray(self._table[k].astype(np.int64)).tobytes())
            d["table"] = h.hexdigest()
        else:
            d.update(row=self.row_src, col=self.col_src, product=self.product_src, active=self.active_src,
                     let=list(self.let))
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    @cached_property
    def packing_key(self) -> str:
        d = dict(self.packing(), nregs=self.nregs, elements=self.elements)
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    @cached_property
    def key(self) -> str:
        """Content hash of map and packing: equal keys mean identical fragments."""
        return hashlib.sha256(f"{self.map_key}/{self.packing_key}".encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        p = f", products={self.products}" if self.products > 1 else ""
        if self.warps > 1:
            p += f", {self.warps} warps"
        return (f"<Layout {self.name or '(anonymous)'}: {self.rows}x{self.cols}{p}, {self.lanes} lanes x "
                f"{self.nregs} x b{self.reg_bits} ({self.epr} x {self.elem_bits}-bit)>")

    # ------------------------------------------------------------------------------- numpy
    def _base_env(self) -> dict[str, Any]:
        env: dict[str, Any] = {"epr": self.epr, "container": self.elem_bits, "shift": self.shift,
                               "elements": self.elements}
        env.update(self.params)
        return env

    @cached_property
    def _full(self) -> dict[str, np.ndarray]:
        """Every point of the box lanes x nregs x epr (C order), with a `held` mask."""
        L, R, E = np.meshgrid(np.arange(self.lanes), np.arange(self.nregs), np.arange(self.epr), indexing="ij")
        L, R, E = L.ravel().astype(np.int64), R.ravel().astype(np.int64), E.ravel().astype(np.int64)
        env = self._base_env()
        # the domain index is the thread; formulas see the warp and the lane inside it
        env.update(lane=L % self.warp_lanes, warp=L // self.warp_lanes, thread=L, reg=R, elem=E)
        n = L.size
        bc = lambda v: np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)).copy()
        if self._table is not None:
            I = R * self.epr + E
            out = {"row": self._table["row"].ravel().astype(np.int64),
                   "col": self._table["col"].ravel().astype(np.int64),
                   "product": self._table["product"].ravel().astype(np.int64),
                   "held": self._table["held"].ravel().astype(bool)}
        else:
            I = bc(self._f_index.eval(env))
            env["i"] = I
            out = {"row": bc(self._f_row.eval(env)), "col": bc(self._f_col.eval(env)),
                   "product": bc(self._f_product.eval(env))}
            held = np.ones(n, dtype=bool)
            if self._f_active is not None:
                held &= np.broadcast_to(np.asarray(self._f_active.eval(env), dtype=bool), (n,))
            out["held"] = held
        out["held"] = out["held"] & (I < self.elements) & (I >= 0)
        out.update(lane=L, reg=R, elem=E, i=I, warp=L // self.warp_lanes, wlane=L % self.warp_lanes)
        env_b = {"elem": E, "container": self.elem_bits, "shift": self.shift, "epr": self.epr}
        out["bit_lo"] = bc(_formula(self.bit_lo_src).eval(env_b))
        for v in out.values():
            v.setflags(write=False)
        return out

    def enumerate(self) -> dict[str, np.ndarray]:
        """All held points: int64 arrays ``lane, reg, elem, i, product, row, col, bit_lo``; a
        warpgroup layout adds ``warp`` and ``thread`` (``thread = warp * warp_lanes + lane``,
        ``lane`` being the lane in its warp).

        Points are in (thread, reg, elem) order.
        """
        f = self._full
        m = f["held"]
        out = {k: f[k][m] for k in ("lane", "reg", "elem", "i", "product", "row", "col", "bit_lo")}
        if self.warps > 1:
            out["thread"] = out["lane"]
            out["lane"] = f["wlane"][m]
            out["warp"] = f["warp"][m]
        return out

    def at(self, lane: int, reg: int, elem: int, warp: int | None = None) -> tuple[int, int, int] | None:
        """(row, col, product) of one point, or None if the point is not held.  With ``warp``,
        ``lane`` is the lane in that warp; without, it is the thread (= lane for one warp)."""
        if warp is not None:
            if not (0 <= warp < self.warps and 0 <= lane < self.warp_lanes):
                return None
            lane = warp * self.warp_lanes + lane
        if not (0 <= lane < self.lanes and 0 <= reg < self.nregs and 0 <= elem < self.epr):
            return None
        k = (lane * self.nregs + reg) * self.epr + elem
        f = self._full
        if not f["held"][k]:
            return None
        return int(f["row"][k]), int(f["col"][k]), int(f["product"][k])

    def where(self, row: int, col: int, product: int = 0) -> tuple[int, int, int] | None:
        """The smallest (lane, reg, elem) holding cell (row, col) of ``product`` (element -> lane), or None.
        For a warpgroup layout the first component is the thread (:meth:`locate` splits it)."""
        f = self._full
        hit = np.flatnonzero(f["held"] & (f["row"] == row) & (f["col"] == col) & (f["product"] == product))
        if hit.size == 0:
            return None
        k = int(hit[0])
        return int(f["lane"][k]), int(f["reg"][k]), int(f["elem"][k])

    def locate(self, row: int, col: int, product: int = 0) -> dict[str, int] | None:
        """Who holds cell (row, col): ``{warp, lane, thread, reg, elem, i}`` (smallest holder), or None."""
        w = self.where(row, col, product)
        if w is None:
            return None
        th, reg, elem = w
        k = (th * self.nregs + reg) * self.epr + elem
        return {"warp": th // self.warp_lanes, "lane": th % self.warp_lanes, "thread": th, "reg": reg,
                "elem": elem, "i": int(self._full["i"][k])}

    def eval_let(self, name: str) -> np.ndarray:
        """Evaluate one of the entry's ``let`` bindings (e.g. ``firstcol``) at every held point."""
        lets = dict(self.let)
        if name not in lets:
            raise LayoutError(f"layout {self.name} has no binding {name!r} (has: {', '.join(lets) or 'none'})")
        f = self._full
        env = self._base_env()
        env.update(lane=f["wlane"], warp=f["warp"], thread=f["lane"], reg=f["reg"], elem=f["elem"], i=f["i"])
        v = np.broadcast_to(np.asarray(Formula(name, lets).eval(env), dtype=np.int64), f["lane"].shape)
        return v[f["held"]]

    # ------------------------------------------------------------------------------- Z3
    def z3_held(self, lane, reg, elem):
        """Z3 predicate: the point is in the domain and held."""
        import z3

        w = lane.size()
        c = [z3.ULT(lane, self.lanes), z3.ULT(reg, self.nregs), z3.ULT(elem, self.epr)]
        if self._table is not None:
            c.append(self._table_term("held", lane, reg, elem) == 1)
        else:
            env = self._z3_env(lane, reg, elem)
            c.append(z3.ULT(env["i"], self.elements))
            if self._f_active is not None:
                a = self._f_active.z3(env, w)
                c.append(a if isinstance(a, z3.BoolRef) else a != 0)
        return z3.And(*c)

    def _z3_env(self, lane, reg, elem) -> dict[str, Any]:
        import z3

        env: dict[str, Any] = self._base_env()
        if self.warps > 1:     # the domain variable is the thread
            wl = z3.BitVecVal(self.warp_lanes, lane.size())
            env.update(lane=z3.URem(lane, wl), warp=z3.UDiv(lane, wl), thread=lane)
        else:
            env.update(lane=lane, warp=z3.BitVecVal(0, lane.size()), thread=lane)
        env.update(reg=reg, elem=elem)
        env["i"] = self._f_index.z3(env, lane.size())
        return env

    def z3_terms(self, lane, reg, elem):
        """(row, col, product) as Z3 bit-vector terms of the point (lane, reg, elem)."""
        if self._table is not None:
            return tuple(self._table_term(k, lane, reg, elem) for k in ("row", "col", "product"))
        import z3

        w = lane.size()
        env = self._z3_env(lane, reg, elem)

        def bv(x):
            return z3.If(x, z3.BitVecVal(1, w), z3.BitVecVal(0, w)) if isinstance(x, z3.BoolRef) else x

        return (bv(self._f_row.z3(env, w)), bv(self._f_col.z3(env, w)), bv(self._f_product.z3(env, w)))

    def z3_bit_lo(self, lane, reg, elem):
        env = {"elem": elem, "container": self.elem_bits, "shift": self.shift, "epr": self.epr}
        return _formula(self.bit_lo_src).z3(env, elem.size())

    def _table_term(self, key: str, lane, reg, elem):
        """A table column as a balanced If-tree over the flat point index."""
        import z3

        w = lane.size()
        vals = self._table[key].ravel().astype(np.int64)
        n = vals.size
        bits = max(1, int(n - 1).bit_length())
        idx = (lane * self.nregs + reg) * self.epr + elem

        # the selector of each bit and each leaf constant made once (Z3 shares equal terms anyway;
        # this only saves building them again per node)
        sels = {b: z3.Extract(b, b, idx) == 1 for b in range(bits)}
        consts: dict[int, Any] = {}

        def const(v: int):
            if v not in consts:
                consts[v] = z3.BitVecVal(v, w)
            return consts[v]

        flat = vals.tolist()      # plain ints: the per-node slices are small, numpy is slower on them

        def build(lo: int, hi: int, bit: int):
            seg = flat[lo:min(hi, n)]
            if not seg or seg.count(seg[0]) == len(seg):
                return const(seg[0] if seg else 0)
            mid = lo + (1 << bit)
            return z3.If(sels[bit], build(mid, hi, bit - 1), build(lo, mid, bit - 1))

        return build(0, 1 << bits, bits - 1)

    # ------------------------------------------------------------------------------- text
    def describe(self) -> str:
        """The formulas as text."""
        if self._table is not None:
            return f"{self.name or 'table layout'}: {int(self._full['held'].sum())} points from a table"
        lines = []
        if self.let:
            lines.append("where " + ", ".join(f"{k} = {v}" for k, v in self.let))
        lines.append(f"row = {self.row_src}")
        lines.append(f"col = {self.col_src}")
        if self.products > 1:
            lines.append(f"product = {self.product_src}")
        if self.active_src:
            lines.append(f"held iff {self.active_src}")
        lines.append(f"i = {self.index_src}; bits [{self.bit_lo_src}, +{self.value_bits})")
        if self.warps > 1:
            lines.append(f"warp < {self.warps}, lane < {self.warp_lanes}; thread = {self.warp_lanes} * warp + lane")
        return "\n".join(lines)

    def sympy(self) -> dict[str, Any]:
        """sympy expressions of row, col (and product) with the lets inlined."""
        if self._table is not None:
            raise LayoutError("a table layout has no formulas")
        out = {"row": self._f_row.sympy(inline_lets=True), "col": self._f_col.sympy(inline_lets=True)}
        if self.products > 1:
            out["product"] = self._f_product.sympy(inline_lets=True)
        return out


def _dims_of(lay: Layout) -> dict[str, Any]:
    return {"rows": lay.rows, "cols": lay.cols, "nregs": lay.nregs, "epr": lay.epr, "lanes": lay.lanes,
            "warps": lay.warps,
            "products": lay.products, "elem_bits": lay.elem_bits, "value_bits": lay.value_bits,
            "shift": lay.shift, "reg_bits": lay.reg_bits, "elements": lay.elements,
            "index": lay.index_src, "bit_lo": lay.bit_lo_src}


def _need_dims(kw: dict[str, Any]) -> dict[str, Any]:
    missing = [k for k in ("rows", "cols", "nregs", "epr") if k not in kw]
    if missing:
        raise LayoutError(f"layout needs {', '.join(missing)} (or like=<a layout to copy them from>)")
    return kw


# =========================================================================================
# The spec: entries, resolution, fragment()


@dataclass(frozen=True)
class Entry:
    """One [[fragment]] entry of specs/fragments_*.toml."""

    id: str
    file: str
    operands: tuple[str, ...]
    forms: tuple[tuple[str, tuple], ...]
    when: str | None
    matrix: tuple[str, str]
    elements: int | str              # a number, or a formula over m, n, k (wgmma D: "n // 2")
    let: tuple[tuple[str, str], ...]
    row: str
    col: str
    product: str | None
    products: int
    active: str | None
    params: tuple[tuple[str, str], ...]
    same_as: str | None
    section: str
    figure: str
    evidence: str
    note: str
    warps: int = 1                   # 4: a warpgroup fragment, (warp, lane, reg, elem) -> (row, col)
    container: int | None = None     # element container bits, when not the operand's (metadata nibbles: 4)

    def matches(self, env: Mapping[str, Any]) -> bool:
        if env.get("operand") not in self.operands:
            return False
        for ax, vals in self.forms:
            if env.get(ax) not in vals:
                return False
        return self.when is None or bool(_formula(self.when).eval(env))

    def selector_text(self) -> str:
        parts = [f"{ax}={'|'.join(map(str, v))}" for ax, v in self.forms]
        if self.when:
            parts.append(f"when {self.when}")
        return ", ".join(parts)


@dataclass(frozen=True)
class SharedRule:
    operands: tuple[str, ...]
    when: str | None
    section: str
    file: str

    def applies(self, env: Mapping[str, Any]) -> bool:
        return self.when is None or bool(_formula(self.when).eval(env))


@dataclass(frozen=True)
class Spec:
    entries: tuple[Entry, ...]
    by_id: dict
    index: str
    bit_lo: str
    let: tuple[tuple[str, str], ...]
    convention_section: str
    shared: tuple[SharedRule, ...]


_SELECTOR_AXES = set(cat.AXES) | {"type", "operand"}


@lru_cache(maxsize=1)
def spec() -> Spec:
    """Load and validate the fragment spec files (cached)."""
    entries: list[Entry] = []
    shared: list[SharedRule] = []
    conv: dict[str, Any] | None = None
    for fname in SPEC_FILES:
        doc = load_spec(fname)
        if "convention" in doc:
            if conv is not None:
                raise SpecError(f"{fname}.toml: [convention] is defined twice")
            conv = doc["convention"]
        for r in doc.get("shared_layout", []):
            shared.append(SharedRule(tuple(r["operands"]), r.get("when"), r.get("section", ""), fname))
        for n, e in enumerate(doc.get("fragment", [])):
            where = f"{fname}.toml [[fragment]] #{n + 1} ({e.get('id', '?')})"
            try:
                ops = e["operand"]
                ops = tuple([ops] if isinstance(ops, str) else ops)
                forms = []
                for ax, v in e.get("forms", {}).items():
                    if ax not in _SELECTOR_AXES:
                        raise SpecError(f"{where}: unknown selector axis {ax!r}")
                    forms.append((ax, tuple(v) if isinstance(v, list) else (v,)))
                ent = Entry(
                    id=e["id"], file=fname, operands=ops, forms=tuple(forms), when=e.get("when"),
                    matrix=(str(e["matrix"][0]), str(e["matrix"][1])),
                    elements=e["elements"] if isinstance(e["elements"], str) else int(e["elements"]),
                    let=_canon_let(e.get("let")), row=str(e["row"]), col=str(e["col"]),
                    product=e.get("product"), products=int(e.get("products", 1)), active=e.get("active"),
                    params=tuple((str(k), str(v)) for k, v in e.get("params", {}).items()),
                    same_as=e.get("same_as"), section=str(e.get("section", "")), figure=str(e.get("figure", "")),
                    evidence=str(e.get("evidence", "")), note=str(e.get("note", "")),
                    warps=int(e.get("warps", 1)), container=(int(e["container"]) if "container" in e else None))
            except KeyError as k:
                raise SpecError(f"{where}: missing field {k}") from None
            for o in ent.operands:
                if o not in LAYOUT_OPERANDS:
                    raise SpecError(f"{where}: unknown operand {o!r}")
            for src in (ent.row, ent.col, ent.product, ent.active, ent.when, *ent.matrix, *(v for _, v in ent.let),
                        ent.elements if isinstance(ent.elements, str) else None):
                if src is not None:
                    try:
                        Formula(src)
                    except FormulaError as err:
                        raise SpecError(f"{where}: {err}") from None
            entries.append(ent)
    if conv is None:
        raise SpecError("no [convention] table in the fragment spec files")
    by_id: dict[str, Entry] = {}
    for ent in entries:
        if ent.id in by_id:
            raise SpecError(f"fragment id {ent.id!r} is defined twice ({by_id[ent.id].file}, {ent.file})")
        by_id[ent.id] = ent
    for ent in entries:
        if ent.same_as and ent.same_as not in by_id:
            raise SpecError(f"{ent.file}.toml {ent.id}: same_as names unknown entry {ent.same_as!r}")
    return Spec(tuple(entries), by_id, str(conv["i"]), str(conv["bit_lo"]), _canon_let(conv.get("let")),
                str(conv.get("section", "")), tuple(shared))


def _as_form(form_or_opcode: "cat.Form | str") -> cat.Form:
    return form_or_opcode if isinstance(form_or_opcode, cat.Form) else cat.parse(form_or_opcode)


def normalize_operand(operand: str) -> str:
    o = str(operand).strip().lower().replace("-", "_")
    o = {"scalea": "scale_a", "scaleb": "scale_b", "scale_a_data": "scale_a", "scale_b_data": "scale_b",
         "sfa": "scale_a", "sfb": "scale_b"}.get(o, o)
    return o


def selector_env(form: cat.Form, operand: str) -> dict[str, Any]:
    """The names a [[fragment]] selector sees for (form, operand)."""
    env = form.env()
    env["operand"] = operand
    ax = OPERAND_TYPE_AXIS.get(operand)
    env["type"] = (getattr(form, ax) or "") if ax else ""
    env["scale_vec"] = form.scale_vec_effective or ""
    if operand == "e":
        env["type"] = form.atype or ""      # the metadata layout follows A's type
    return env


def resolve(form_or_opcode, operand: str) -> list[Entry]:
    """Every spec entry matching (form, operand); a well-formed spec yields exactly one."""
    form = _as_form(form_or_opcode)
    env = selector_env(form, normalize_operand(operand))
    return [e for e in spec().entries if e.matches(env)]


def layout_operands(form: cat.Form) -> list[str]:
    """The operands of a form that have an element layout here (not mma.sp's metadata `e`, which
    formal.metadata models; wgmma's `e` is the per-warp mma.sp layout as nibbles here)."""
    if form.family not in LAYOUT_FAMILIES:
        return []
    return [o for o in LAYOUT_OPERANDS if o in form.operands and (o != "e" or form.family == "wgmma")]


def _value_bits(etype: str | None, elem_bits: int) -> int:
    if not etype:
        return elem_bits
    try:
        return int(load_spec("formats")[etype]["bits"])
    except KeyError:
        return elem_bits


def _check_operand(form: cat.Form, operand: str) -> str:
    op = normalize_operand(operand)
    if form.family in cat.WGMMA_FAMILIES and form.family != "wgmma":
        raise LayoutError(f"{form.opcode} has no register operands")
    if form.family not in LAYOUT_FAMILIES:
        raise LayoutError(f"{form.opcode}: wmma fragments are unspecified by PTX (9.7.14.4.1); "
                          "see formal.wmma for the per-architecture observations")
    if form.family == "wgmma":
        if op in ("a_desc", "b_desc", "b"):
            raise LayoutError(f"{form.opcode}: operand {op} is a shared-memory matrix (a 64-bit descriptor, "
                              "9.7.15.5.1.2), not a register fragment")
        if op == "a" and form.asource == "desc":
            raise LayoutError(f"{form.opcode}: A comes from a descriptor here (shared memory), not registers")
        if op == "e" and not form.is_sparse:
            raise LayoutError(f"{form.opcode} is dense: it has no metadata operand")
        if op in ("a", "e", "d"):
            return op
    if op == "e":
        raise LayoutError(f"{form.opcode}: the sparsity metadata e is a bit field, not an element layout; "
                          "see `ptx-formal metadata`")
    if op not in form.operands or op not in LAYOUT_OPERANDS:
        have = ", ".join(o for o in form.operands if o in LAYOUT_OPERANDS)
        raise LayoutError(f"{form.opcode} has no operand {operand!r} (has: {have})")
    return op


def param_space(form_or_opcode, operand: str) -> list[dict[str, int]]:
    """Every legal value combination of the immediates a layout depends on ([{}] if none)."""
    form = _as_form(form_or_opcode)
    op = _check_operand(form, operand)
    ents = resolve(form, op)
    if len(ents) != 1 or not ents[0].params:
        return [{}]
    if [c for _, c in ents[0].params] == ["selectors"]:      # the sparsity selector: the form's legal values
        return [{ents[0].params[0][0]: v} for v in (form.selectors or (0,))]
    table = cat.spec().scale_selectors.get(form.scale_vec_effective or "", {})
    names = [k for k, _ in ents[0].params]
    choices = [list(table.get(col, [])) for _, col in ents[0].params]
    return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


def layout_from_entry(entry: Entry, form: cat.Form, operand: str, params: Mapping[str, int] | None = None) -> Layout:
    """Compile one spec entry for one concrete form and operand (no resolution check)."""
    return _layout_from_entry(entry, form, operand, tuple(sorted((params or {}).items())))


@lru_cache(maxsize=8192)
def _layout_from_entry(entry: Entry, form: cat.Form, operand: str, params: tuple) -> Layout:
    sp = spec()
    if form.family == "wgmma" and operand == "a" and form.asource is None:
        form = form.with_asource("reg")         # the register fragment of an opcode given alone
    op = form.operands[operand]
    m, n, k = form.mnk
    dims_env = {"m": m, "n": n, "k": k}
    rows, cols = (int(_formula(x).eval(dims_env)) for x in entry.matrix)
    elements = int(_formula(entry.elements).eval(dims_env)) if isinstance(entry.elements, str) else entry.elements
    elem_bits = entry.container or op.elem_bits
    epr = op.reg_bits // elem_bits if elem_bits <= op.reg_bits else 0
    nregs = -(-elements * elem_bits // op.reg_bits)   # ceil: a bad element count shows in regcount
    pvals = dict(params)
    if entry.params:
        space = param_space(form, operand)
        names = [p for p, _ in entry.params]
        if not pvals:
            pvals = dict(space[0]) if space and space[0] else {p: 0 for p in names}
        unknown = set(pvals) - set(names)
        if unknown:
            raise LayoutError(f"{entry.id}: unknown parameter(s) {sorted(unknown)} (has: {', '.join(names)})")
        for p in names:
            pvals.setdefault(p, 0)
    elif pvals:
        raise LayoutError(f"{entry.id} takes no parameters, got {sorted(pvals)}")
    own = dict(entry.let)
    let = [(k, v) for k, v in sp.let if k not in own] + list(entry.let)
    return Layout(rows, cols, nregs, max(epr, 1), lanes=32 * entry.warps, warps=entry.warps, products=entry.products,
                  elem_bits=elem_bits, value_bits=_value_bits(op.etype, elem_bits), shift=op.shift,
                  reg_bits=op.reg_bits, elements=elements, row=entry.row, col=entry.col, product=entry.product,
                  active=entry.active, let=let, params=pvals, index=sp.index, bit_lo=sp.bit_lo,
                  name=entry.id, source=entry.section, entry=entry, operand=operand)


def fragment(form_or_opcode, operand: str, **params: int) -> Layout:
    """The spec's layout of one operand (a, b, c, d, scale_a, scale_b) of a form.

    Sparse A is the compressed M x K/2 matrix.  Scale-factor layouts depend on the
    selector immediates: pass ``byte_id=..., thread_id=...`` (default: the first legal
    values, 0 and 0).  Raises :class:`LayoutError` for an unknown operand or a form with
    no (or more than one) spec entry.
    """
    form = _as_form(form_or_opcode)
    op = _check_operand(form, operand)
    ents = resolve(form, op)
    if not ents:
        raise LayoutError(f"{form.opcode}: no spec entry gives the layout of operand {op}")
    if len(ents) > 1:
        raise LayoutError(f"{form.opcode}: operand {op} matches several spec entries: {', '.join(e.id for e in ents)}")
    if params:
        legal = param_space(form, op)
        if legal == [{}]:
            raise LayoutError(f"{form.opcode}: operand {op} takes no selector parameters, got {sorted(params)}")
        unknown = set(params) - set(legal[0])
        if unknown:
            raise LayoutError(f"{form.opcode}: operand {op} has no parameter(s) {sorted(unknown)} "
                              f"(has: {', '.join(legal[0])})")
        full = dict(legal[0], **params)          # unnamed selectors take their first legal value
        if full not in legal:
            names = ", ".join(f"{k}={v}" for k, v in full.items())
            raise LayoutError(f"{form.opcode}: {names} is not a legal selector for {op} (PTX ISA 9.7.14.3 Table 37: "
                              f"{'; '.join(', '.join(f'{k}={v}' for k, v in p.items()) for p in legal)}); "
                              "undefined behaviour")
        params = full
    return layout_from_entry(ents[0], form, op, params)


# =========================================================================================
# pack / unpack (vectorised; the evaluator's hot path)


def _out_dtype(bits: int):
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64


@dataclass(frozen=True)
class _Codec:
    ncell: int
    shape: tuple[int, ...]          # (P, R, C) or (R, C)
    lane: np.ndarray                # per cell (P*R*C): which lane, register, bit
    reg: np.ndarray
    bit: np.ndarray
    cell_of_point: np.ndarray       # per point of the box (lanes*nregs*epr): cell index or -1
    bit_of_point: np.ndarray
    mask: int
    reg_dtype: Any
    out_dtype: Any


_CODECS: dict[str, _Codec] = {}


def _codec(lay: Layout) -> _Codec:
    c = _CODECS.get(lay.key)
    if c is not None:
        return c
    f = lay._full
    held = f["held"]
    P, R, C = lay.products, lay.rows, lay.cols
    ok = held & (f["row"] >= 0) & (f["row"] < R) & (f["col"] >= 0) & (f["col"] < C) & (f["product"] >= 0) & (f["product"] < P)
    if (held & ~ok).any():
        raise LayoutError(f"{lay.name}: some held point lands outside the {R}x{C} matrix; prove the layout first")
    cell = np.where(held, (f["product"] * R + f["row"]) * C + f["col"], -1)
    ncell = P * R * C
    counts = np.bincount(cell[held], minlength=ncell)
    if (counts != 1).any():
        bad = int(np.flatnonzero(counts != 1)[0])
        raise LayoutError(f"{lay.name}: not a bijection (cell {bad} is held {int(counts[bad])} times); "
                          "prove the layout first")
    src = np.empty(ncell, dtype=np.int64)
    pts = np.flatnonzero(held)
    src[cell[pts]] = pts
    reg_dtype = np.uint64 if lay.reg_bits > 32 else np.uint32
    c = _Codec(ncell=ncell, shape=((P, R, C) if P > 1 else (R, C)),
               lane=f["lane"][src], reg=f["reg"][src], bit=f["bit_lo"][src].astype(reg_dtype),
               cell_of_point=cell, bit_of_point=f["bit_lo"].astype(np.uint64),
               mask=(1 << lay.value_bits) - 1, reg_dtype=reg_dtype, out_dtype=_out_dtype(lay.value_bits))
    _CODECS[lay.key] = c
    return c


_CHUNK = 1 << 23     # elements per intermediate array (bounds memory at ~64 MiB)


def _lay_of(form_or_layout, operand, params) -> Layout:
    if isinstance(form_or_layout, Layout):
        return form_or_layout
    return fragment(form_or_layout, operand, **params)


def _to_slots(regs: np.ndarray, lay: Layout, reg_dtype) -> np.ndarray:
    """[T, lanes*nregs] registers -> [T, lanes*nregs*epr] containers, in (lane, reg, elem) order.

    Containers of 8/16/32/64 bits are a zero-copy little-endian view; 1- and 4-bit
    containers are split with unpackbits / nibble arithmetic; anything else by shifting.
    """
    T = regs.shape[0]
    eb, epr = lay.elem_bits, lay.epr
    little = sys.byteorder == "little"
    if epr * eb == lay.reg_bits and little:
        if eb in (8, 16, 32, 64):
            dt = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[eb]
            return np.ascontiguousarray(regs).view(dt).reshape(T, -1)
        if eb == 1:
            return np.unpackbits(np.ascontiguousarray(regs).view(np.uint8), axis=1, bitorder="little")
        if eb == 4:
            b = np.ascontiguousarray(regs).view(np.uint8)
            out = np.empty((T, b.shape[1] * 2), dtype=np.uint8)
            out[:, 0::2] = b & 0xF
            out[:, 1::2] = b >> 4
            return out
    bits = (np.arange(epr, dtype=np.uint64) * eb).astype(reg_dtype)
    cmask = reg_dtype((1 << eb) - 1) if eb < 64 else reg_dtype(~np.uint64(0))
    return ((regs[:, :, None] >> bits) & cmask).reshape(T, -1)


def _from_slots(slots: np.ndarray, lay: Layout, reg_dtype) -> np.ndarray:
    """The inverse of :func:`_to_slots`: [T, lanes*nregs*epr] containers -> [T, lanes*nregs]."""
    T = slots.shape[0]
    eb, epr = lay.elem_bits, lay.epr
    little = sys.byteorder == "little"
    if epr * eb == lay.reg_bits and little:
        if eb in (8, 16, 32, 64):
            dt = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[eb]
            return np.ascontiguousarray(slots.astype(dt, copy=False)).view(reg_dtype).reshape(T, -1)
        if eb == 1:
            return np.ascontiguousarray(np.packbits(slots.astype(np.uint8, copy=False), axis=1,
                                                    bitorder="little")).view(reg_dtype)
        if eb == 4:
            s8 = slots.astype(np.uint8, copy=False)
            return np.ascontiguousarray(s8[:, 0::2] | (s8[:, 1::2] << 4)).view(reg_dtype)
    sl = slots.astype(reg_dtype).reshape(T, -1, epr)
    bits = (np.arange(epr, dtype=np.uint64) * eb).astype(reg_dtype)
    return np.bitwise_or.reduce(sl << bits, axis=2)


@dataclass(frozen=True)
class _Fast:
    """Point order <-> cell order permutations for the slot-based codec."""

    src: np.ndarray          # per cell: its point index (lane, reg, elem order)
    cell: np.ndarray         # per point: its cell, or -1
    standard: bool           # bit_lo == elem * elem_bits + shift for every point


_FAST: dict[str, _Fast] = {}


def _fast(lay: Layout, c: _Codec) -> _Fast:
    f = _FAST.get(lay.key)
    if f is None:
        full = lay._full
        held = c.cell_of_point >= 0
        src = np.empty(c.ncell, dtype=np.int64)
        src[c.cell_of_point[held]] = np.flatnonzero(held)
        std = bool((full["bit_lo"] == full["elem"] * lay.elem_bits + lay.shift).all()) and \
            lay.shift + lay.value_bits <= lay.elem_bits
        f = _Fast(src, c.cell_of_point, std)
        _FAST[lay.key] = f
    return f


def unpack(form, operand: str | None, regs, **params) -> np.ndarray:
    """Register files -> matrices of element encodings.

    ``regs``: ``[T, 32, nregs]`` unsigned integers (uint32, or uint64 for .f64 operands);
    a single warp ``[32, nregs]`` is accepted too.  Returns ``[T, rows, cols]`` (``[T,
    products, rows, cols]`` when the form computes several products), each element
    right-aligned (container shift removed, value bits only) in the narrowest unsigned type
    that holds it (uint8/16/32/64).  ``form`` may also be a :class:`Layout`.
    """
    lay = _lay_of(form, operand, params)
    c = _codec(lay)
    a = np.asarray(regs)
    if a.ndim < 2 or a.shape[-2:] != (lay.lanes, lay.nregs):
        raise LayoutError(f"unpack {lay.name}: registers must have shape [T, {lay.lanes}, {lay.nregs}], got {list(a.shape)}")
    if not np.issubdtype(a.dtype, np.integer):
        raise LayoutError(f"unpack {lay.name}: registers must be integers, got {a.dtype}")
    lead = a.shape[:-2]
    nrl = lay.lanes * lay.nregs
    a = a.reshape(-1, nrl).astype(c.reg_dtype, copy=False)
    T = a.shape[0]
    fast = _fast(lay, c)
    out = np.empty((T, c.ncell), dtype=c.out_dtype)
    step = max(1, _CHUNK // max(1, nrl * lay.epr))
    for s in range(0, T, step):
        blk = a[s:s + step]
        if fast.standard:
            v = np.take(_to_slots(blk, lay, c.reg_dtype), fast.src, axis=1)   # take: ~10x faster than [:, idx]
            if lay.shift:
                v = v >> v.dtype.type(lay.shift)
            if lay.value_bits < 8 * v.dtype.itemsize:
                v = v & v.dtype.type(c.mask)
            out[s:s + step] = v
        else:   # a non-standard packing (user layouts): per-cell register gather and shift
            g = np.take(blk, c.lane * lay.nregs + c.reg, axis=1)
            out[s:s + step] = ((g >> c.bit) & c.reg_dtype(c.mask)).astype(c.out_dtype, copy=False)
    return out.reshape(lead + c.shape)


def pack(form, operand: str | None, mats, **params) -> np.ndarray:
    """Matrices of element encodings -> register files (the inverse of :func:`unpack`).

    ``mats``: ``[T, rows, cols]`` (or ``[T, products, rows, cols]``; a single matrix
    without T is accepted).  Values are masked to the element's value bits; bits of a
    register that no element covers (container padding, unread lanes) are 0.  Returns
    ``[T, 32, nregs]`` uint32 (uint64 for 64-bit registers).
    """
    lay = _lay_of(form, operand, params)
    c = _codec(lay)
    a = np.asarray(mats)
    if a.ndim < len(c.shape) or a.shape[-len(c.shape):] != c.shape:
        raise LayoutError(f"pack {lay.name}: matrices must have shape [T, {', '.join(map(str, c.shape))}], "
                          f"got {list(a.shape)}")
    if not np.issubdtype(a.dtype, np.integer):
        raise LayoutError(f"pack {lay.name}: element encodings must be integers, got {a.dtype}")
    lead = a.shape[:-len(c.shape)]
    a = a.reshape(-1, c.ncell)
    T = a.shape[0]
    nrl = lay.lanes * lay.nregs
    fast = _fast(lay, c)
    out = np.empty((T, nrl), dtype=c.reg_dtype)
    held = fast.cell >= 0
    src = np.where(held, fast.cell, 0)
    cdt = _out_dtype(lay.elem_bits)
    step = max(1, _CHUNK // max(1, nrl * lay.epr))
    for s in range(0, T, step):
        blk = a[s:s + step]
        if fast.standard:
            v = np.take(blk.astype(cdt, copy=False), src, axis=1) & cdt(c.mask)
            if lay.shift:
                v = v << cdt(lay.shift)
            if not held.all():
                v[:, ~held] = 0
            out[s:s + step] = _from_slots(v, lay, c.reg_dtype)
        else:
            v = (np.take(blk.astype(np.uint64), src, axis=1) & np.uint64(c.mask)) << c.bit_of_point
            v[:, ~held] = 0
            out[s:s + step] = np.bitwise_or.reduce(v.reshape(-1, nrl, lay.epr), axis=2).astype(c.reg_dtype)
    return out.reshape(lead + (lay.lanes, lay.nregs))


# =========================================================================================
# Tables both ways (the `ptx-formal layout` command)


def _bits(lo: int, width: int) -> str:
    return f"[{lo + width - 1}:{lo}]" if width > 1 else f"[{lo}]"


def operand_letter(operand: str | None) -> str:
    return {"scale_a": "sa", "scale_b": "sb"}.get(operand or "", operand or "x")


def by_lane(lay: Layout) -> list[dict[str, int | str]]:
    """lane/register -> element: one record per held (lane, reg, elem), in that order."""
    e = lay.enumerate()
    recs = []
    for k in range(e["lane"].size):
        r = {"warp": int(e["warp"][k])} if lay.warps > 1 else {}
        r.update({"lane": int(e["lane"][k]), "reg": int(e["reg"][k]), "elem": int(e["elem"][k]), "i": int(e["i"][k]),
                  "bits": _bits(int(e["bit_lo"][k]), lay.value_bits), "row": int(e["row"][k]), "col": int(e["col"][k])})
        if lay.products > 1:
            r["product"] = int(e["product"][k])
        recs.append(r)
    return recs


def by_element(lay: Layout) -> list[dict[str, int | str]]:
    """element -> lane/register/bits: one record per matrix cell, in (product, row, col) order."""
    recs = by_lane(lay)
    return sorted(recs, key=lambda r: (r.get("product", 0), r["row"], r["col"], r.get("warp", 0), r["lane"], r["reg"],
                                       r["elem"]))


def text_grid(lay: Layout, operand: str | None = None) -> str:
    """The matrix as text, each cell 'T<lane>:<op><i>' (the ISA figures' labels)."""
    letter = operand_letter(operand or lay.operand)
    e = lay.enumerate()
    out = []
    for p in range(lay.products):
        grid = [["." for _ in range(lay.cols)] for _ in range(lay.rows)]
        for k in range(e["lane"].size):
            if e["product"][k] != p:
                continue
            r, c = int(e["row"][k]), int(e["col"][k])
            if 0 <= r < lay.rows and 0 <= c < lay.cols:
                lab = f"T{int(e.get('thread', e['lane'])[k])}:{letter}{int(e['i'][k])}"   # figures: T0..T127
                grid[r][c] = lab if grid[r][c] == "." else grid[r][c] + "|" + lab
        w = max(len(x) for row in grid for x in row)
        if lay.products > 1:
            out.append(f"product {p}:")
        out.append("      " + " ".join(f"{c:>{w}}" for c in range(lay.cols)))
        for r, row in enumerate(grid):
            out.append(f"{r:>5} " + " ".join(f"{x:>{w}}" for x in row))
    return "\n".join(out)


def text_lanes(lay: Layout, operand: str | None = None) -> str:
    """Per lane: each register's elements with their cells and bits."""
    letter = operand_letter(operand or lay.operand)
    recs = by_lane(lay)
    out = []
    cur = None
    line: list[str] = []
    for r in recs:
        key = (r.get("warp", 0), r["lane"], r["reg"])
        if key != cur:
            if line:
                out.append(" ".join(line))
            cur = key
            line = [(f"warp {r['warp']} " if "warp" in r else "") + f"lane {r['lane']:>2} reg {r['reg']}:"]
        p = f"p{r['product']} " if "product" in r else ""
        line.append(f"{letter}{r['i']}{r['bits']}=({p}{r['row']},{r['col']})")
    if line:
        out.append(" ".join(line))
    return "\n".join(out)


def records_csv(recs: list[dict]) -> str:
    buf = io.StringIO()
    if not recs:
        return ""
    w = csv.DictWriter(buf, fieldnames=list(recs[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(recs)
    return buf.getvalue()


def records_md(recs: list[dict]) -> str:
    if not recs:
        return ""
    keys = list(recs[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in recs:
        lines.append("| " + " | ".join(str(r[k]) for k in keys) + " |")
    return "\n".join(lines)


def layout_json(lay: Layout, form: cat.Form | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": lay.name, "source": lay.source, "operand": lay.operand,
        "rows": lay.rows, "cols": lay.cols, "products": lay.products, "lanes": lay.lanes, "warps": lay.warps,
        "nregs": lay.nregs, "reg_bits": lay.reg_bits, "epr": lay.epr, "elem_bits": lay.elem_bits,
        "value_bits": lay.value_bits, "shift": lay.shift, "params": lay.params,
        "formulas": None if lay.is_table else {"let": dict(lay.let), "row": lay.row_src, "col": lay.col_src,
                                               "product": lay.product_src if lay.products > 1 else None,
                                               "active": lay.active_src, "i": lay.index_src,
                                               "bit_lo": lay.bit_lo_src},
        "key": lay.key,
    }
    if form is not None:
        d["form"] = form.opcode
    if lay.entry is not None:
        d["entry"] = {"id": lay.entry.id, "section": lay.entry.section, "figure": lay.entry.figure,
                      "evidence": lay.entry.evidence, "note": lay.entry.note}
    return d


def load_table(path: str | Path, *, like: Layout) -> Layout:
    """A table layout from a CSV (header: lane,reg,elem,row,col[,product] or lane,i,row,col)
    or JSON file (a list of such records, or {"entries": [...]})."""
    p = Path(path)
    text = p.read_text()
    if p.suffix.lower() == ".json" or text.lstrip().startswith(("[", "{")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise LayoutError(f"{p}: not valid JSON: {e}") from None
        if isinstance(data, dict):
            data = data.get("entries", data.get("by_lane"))
        if not isinstance(data, list):
            raise LayoutError(f"{p}: expected a list of records (or an object with 'entries')")
        recs = data
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows:
            raise LayoutError(f"{p}: empty table")
        recs = rows
    return Layout.from_table(recs, like=like, name=str(p.name))


# =========================================================================================
# Observed fragments (silicon one-hot probes) against the spec


def observed_layout(form_or_opcode, operand: str, observed, **params) -> Layout:
    """A table layout from an observed fragment, shaped like the spec's (form, operand).

    ``observed`` is a list of records ``{warp, lane, reg, elem, row, col}`` (or ``thread``
    instead of warp/lane, or ``i`` instead of reg/elem; one-warp layouts: ``lane``), or an
    integer array ``[threads, nregs, epr, 2]`` (``[threads, nregs, 2]`` when a register holds
    one element) of (row, col) per point, ``-1`` for a point that held nothing."""
    spec_lay = fragment(form_or_opcode, operand, **params)
    if isinstance(observed, np.ndarray) or (isinstance(observed, (list, tuple)) and observed
                                            and not isinstance(observed[0], Mapping)
                                            and np.asarray(observed).ndim >= 3):
        a = np.asarray(observed, dtype=np.int64)
        if a.ndim == 3 and spec_lay.epr == 1:
            a = a[:, :, None, :]
        want = (spec_lay.lanes, spec_lay.nregs, spec_lay.epr, 2)
        if a.shape != want:
            raise LayoutError(f"observed array has shape {list(a.shape)}, expected {list(want)} "
                              "(thread, register, element, (row, col))")
        recs = [{"thread": t, "reg": r, "elem": e, "row": int(a[t, r, e, 0]), "col": int(a[t, r, e, 1])}
                for t in range(want[0]) for r in range(want[1]) for e in range(want[2]) if a[t, r, e, 0] >= 0]
        if spec_lay.warps == 1:
            recs = [dict(x, lane=x.pop("thread")) for x in recs]
        observed = recs
    return Layout.from_table(observed, like=spec_lay, name="observed")
