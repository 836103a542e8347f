"""Prove that a sequence of movements delivers a layout: Proved / Refuted / Unknown.

The obligation for a register target ``T`` over registers ``t_0..t_n``::

    for every lane L < 32, target register t_r, bit B of it that T holds:
        content_after_all_steps(t_r, L, B) == (DATA, T.row(L, r, B // w), T.col(...), B % w)

and for a shared-memory target the same over every (row, col, bit) of the tile.  The
content of a location after the steps is obtained by *pulling back* through the steps
(each step says where each destination bit comes from), down to the sources.

Two independent deciders, which must agree:

* **Z3** -- lane and bit are symbolic bit-vectors, the pull-back is a term; the negated
  obligation is unsat (proved) or gives a model, minimised lexicographically to the first
  (lane, register, element, bit) that is wrong;
* **enumeration** -- the steps run on numpy arrays over every lane and bit, keeping the
  provenance of every bit, which also yields the *path* of the witness (where the wrong
  value came from, through every step).

Undefined behaviour (a misaligned ldmatrix row address, a shuffle outside membermask,
two stores to one address) is checked the same two ways before the layout and reported as
Refuted with reason ``undefined behaviour``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import algebra as alg
from ..expr import Formula
from .spaces import (DATA, GARBLED, KIND_NAMES, NP, SIGN, UNDEF, Z3, Content, MemLayout, RegLayout, TransformError,
                     Undecided, const_content, content_eq, ite_content)
from .steps import Addr, Imm, Name, Step

DEFAULT_TIMEOUT_MS = 60_000


# ---------------------------------------------------------------------------------------
# Program

@dataclass
class Program:
    sources: list            # RegLayout | MemLayout
    steps: list[Step]
    target: Any              # RegLayout | MemLayout | list of RegLayout (disjoint registers)
    values: dict[str, Formula] = field(default_factory=dict)
    regs: dict[str, int] = field(default_factory=dict)   # register -> width in bits
    wmma_maps: dict[str, Any] = field(default_factory=dict)  # wmma opcode -> assumed fragment map

    def __post_init__(self):
        tl = list(self.target) if isinstance(self.target, (list, tuple)) else [self.target]
        if not tl:
            raise TransformError("a recipe needs a target")
        if len(tl) > 1 and not all(isinstance(t, RegLayout) for t in tl):
            raise TransformError("several targets must all be register layouts")
        self.targets = tl
        self.target = tl[0] if len(tl) == 1 else tl
        self.regs = dict(self.regs)
        widths: dict[str, tuple[int, str]] = {n: (w, "declared") for n, w in self.regs.items()}

        def note(name, w, why):
            if name in self.values:
                raise TransformError(f"{name!r} is a value (per-lane integer), not a data register ({why})")
            if name in widths and widths[name][0] != w:
                raise TransformError(f"register {name!r} is {widths[name][0]}-bit ({widths[name][1]}) but "
                                     f"{w}-bit in {why}")
            widths.setdefault(name, (w, why))

        for s in self.sources:
            if isinstance(s, RegLayout):
                for n in s.names:
                    note(n, s.reg_bits, s.label or "source")
        tnames = []
        for t in self.targets:
            if isinstance(t, RegLayout):
                for n in t.names:
                    note(n, t.reg_bits, t.label or "target")
                tnames += t.names
        if len(set(tnames)) != len(tnames):
            raise TransformError("two targets name the same register")
        for st in self.steps:
            for n, w in st.widths.items():
                note(n, w, st.text)
        self.regs = {n: w for n, (w, _) in widths.items()}
        src_regs = [n for s in self.sources if isinstance(s, RegLayout) for n in s.names]
        dup = {n for n in src_regs if src_regs.count(n) > 1}
        if dup:
            raise TransformError(f"registers {sorted(dup)} are given by two sources")
        mems = [s for s in self.sources if isinstance(s, MemLayout)]
        for i, a in enumerate(mems):
            for b in mems[i + 1:]:
                lo1, hi1 = a.bit_extent()
                lo2, hi2 = b.bit_extent()
                if lo1 < hi2 and lo2 < hi1:
                    raise TransformError(f"shared-memory sources {a.label} and {b.label} overlap")
        for st in self.steps:
            for op in _value_operands(st):
                if isinstance(op, Name) and op.name not in self.values:
                    raise TransformError(f"{st.text}: {op.name!r} is not a defined value "
                                         f"(write `value {op.name} = <formula in lane>`)")
                if isinstance(op, str) and op not in self.values:
                    raise TransformError(f"{st.text}: {op!r} is not a defined value "
                                         f"(write `value {op} = <formula in lane>`)")

    @property
    def unit(self) -> int:
        """Granularity (bits) at which every step moves data in order: the gcd of the
        steps' granularities and the element widths of sources and target."""
        from math import gcd
        g = 32
        for st in self.steps:
            g = gcd(g, st.granularity)
        for s in list(self.sources) + list(self.targets):
            g = gcd(g, s.elem_bits)
            g = gcd(g, getattr(s, "shift", 0) or g)
        return g


def _value_operands(st: Step):
    for attr in ("b", "c", "mask"):
        v = getattr(st, attr, None)
        if isinstance(v, (Name, Imm)):
            yield v
    a = getattr(st, "addr", None)
    if isinstance(a, Addr) and isinstance(a.base, str):
        yield a.base
    s = getattr(st, "stride", None)
    if isinstance(s, (Name, Imm)):
        yield s


# ---------------------------------------------------------------------------------------
# Contexts: reading a stage on either backend

class _Ctx:
    def __init__(self, prog: Program, ops):
        self.prog, self.ops = prog, ops
        self.unit = prog.unit

    def value(self, op, lane):
        ops = self.ops
        if isinstance(op, Imm):
            return ops.const(op.value) if ops.is_z3 else np.full(np.shape(lane), op.value, dtype=np.int64)
        if isinstance(op, int):
            return ops.const(op) if ops.is_z3 else np.full(np.shape(lane), op, dtype=np.int64)
        name = op.name if isinstance(op, Name) else op
        f = self.prog.values[name]
        v = ops.formula(f, {"lane": lane})
        if ops.is_z3:
            return v
        # per-lane values are 32-bit registers: wrap like Z3's bit-vectors and PTX's .u32
        return np.broadcast_to(np.asarray(v, dtype=np.int64) & 0xFFFFFFFF, np.shape(lane))


class NPRun(_Ctx):
    """Run every step on numpy arrays: state[k] after k steps, with provenance."""

    def __init__(self, prog: Program):
        super().__init__(prog, NP())
        self._mem_bounds()
        self.states: list[dict] = []
        self.prov: list[dict] = [{}]
        self.writers: dict[int, Any] = {}
        s0 = {"regs": {}, "mem": None}
        for name, w in prog.regs.items():
            L, B = np.meshgrid(np.arange(32), np.arange(w), indexing="ij")
            c = const_content(self.ops, UNDEF)
            c = Content(*(np.broadcast_to(x, L.shape).copy() for x in c.fields()))
            for src in prog.sources:
                if isinstance(src, RegLayout) and name in src.names:
                    c = src.content(self.ops, L, src.names.index(name), B)
            s0["regs"][name] = _freeze(c)
        A = np.arange(self.nbits, dtype=np.int64)
        mc = Content(*(np.broadcast_to(x, A.shape).copy() for x in const_content(self.ops, UNDEF).fields()))
        for src in prog.sources:
            if isinstance(src, MemLayout):
                c = src.content(self.ops, A)
                mc = ite_content(self.ops, c.kind != UNDEF, c, mc)
        s0["mem"] = _freeze(mc)
        self.states.append(s0)
        for k, st in enumerate(prog.steps):
            self.states.append(self._apply(k, st))

    def _mem_bounds(self):
        hi = 0
        for src in list(self.prog.sources) + list(self.prog.targets):
            if isinstance(src, MemLayout):
                hi = max(hi, src.bit_extent()[1])
        for st in self.prog.steps:
            if st.reads_mem or st.writes_mem:
                b = st.addresses(self)
                if b is not None:
                    if b[0] < 0:
                        raise TransformError(f"{st.text}: negative shared-memory address")
                    hi = max(hi, b[1])
        if hi > (1 << 24):
            raise TransformError(f"shared-memory addresses reach byte {hi // 8}; more than 2 MiB is not shared memory")
        self.nbits = max(hi, 8)

    def read(self, k, name, lane, bit) -> Content:
        st = self.states[k]["regs"][name]
        w = self.prog.regs[name]
        lane = np.asarray(lane, dtype=np.int64)
        bit = np.asarray(bit, dtype=np.int64)
        lane, bit = np.broadcast_arrays(lane, bit)
        ok = (lane >= 0) & (lane < 32) & (bit >= 0) & (bit < w)
        li, bi = np.where(ok, lane, 0), np.where(ok, bit, 0)
        got = Content(*(f[li, bi] for f in st.fields()))
        return ite_content(self.ops, ok, got, const_content(self.ops, UNDEF))

    def read_mem(self, k, A) -> Content:
        mem = self.states[k]["mem"]
        A = np.asarray(A, dtype=np.int64)
        ok = (A >= 0) & (A < self.nbits)
        ai = np.where(ok, A, 0)
        got = Content(*(f[ai] for f in mem.fields()))
        return ite_content(self.ops, ok, got, const_content(self.ops, UNDEF))

    def _apply(self, k, st: Step) -> dict:
        prev = self.states[k]
        new = {"regs": dict(prev["regs"]), "mem": prev["mem"]}
        prov = {}
        for name in st.writes:
            w = self.prog.regs[name]
            L, B = np.meshgrid(np.arange(32, dtype=np.int64), np.arange(w, dtype=np.int64), indexing="ij")
            c, loc = st.pull(self, k, name, L, B)
            new["regs"][name] = _freeze(Content(*(np.broadcast_to(np.asarray(x, dtype=np.int64), L.shape).copy()
                                                  for x in c.fields())))
            prov[name] = loc
        if st.writes_mem:
            A = np.arange(self.nbits, dtype=np.int64)
            c, loc = st.pull_mem(self, k, A)
            new["mem"] = _freeze(Content(*(np.broadcast_to(np.asarray(x, dtype=np.int64), A.shape).copy()
                                           for x in c.fields())))
            prov["__mem__"] = loc
        self.prov.append(prov)
        return new

    # stores: writer table
    def writer_table(self, st: Step):
        """Memory element -> the register element stored there (numpy), plus collisions."""
        key = id(st)
        if key in self.writers:
            return self.writers[key]
        L, J, E, start = st._writes(self)
        w = st.dst_bits if hasattr(st, "dst_bits") else st.w
        if (start % w).any():
            i = int(np.nonzero(start % w)[0][0])
            raise TransformError(f"{st.text}: lane {L[i]} stores an element at bit address {start[i]}, not a "
                                 f"multiple of its {w}-bit size")
        idx = start // w
        order = np.lexsort((E, J, L))
        table: dict[int, tuple[int, int, int]] = {}
        collision = None
        for i in order:
            key2 = int(idx[i])
            if key2 in table:
                if collision is None:
                    collision = (table[key2], (int(L[i]), int(J[i]), int(E[i])), key2)
                continue
            table[key2] = (int(L[i]), int(J[i]), int(E[i]))
        self.writers[key] = (table, collision, w)
        return self.writers[key]

    def store_pull(self, st: Step, k: int, A):
        table, collision, w = self.writer_table(st)
        n = self.nbits // w + 1
        lanes = np.full(n, -1, dtype=np.int64)
        js = np.zeros(n, dtype=np.int64)
        es = np.zeros(n, dtype=np.int64)
        for idx, (l, j, e) in table.items():
            if idx < n:
                lanes[idx], js[idx], es[idx] = l, j, e
        ei = A // w
        b = A % w
        hit = lanes[ei] >= 0
        lane, j, e = np.where(hit, lanes[ei], 0), js[ei], es[ei]
        c, loc = st.store_source(self, k, lane, j, e, b)
        prev = self.read_mem(k, A)
        out = ite_content(self.ops, hit, c, prev)
        _, reg, l2, b2 = loc
        loc = ("mixed", np.where(hit, reg, "shared"), np.where(hit, l2, 0), np.where(hit, b2, A))
        return out, loc


def _freeze(c: Content) -> Content:
    return Content(*(np.asarray(x, dtype=np.int64) for x in c.fields()))


class Z3Run(_Ctx):
    """The same pull-back as Z3 terms (symbolic lane / bit / address)."""

    def __init__(self, prog: Program, timeout_ms: int, np_run: NPRun):
        super().__init__(prog, Z3())
        self.timeout_ms = timeout_ms
        self.np_run = np_run
        self._memo: dict = {}
        self.writer_maps: dict[int, Any] = {}
        self.certificates: list[alg.Proof] = []

    def read(self, k, name, lane, bit) -> Content:
        ops = self.ops
        lane, bit = ops.bv(lane), ops.bv(bit)
        key = ("r", k, name, lane.get_id(), bit.get_id())
        if key in self._memo:
            return self._memo[key][0]
        w = self.prog.regs[name]
        ok = ops.and_(ops.lt(lane, 32), ops.lt(bit, w))
        if k == 0:
            c = const_content(ops, UNDEF)
            for src in self.prog.sources:
                if isinstance(src, RegLayout) and name in src.names:
                    c = src.content(ops, lane, src.names.index(name), bit)
        else:
            st = self.prog.steps[k - 1]
            if name in st.writes:
                c, _ = st.pull(self, k - 1, name, lane, bit)
            else:
                c = self.read(k - 1, name, lane, bit)
        c = ite_content(ops, ok, c, const_content(ops, UNDEF))
        self._memo[key] = (c, lane, bit)
        return c

    def read_mem(self, k, A) -> Content:
        ops = self.ops
        A = ops.bv(A)
        key = ("m", k, A.get_id())
        if key in self._memo:
            return self._memo[key][0]
        if k == 0:
            c = const_content(ops, UNDEF)
            for src in self.prog.sources:
                if isinstance(src, MemLayout):
                    s = src.content(ops, A)
                    c = ite_content(ops, ops.not_(ops.eq(s.kind, UNDEF)), s, c)
        else:
            st = self.prog.steps[k - 1]
            if st.writes_mem:
                c, _ = st.pull_mem(self, k - 1, A)
            else:
                c = self.read_mem(k - 1, A)
        self._memo[key] = (c, A)
        return c

    def store_pull(self, st: Step, k: int, A):
        ops = self.ops
        g = self.writer_map(st)
        w = g.elem_bits
        ei = ops.div(A, w)
        b = ops.mod(A, w)
        rel = ops.bv(ei) - g.lo
        env = {"index": rel}
        hit = g.map.z3_domain(env)
        out = g.map.z3(env)
        c, _ = st.store_source(self, k, out["lane"], out["j"], out["e"], b)
        prev = self.read_mem(k, A)
        return ite_content(ops, hit, c, prev), None

    def writer_map(self, st: Step):
        """The writer table of a store as a certified inverse of its address map."""
        key = id(st)
        if key in self.writer_maps:
            return self.writer_maps[key]
        table, collision, w = self.np_run.writer_table(st)
        if collision is not None:
            (l1, j1, e1), (l2, j2, e2), idx = collision
            raise _StoreConflict(st, (l1, j1, e1), (l2, j2, e2), idx * w)
        lo = min(table) if table else 0
        hi = max(table) + 1 if table else 1
        n = hi - lo
        lanes = np.full(n, -1, dtype=np.int64)
        js = np.zeros(n, dtype=np.int64)
        es = np.zeros(n, dtype=np.int64)
        for idx, (l, j, e) in table.items():
            lanes[idx - lo], js[idx - lo], es[idx - lo] = l, j, e
        tm = alg.TableMap([("index", n)], [("lane", 32), ("j", st.nregs), ("e", st.epr)],
                          {"lane": np.maximum(lanes, 0), "j": js, "e": es}, defined=lanes >= 0,
                          name=f"writers of `{st.text}`")
        # certificate: writer(addr(l, j, e)) == (l, j, e) for every register element, and
        # addr(writer(i)) == i for every written element: the table is exactly the inverse.
        ops = self.ops
        import z3
        l, j, e = z3.BitVec("wl", 32), z3.BitVec("wj", 32), z3.BitVec("we", 32)
        start, _ = st._elem_bit(self, l, j, e)
        rel = ops.div(start, w) - lo
        fw = tm.z3({"index": rel})
        neg1 = [z3.ULT(l, 32), z3.ULT(j, st.nregs), z3.ULT(e, st.epr),
                z3.Or(ops.mod(start, w) != 0, z3.UGE(rel, n), z3.Not(tm.z3_domain({"index": rel})),
                      fw["lane"] != l, fw["j"] != j, fw["e"] != e)]
        p1 = alg.decide(f"writer table of `{st.text}` inverts its address map", lambda: (neg1, [("lane", l)]),
                        None, self.timeout_ms)
        i = z3.BitVec("wi", 32)
        wi = tm.z3({"index": i})
        s2, _ = st._elem_bit(self, wi["lane"], wi["j"], wi["e"])
        neg2 = [tm.z3_domain({"index": i}), ops.div(s2, w) - lo != i]
        p2 = alg.decide(f"every entry of the writer table of `{st.text}` is a store of that element",
                        lambda: (neg2, [("index", i)]), None, self.timeout_ms)
        for p in (p1, p2):
            self.certificates.append(p)
            if p.status != "proved":
                raise _Unknown(f"could not certify the writer table of `{st.text}`: {p}")

        class G:
            pass

        g = G()
        g.map, g.lo, g.elem_bits = tm, lo, w
        self.writer_maps[key] = g
        return g


class _StoreConflict(Exception):
    def __init__(self, st, a, b, bitaddr):
        self.st, self.a, self.b, self.bitaddr = st, a, b, bitaddr


class _Unknown(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Results

@dataclass
class TransformResult:
    status: str                       # proved | refuted | unknown
    claim: str
    reason: str = ""                  # wrong element | undefined behaviour | conflicting stores | ...
    witness: dict | None = None       # first wrong (lane, register, element, bit) / (row, col, bit)
    expected: dict | None = None
    got: dict | None = None
    path: list[dict] = field(default_factory=list)
    expected_found_at: list[dict] = field(default_factory=list)
    message: str = ""
    z3: str = ""
    enumeration: str = ""
    seconds: float = 0.0
    unit_bits: int = 0
    checks: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    smt2: str | None = None

    def __bool__(self) -> bool:
        return self.status == "proved"

    def to_dict(self, smt2: bool = False) -> dict:
        d = {"status": self.status, "claim": self.claim}
        for k in ("reason", "witness", "expected", "got", "message"):
            v = getattr(self, k)
            if v:
                d[k] = v
        if self.path:
            d["path"] = self.path
        if self.expected_found_at or self.status == "refuted" and self.reason == "wrong element":
            d["expected_found_at"] = self.expected_found_at
        d.update(z3=self.z3, enumeration=self.enumeration, seconds=round(self.seconds, 3), unit_bits=self.unit_bits)
        if self.checks:
            d["checks"] = self.checks
        if self.notes:
            d["notes"] = self.notes
        if smt2 and self.smt2:
            d["smt2"] = self.smt2
        return d

    def text(self) -> str:
        lines = [f"{self.status.upper()}: {self.claim}"]
        if self.status == "refuted":
            lines.append(f"  reason: {self.reason}")
            if self.message:
                lines.append(f"  {self.message}")
            if self.path:
                lines.append("  path (source -> ... -> final):")
                for p in self.path:
                    lines.append(f"    {p['at']:<30} {p['where']:<28} holds {_describe_content(p['holds'])}")
            if self.expected_found_at:
                where = "; ".join(x["where"] for x in self.expected_found_at[:4])
                more = f" (+{len(self.expected_found_at) - 4} more)" if len(self.expected_found_at) > 4 else ""
                lines.append(f"  the expected element ended up at: {where}{more}")
            elif self.reason == "wrong element":
                lines.append("  the expected element is not in any target register")
        elif self.status == "unknown" and self.message:
            lines.append(f"  {self.message}")
        lines.append(f"  z3: {self.z3}; enumeration: {self.enumeration}; {self.seconds:.2f}s; unit {self.unit_bits} bits")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)


def _content_dict(kind, row, col, bit) -> dict:
    d = {"kind": KIND_NAMES.get(int(kind), str(kind))}
    if int(kind) in (DATA, SIGN, GARBLED):
        d.update(row=int(row), col=int(col), bit=int(bit))
    return d


def _describe_content(d: dict) -> str:
    if d["kind"] == "data":
        return (f"bit {d['bit']} of " if d["bit"] else "") + f"element (row {d['row']}, col {d['col']})"
    if d["kind"] in ("sign fill", "garbled"):
        return f"{d['kind']} of element (row {d['row']}, col {d['col']})"
    return d["kind"]


# ---------------------------------------------------------------------------------------
# The decision procedure

def prove_program(prog: Program, timeout_ms: int = DEFAULT_TIMEOUT_MS, claim: str | None = None) -> TransformResult:
    t0 = time.perf_counter()
    try:
        return _prove_program(prog, timeout_ms, claim, t0)
    except Undecided as u:
        return TransformResult("unknown", claim or _claim(prog), message=f"{u}; not proved", z3="unknown",
                               enumeration="not reached", seconds=time.perf_counter() - t0, unit_bits=prog.unit)


def _prove_program(prog: Program, timeout_ms: int, claim: str | None, t0: float) -> TransformResult:
    claim = claim or _claim(prog)
    unit = prog.unit
    notes = []
    doc_only = [st for st in prog.steps if not st.sm90]
    if doc_only:
        notes.append("document-level only (not executable on sm_90): " + "; ".join(st.text for st in doc_only))
    for opcode, m in prog.wmma_maps.items():
        if any(getattr(st, "form", None) is not None and st.form.opcode == opcode for st in prog.steps):
            notes.append(f"conditional on the assumed wmma fragment map of {opcode}: {m.name} "
                         "(PTX 9.7.14.4.1: unspecified)")
    fig = sorted({f"{st.kind} ({st.section})" for st in prog.steps if st.evidence == "figure"})
    if fig:
        notes.append("relies on figure-only PTX semantics: " + ", ".join(fig))
    nrun = NPRun(prog)
    zrun = Z3Run(prog, timeout_ms, nrun)
    res = TransformResult("unknown", claim, unit_bits=unit, notes=notes)

    # 1. undefined behaviour, step by step
    for k, st in enumerate(prog.steps):
        for g in st.guards(nrun):
            p = _decide_guard(prog, nrun, zrun, k, st, g, timeout_ms)
            res.checks.append({"step": k + 1, "check": g.message, "status": p.status})
            if p.status == "refuted":
                res.status, res.reason = "refuted", "undefined behaviour"
                res.witness = p.witness
                msg = g.message.replace("lane l", f"lane {p.witness['l']}") if "l" in p.witness else g.message
                if "lane0" in p.witness:
                    w = p.witness
                    msg += (f": lane {w['lane0']} {st.regs[w['j0']]} element {w['e0']} and lane {w['lane']} "
                            f"{st.regs[w['j']]} element {w['e']}")
                res.message = f"step {k + 1} `{st.text}`: {msg}"
                res.z3, res.enumeration = p.z3, p.enumeration
                res.seconds = time.perf_counter() - t0
                return res
            if p.status != "proved":
                res.message = f"could not decide `{g.message}` for step {k + 1}: {p.detail}"
                res.z3, res.enumeration = p.z3, p.enumeration
                res.seconds = time.perf_counter() - t0
                return res

    # 2. the layout
    try:
        if isinstance(prog.targets[0], RegLayout):
            out = _decide_regs(prog, nrun, zrun, timeout_ms)
        else:
            out = _decide_mem(prog, nrun, zrun, timeout_ms)
    except _StoreConflict as c:
        st = c.st
        res.status, res.reason = "refuted", "conflicting stores"
        res.witness = {"byte": c.bitaddr // 8}
        res.message = (f"`{st.text}`: lane {c.a[0]} register {st.regs[c.a[1]]} element {c.a[2]} and lane {c.b[0]} "
                       f"register {st.regs[c.b[1]]} element {c.b[2]} store to the same byte {c.bitaddr // 8} "
                       "(which value lands is not specified)")
        res.z3, res.enumeration = "not run", "found the collision"
        res.seconds = time.perf_counter() - t0
        return res
    except _Unknown as u:
        res.message = str(u)
        res.seconds = time.perf_counter() - t0
        return res
    for p in zrun.certificates:
        res.checks.append({"check": p.claim, "status": p.status})
    res.status = out["status"]
    res.z3, res.enumeration = out["z3"], out["enumeration"]
    res.smt2 = out.get("smt2")
    if res.status == "refuted":
        res.reason = out.get("reason", "wrong element")
        res.witness, res.expected, res.got = out["witness"], out["expected"], out["got"]
        res.path = _path(prog, nrun, out["final_loc"])
        res.expected_found_at = _find(prog, nrun, out["expected"])
        res.message = out["message"]
    elif res.status == "unknown":
        res.message = out.get("message", "")
    res.seconds = time.perf_counter() - t0
    return res


def _claim(prog: Program) -> str:
    src = " + ".join(s.label or "source" for s in prog.sources) or "nothing"
    n = len(prog.steps)
    tgt = " + ".join(t.label or "target" for t in prog.targets)
    return f"{src} --[{n} step{'s' if n != 1 else ''}]--> {tgt}"


def _decide_guard(prog, nrun, zrun, k, st, g, timeout_ms) -> alg.Proof:
    import z3

    def neg():
        env = {n: z3.BitVec("g_" + n, 32) for n, _ in g.dims}
        cons = [z3.ULT(env[n], s) for n, s in g.dims]
        cons.append(zrun.ops.truth(g.bad(zrun.ops, zrun, k, env)))
        return cons, [(n, env[n]) for n, _ in g.dims]

    def enum():
        grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for _, s in g.dims], indexing="ij")
        env = {n: x.ravel() for (n, _), x in zip(g.dims, grids)}
        bad = np.broadcast_to(np.asarray(g.bad(nrun.ops, nrun, k, env), dtype=bool), env[g.dims[0][0]].shape)
        idx = np.nonzero(bad)[0]
        if len(idx) == 0:
            return None
        return {n: int(env[n][idx[0]]) for n, _ in g.dims}

    return alg.decide(f"step {k + 1}: never {g.message}", neg, enum, timeout_ms)


def _decide_regs(prog, nrun, zrun, timeout_ms) -> dict:
    import z3

    ops, nops = zrun.ops, nrun.ops
    final = len(prog.steps)
    pairs = [(t, r, name) for t in prog.targets for r, name in enumerate(t.names)]
    # --- enumeration: the first wrong (lane, register, bit), registers in target order
    first_enum = None
    for ri, (tgt, r, name) in enumerate(pairs):
        width = prog.regs[name]
        L, B = np.meshgrid(np.arange(32, dtype=np.int64), np.arange(width, dtype=np.int64), indexing="ij")
        held, row, col, b = tgt.logical(nops, L, r, B)
        got = nrun.read(final, name, L, B)
        exp_row, exp_col = row + tgt.row_offset, col + tgt.col_offset
        bad = held & ~((got.kind == DATA) & (got.row == exp_row) & (got.col == exp_col) & (got.bit == b))
        idx = np.argwhere(bad)
        if len(idx):
            l, bb = (int(x) for x in idx[0])
            cand = (l, ri, bb)
            if first_enum is None or cand < first_enum:
                first_enum = cand
    # --- Z3, register by register; the overall lexicographic minimum
    first_z3 = None
    verdicts = []
    smt2 = []
    for ri, (tgt, r, name) in enumerate(pairs):
        width = prog.regs[name]
        L, B = z3.BitVec("lane", 32), z3.BitVec("bit", 32)
        held, row, col, b = tgt.logical(ops, L, r, B)
        got = zrun.read(final, name, L, B)
        exp = Content(ops.const(DATA), ops.bv(row) + tgt.row_offset, ops.bv(col) + tgt.col_offset, b)
        s = alg._solver(timeout_ms)
        s.add(z3.ULT(L, 32), z3.ULT(B, width), ops.b(held), z3.Not(content_eq(ops, got, exp)))
        smt2.append(s.to_smt2())
        v = s.check()
        verdicts.append(str(v))
        if v == z3.unknown:
            return {"status": "unknown", "z3": f"unknown ({name})", "enumeration": _enum_note(first_enum),
                    "message": f"solver gave no verdict for register {name} within {timeout_ms / 1000:.0f}s; not proved"}
        if v == z3.sat:
            m = alg.minimize_witness(s, [("lane", L), ("bit", B)], timeout_ms)
            if m is None:
                return {"status": "unknown", "z3": "unknown (minimisation)", "enumeration": _enum_note(first_enum),
                        "message": "solver timed out while minimising the counterexample; not proved"}
            cand = (m["lane"], ri, m["bit"])
            if first_z3 is None or cand < first_z3:
                first_z3 = cand
    if first_z3 != first_enum:
        return {"status": "unknown", "z3": ", ".join(verdicts), "enumeration": "DISAGREES",
                "message": f"Z3 (first failure {first_z3}) and enumeration (first failure {first_enum}) disagree -- "
                           "a bug; please report"}
    if first_z3 is None:
        # one query per target register, separated by (reset): `z3 FILE` answers unsat to each
        return {"status": "proved", "z3": "unsat", "enumeration": "agrees", "smt2": "\n(reset)\n".join(smt2)}
    lane, ri, bit = first_z3
    tgt, r, name = pairs[ri]
    w = tgt.elem_bits
    held, row, col, b = tgt.logical(nops, np.array([lane]), r, np.array([bit]))
    got = nrun.read(final, name, np.array([lane]), np.array([bit]))
    exp = {"row": int(row[0]) + tgt.row_offset, "col": int(col[0]) + tgt.col_offset, "bit": int(b[0])}
    gd = _content_dict(got.kind[0], got.row[0], got.col[0], got.bit[0])
    elem = bit // w
    wit = {"lane": lane, "register": name, "element": elem, "bit": bit % w}
    where = f"container bit {bit % w}: " if (bit % w) or exp["bit"] else ""
    msg = (f"lane {lane}, register {name}, element {elem} (bits {elem * w}..{elem * w + w - 1}): {where}expected "
           + (f"bit {exp['bit']} of " if exp["bit"] or where else "")
           + f"element (row {exp['row']}, col {exp['col']}), got {_describe_content(gd)}")
    return {"status": "refuted", "z3": "sat", "enumeration": "agrees", "witness": wit, "expected": exp, "got": gd,
            "final_loc": ("reg", name, lane, bit), "message": msg}


def _enum_note(first):
    return "no mismatch" if first is None else f"first mismatch {first}"


def _decide_mem(prog, nrun, zrun, timeout_ms) -> dict:
    import z3

    tgt: MemLayout = prog.targets[0]
    ops, nops = zrun.ops, nrun.ops
    final = len(prog.steps)
    w = tgt.elem_bits
    # enumeration over (row, col, bit)
    e = tgt.map.enumerate()
    R, C, O = e["row"], e["col"], e["offset"]
    first_enum = None
    Bs = np.arange(w, dtype=np.int64)
    A = (8 * tgt.base + O[:, None] * w + Bs[None, :])
    got = nrun.read_mem(final, A)
    bad = ~((got.kind == DATA) & (got.row == R[:, None]) & (got.col == C[:, None]) & (got.bit == Bs[None, :]))
    idx = np.argwhere(bad)
    if len(idx):
        i, bb = (int(x) for x in idx[0])
        first_enum = (int(R[i]), int(C[i]), bb)
    r, c, b = z3.BitVec("row", 32), z3.BitVec("col", 32), z3.BitVec("bit", 32)
    env = {"row": r, "col": c}
    off = tgt.map.z3(env)["offset"]
    Az = ops.bv(off) * w + b + 8 * tgt.base
    got_z = zrun.read_mem(final, Az)
    exp = Content(ops.const(DATA), r, c, b)
    s = alg._solver(timeout_ms)
    s.add(tgt.map.z3_domain(env), z3.ULT(b, w), z3.Not(content_eq(ops, got_z, exp)))
    smt2 = s.to_smt2()
    v = s.check()
    if v == z3.unknown:
        return {"status": "unknown", "z3": "unknown", "enumeration": _enum_note(first_enum),
                "message": "solver gave no verdict; not proved"}
    first_z3 = None
    if v == z3.sat:
        m = alg.minimize_witness(s, [("row", r), ("col", c), ("bit", b)], timeout_ms)
        if m is None:
            return {"status": "unknown", "z3": "unknown (minimisation)", "enumeration": _enum_note(first_enum),
                    "message": "solver timed out while minimising; not proved"}
        first_z3 = (m["row"], m["col"], m["bit"])
    if first_z3 != first_enum:
        return {"status": "unknown", "z3": str(v), "enumeration": "DISAGREES",
                "message": f"Z3 ({first_z3}) and enumeration ({first_enum}) disagree -- a bug; please report"}
    if first_z3 is None:
        return {"status": "proved", "z3": "unsat", "enumeration": "agrees", "smt2": smt2}
    row, col, bit = first_z3
    off = int(tgt.map.eval({"row": row, "col": col})["offset"])
    addr = 8 * tgt.base + off * w + bit
    g = nrun.read_mem(final, np.array([addr]))
    gd = _content_dict(g.kind[0], g.row[0], g.col[0], g.bit[0])
    wit = {"row": row, "col": col, "bit": bit, "byte": addr // 8}
    msg = (f"tile element (row {row}, col {col}) at byte {addr // 8}: got {_describe_content(gd)}")
    return {"status": "refuted", "z3": "sat", "enumeration": "agrees", "witness": wit,
            "expected": {"row": row, "col": col, "bit": bit}, "got": gd, "final_loc": ("mem", "shared", 0, addr),
            "message": msg}


# ---------------------------------------------------------------------------------------
# Paths

def _loc_text(prog: Program, loc) -> str:
    space, name, lane, bit = loc
    if space == "reg":
        return f"lane {lane}, {name} bit {bit}"
    return f"shared byte {bit // 8} bit {bit % 8}"


def _path(prog: Program, nrun: NPRun, final_loc) -> list[dict]:
    """Walk provenance back from the final location to the source."""
    hops = []
    loc = final_loc
    for k in range(len(prog.steps), 0, -1):
        st = prog.steps[k - 1]
        prov = nrun.prov[k]
        space, name, lane, bit = loc
        moved = False
        if space == "reg" and name in prov:
            p = prov[name]
            hops.append((k, loc))
            loc = _pick(p, lane, bit)
            moved = True
        elif space == "mem" and "__mem__" in prov:
            p = prov["__mem__"]
            hops.append((k, loc))
            loc = _pick_mem(p, bit)
            moved = True
        if not moved:
            continue
    hops.append((0, loc))
    hops.reverse()
    out = []
    for k, l in hops:
        c = _content_at(nrun, k, l)
        at = "source" if k == 0 else f"after step {k}"
        d = {"stage": k, "at": at, "location": _loc_dict(l), "where": _loc_text(prog, l),
             "holds": c}
        if k:
            d["instruction"] = prog.steps[k - 1].text
            d["at"] = f"after step {k} ({prog.steps[k - 1].kind})"
        out.append(d)
    return out


def _pick(p, lane, bit):
    space, name, L, B = p
    L = np.broadcast_to(np.asarray(L), np.shape(B)) if np.ndim(L) else L
    if space == "mixed":
        nm = name[lane, bit] if np.ndim(name) else name
        if nm == "shared":
            return ("mem", "shared", 0, int(np.asarray(B)[lane, bit]))
        return ("reg", str(nm), int(np.asarray(L)[lane, bit]), int(np.asarray(B)[lane, bit]))
    if space == "mem":
        return ("mem", "shared", 0, int(np.asarray(B)[lane, bit]))
    nm = name[lane, bit] if np.ndim(name) else name
    Ls = np.asarray(L)
    Bs = np.asarray(B)
    return ("reg", str(nm), int(Ls[lane, bit] if Ls.ndim else Ls), int(Bs[lane, bit] if Bs.ndim else Bs))


def _pick_mem(p, A):
    space, name, L, B = p
    nm = name[A] if np.ndim(name) else name
    if nm == "shared":
        return ("mem", "shared", 0, int(np.asarray(B)[A]))
    return ("reg", str(nm), int(np.asarray(L)[A]), int(np.asarray(B)[A]))


def _content_at(nrun: NPRun, k, loc) -> dict:
    space, name, lane, bit = loc
    if space == "reg":
        c = nrun.read(k, name, np.array([lane]), np.array([bit]))
    else:
        c = nrun.read_mem(k, np.array([bit]))
    return _content_dict(c.kind[0], c.row[0], c.col[0], c.bit[0])


def _loc_dict(loc) -> dict:
    space, name, lane, bit = loc
    if space == "reg":
        return {"space": "register", "lane": lane, "register": name, "bit": bit}
    return {"space": "shared", "byte": bit // 8, "bit": bit % 8}


def _find(prog: Program, nrun: NPRun, exp: dict) -> list[dict]:
    """Where the expected element's bit ended up among the target's registers / tile."""
    final = len(prog.steps)
    out = []
    tgt = prog.targets[0]
    if isinstance(tgt, RegLayout):
        for name in [n for t in prog.targets for n in t.names]:
            st = nrun.states[final]["regs"][name]
            m = (st.kind == DATA) & (st.row == exp["row"]) & (st.col == exp["col"]) & (st.bit == exp["bit"])
            for l, b in np.argwhere(m):
                t = next(t for t in prog.targets if name in t.names)
                e = int(b) // t.elem_bits
                cb = int(b) % t.elem_bits
                at = f" (at container bit {cb}, wanted at {exp['bit'] + t.shift})" if cb != exp["bit"] + t.shift else ""
                out.append({"lane": int(l), "register": name, "element": e,
                            "where": f"lane {int(l)}, {name} element {e}{at}"})
    else:
        mem = nrun.states[final]["mem"]
        m = (mem.kind == DATA) & (mem.row == exp["row"]) & (mem.col == exp["col"]) & (mem.bit == exp["bit"])
        for a in np.nonzero(m)[0]:
            out.append({"byte": int(a) // 8, "where": f"shared byte {int(a) // 8}"})
    return out
