"""Where data lives and what it is: backends, contents and the two endpoint kinds.

Locations.  A value is tracked bit by bit:

* register bits ``(lane, register name, bit)``, ``bit < width(register)``;
* shared-memory bits ``(bit address)`` = 8 * byte address + bit in byte (little-endian:
  the lowest byte address holds the least significant byte of an element).

Contents.  Each location holds a :data:`Content` ``(kind, row, col, bit)``: ``kind`` is
``DATA`` for bit ``bit`` of logical element ``(row, col)`` of the matrix the recipe moves;
``UNDEF`` (never written / outside the source), ``ZERO`` (padding the hardware writes as
zero), ``SIGN`` (prmt's sign replication of the byte holding that bit) and ``GARBLED`` (a
conversion read something that is not one whole element) are never what a layout wants.

Backends.  Every movement is written once against :class:`Ops`, and runs on numpy arrays
(every lane and bit at once: enumeration) or on Z3 terms (symbolic lane and bit: proof).

Endpoints.  :class:`RegLayout` -- a layout of registers, ``(lane, reg, elem) -> (row,
col)`` over named registers (a fragment of the spec, a user's formulas, a Triton or CuTe
layout); :class:`MemLayout` -- a tile in shared memory, ``(row, col) -> element offset``
from a base byte address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import algebra as alg
from ..algebra import Map
from ..expr import Formula

UNDEF, DATA, ZERO, SIGN, GARBLED = 0, 1, 2, 3, 4
KIND_NAMES = {UNDEF: "undefined", DATA: "data", ZERO: "zero padding", SIGN: "sign fill", GARBLED: "garbled"}
W = alg.WIDTH


class TransformError(ValueError):
    """Bad recipe input (one-line message; exit code 2 in the CLI)."""


class Undecided(Exception):
    """A preliminary proof (e.g. a tile's certified inverse) got no solver verdict: the
    recipe's result is Unknown, not bad input."""


# ---------------------------------------------------------------------------------------
# Backends

class Ops:
    is_z3 = False

    def const(self, v):
        raise NotImplementedError


class NP(Ops):
    """numpy: values are int64 arrays of one common shape, booleans bool arrays."""

    def const(self, v):
        return np.int64(v)

    def ite(self, c, a, b):
        return np.where(c, a, b)

    def and_(self, *cs):
        out = True
        for c in cs:
            out = np.logical_and(out, c)
        return out

    def or_(self, *cs):
        out = False
        for c in cs:
            out = np.logical_or(out, c)
        return out

    def not_(self, c):
        return np.logical_not(c)

    def eq(self, a, b):
        return np.equal(a, b)

    def lt(self, a, b):
        return np.less(a, b)

    def le(self, a, b):
        return np.less_equal(a, b)

    def div(self, a, n):
        return np.floor_divide(a, n)

    def mod(self, a, n):
        return np.mod(a, n)

    def truth(self, x):
        return np.asarray(x) != 0 if np.asarray(x).dtype != bool else np.asarray(x)

    def formula(self, f: Formula, env: Mapping[str, Any]):
        return f.eval(env)


class Z3(Ops):
    """Z3: values are 32-bit bit-vectors (unsigned), booleans BoolRefs."""

    is_z3 = True

    def __init__(self):
        import z3
        self.z3 = z3

    def const(self, v):
        return self.z3.BitVecVal(int(v) & 0xFFFFFFFF, W)

    def bv(self, x):
        z3 = self.z3
        if isinstance(x, z3.BoolRef):
            return z3.If(x, self.const(1), self.const(0))
        if isinstance(x, (int, np.integer, bool)):
            return self.const(int(x))
        return x

    def b(self, x):
        z3 = self.z3
        if isinstance(x, z3.BoolRef):
            return x
        if isinstance(x, (bool, np.bool_)):
            return z3.BoolVal(bool(x))
        return self.bv(x) != 0

    def ite(self, c, a, b):
        z3 = self.z3
        c = self.b(c)
        if isinstance(a, z3.BoolRef) and isinstance(b, z3.BoolRef):
            return z3.If(c, a, b)
        return z3.If(c, self.bv(a), self.bv(b))

    def and_(self, *cs):
        return self.z3.And(*[self.b(c) for c in cs])

    def or_(self, *cs):
        return self.z3.Or(*[self.b(c) for c in cs])

    def not_(self, c):
        return self.z3.Not(self.b(c))

    def eq(self, a, b):
        return self.bv(a) == self.bv(b)

    def lt(self, a, b):
        return self.z3.ULT(self.bv(a), self.bv(b))

    def le(self, a, b):
        return self.z3.ULE(self.bv(a), self.bv(b))

    def div(self, a, n):
        return self.z3.UDiv(self.bv(a), self.bv(n))

    def mod(self, a, n):
        return self.z3.URem(self.bv(a), self.bv(n))

    def truth(self, x):
        return self.b(x)

    def formula(self, f: Formula, env: Mapping[str, Any]):
        return f.z3({k: self.bv(v) for k, v in env.items()}, W)


@dataclass
class Content:
    kind: Any
    row: Any
    col: Any
    bit: Any

    def fields(self):
        return (self.kind, self.row, self.col, self.bit)


def ite_content(ops: Ops, c, a: Content, b: Content) -> Content:
    return Content(*(ops.ite(c, x, y) for x, y in zip(a.fields(), b.fields())))


def const_content(ops: Ops, kind: int, like=None) -> Content:
    z = ops.const(0)
    return Content(ops.const(kind), z, z, z)


def content_eq(ops: Ops, a: Content, b: Content):
    return ops.and_(*[ops.eq(x, y) for x, y in zip(a.fields(), b.fields())])


# ---------------------------------------------------------------------------------------
# Endpoints

@dataclass
class RegLayout:
    """Registers ``names`` of every lane hold a layout ``(lane, reg, elem) -> (row, col)``.

    ``map`` has inputs lane:32, reg:len(names), elem:epr and outputs row, col; element
    ``elem`` of register ``reg`` sits at bits ``[elem*elem_bits, (elem+1)*elem_bits)``.
    ``row_offset`` / ``col_offset`` place it inside a larger logical matrix."""

    names: list[str]
    map: Map
    elem_bits: int
    reg_bits: int = 32
    row_offset: int = 0
    col_offset: int = 0
    label: str = ""
    value_bits: int | None = None   # bits of the value inside its container (default: all)
    shift: int = 0                  # the value's offset inside its container (e2m1 in bits 5:2)
    opcode: str = ""                # set for spec fragments: the mma form and operand
    operand: str = ""

    def __post_init__(self):
        n = dict((d.name, d.size) for d in self.map.ins)
        if set(n) != {"lane", "reg", "elem"}:
            raise TransformError(f"{self.label}: a register layout maps (lane, reg, elem), not {tuple(n)}")
        if n["reg"] != len(self.names):
            raise TransformError(f"{self.label}: layout has {n['reg']} registers but {len(self.names)} names "
                                 f"were given ({', '.join(self.names)})")
        if n["elem"] * self.elem_bits > self.reg_bits:
            raise TransformError(f"{self.label}: {n['elem']} elements of {self.elem_bits} bits do not fit a "
                                 f"{self.reg_bits}-bit register")
        if len(set(self.names)) != len(self.names):
            raise TransformError(f"{self.label}: register names repeat: {self.names}")

    @property
    def epr(self) -> int:
        return dict((d.name, d.size) for d in self.map.ins)["elem"]

    def logical(self, ops: Ops, lane, reg: int, bit):
        """(held, row, col, bit-in-element) of bit ``bit`` of register ``reg`` of ``lane``."""
        w = self.elem_bits
        elem = ops.div(bit, w)
        env = {"lane": lane, "reg": ops.const(reg) if ops.is_z3 else np.broadcast_to(np.int64(reg), np.shape(lane)),
               "elem": elem}
        if ops.is_z3:
            out = self.map.z3(env)
            held = self.map.z3_domain(env)
            held = ops.and_(held, ops.lt(bit, self.epr * w))
            vb = self.value_bits or w
            if vb < w or self.shift:
                bw = ops.mod(bit, w)
                held = ops.and_(held, ops.le(self.shift, bw), ops.lt(bw, self.shift + vb))
        else:
            lane_a = np.asarray(lane, dtype=np.int64)
            inbox = (lane_a >= 0) & (lane_a < 32) & (np.asarray(elem) < self.epr) & (np.asarray(bit) >= 0)
            safe = {"lane": np.where(inbox, lane_a, 0), "reg": np.asarray(env["reg"]),
                    "elem": np.where(inbox, elem, 0)}
            safe = {k: np.broadcast_to(v, lane_a.shape) for k, v in safe.items()}
            out = self.map._eval(safe)
            out = {k: np.broadcast_to(np.asarray(v, dtype=np.int64), lane_a.shape) for k, v in out.items()}
            m = self.map.domain_mask({k: v.reshape(-1) for k, v in safe.items()}).reshape(lane_a.shape)
            held = inbox & m
            vb = self.value_bits or w
            if vb < w or self.shift:
                bw = np.mod(bit, w)
                held = held & (bw >= self.shift) & (bw < self.shift + vb)
        return held, out["row"], out["col"], ops.mod(bit, w) - self.shift

    def content(self, ops: Ops, lane, reg: int, bit) -> Content:
        held, row, col, b = self.logical(ops, lane, reg, bit)
        data = Content(ops.const(DATA), row + self.row_offset if not ops.is_z3 else ops.bv(row) + self.row_offset,
                       col + self.col_offset if not ops.is_z3 else ops.bv(col) + self.col_offset, b)
        return ite_content(ops, held, data, const_content(ops, UNDEF))

    def describe(self) -> str:
        off = ""
        if self.row_offset or self.col_offset:
            off = f" at (+{self.row_offset}, +{self.col_offset})"
        return (f"{self.label or self.map.name}: {{{', '.join(self.names)}}} "
                f"{self.map.signature()}, {self.epr} x {self.elem_bits}-bit per {self.reg_bits}-bit register{off}")


@dataclass
class MemLayout:
    """A tile in shared memory: element (row, col) at byte ``base + offset(row, col) *
    elem_bits / 8``; ``map`` is ``(row, col) -> (offset)`` (must be injective)."""

    map: Map
    elem_bits: int
    base: int = 0
    label: str = ""
    _inverse: Any = field(default=None, repr=False)

    def __post_init__(self):
        ins = [d.name for d in self.map.ins]
        if ins != ["row", "col"] or [d.name for d in self.map.outs] != ["offset"]:
            raise TransformError(f"{self.label}: a memory tile maps (row, col) -> (offset), not "
                                 f"{self.map.signature()}")
        if self.elem_bits % 8 and 8 % self.elem_bits:
            raise TransformError(f"{self.label}: element size {self.elem_bits} bits is neither a multiple nor "
                                 "a divisor of a byte")

    @property
    def rows(self) -> int:
        return self.map.ins[0].size

    @property
    def cols(self) -> int:
        return self.map.ins[1].size

    def inverse(self):
        """offset -> (row, col), certified (``Map.invert(onto='image')``)."""
        if self._inverse is None:
            try:
                self._inverse = self.map.invert(onto="image")
            except alg.NotInvertible as e:
                if e.undecided:
                    raise Undecided(f"{self.label}: {e}") from None
                raise TransformError(f"{self.label}: the tile's address map is not invertible: {e}") from None
        return self._inverse

    def bit_extent(self) -> tuple[int, int]:
        """[lo, hi) bit addresses the tile occupies."""
        e = self.map.enumerate()
        off = e["offset"]
        return (8 * self.base + int(off.min()) * self.elem_bits,
                8 * self.base + (int(off.max()) + 1) * self.elem_bits)

    def content(self, ops: Ops, addr_bit) -> Content:
        """What the tile puts at bit address ``addr_bit`` (UNDEF outside the tile)."""
        inv = self.inverse()
        w = self.elem_bits
        rel = addr_bit - 8 * self.base if not ops.is_z3 else ops.bv(addr_bit) - 8 * self.base
        off = ops.div(rel, w)
        b = ops.mod(rel, w)
        size = inv.ins[0].size
        if ops.is_z3:
            env = {"offset": off}
            held = ops.and_(ops.le(8 * self.base, addr_bit), inv.z3_domain(env))
            out = inv.z3(env)
        else:
            rel = np.asarray(rel)
            inbox = (rel >= 0) & (off < size)
            safe = np.where(inbox, off, 0)
            out = inv._eval({"offset": safe})
            m = inv.domain_mask({"offset": safe.reshape(-1)}).reshape(safe.shape)
            held = inbox & m
            out = {k: np.broadcast_to(np.asarray(v, dtype=np.int64), safe.shape) for k, v in out.items()}
        data = Content(ops.const(DATA), out["row"], out["col"], b)
        return ite_content(ops, held, data, const_content(ops, UNDEF))

    def describe(self) -> str:
        return (f"{self.label or self.map.name}: shared tile {self.map.signature()} of {self.elem_bits}-bit "
                f"elements at byte {self.base}")


# ---------------------------------------------------------------------------------------
# Adapters to other engineers' layout objects

class LayoutMap(Map):
    """A ``formal.layout.Layout`` as an algebra map (lane, reg, elem) -> (row, col).

    Requires a single-product layout (``products == 1``); ``product`` is dropped."""

    def __init__(self, lay, name: str | None = None):
        if lay.products != 1:
            raise TransformError(f"{lay.name}: a layout with {lay.products} products per warp cannot be a "
                                 "single-matrix endpoint (restrict it to one product first)")
        self.lay = lay
        self.ins = alg._dims([("lane", lay.lanes), ("reg", lay.nregs), ("elem", lay.epr)])
        self.outs = alg._dims([("row", lay.rows), ("col", lay.cols)])
        self.name = name or lay.name
        f = lay._full
        self._row, self._col, self._held = f["row"], f["col"], f["held"]

    def _idx(self, env):
        L = np.clip(np.asarray(env["lane"], dtype=np.int64), 0, self.lay.lanes - 1)
        R = np.clip(np.asarray(env["reg"], dtype=np.int64), 0, self.lay.nregs - 1)
        E = np.clip(np.asarray(env["elem"], dtype=np.int64), 0, self.lay.epr - 1)
        return (L * self.lay.nregs + R) * self.lay.epr + E

    def _eval(self, env):
        i = self._idx(env)
        return {"row": self._row[i], "col": self._col[i]}

    def _dom_eval(self, env):
        return self._held[self._idx(env)]

    def _z3(self, env):
        r, c, _ = self.lay.z3_terms(env["lane"], env["reg"], env["elem"])
        return {"row": r, "col": c}

    def _dom_z3(self, env):
        return self.lay.z3_held(env["lane"], env["reg"], env["elem"])


def fragment_endpoint(opcode: str, operand: str, names: Sequence[str] | None = None,
                      row_offset: int = 0, col_offset: int = 0, **params) -> RegLayout:
    """The spec fragment of ``operand`` of the mma/mma.sp form ``opcode`` (formal.layout)."""
    from .. import catalog as cat
    from ..layout import fragment

    form = cat.parse(opcode)
    lay = fragment(form, operand, **params)
    if names is None:
        names = [f"{operand}{i}" for i in range(lay.nregs)]
    names = list(names)
    at = f" at (+{row_offset}, +{col_offset})" if row_offset or col_offset else ""
    return RegLayout(names, LayoutMap(lay), lay.elem_bits, lay.reg_bits, row_offset, col_offset,
                     label=f"{form.opcode} {operand}{at}", value_bits=lay.value_bits, shift=lay.shift,
                     opcode=form.opcode, operand=lay.operand or operand)
