"""mma / mma.sp in the kernel interpreter: bit patterns through :func:`formal.evaluate`
(batched over every warp at the instruction), provenance through :mod:`formal.kernel.provenance`."""

from __future__ import annotations

import numpy as np

from .values import U64
from .parse import Imm, Reg, Unsupported, Vec


def _regs(op, ins, n):
    items = list(op.items) if isinstance(op, Vec) else [op]
    if len(items) != n or not all(isinstance(x, Reg) for x in items):
        raise Unsupported(ins.line, ins.text, f"expected {n} registers, got {op}")
    return [x.name for x in items]


def mma(m, p, ins, exe, gw, thread_ids):
    form = ins.form
    if form is None or form.family not in ("mma", "mma.sp"):
        raise Unsupported(ins.line, ins.text)
    if form.block_scale:
        raise Unsupported(ins.line, ins.text, "block-scaled mma")
    ops = form.operands
    names = ["d", "a", "b", "c"]
    regs = {}
    for k, op in zip(names, ins.ops[:4]):
        if k == "c" and isinstance(op, Imm):
            raise Unsupported(ins.line, ins.text, "immediate accumulator")
        regs[k] = _regs(op, ins, ops[k].count)
    tids = thread_ids(m, gw)                                        # [W, 32]
    W = len(gw)

    def gather(k):
        dt = U64 if ops[k].reg_bits == 64 else np.uint32
        out = np.zeros((W, 32, ops[k].count), dtype=dt)
        for j, r in enumerate(regs[k]):
            out[:, :, j] = m.get(r, ins)[tids].astype(dt)
        return out

    e = sel = None
    if form.is_sparse:
        if len(ins.ops) < 6 or not isinstance(ins.ops[5], Imm):
            raise Unsupported(ins.line, ins.text, "mma.sp needs its metadata register and an immediate selector")
        e = m.value(ins.ops[4], ins, 32)[tids].astype(np.uint32)
        sel = int(ins.ops[5].value)
    a, b, c = gather("a"), gather("b"), gather("c")
    if m.mma_bits:
        from ..evaluate import EvalError, evaluate
        from ..metadata.storage import UndefinedBehavior
        try:
            d = evaluate(form, a, b, c, e=e, sel=sel, arch=m.arch)
        except UndefinedBehavior as ex:        # illegal metadata / selector: undefined behaviour, as in check
            m.witness("undefined", ins, int(tids[0, 0]), ins.ops[4].name if isinstance(ins.ops[4], Reg) else "",
                      f"sparse metadata / selector: {ex}", "legal metadata and selector (9.7.14.6)")
            d = np.zeros((W, 32, ops["d"].count), dtype=np.uint64)
        except EvalError as ex:
            raise Unsupported(ins.line, ins.text, str(ex)) from None
    else:
        d = np.zeros((W, 32, ops["d"].count), dtype=np.uint64)
    sub = np.zeros(m.T, bool)
    sub[tids.ravel()] = True
    dtags = None
    if m.prov is not None:
        dtags = m.prov.mma(ins, p, form, tids, regs, a, b, c, e, sel)
    from .provenance import _frag
    du = undefined_d(m, tids, regs, {k: _frag(form, k)[0] for k in "abcd"}, e_undef=form.is_sparse)
    for j, r in enumerate(regs["d"]):
        v = np.zeros(m.T, dtype=U64)
        v[tids.ravel()] = d[:, :, j].astype(U64).ravel()
        if du is not None:
            m._uin = np.zeros(m.T, np.int32)
            m._uin[tids] = du[:, :, j]
        m.put(r, v, sub, ins, None if dtags is None else dtags[j], p)
    return None


def undefined_d(m, tids, regs, frags, e_undef=False):
    """Which d registers hold a result computed from an undefined operand element: an
    undefined A element makes its row of D undefined, a B element its column, a C element
    itself (origin numbers [W, 32, d registers]; None if every operand is defined).  Undefined
    sparse metadata makes the warp's results undefined."""
    if m._uin is None or not m._uin[tids].any():
        return None
    W = tids.shape[0]
    if e_undef:
        m.spread_undef(tids)
        return np.broadcast_to(m._uin[tids][:, :, None], (W, 32, len(regs["d"]))).copy()

    def per_slot(k):
        fr = frags[k]
        en = fr.enumerate()
        u = np.zeros((W, 32, len(regs[k])), np.int32)
        for j, r in enumerate(regs[k]):
            ur = m.udef.get(r)
            if ur is not None:
                u[:, :, j] = ur[tids]
        return u[:, en["lane"], en["reg"]], en, fr          # [W, P]
    ua, ea, fa = per_slot("a")
    ub, eb_, fb = per_slot("b")
    uc, ec, fc = per_slot("c")
    fd = frags["d"]
    M, N = fd.rows, fd.cols
    rows = np.zeros((W, M), np.int32)
    cols = np.zeros((W, N), np.int32)
    cell = np.zeros((W, M, N), np.int32)
    wi = np.arange(W)[:, None]
    np.maximum.at(rows, (wi, ea["row"][None, :] % M), ua)
    np.maximum.at(cols, (wi, eb_["col"][None, :] % N), ub)
    np.maximum.at(cell, (wi, ec["row"][None, :], ec["col"][None, :]), uc)
    D = np.maximum(np.maximum(rows[:, :, None], cols[:, None, :]), cell)
    ed = fd.enumerate()
    du = np.zeros((W, 32, len(regs["d"])), np.int32)
    np.maximum.at(du, (wi, ed["lane"][None, :], ed["reg"][None, :]), D[:, ed["row"], ed["col"]])
    return du
