"""One warp's ldmatrix / stmatrix addressing over a symbolic lane (Z3), cross-checked by the
32-lane enumeration.

At the first execution of a matrix load/store by a warp, the row-address register is rebuilt
as a bit-vector term of a symbolic ``lane``: walking back through the instructions that last
wrote it (the same instruction in every lane), down to ``%tid``/``%laneid`` and warp-uniform
values (concrete).  The term is accepted only if it reproduces the concrete address of each
of the 32 lanes (the enumeration); then Z3 proves, for all lanes at once,

* ``aligned``: every address lane supplies a row address aligned as ``specs/movement.toml``
  requires (the undefined-behaviour guard of 9.7.14.5.15 / .16);
* ``distinct``: no two register elements of the warp read (ldmatrix) or write (stmatrix) the
  same memory element (the gather of ``specs/movement.toml``, evaluated as Z3 terms through the
  same step object the recipes use).

A term that cannot be built (a construct outside the integer table, lanes whose addresses come
from different instructions) is reported as ``unknown``; nothing here changes a verdict of
:func:`formal.kernel.check` -- it is a second, independent derivation of the addressing.
"""

from __future__ import annotations

import numpy as np
import z3

from .parse import Addr, Imm, Reg, Sym

W64 = 64
_M64 = (1 << 64) - 1


def _bits_of(t: str) -> int:
    from .values import type_bits
    return type_bits(t)


class _NoTerm(Exception):
    pass


class _NoIns:
    line, text = 0, ""


_NOINS = _NoIns()


def lane_term(m, reg: str, tids: np.ndarray, lane, depth: int = 0):
    """Bit-vector term (64 bits) of register ``reg`` over the symbolic lane for warp ``tids``."""
    if reg in m.regs:
        cur = m.regs[reg]
    else:
        try:
            cur = m.special(reg, _NOINS)
        except Exception:  # noqa: BLE001 - an unsupported special register: no term
            cur = None
        if cur is None:
            raise _NoTerm(f"{reg} has no value")
    if np.asarray(cur).dtype == bool:
        pv = np.asarray(cur)[tids]
        if (pv == pv[0]).all():
            return z3.BoolVal(bool(pv[0]))
        return _pred_term(m, reg, tids, lane, depth)
    vals = np.asarray(cur, dtype=np.uint64)[tids]
    if (vals == vals[0]).all():
        return z3.BitVecVal(int(vals[0]), W64)
    if reg == "%laneid":
        return z3.ZeroExt(W64 - 5, lane)
    if reg == "%tid.x":
        base = int(vals[0])
        if not (vals == base + np.arange(32)).all():
            raise _NoTerm(f"{reg} is not tid0 + lane in this warp")
        return z3.BitVecVal(base, W64) + z3.ZeroExt(W64 - 5, lane)
    if depth > 48:
        raise _NoTerm("definition chain too deep")
    lw = m.lastw.get(reg)
    if lw is None:
        raise _NoTerm(f"{reg} has no writer")
    idx = lw[tids]
    if (idx < 0).any() or not (idx == idx[0]).all():
        raise _NoTerm(f"{reg} was last written by different instructions in different lanes")
    ins = m.instrs[int(idx[0])]
    if ins.pred is not None:
        raise _NoTerm(f"{reg} comes from a predicated instruction (line {ins.line})")
    return _term_of(m, ins, tids, lane, depth)


def _pred_term(m, reg, tids, lane, depth):
    lw = m.lastw.get(reg)
    idx = lw[tids] if lw is not None else None
    if idx is None or (idx < 0).any() or not (idx == idx[0]).all():
        raise _NoTerm(f"{reg} was last written by different instructions in different lanes")
    ins = m.instrs[int(idx[0])]
    if ins.head != "setp" or ins.pred is not None or len(ins.ops) != 3 or not isinstance(ins.ops[0], Reg):
        raise _NoTerm(f"line {ins.line}: predicate from {ins.opcode}")
    cmp, t = ins.parts[1], ins.parts[-1]
    if t not in [f"{p}{n}" for p in "bsu" for n in (16, 32, 64)]:
        raise _NoTerm(f"line {ins.line}: {ins.opcode}")
    w = _bits_of(t)
    a, b = (_operand(m, o, tids, lane, depth) for o in ins.ops[1:3])
    if t.startswith("s"):
        a, b = _sext(a, w), _sext(b, w)
        rel = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
               "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}
    else:
        a, b = _mask(a, w), _mask(b, w)
        rel = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": z3.ULT, "le": z3.ULE, "gt": z3.UGT,
               "ge": z3.UGE, "lo": z3.ULT, "ls": z3.ULE, "hi": z3.UGT, "hs": z3.UGE}
    if cmp not in rel:
        raise _NoTerm(f"line {ins.line}: {ins.opcode}")
    return rel[cmp](a, b)


def _operand(m, o, tids, lane, depth):
    if isinstance(o, Reg):
        t = lane_term(m, o.name, tids, lane, depth + 1)
        return z3.Not(t) if o.neg else t
    if isinstance(o, Imm):
        return z3.BitVecVal(o.value & _M64, W64)
    if isinstance(o, Sym):
        return z3.BitVecVal(m.sym_value(o.name, _NOINS), W64)
    if isinstance(o, Addr) and isinstance(o.base, Sym):
        return z3.BitVecVal((m.sym_value(o.base.name, _NOINS) + o.offset) & _M64, W64)
    raise _NoTerm(f"operand {o}")


def _mask(x, w):
    return x & z3.BitVecVal((1 << w) - 1, W64) if w < 64 else x


def _sext(x, w):
    """Sign-extend the low w bits of x to 64."""
    return z3.SignExt(W64 - w, z3.Extract(w - 1, 0, x)) if w < 64 else x


def _term_of(m, ins, tids, lane, depth):
    h, parts = ins.head, ins.parts
    types = [p for p in parts[1:] if p[:1] in "bsu" and p[1:].isdigit()]
    t = types[-1] if types else None
    ops = [_operand(m, o, tids, lane, depth) for o in ins.ops[1:]] if h not in ("cvta",) else None
    if h == "mov" and len(ins.ops) == 2 and t:
        return _mask(ops[0], _bits_of(t))
    if t is None and h != "cvta":
        raise _NoTerm(f"line {ins.line}: {ins.opcode}")
    w = _bits_of(t) if t else 64
    signed = t.startswith("s") if t else False
    if h in ("add", "sub") and len(ops) == 2:
        return _mask(ops[0] + ops[1] if h == "add" else ops[0] - ops[1], w)
    if h in ("mul", "mad"):
        a, b = ops[0], ops[1]
        c = ops[2] if h == "mad" else z3.BitVecVal(0, W64)
        if "wide" in parts:
            ext = _sext if signed else (lambda x, ww: _mask(x, ww))
            return _mask(ext(a, w) * ext(b, w) + c, 2 * w)
        if "hi" in parts:
            raise _NoTerm(f"line {ins.line}: {h}.hi")
        return _mask(a * b + c, w)
    if h in ("and", "or", "xor"):
        f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[h]
        return _mask(f(ops[0], ops[1]), w)
    if h == "not":
        return _mask(~ops[0], w)
    if h in ("shl", "shr"):
        a, b = ops
        if h == "shl":
            return _mask(a << b, w)
        if signed:
            return _mask(_sext(a, w) >> b, w)
        return z3.LShR(_mask(a, w), b)
    if h == "bfe" and all(isinstance(o, Imm) for o in ins.ops[2:4]):
        pos, ln = ins.ops[2].value & 0xFF, ins.ops[3].value & 0xFF
        if ln == 0 or pos + ln > w:
            raise _NoTerm(f"line {ins.line}: bfe field outside the operand")
        f = z3.LShR(_mask(ops[0], w), pos) & z3.BitVecVal((1 << ln) - 1, W64)
        return _mask(_sext(f, ln), w) if signed else f
    if h == "bfi" and all(isinstance(o, Imm) for o in ins.ops[3:5]):
        pos, ln = ins.ops[3].value & 0xFF, ins.ops[4].value & 0xFF
        if pos + ln > w:
            raise _NoTerm(f"line {ins.line}: bfi field outside the operand")
        fm = ((1 << ln) - 1) << pos
        return _mask((ops[1] & z3.BitVecVal(~fm & _M64, W64)) | ((ops[0] << pos) & z3.BitVecVal(fm, W64)), w)
    if h == "selp":
        c = ops[2]
        if not z3.is_bool(c):
            raise _NoTerm(f"line {ins.line}: selp predicate")
        return _mask(z3.If(c, ops[0], ops[1]), w)
    if h == "cvt" and len(types) == 2:
        dt, st = types
        src = _sext(ops[0], _bits_of(st)) if st.startswith("s") else _mask(ops[0], _bits_of(st))
        return _mask(src, _bits_of(dt))
    if h == "cvta":
        from .values import LOCAL_WINDOW, SHARED_WINDOW
        space = next((x for x in parts if x in ("shared", "local", "global")), None)
        base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "global": 0}.get(space)
        if base is None:
            raise _NoTerm(f"line {ins.line}: {ins.opcode}")
        a = _operand(m, ins.ops[1], tids, lane, depth)
        return _mask(a - base if "to" in parts else a + base, w)
    raise _NoTerm(f"line {ins.line}: {ins.opcode} is outside the symbolic integer table")


def prove_matrix_addressing(m, ins, step, tids, rowaddr) -> dict:
    """Z3 over the lane for one warp's ldmatrix / stmatrix (see module docstring)."""
    addr_op = ins.ops[1] if ins.head == "ldmatrix" else ins.ops[0]
    rec = {"line": ins.line, "instruction": ins.text, "warp": int(m.gwarp[tids[0]])}
    lane = z3.BitVec("lane", 5)
    try:
        base = _operand(m, addr_op.base, tids, lane, 0) if addr_op.base is not None else z3.BitVecVal(0, W64)
    except _NoTerm as e:
        rec.update(status="unknown", why=str(e))
        return rec
    term = base + z3.BitVecVal(addr_op.offset & _M64, W64)
    # the enumeration: the term must give every lane's concrete row address
    for l in range(32):
        v = z3.simplify(z3.substitute(term, (lane, z3.BitVecVal(l, 5))))
        if not z3.is_bv_value(v) or v.as_long() != int(rowaddr[l]) & _M64:
            rec.update(status="unknown", why=f"the symbolic address disagrees with lane {l}'s concrete address")
            return rec
    n_addr = len(step.addr_lanes)
    # the same base term and form (another k tile of the same load, say): the same proof
    key = (base.sexpr(), step.entry["id"], step.nregs, addr_op.offset % step.align)
    cache = m.__dict__.setdefault("_lane_proof_cache", {})
    if key in cache:
        rec.update(cache[key], same_proof_as=cache[key]["line"])
        rec["line"] = ins.line
        return rec
    s = z3.Solver()
    s.add(z3.ULT(z3.ZeroExt(W64 - 5, lane), n_addr), z3.URem(term, step.align) != 0)
    aligned = s.check()
    # distinct: element (lane, j, e) at row address of addr_lane(lane, j, e) + index * src bytes
    l1, l2 = z3.BitVec("l1", W64), z3.BitVec("l2", W64)
    j1, j2, e1, e2 = (z3.BitVec(n, W64) for n in ("j1", "j2", "e1", "e2"))

    def ev(f, env):
        return f.z3(env, W64)

    def addr(l, j, e):
        al, ix = step.gather(l, j, e, ev)
        row = z3.substitute(term, (lane, z3.Extract(4, 0, al)))
        return row + ix * (step.src_bits // 8)

    s2 = z3.Solver()
    dom = lambda l, j, e: z3.And(z3.ULT(l, 32), z3.ULT(j, step.nregs), z3.ULT(e, step.epr))
    s2.add(dom(l1, j1, e1), dom(l2, j2, e2), z3.Or(l1 != l2, j1 != j2, e1 != e2), addr(l1, j1, e1) == addr(l2, j2, e2))
    distinct = s2.check()
    if distinct == z3.sat:
        md = s2.model()
        rec["distinct_counterexample"] = [md.eval(x, model_completion=True).as_long() for x in (l1, j1, e1, l2, j2, e2)]
    # the enumeration of the same two properties
    L, J, E = np.meshgrid(np.arange(32), np.arange(step.nregs), np.arange(step.epr), indexing="ij")
    al, ix = (np.asarray(x) for x in step.gather(L, J, E))
    ea = rowaddr.astype(np.int64)[al] + ix * (step.src_bits // 8)
    enum_aligned = bool((rowaddr.astype(np.int64)[:n_addr] % step.align == 0).all())
    enum_distinct = len(np.unique(ea)) == ea.size
    z_aligned, z_distinct = aligned == z3.unsat, distinct == z3.unsat
    if aligned == z3.unknown or distinct == z3.unknown:
        rec.update(status="unknown", why="Z3 returned unknown")
        return rec
    rec.update(status="proved" if z_aligned and z_distinct else "refuted", aligned=z_aligned, distinct=z_distinct,
               agrees_with_enumeration=(z_aligned == enum_aligned and z_distinct == enum_distinct))
    if not z_aligned:
        mdl = s.model()
        rec["aligned_counterexample_lane"] = mdl.eval(lane).as_long()
    cache[key] = {k: v for k, v in rec.items() if k not in ("instruction",)}
    return rec
