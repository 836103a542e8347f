"""wgmma in the kernel interpreter: the warpgroup instructions (PTX ISA 9.7.15).

``wgmma.mma_async`` is executed when it is issued: B (and A from a descriptor) is read from the
CTA's shared memory through the descriptor (:mod:`formal.smem`, the silicon-settled address map),
A from registers otherwise, and D computed with the wgmma numerics
(:func:`formal.evaluate.wgmma_matrices`).  When its results may be touched is state
(:mod:`formal.kernel.asynchrony`): the accumulator and A registers are in flight until a
``wgmma.wait_group`` covers the wgmma's group.  Issuing at the issue point gives the hardware's
result for every kernel that respects that state (a kernel that does not gets a witness).

A warpgroup is four consecutive warps of a CTA (warps 4g .. 4g+3); every instruction here is
``.sync.aligned``: all 128 threads execute it together, or it is undefined behaviour.
"""

from __future__ import annotations

import numpy as np

from .parse import Imm, Reg, Unsupported, Vec
from .values import U64


def _names(op, ins, n=None) -> list[str]:
    items = list(op.items) if isinstance(op, Vec) else [op]
    if not all(isinstance(x, Reg) for x in items) or (n is not None and len(items) != n):
        raise Unsupported(ins.line, ins.text, f"expected {n} registers, got {op}")
    return [x.name for x in items]


def warpgroups(m, ins, exe) -> np.ndarray:
    """Thread ids [G, 128] of the warpgroups executing ``ins``; a warpgroup that executes it with
    fewer than its 128 threads (divergence, exited or missing threads) is undefined behaviour."""
    if m.bsp % 128:
        raise Unsupported(ins.line, ins.text, "a warpgroup instruction in a CTA whose threads do not fill whole "
                                              "warpgroups (block size a multiple of 128)")
    t = np.flatnonzero(exe)
    base = np.unique(t - (t % m.bsp) % 128)
    tids = base[:, None] + np.arange(128)[None, :]
    miss = ~exe[tids]
    if miss.any():
        g, j = (int(x[0]) for x in np.nonzero(miss))
        m.witness("undefined", ins, int(tids[g, j]), arrived="this thread of the warpgroup does not execute the "
                  ".sync.aligned warpgroup instruction with the others",
                  wanted="all 128 threads of the warpgroup execute it convergently (9.7.15)")
    return tids


def wgmma(m, p, ins, exe):
    form = ins.form
    if form is None:
        raise Unsupported(ins.line, ins.text, "not a wgmma form the catalog reads")
    asy = m.asy
    tids = warpgroups(m, ins, exe)
    fam = form.family
    if fam == "wgmma.fence":
        asy.fence(tids.ravel())
        return None
    if fam == "wgmma.commit_group":
        asy.commit(tids.ravel())
        return None
    if fam == "wgmma.wait_group":
        n = ins.ops[0]
        if not isinstance(n, Imm):
            raise Unsupported(ins.line, ins.text, "wait_group N must be an integer constant")
        asy.wait(tids.ravel(), int(n.value), p)
        return None
    if fam != "wgmma":
        raise Unsupported(ins.line, ins.text, f"{fam} is not modelled")
    if form.is_sparse and m.prov is not None:
        raise Unsupported(ins.line, ins.text, "the data-path proof of wgmma.mma_async.sp (kernel run executes it)")
    return _mma_async(m, p, ins, exe, form, tids)


def _uniform(m, ins, op, tids, what: str) -> np.ndarray:
    """A descriptor operand: one 64-bit value per warpgroup [G] (every thread must hold the same)."""
    v = np.asarray(m.value(op, ins, 64), dtype=U64)[tids]
    bad = (v != v[:, :1]).any(axis=1)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        j = int(np.flatnonzero(v[g] != v[g, 0])[0])
        m.witness("descriptor", ins, int(tids[g, j]), op.name if isinstance(op, Reg) else "",
                  f"{what} {int(v[g, j]):#018x} in this thread, {int(v[g, 0]):#018x} in thread 0 of its warpgroup",
                  f"the same {what} in every thread of the warpgroup (9.7.15.5.1: a warpgroup-wide operand)")
    return v[:, 0]


def _scale_d(m, ins, op, tids) -> np.ndarray:
    if isinstance(op, Imm):
        return np.full(len(tids), bool(op.value))
    v = np.asarray(m.value(op, ins), dtype=bool)[tids]
    if (v != v[:, :1]).any():
        g = int(np.flatnonzero((v != v[:, :1]).any(axis=1))[0])
        m.witness("undefined", ins, int(tids[g, 0]), op.name if isinstance(op, Reg) else "",
                  "scale-d differs between threads of the warpgroup", "a warpgroup-uniform scale-d predicate")
    return v[:, 0]


def smem_elements(m, ins, p, desc: np.ndarray, tids, name: str, etype: str, n: int, trans: int):
    """Operand ``name`` (a | b) read from each warpgroup's CTA shared memory through its descriptor:
    (codes [G, mn, k], tags [G, mn, k, bytes] or None, flat byte indices [G, mn, k]).  Reads go through
    the interpreter's shared-memory checks (pending cp.async, races, proxy fences, bounds)."""
    from .. import smem as S
    from ..smem import DescriptorError, SmemError
    op = S.operand(name, etype, n=n, major="MN" if trans else "K")
    nb = max(op.bits // 8, 1)
    if op.bits < 8:
        raise Unsupported(ins.line, ins.text, "sub-byte wgmma operands in shared memory")
    G = len(desc)
    byte = np.zeros((G, op.mn, op.k), np.int64)
    for v in np.unique(desc):
        try:
            b, _ = S.addresses(int(v), op)
        except (SmemError, DescriptorError) as e:
            g = int(np.flatnonzero(desc == v)[0])
            m.witness("descriptor", ins, int(tids[g, 0]), "", f"operand {name} descriptor {int(v):#018x}: {e}",
                      "a descriptor the wgmma can use (9.7.15.5.1)")
            continue
        byte[desc == v] = b
    reg = m.shared
    slot = m.slot[tids[:, 0]]
    oob = (byte < 0) | (byte + nb > m.S)
    if oob.any():
        g, i, j = (int(x[0]) for x in np.nonzero(oob))
        m.witness("out-of-bounds", ins, int(tids[g, 0]), "",
                  f"operand {name} element ({i}, {j}) at shared address {int(byte[g, i, j]):#x} ({nb} bytes)",
                  f"inside the CTA's {m.S} bytes of shared memory")
        byte = np.where(oob, 0, byte)
    flat = slot[:, None, None] * m.S + byte                                    # [G, mn, k]
    idx = flat[..., None] + np.arange(nb)                                       # [G, mn, k, nb]
    data = reg.data[idx]
    codes = np.zeros(flat.shape, np.uint64)
    for j in range(nb):
        codes |= data[..., j].astype(np.uint64) << np.uint64(8 * j)
    # the shared-memory checks, per byte, with thread 0 of the warpgroup as the reader
    from .memory import _shared_read_checks
    reader = np.broadcast_to(tids[:, :1, None, None], idx.shape).reshape(-1)
    fl = idx.reshape(-1)
    _shared_read_checks(m, ins, reg, reader, fl[:, None])
    m.asy.check_async_read(ins, reg, fl, reader, f"wgmma operand {name}")
    m.asy.reading(p, fl, reader)
    reg.reader[fl] = reader
    reg.repoch[fl] = m.epoch[m.slot[reader]]
    reg.rwepoch[fl] = m.wepoch[m.gwarp[reader]]
    if reg.udef is not None:
        u = reg.udef[fl].reshape(idx.shape).max(axis=3)
        if u.any():
            m.note_undef(tids[:, 0], u.reshape(G, -1).max(axis=1))
    tg = reg.tags[idx] if reg.tags is not None else None
    return codes, tg, flat


def _mma_async(m, p, ins, exe, form, tids):
    from .. import layout
    from ..evaluate import EvalError, wgmma_compressed, wgmma_matrices
    from ..catalog import wgmma_operand_names
    M, N, K = form.mnk
    ops = form.operands
    names = wgmma_operand_names(form)
    byname = dict(zip(names, ins.ops))
    asy = m.asy
    dregs = _names(byname["d"], ins, ops["d"].count)
    aregs = _names(byname["a"], ins, ops["a"].count) if form.asource == "reg" else []
    imm = {k: (int(o.value) if isinstance(o, Imm) else None) for k, o in byname.items()
           if k in ("imm-scale-a", "imm-scale-b", "imm-trans-a", "imm-trans-b")}
    if any(v is None for v in imm.values()):
        raise Unsupported(ins.line, ins.text, "imm-scale / imm-trans must be integer constants")
    asy.check_fenced(ins, tids, dregs + aregs, "accumulator / A")
    asy.in_wgmma = True
    try:
        G = len(tids)
        sd = _scale_d(m, ins, byname["scale-d"], tids)

        def regs(rs, bits):
            out = np.zeros((G, 128, len(rs)), np.uint32 if bits == 32 else U64)
            for j, r in enumerate(rs):
                out[:, :, j] = m.get(r, ins)[tids]
            return out
        # the accumulator is read only where scale-d is true: its undefined values count there only
        u0 = None if m._uin is None else m._uin.copy()
        d_in = regs(dregs, 32)
        m._uin = u0
        ud = np.zeros(G, np.int32)
        for r in dregs:
            ur = m.udef.get(r)
            if ur is not None:
                ud = np.maximum(ud, ur[tids].max(axis=1))
        ud = np.where(sd, ud, 0)
        C = layout.unpack(form, "d", d_in)
        bdesc = _uniform(m, ins, byname["b-desc"], tids, "B descriptor")
        sp = ".sp" if form.is_sparse else ""
        B, btags, bflat = smem_elements(m, ins, p, bdesc, tids, "b" + sp, form.btype, N, imm.get("imm-trans-b", 0))
        B = np.swapaxes(B, 1, 2)                                       # [G, K, N]
        atags = aflat = a_in = None
        if form.asource == "reg":
            a_in = regs(aregs, 32)
            A = layout.unpack(form, "a", a_in)
        else:
            adesc = _uniform(m, ins, byname["a-desc"], tids, "A descriptor")
            A, atags, aflat = smem_elements(m, ins, p, adesc, tids, "a" + sp, form.atype, None,
                                            imm.get("imm-trans-a", 0))
        if form.is_sparse:
            sel = byname["sp-sel"]
            if not isinstance(sel, Imm):
                raise Unsupported(ins.line, ins.text, "the sparsity selector must be an integer constant")
            e = np.asarray(m.value(byname["sp-meta"], ins, 32), dtype=np.uint32)[tids]       # [G, 128]
        if m.mma_bits:
            scales = dict(arch=m.arch, scale_d=sd, imm_scale_a=imm.get("imm-scale-a", 1),
                          imm_scale_b=imm.get("imm-scale-b", 1))
            from ..metadata.storage import UndefinedBehavior
            try:
                D = (wgmma_compressed(form, A, e, int(sel.value), B, C, **scales) if form.is_sparse
                     else wgmma_matrices(form, A, B, C, **scales))
                d_out = layout.pack(form, "d", D)
            except UndefinedBehavior as ex:        # illegal metadata / selector: as mma.sp (kernel/mma.py)
                m.witness("undefined", ins, int(tids[0, 0]), byname["sp-meta"].name
                          if isinstance(byname["sp-meta"], Reg) else "", f"sparse metadata / selector: {ex}",
                          "legal metadata and selector (9.7.15.6.1)")
                d_out = np.zeros_like(d_in)
            except EvalError as ex:
                raise Unsupported(ins.line, ins.text, str(ex)) from None
        else:
            d_out = np.zeros_like(d_in)
        dtags = None
        if m.prov is not None:
            descs = tuple(o.name if isinstance(o, Reg) else "" for o in (byname.get("a-desc"), byname["b-desc"]))
            dtags = m.prov.wgmma(ins, p, form, tids, dregs, aregs, sd, A, B, atags, btags, aflat, bflat, d_in, a_in,
                                 descs)
        # undefined operands make the warpgroup's result undefined (coarse: the whole warpgroup)
        u = ud if m._uin is None else np.maximum(ud, m._uin[tids].max(axis=1))
        du = np.broadcast_to(u[:, None], tids.shape).astype(np.int32) if u.any() else None
        sub = np.zeros(m.T, bool)
        sub[tids.ravel()] = True
        for j, r in enumerate(dregs):
            v = np.zeros(m.T, dtype=U64)
            v[tids.ravel()] = d_out[:, :, j].astype(U64).ravel()
            if du is not None:
                m._uin = np.zeros(m.T, np.int32)
                m._uin[tids] = du
            m.put(r, v, sub, ins, None if dtags is None else dtags[j], p)
    finally:
        asy.in_wgmma = False
    asy.issue(p, tids, dregs + aregs)
    return None
