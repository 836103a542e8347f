"""Movement instructions: PTX text -> semantics from ``specs/movement.toml``.

Each supported instruction becomes a :class:`Step` that says, for every destination bit,
where it comes from (a *gather*); stores additionally say which register bit lands at
every memory bit (through a writer table that Z3 certifies).  The PTX facts -- which lane
supplies which row address, which byte prmt selects, which cvt operand lands in the upper
half -- are formulas of ``specs/movement.toml``; this module only parses the instruction
and plumbs operands into those formulas.

Supported (straight-line, all 32 lanes execute every step):

=====================================================  ==========================
``ldmatrix.sync.aligned.{m8n8,m16n16,m8n16}.{x1,x2,x4}{.trans}{.shared{::cta}}.{b16,b8}[.b8x16.{b6x16_p32,b4x16_p64}] {d..}, [p]``
``stmatrix.sync.aligned.{m8n8,m16n8}.{x1,x2,x4}{.trans}{.shared{::cta}}.{b16,b8} [p], {r..}``
``movmatrix.sync.aligned.m8n8.trans.b16 d, a``
``shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask``
``prmt.b32{.f4e,.b4e,.rc8,.ecl,.ecr,.rc16} d, a, b, c``
``cvt{.rn,.rz,...}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b``
``mov.{b16,b32,b64} d, a`` / ``d, {x, y..}`` / ``{x, y..}, d``
``ld.shared{.v2,.v4}.{b16,b32,b64} d|{..}, [p+off]`` and ``st.shared...``
``shl/shr.{b,u,s}{16,32,64} d, a, imm``
``wmma.load/.store ... [p], stride`` (with a fragment map, see :class:`WmmaMove`)
=====================================================  ==========================

Address and index operands are *values*: integers per lane, written as formulas in the
recipe (``value p = (lane % 16) * 32``) or immediates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from .. import catalog as cat
from ..expr import Formula
from ..specdata import load_spec
from .spaces import DATA, GARBLED, SIGN, UNDEF, ZERO, Content, TransformError, const_content, ite_content


# ---------------------------------------------------------------------------------------
# Operands

@dataclass(frozen=True)
class Vec:
    names: tuple[str, ...]


@dataclass(frozen=True)
class Addr:
    base: str | int
    offset: int = 0


@dataclass(frozen=True)
class Name:
    name: str
    pred: str | None = None


@dataclass(frozen=True)
class Imm:
    value: int


_IDENT = r"%?[A-Za-z_$][A-Za-z0-9_$]*"


def _strip(name: str) -> str:
    return name[1:] if name.startswith("%") else name


def _int(tok: str) -> int | None:
    t = tok.strip().lower()
    try:
        if re.fullmatch(r"-?0x[0-9a-f]+", t):
            return int(t, 16)
        if re.fullmatch(r"-?0b[01]+", t):
            return int(t, 2)
        if re.fullmatch(r"-?[0-9]+", t):
            return int(t, 10)
    except ValueError:
        return None
    return None


def split_top(s: str) -> list[str]:
    """Top-level comma split of a PTX operand list (commas inside {}, [] and () stay); the
    recipe reader and the kernel front end both use it."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_operand(tok: str):
    tok = tok.strip()
    if tok.startswith("{"):
        if not tok.endswith("}"):
            raise TransformError(f"unbalanced braces in operand {tok!r}")
        names = [x.strip() for x in tok[1:-1].split(",") if x.strip()]
        for n in names:
            if not re.fullmatch(_IDENT, n):
                raise TransformError(f"bad register name {n!r} in {tok!r}")
        return Vec(tuple(_strip(n) for n in names))
    if tok.startswith("["):
        if not tok.endswith("]"):
            raise TransformError(f"unbalanced brackets in operand {tok!r}")
        inner = tok[1:-1].replace(" ", "")
        m = re.fullmatch(rf"({_IDENT}|-?(?:0x[0-9a-fA-F]+|[0-9]+))(?:([+-])(0x[0-9a-fA-F]+|[0-9]+))?", inner)
        if not m:
            raise TransformError(f"cannot read address operand {tok!r} (expected [name], [name+imm] or [imm])")
        base = _int(m.group(1))
        off = 0
        if m.group(3):
            off = _int(m.group(3)) * (-1 if m.group(2) == "-" else 1)
        return Addr(base if base is not None else _strip(m.group(1)), off)
    v = _int(tok)
    if v is not None:
        return Imm(v)
    m = re.fullmatch(rf"({_IDENT})(?:\|({_IDENT}))?", tok)
    if not m:
        raise TransformError(f"cannot read operand {tok!r}")
    return Name(_strip(m.group(1)), _strip(m.group(2)) if m.group(2) else None)


def parse_instruction(text: str) -> tuple[str, list[str], list]:
    """'opcode ops;' -> (opcode, qualifier list, operands)."""
    t = text.split("//")[0].strip()
    if t.endswith(";"):
        t = t[:-1].strip()
    if not t:
        raise TransformError("empty instruction")
    m = re.match(r"([A-Za-z][A-Za-z0-9_.:]*)\s*(.*)$", t)
    if not m:
        raise TransformError(f"cannot read instruction {text!r}")
    opcode, rest = m.group(1), m.group(2)
    ops = [parse_operand(x) for x in split_top(rest)] if rest.strip() else []
    return opcode, opcode.split("."), ops


# ---------------------------------------------------------------------------------------
# The spec

@lru_cache(maxsize=None)
def movement_spec() -> dict:
    return load_spec("movement")


def _F(src: str, let: dict | None = None) -> Formula:
    return Formula(str(src), let=dict(let or {}))


def _numpy_eval(f: Formula, env: dict):
    return f.eval(env)


# ---------------------------------------------------------------------------------------
# Steps

@dataclass
class Guard:
    """An undefined-behaviour condition of one step: ``bad(ops, ctx, k, env)`` over the
    integer variables ``dims`` (name, size); any satisfying point is UB."""

    message: str
    dims: list[tuple[str, int]]
    bad: Callable


class Step:
    """One instruction.  ``pull(ctx, k, name, L, B)`` -> (content of bit B of register
    ``name`` of lane L after the step, its source location); ``ctx`` reads stage ``k``."""

    text: str = ""
    kind: str = ""
    section: str = ""
    evidence: str = ""
    sm90: bool = True
    granularity: int = 32
    writes: list[str]
    reads: list[str]
    writes_mem: bool = False
    reads_mem: bool = False
    widths: dict[str, int]     # registers this step touches and their widths

    def pull(self, ctx, k: int, name: str, L, B):
        raise NotImplementedError

    def pull_mem(self, ctx, k: int, A):
        raise NotImplementedError

    def guards(self, ctx) -> list[Guard]:
        return []

    def addresses(self, ctx) -> tuple[int, int] | None:
        """[lo, hi) bit addresses this step may touch (numpy evaluation), or None."""
        return None

    def describe(self) -> str:
        return self.text


def _reg_loc(ctx, name, lane, bit):
    return ("reg", name, lane, bit)


def _vec(op, what: str, text: str) -> tuple[str, ...]:
    if isinstance(op, Vec):
        return op.names
    if isinstance(op, Name):
        return (op.name,)
    raise TransformError(f"{text}: {what} must be a register or a {{vector}} of registers")


def _name(op, what: str, text: str) -> str:
    if isinstance(op, Name):
        return op.name
    raise TransformError(f"{text}: {what} must be a register name")


def _value(op, what: str, text: str):
    if isinstance(op, (Imm, Name)):
        return op
    raise TransformError(f"{text}: {what} must be an immediate or a value name")


def _need(ops, n: int, text: str):
    if len(ops) != n:
        raise TransformError(f"{text}: expected {n} operands, got {len(ops)}")


# ---- matrix load / store -------------------------------------------------------------------

_LDM_QUALS = {"sync", "aligned", "trans", "shared", "shared::cta", "b16", "b8", "b8x16", "b6x16_p32", "b4x16_p64",
              "m8n8", "m16n16", "m8n16", "m16n8", "x1", "x2", "x4"}


def _matrix_quals(quals: list[str], text: str) -> dict:
    q = quals[1:]
    bad = [x for x in q if x not in _LDM_QUALS]
    if bad:
        raise TransformError(f"{text}: unknown qualifier(s) .{', .'.join(bad)}")
    for must in ("sync", "aligned"):
        if must not in q:
            raise TransformError(f"{text}: .{must} is mandatory")
    shapes = [x for x in q if x in ("m8n8", "m16n16", "m8n16", "m16n8")]
    nums = [x for x in q if x in ("x1", "x2", "x4")]
    types = [x for x in q if x in ("b16", "b8")]
    src = [x for x in q if x in ("b6x16_p32", "b4x16_p64")]
    if len(shapes) != 1 or len(nums) != 1:
        raise TransformError(f"{text}: needs exactly one shape and one .num (.x1/.x2/.x4)")
    if "b8x16" in q:
        types.append("b8")
    if len(set(types)) != 1:
        raise TransformError(f"{text}: needs exactly one element type")
    return {"shape": shapes[0], "num": int(nums[0][1]), "trans": "trans" in q, "type": types[0],
            "src_fmt": src[0] if src else "", "space": "shared" if any(x.startswith("shared") for x in q) else ""}


def _bind_memory_operands(st, ops, store: bool, what: str, text: str, n: int, need: str) -> None:
    """A load (``{regs}, [addr]``) or store (``[addr], {regs}``) of n registers: sets the step's
    registers, address and what it reads and writes."""
    _need(ops, 2, text)
    vec_op, addr_op = (ops[1], ops[0]) if store else (ops[0], ops[1])
    regs = _vec(vec_op, what, text)
    if len(regs) != n:
        raise TransformError(f"{text}: {need}, got {len(regs)}")
    if not isinstance(addr_op, Addr):
        raise TransformError(f"{text}: the address operand must be [p] or [p+imm]")
    st.regs, st.addr = list(regs), addr_op
    st.writes = [] if store else list(regs)
    st.reads = list(regs) if store else []
    st.writes_mem, st.reads_mem = store, not store


def _store_source(ctx, regs, k, lane, j, B):
    """Content of bit B of register ``regs[j]`` of ``lane`` at stage k, and where it was read
    (a store's source: j is symbolic under Z3, an array under numpy)."""
    ops = ctx.ops
    if ops.is_z3:
        out = const_content(ops, UNDEF)
        for jj, r in enumerate(regs):
            out = ite_content(ops, ops.eq(j, jj), ctx.read(k, r, lane, B), out)
        return out, None
    out = None
    loc_reg = np.empty(np.shape(lane), dtype=object)
    for jj, r in enumerate(regs):
        c = ctx.read(k, r, lane, B)
        out = c if out is None else ite_content(ops, j == jj, c, out)
        loc_reg[np.asarray(j) == jj] = r
    return out, ("reg", loc_reg, lane, B)


def _store_conflict_guard(st) -> "Guard":
    """Two register elements of one store landing on the same memory element: which one
    lands is not specified, so the recipe is refuted (checked by Z3 and enumeration)."""
    n, epr = st.nregs, st.epr
    w = st.dst_bits

    def bad(ops, ctx, k, env):
        a, _ = st._elem_bit(ctx, env["lane"], env["j"], env["e"])
        b, _ = st._elem_bit(ctx, env["lane0"], env["j0"], env["e0"])
        if ops.is_z3:
            import z3
            earlier = z3.Or(z3.ULT(env["lane0"], env["lane"]),
                            z3.And(env["lane0"] == env["lane"], z3.Or(z3.ULT(env["j0"], env["j"]),
                                   z3.And(env["j0"] == env["j"], z3.ULT(env["e0"], env["e"])))))
            same = ops.eq(ops.div(a, w), ops.div(b, w))
        else:
            key = lambda l, j, e: (l * n + j) * epr + e
            earlier = key(env["lane0"], env["j0"], env["e0"]) < key(env["lane"], env["j"], env["e"])
            same = np.floor_divide(a, w) == np.floor_divide(b, w)
        return ops.and_(earlier, same)

    return Guard("two register elements are stored to the same address (which value lands is not specified)",
                 [("lane", 32), ("j", n), ("e", epr), ("lane0", 32), ("j0", n), ("e0", epr)], bad)


class ElementStore:
    """A store of register elements (``self.regs``: ``nregs`` registers of ``epr`` elements of
    ``dst_bits``) to the addresses ``self._elem_bit`` gives: the writer table and the sources."""

    def _writes(self, ctx):
        """Numpy: every register element (lane, j, e) and its memory element index."""
        L, J, E = np.meshgrid(np.arange(32), np.arange(self.nregs), np.arange(self.epr), indexing="ij")
        L, J, E = L.ravel(), J.ravel(), E.ravel()
        start, _ = self._elem_bit(ctx, L, J, E)
        return L, J, E, np.asarray(start)

    def pull_mem(self, ctx, k, A):
        return ctx.store_pull(self, k, A)

    def store_source(self, ctx, k, lane, j, e, b):
        """Content of bit b of register element (lane, j, e) at stage k."""
        ops = ctx.ops
        B = ops.bv(e) * self.dst_bits + ops.bv(b) if ops.is_z3 else e * self.dst_bits + b
        return _store_source(ctx, self.regs, k, lane, j, B)


class MatrixMove(ElementStore, Step):
    """ldmatrix (load) / stmatrix (store): 8 (or 16) lanes supply row addresses."""

    def __init__(self, text: str, quals: list[str], ops: list, store: bool):
        self.text, self.store = text, store
        self.kind = "stmatrix" if store else "ldmatrix"
        env = _matrix_quals(quals, text)
        entries = [e for e in movement_spec()[self.kind] if _F(e["when"]).eval(env)]
        if len(entries) != 1:
            raise TransformError(f"{text}: no {self.kind} form in specs/movement.toml matches "
                                 f"(shape .{env['shape']}, type .{env['type']}{', .trans' if env['trans'] else ''})")
        e = self.entry = entries[0]
        if env["num"] not in e["num"]:
            raise TransformError(f"{text}: .x{env['num']} is not allowed for {e['id']} (allowed: "
                                 f"{', '.join('.x' + str(n) for n in e['num'])})")
        self.num = env["num"]
        self.section, self.evidence, self.sm90 = e["section"], e["evidence"], bool(e["sm90"])
        self.dst_bits, self.src_bits = int(e["dst_bits"]), int(e["src_bits"])
        self.row_bytes, self.align = int(e["row_bytes"]), int(e["align_bytes"])
        let = e.get("let", {})
        self.f_lane, self.f_index = _F(e["addr_lane"], let), _F(e["index"], let)
        self.nregs = self.num * int(e["regs"])
        _bind_memory_operands(self, ops, store, "the register vector", text, self.nregs,
                              f".x{self.num} needs {self.nregs} registers")
        self.widths = {r: 32 for r in self.regs}
        self.granularity = min(self.src_bits, self.dst_bits)
        self.epr = 32 // self.dst_bits
        # the lanes that supply addresses (the table in 9.7.14.5.15): image of addr_lane
        L, J, E = np.meshgrid(np.arange(32), np.arange(self.nregs), np.arange(self.epr), indexing="ij")
        al = np.asarray(self.f_lane.eval({"lane": L, "j": J, "e": E}))
        self.addr_lanes = sorted(set(int(x) for x in al.ravel()))
        if self.addr_lanes != list(range(len(self.addr_lanes))):
            raise TransformError(f"{e['id']}: address lanes are not 0..n-1 (spec error)")

    def _row_addr(self, ctx, lane):
        return ctx.value(self.addr.base, lane) + self.addr.offset if not ctx.ops.is_z3 else \
            ctx.ops.bv(ctx.value(self.addr.base, lane)) + self.addr.offset

    def gather(self, lane, j, e, ev=None):
        """Element e of register j of ``lane`` <-> (the lane whose address operand holds its
        row, the element index from that row address): the one definition of the
        instruction, used by the recipe engine (numpy and Z3 through ``ev``) and the kernel
        interpreter (numpy)."""
        ev = ev or _numpy_eval
        env = {"lane": lane, "j": j, "e": e}
        return ev(self.f_lane, env), ev(self.f_index, env)

    def _elem_bit(self, ctx, lane, j, e):
        """Bit address of the first bit of memory element (lane, j, e)."""
        ops = ctx.ops
        al, idx = self.gather(lane, j, e, ops.formula)
        ra = self._row_addr(ctx, al)
        if ops.is_z3:
            return ops.bv(ra) * 8 + ops.bv(idx) * self.src_bits, al
        return ra * 8 + idx * self.src_bits, al

    # load
    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        j = self.regs.index(name)
        e = ops.div(B, self.dst_bits)
        b = ops.mod(B, self.dst_bits)
        start, al = self._elem_bit(ctx, L, ops.const(j) if ops.is_z3 else np.full_like(L, j), e)
        A = start + b if not ops.is_z3 else start + ops.bv(b)
        got = ctx.read_mem(k, A)
        if self.src_bits < self.dst_bits:
            got = ite_content(ops, ops.lt(b, self.src_bits), got, const_content(ops, ZERO))
        return got, ("mem", "shared", 0, A)

    def guards(self, ctx):
        n = len(self.addr_lanes)

        def bad(ops, ctx, k, env):
            ra = self._row_addr(ctx, env["l"])
            return ops.and_(ops.lt(env["l"], n), ops.not_(ops.eq(ops.mod(ra, self.align), 0)))

        g = [Guard(f"row address of lane l is not {self.align}-byte aligned (9.7.14.5.1{6 if self.store else 5}: "
                   "\"The matrix addresses must be naturally aligned\")", [("l", 32)], bad)]
        return g + ([_store_conflict_guard(self)] if self.store else [])

    def addresses(self, ctx):
        L, J, E, start = self._writes(ctx)
        return int(start.min()), int(start.max()) + self.src_bits

    def describe(self):
        return f"{self.text}    [{self.entry['id']}, {self.section}, evidence: {self.evidence}]"


class MovMatrix(Step):
    kind = "movmatrix"

    def __init__(self, text, quals, ops):
        self.text = text
        q = quals[1:]
        env = {"shape": next((x for x in q if x.startswith("m")), ""), "type": next((x for x in q if x.startswith("b")), ""),
               "trans": "trans" in q}
        for must in ("sync", "aligned", "trans"):
            if must not in q:
                raise TransformError(f"{text}: .{must} is mandatory")
        es = [e for e in movement_spec()["movmatrix"] if _F(e["when"]).eval(env)]
        if len(es) != 1:
            raise TransformError(f"{text}: no movmatrix form matches (only .m8n8.trans.b16 exists)")
        e = self.entry = es[0]
        self.section, self.evidence, self.sm90 = e["section"], e["evidence"], bool(e["sm90"])
        self.bits = int(e["elem_bits"])
        let = e.get("let", {})
        self.f_lane, self.f_e = _F(e["src_lane"], let), _F(e["src_e"], let)
        _need(ops, 2, text)
        self.d, self.a = _name(ops[0], "d", text), _name(ops[1], "a", text)
        self.writes, self.reads = [self.d], [self.a]
        self.widths = {self.d: 32, self.a: 32}
        self.granularity = self.bits

    def gather(self, lane, e, ev=None):
        """Element e of d in ``lane`` comes from (lane, element) of a (shared with the kernel interpreter)."""
        ev = ev or _numpy_eval
        env = {"lane": lane, "e": e}
        return ev(self.f_lane, env), ev(self.f_e, env)

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        e = ops.div(B, self.bits)
        sl, se = self.gather(L, e, ops.formula)
        SB = (ops.bv(se) * self.bits + ops.mod(B, self.bits)) if ops.is_z3 else se * self.bits + ops.mod(B, self.bits)
        return ctx.read(k, self.a, sl, SB), ("reg", self.a, sl, SB)


# ---- shuffles, permutes, packs, moves ------------------------------------------------------

class Shfl(Step):
    kind = "shfl.sync"

    def __init__(self, text, quals, ops):
        self.text = text
        q = quals[1:]
        sp = movement_spec()["shfl"]
        modes = [x for x in q if x in sp["mode"]]
        if "sync" not in q or len(modes) != 1 or "b32" not in q:
            raise TransformError(f"{text}: expected shfl.sync.{{up,down,bfly,idx}}.b32")
        self.mode = modes[0]
        self.section, self.evidence, self.sm90 = sp["section"], sp["evidence"], bool(sp["sm90"])
        let = sp["let"]
        self.f_j, self.f_p = _F(sp["mode"][self.mode]["j"], let), _F(sp["mode"][self.mode]["pval"], let)
        self.f_ub_exec = _F(sp["ub"]["executing_not_in_mask"])
        self.f_ub_src = _F(sp["ub"]["source_not_in_mask"])
        _need(ops, 5, text)
        self.d = _name(ops[0], "d", text)
        self.a = _name(ops[1], "a", text)
        self.b, self.c, self.mask = (_value(o, w, text) for o, w in zip(ops[2:], ("b", "c", "membermask")))
        self.writes, self.reads = [self.d], [self.a]
        self.widths = {self.d: 32, self.a: 32}
        self.granularity = 32

    def source(self, lane, b, c, ev=None):
        """(j, pval) of the 9.7.9.6 pseudo-code: lane reads lane j when pval holds, else itself."""
        ev = ev or _numpy_eval
        env = {"lane": lane, "b": b, "c": c}
        return ev(self.f_j, env), ev(self.f_p, env)

    def src_lane(self, ctx, L):
        ops = ctx.ops
        j, p = self.source(L, ctx.value(self.b, L), ctx.value(self.c, L), ops.formula)
        return ops.ite(ops.truth(p), j, L)

    def pull(self, ctx, k, name, L, B):
        s = self.src_lane(ctx, L)
        return ctx.read(k, self.a, s, B), ("reg", self.a, s, B)

    def guards(self, ctx):
        def exec_bad(ops, ctx, k, env):
            return ops.truth(ops.formula(self.f_ub_exec, {"lane": env["l"], "membermask": ctx.value(self.mask, env["l"])}))

        def src_bad(ops, ctx, k, env):
            s = self.src_lane(ctx, env["l"])
            return ops.truth(ops.formula(self.f_ub_src, {"src": s, "membermask": ctx.value(self.mask, env["l"])}))

        return [Guard("lane l executes shfl.sync but is not in membermask (9.7.9.6: undefined)", [("l", 32)], exec_bad),
                Guard("lane l reads from a lane not in membermask (9.7.9.6: results undefined)", [("l", 32)], src_bad)]


class Prmt(Step):
    kind = "prmt"

    def __init__(self, text, quals, ops):
        self.text = text
        q = quals[1:]
        sp = movement_spec()["prmt"]
        if "b32" not in q:
            raise TransformError(f"{text}: expected prmt.b32{{.mode}}")
        modes = [x for x in q if x in sp["mode"] and x != "default"]
        extra = [x for x in q if x not in ("b32",) and x not in sp["mode"]]
        if extra or len(modes) > 1:
            raise TransformError(f"{text}: unknown prmt qualifier(s) {extra or modes}")
        self.mode = modes[0] if modes else "default"
        self.section, self.evidence, self.sm90 = sp["section"], sp["evidence"], bool(sp["sm90"])
        self.f_byte, self.f_sign = _F(sp["mode"][self.mode]["byte"]), _F(sp["mode"][self.mode]["sign"])
        _need(ops, 4, text)
        self.d = _name(ops[0], "d", text)
        self.a, self.b = _name(ops[1], "a", text), _name(ops[2], "b", text)
        self.c = _value(ops[3], "c", text)
        self.writes, self.reads = [self.d], [self.a, self.b]
        self.widths = {self.d: 32, self.a: 32, self.b: 32}
        self.granularity = 8

    def select(self, k_byte, c, ev=None):
        """Destination byte k takes source byte ``byte`` of {b, a}; ``sign``: replicate its msb."""
        ev = ev or _numpy_eval
        env = {"k": k_byte, "c": c}
        return ev(self.f_byte, env), ev(self.f_sign, env)

    def selection(self, ctx, L, k_byte):
        return self.select(k_byte, ctx.value(self.c, L), ctx.ops.formula)

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        kb = ops.div(B, 8)
        s, sg = self.selection(ctx, L, kb)
        inb = ops.mod(B, 8)
        if ops.is_z3:
            sb = ops.bv(ops.mod(s, 4)) * 8
            bit = ops.ite(ops.truth(sg), sb + 7, sb + ops.bv(inb))
        else:
            sb = (s % 4) * 8
            bit = np.where(sg != 0, sb + 7, sb + inb)
        ca, cb = ctx.read(k, self.a, L, bit), ctx.read(k, self.b, L, bit)
        got = ite_content(ops, ops.lt(s, 4), ca, cb)
        signed = Content(ops.const(SIGN), got.row, got.col, got.bit)
        got = ite_content(ops, ops.and_(ops.truth(sg), ops.eq(got.kind, DATA)), signed, got)
        if ops.is_z3:
            return got, None
        reg = np.where(s < 4, self.a, self.b)
        return got, ("reg", reg, L, bit)


_CVT_ROUND = {"rn", "rz", "rm", "rp", "rna", "rs"}


class CvtPack(Step):
    kind = "cvt"

    def __init__(self, text, quals, ops):
        self.text = text
        q = quals[1:]
        rest = [x for x in q if x not in _CVT_ROUND and x not in ("relu", "satfinite", "ftz")]
        if len(rest) != 2:
            raise TransformError(f"{text}: expected cvt{{.rnd}}{{.relu}}{{.satfinite}}.dtype.atype")
        env = {"dtype": rest[0], "atype": rest[1]}
        self.dtype, self.atype = rest[0], rest[1]     # the probe encodes elements in these formats
        es = [e for e in movement_spec()["pack"] if _F(e["when"]).eval(env)]
        if len(es) != 1:
            raise TransformError(f"{text}: only the packing conversions .f16x2.f32 / .bf16x2.f32 are movements "
                                 f"(got .{rest[0]}.{rest[1]})")
        if not any(x in ("rn", "rz", "rm", "rp", "rna", "rs") for x in q):
            raise TransformError(f"{text}: a rounding modifier is mandatory for .f32 -> .{rest[0]} (9.7.9.21)")
        e = self.entry = es[0]
        self.section, self.evidence, self.sm90 = e["section"], e["evidence"], bool(e["sm90"])
        self.dst_bits, self.src_bits = int(e["dst_bits"]), int(e["src_bits"])
        self.f_op = _F(e["operand"])
        _need(ops, 3, text)
        self.d = _name(ops[0], "d", text)
        self.srcs = [_name(ops[1], "a", text), _name(ops[2], "b", text)]
        self.writes, self.reads = [self.d], list(self.srcs)
        self.widths = {self.d: 32, self.srcs[0]: 32, self.srcs[1]: 32}
        self.granularity = self.dst_bits

    def _converted(self, ctx, k, src, L):
        """Content of the element converted from register ``src`` of lane L: DATA only if
        the register holds one whole element (every unit of it, in order)."""
        ops = ctx.ops
        zero = ops.const(0) if ops.is_z3 else np.zeros_like(L)
        r0 = ctx.read(k, src, L, zero)
        ok = [ops.eq(r0.kind, DATA), ops.eq(r0.bit, 0)]
        for u in range(ctx.unit, self.src_bits, ctx.unit):
            cu = ctx.read(k, src, L, ops.const(u) if ops.is_z3 else np.full_like(L, u))
            ok += [ops.eq(cu.kind, DATA), ops.eq(cu.row, r0.row), ops.eq(cu.col, r0.col), ops.eq(cu.bit, u)]
        intact = ops.and_(*ok)
        kind = ops.ite(intact, DATA, ops.ite(ops.eq(r0.kind, UNDEF), UNDEF, GARBLED))
        return Content(kind, r0.row, r0.col, r0.bit)

    def operand_of_half(self, h, ev=None):
        """Which source operand (0 = a, 1 = b) lands in destination half h."""
        return (ev or _numpy_eval)(self.f_op, {"h": h})

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        h = ops.div(B, self.dst_bits)
        opi = self.operand_of_half(h, ops.formula)
        c0 = self._converted(ctx, k, self.srcs[0], L)
        c1 = self._converted(ctx, k, self.srcs[1], L)
        c = ite_content(ops, ops.eq(opi, 0), c0, c1)
        c = Content(c.kind, c.row, c.col, ops.mod(B, self.dst_bits))
        if ops.is_z3:
            return c, None
        reg = np.where(opi == 0, self.srcs[0], self.srcs[1])
        return c, ("reg", reg, L, np.zeros_like(B))


_MOV_TYPES = {"b16": 16, "b32": 32, "b64": 64, "u16": 16, "u32": 32, "u64": 64, "s16": 16, "s32": 32, "s64": 64,
              "f16": 16, "f32": 32, "f64": 64, "bf16": 16, "f16x2": 32, "bf16x2": 32, "b8": 8}


class Mov(Step):
    """mov: rename (d, a), pack (d, {x, y..}) or unpack ({x, y..}, d)."""

    kind = "mov"

    def __init__(self, text, quals, ops):
        self.text = text
        q = quals[1:]
        if len(q) != 1 or q[0] not in _MOV_TYPES:
            raise TransformError(f"{text}: expected mov.{{b16,b32,b64,...}}")
        self.width = _MOV_TYPES[q[0]]
        sp = movement_spec()["mov"]
        self.section, self.evidence, self.sm90 = sp["section"], sp["evidence"], bool(sp["sm90"])
        self.f_op, self.f_bit = _F(sp["pack_operand"]), _F(sp["pack_bit"])
        _need(ops, 2, text)
        d, a = ops
        if isinstance(d, Vec) and isinstance(a, Vec):
            raise TransformError(f"{text}: mov needs a scalar on one side")
        if isinstance(a, Vec):
            self.form, self.d, self.parts = "pack", _name(d, "d", text), list(a.names)
        elif isinstance(d, Vec):
            self.form, self.a, self.parts = "unpack", _name(a, "a", text), list(d.names)
        else:
            self.form, self.d, self.a = "rename", _name(d, "d", text), _name(a, "a", text)
        if self.form == "rename":
            self.writes, self.reads = [self.d], [self.a]
            self.widths = {self.d: self.width, self.a: self.width}
            self.granularity = self.width
        else:
            n = len(self.parts)
            if self.width % n or (self.width // n) not in (8, 16, 32, 64):
                raise TransformError(f"{text}: {n} parts do not split a {self.width}-bit value")
            self.w = self.width // n
            scalar = self.d if self.form == "pack" else self.a
            self.widths = {scalar: self.width, **{p: self.w for p in self.parts}}
            self.writes = [self.d] if self.form == "pack" else list(self.parts)
            self.reads = list(self.parts) if self.form == "pack" else [self.a]
            self.granularity = self.w

    def part_of_bit(self, bit, ev=None):
        """Bit ``bit`` of the packed scalar is bit ``sb`` of vector part ``v``."""
        ev = ev or _numpy_eval
        env = {"bit": bit, "w": self.w}
        return ev(self.f_op, env), ev(self.f_bit, env)

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        if self.form == "rename":
            return ctx.read(k, self.a, L, B), ("reg", self.a, L, B)
        if self.form == "unpack":
            v = self.parts.index(name)
            SB = ops.bv(B) + v * self.w if ops.is_z3 else B + v * self.w
            return ctx.read(k, self.a, L, SB), ("reg", self.a, L, SB)
        v, sb = self.part_of_bit(B, ops.formula)
        out = None
        for i, p in enumerate(self.parts):
            c = ctx.read(k, p, L, sb)
            out = c if out is None else ite_content(ops, ops.eq(v, i), c, out)
        if ops.is_z3:
            return out, None
        reg = np.asarray(self.parts, dtype=object)[np.clip(v, 0, len(self.parts) - 1)]
        return out, ("reg", reg, L, sb)


_LDST_TYPES = {"b8": 8, "b16": 16, "b32": 32, "b64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64, "s8": 8, "s16": 16,
               "s32": 32, "s64": 64, "f16": 16, "f32": 32, "f64": 64}


class LdSt(Step):
    """ld.shared / st.shared of one element or a .v2/.v4 vector of elements."""

    def __init__(self, text, quals, ops, store: bool):
        self.text, self.store = text, store
        self.kind = "st.shared" if store else "ld.shared"
        q = quals[1:]
        if not any(x in ("shared", "shared::cta") for x in q):
            raise TransformError(f"{text}: only .shared loads/stores are movements here")
        types = [x for x in q if x in _LDST_TYPES]
        vecs = [x for x in q if x in ("v2", "v4")]
        extra = [x for x in q if x not in _LDST_TYPES and x not in ("v2", "v4", "shared", "shared::cta")]
        if len(types) != 1 or extra:
            raise TransformError(f"{text}: expected {self.kind}{{.v2,.v4}}.type")
        sp = movement_spec()["ldst"]
        self.section, self.evidence, self.sm90 = sp["section"], sp["evidence"], bool(sp["sm90"])
        self.f_addr = _F(sp["element_address"])
        self.w = _LDST_TYPES[types[0]]
        self.n = int(vecs[0][1]) if vecs else 1
        _bind_memory_operands(self, ops, store, "the data operand", text, self.n,
                              f"expected {self.n} registers")
        self.widths = {r: self.w for r in self.regs}
        self.granularity = min(self.w, 8) if self.w >= 8 else self.w
        self.dst_bits = self.w
        self.nregs, self.epr = self.n, 1

    def _base(self, ctx, lane):
        ops = ctx.ops
        v = ctx.value(self.addr.base, lane)
        return (ops.bv(v) + self.addr.offset) if ops.is_z3 else v + self.addr.offset

    def _elem_bit(self, ctx, lane, j, e=None):
        ops = ctx.ops
        a = ops.formula(self.f_addr, {"addr": self._base(ctx, lane), "v": j, "w": self.w})
        return (ops.bv(a) * 8 if ops.is_z3 else a * 8), lane

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        j = self.regs.index(name)
        start, _ = self._elem_bit(ctx, L, ops.const(j) if ops.is_z3 else np.full_like(L, j))
        A = start + ops.bv(B) if ops.is_z3 else start + B
        return ctx.read_mem(k, A), ("mem", "shared", 0, A)

    def _writes(self, ctx):
        L, J = np.meshgrid(np.arange(32), np.arange(self.n), indexing="ij")
        L, J = L.ravel(), J.ravel()
        start, _ = self._elem_bit(ctx, L, J)
        return L, J, np.zeros_like(L), np.asarray(start)

    def pull_mem(self, ctx, k, A):
        return ctx.store_pull(self, k, A)

    def store_source(self, ctx, k, lane, j, e, b):
        return _store_source(ctx, self.regs, k, lane, j, b)

    def guards(self, ctx):
        size = self.w * self.n // 8

        def bad(ops, ctx, k, env):
            return ops.not_(ops.eq(ops.mod(self._base(ctx, env["l"]), size), 0))

        g = [Guard(f"address of lane l is not {size}-byte aligned (9.7.9.8: accesses must be naturally aligned)",
                   [("l", 32)], bad)]
        return g + ([_store_conflict_guard(self)] if self.store else [])

    def addresses(self, ctx):
        L, J, E, start = self._writes(ctx)
        return int(start.min()), int(start.max()) + self.w


class Shift(Step):
    """shl / shr by an immediate: bits move within one register."""

    def __init__(self, text, quals, ops):
        self.text = text
        self.kind = quals[0]
        q = quals[1:]
        if len(q) != 1 or q[0] not in ("b16", "b32", "b64", "u16", "u32", "u64", "s16", "s32", "s64"):
            raise TransformError(f"{text}: expected {self.kind}.{{b,u,s}}{{16,32,64}}")
        self.w = int(q[0][1:])
        self.signed = q[0].startswith("s") and self.kind == "shr"
        if q[0].startswith("s") and self.kind == "shl":
            raise TransformError(f"{text}: shl takes .b types")
        sp = movement_spec()["shift"]
        self.section, self.evidence, self.sm90 = sp["section"], sp["evidence"], bool(sp["sm90"])
        self.f_src, self.f_ok = _F(sp[self.kind]["src_bit"]), _F(sp[self.kind]["from_src"])
        _need(ops, 3, text)
        self.d, self.a = _name(ops[0], "d", text), _name(ops[1], "a", text)
        if not isinstance(ops[2], Imm) or ops[2].value < 0:
            raise TransformError(f"{text}: the shift amount must be a non-negative immediate here")
        self.n = min(ops[2].value, self.w)
        self.writes, self.reads = [self.d], [self.a]
        self.widths = {self.d: self.w, self.a: self.w}
        from math import gcd
        self.granularity = gcd(self.w, self.n) if self.n else self.w

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        env = {"bit": B, "n": self.n, "w": self.w}
        sb, ok = ops.formula(self.f_src, env), ops.truth(ops.formula(self.f_ok, env))
        got = ctx.read(k, self.a, L, sb)
        if self.signed:
            top = ctx.read(k, self.a, L, ops.const(self.w - 1) if ops.is_z3 else np.full_like(B, self.w - 1))
            fill = Content(ops.const(SIGN), top.row, top.col, top.bit)
        else:
            fill = const_content(ops, ZERO)
        out = ite_content(ops, ok, got, fill)
        return out, (None if ops.is_z3 else ("reg", self.a, L, np.where(ok, sb, self.w - 1)))


class WmmaMove(ElementStore, Step):
    """wmma.load / wmma.store with a stride, as a movement.

    The memory side is the wmma engineer's ``specs/wmma_memory.toml`` (through
    ``formal.wmma.memory``): element (row, col) of the matrix is element ``index(row, col,
    stride)`` from the base pointer (``row * stride + col`` for .row, ``col * stride + row``
    for .col), at bit ``8 * ptr + index * elem_bits``; the alignment and stride rules there
    are this step's undefined-behaviour guards, plus "the same values of p and stride" in
    every thread.

    The register side -- which (row, col) each (lane, register, element) holds -- is
    unspecified by PTX (9.7.14.4.1) and differs per architecture.  A recipe names the map it
    assumes with a ``wmma-map`` directive (formulas over lane, reg, elem, i); the proof is
    then conditional on that map.
    """

    def __init__(self, text, quals, ops):
        from ..wmma import memory as wm

        self.text = text
        opcode = text.split()[0].rstrip(";")
        try:
            form = cat.parse(opcode)
        except cat.MalformedOpcode as e:
            raise TransformError(f"{text}: {e}") from None
        if form.family not in ("wmma.load", "wmma.store"):
            raise TransformError(f"{text}: only wmma.load / wmma.store move data")
        try:
            self.view = wm.memory_view(form)
        except cat.BadArgument as e:
            raise TransformError(f"{text}: {e}") from None
        self.form, self.store = form, form.family == "wmma.store"
        self.kind = form.family
        self.section = wm.spec().layouts[self.view.layout].section
        self.evidence, self.sm90 = "text (memory side); fragment map assumed", True
        self.f_index = wm.spec().layouts[self.view.layout].index
        self.f_bit = wm.spec().address["bit"]
        self.rules = [r for r in wm.spec().rules if r.kind in ("alignment", "stride")]
        self.f_frag_bytes = wm.spec().fragment_bytes[wm.spec().default_reading]
        if len(ops) not in (2, 3):
            raise TransformError(f"{text}: expected r, [p] {{, stride}}")
        vec_op, addr_op = (ops[1], ops[0]) if self.store else (ops[0], ops[1])
        self.regs = list(_vec(vec_op, "the fragment", text))
        self.nregs, self.epr = self.view.regs, max(1, self.view.reg_bits // max(self.view.elem_bits, 1))
        if self.form.operands["r"].elems_per_reg:
            self.epr = self.form.operands["r"].elems_per_reg
        self.dst_bits = self.view.reg_bits // self.epr
        if len(self.regs) != self.nregs:
            raise TransformError(f"{text}: the fragment has {self.nregs} registers, got {len(self.regs)}")
        if not isinstance(addr_op, Addr):
            raise TransformError(f"{text}: the address operand must be [p] or [p+imm]")
        self.addr = addr_op
        self.stride = ops[2] if len(ops) == 3 else Imm(self.view.default_stride)
        if not isinstance(self.stride, (Imm, Name)):
            raise TransformError(f"{text}: stride must be an immediate or a value name")
        self.writes = [] if self.store else list(self.regs)
        self.reads = list(self.regs) if self.store else []
        self.writes_mem, self.reads_mem = self.store, not self.store
        self.widths = {r: self.view.reg_bits for r in self.regs}
        self.granularity = min(self.view.elem_bits, self.dst_bits)

    def _map(self, ctx):
        m = ctx.prog.wmma_maps.get(self.form.opcode) if hasattr(ctx.prog, "wmma_maps") else None
        if m is None:
            raise TransformError(f"{self.text}: the wmma fragment map is unspecified by PTX (9.7.14.4.1); give the "
                                 f"map you assume: `wmma-map {self.form.opcode} row \"F\" col \"F\"`")
        return m

    def _base(self, ctx, lane):
        ops = ctx.ops
        v = ctx.value(self.addr.base, lane)
        return (ops.bv(v) + self.addr.offset) if ops.is_z3 else v + self.addr.offset

    def _elem_bit(self, ctx, lane, j, e):
        ops = ctx.ops
        m = self._map(ctx)
        env = {"lane": lane, "reg": j, "elem": e}
        rc = m.z3(env) if ops.is_z3 else m._eval({k: np.asarray(v) for k, v in env.items()})
        stride = ctx.value(self.stride, lane)
        idx = ops.formula(self.f_index, {"row": rc["row"], "col": rc["col"], "stride": stride})
        bit = ops.formula(self.f_bit, {"ptr": self._base(ctx, lane), "index": idx, "elem_bits": self.view.elem_bits})
        return bit, lane

    def pull(self, ctx, k, name, L, B):
        ops = ctx.ops
        j = self.regs.index(name)
        w = self.dst_bits
        e, b = ops.div(B, w), ops.mod(B, w)
        start, _ = self._elem_bit(ctx, L, ops.const(j) if ops.is_z3 else np.full_like(L, j), e)
        A = start + ops.bv(b) if ops.is_z3 else start + b
        got = ctx.read_mem(k, A)
        held = self._held(ctx, L, j, e)
        got = ite_content(ops, held, got, const_content(ops, UNDEF))
        return got, ("mem", "shared", 0, A)

    def _held(self, ctx, L, j, e):
        m = self._map(ctx)
        ops = ctx.ops
        if ops.is_z3:
            return m.z3_domain({"lane": L, "reg": ops.const(j) if isinstance(j, int) else j, "elem": e})
        env = {"lane": np.asarray(L), "reg": np.broadcast_to(np.asarray(j), np.shape(L)), "elem": np.asarray(e)}
        return m.domain_mask({k: v.reshape(-1) for k, v in env.items()}).reshape(np.shape(L))

    def guards(self, ctx):
        v = self.view
        env0 = dict(v.base_env())
        fb = int(self.f_frag_bytes.eval(env0))
        out = []

        def uniform(ops, ctx, k, env):
            l = env["l"]
            z = ops.const(0) if ops.is_z3 else np.zeros_like(l)
            return ops.or_(ops.not_(ops.eq(self._base(ctx, l), self._base(ctx, z))),
                           ops.not_(ops.eq(ctx.value(self.stride, l), ctx.value(self.stride, z))))

        out.append(Guard("lane l uses a different p or stride than lane 0 (9.7.14.4.3: undefined)", [("l", 32)],
                         uniform))
        for rule in self.rules:
            dims = [("ld", v.n_ld)] if rule.forall == "ld" else [("ld", 1)]

            def bad(ops, ctx, k, env, rule=rule):
                z = ops.const(0) if ops.is_z3 else np.zeros_like(env["ld"])
                e = dict(env0, ptr=self._base(ctx, z), stride=ctx.value(self.stride, z), frag_bytes=fb,
                         ld=env["ld"])
                return ops.not_(ops.truth(ops.formula(rule.holds, e)))

            out.append(Guard(f"{rule.id}: {rule.text[:120]} ({rule.section})", dims, bad))
        if self.store:
            out.append(_store_conflict_guard(self))
        return out

    def addresses(self, ctx):
        L, J, E, start = self._writes(ctx)
        return int(start.min()), int(start.max()) + self.view.elem_bits


# ---------------------------------------------------------------------------------------

def make_step(text: str) -> Step:
    """Parse one PTX instruction into a Step (TransformError if unsupported)."""
    opcode, quals, ops = parse_instruction(text)
    head = quals[0]
    text = text.strip()
    if head == "ldmatrix":
        return MatrixMove(text, quals, ops, store=False)
    if head == "stmatrix":
        return MatrixMove(text, quals, ops, store=True)
    if head == "movmatrix":
        return MovMatrix(text, quals, ops)
    if head == "shfl":
        return Shfl(text, quals, ops)
    if head == "prmt":
        return Prmt(text, quals, ops)
    if head == "cvt":
        return CvtPack(text, quals, ops)
    if head == "mov":
        return Mov(text, quals, ops)
    if head == "ld":
        return LdSt(text, quals, ops, store=False)
    if head == "st":
        return LdSt(text, quals, ops, store=True)
    if head in ("shl", "shr"):
        return Shift(text, quals, ops)
    if head == "wmma":
        return WmmaMove(text, quals, ops)
    raise TransformError(f"{opcode}: not a supported movement (ldmatrix, stmatrix, movmatrix, shfl.sync, prmt, "
                         "cvt pack, mov, ld/st.shared, wmma.load/store)")
