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
        try:
            d = evaluate(form, a, b, c, e=e, sel=sel, arch=m.arch)
        except EvalError as ex:
            raise Unsupported(ins.line, ins.text, str(ex)) from None
    else:
        d = np.zeros((W, 32, ops["d"].count), dtype=np.uint64)
    sub = np.zeros(m.T, bool)
    sub[tids.ravel()] = True
    dtags = None
    if m.prov is not None:
        dtags = m.prov.mma(ins, p, form, tids, regs, a, b, c, e, sel)
    for j, r in enumerate(regs["d"]):
        v = np.zeros(m.T, dtype=U64)
        v[tids.ravel()] = d[:, :, j].astype(U64).ravel()
        m.put(r, v, sub, ins, None if dtags is None else dtags[j], p)
    return None
