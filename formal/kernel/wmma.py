"""wmma.load / wmma.store / wmma.mma in the kernel interpreter.

The memory side is ``specs/wmma_memory.toml`` (:mod:`formal.wmma.memory`: element (row, col)
at ``index(row, col, stride)`` elements from the pointer).  The register side -- which
(row, col) a (lane, element) of a fragment holds -- is unspecified by PTX (9.7.14.4.1); the
interpreter uses the fragment maps observed on silicon (:mod:`formal.wmma.maps`, H100 for
``sm_90``), so a ``check`` is a proof *for that map* (it says which) and a ``run`` is what
that GPU computes.  The accumulator map of wmma.mma is the load map of ``c`` (row); the
interpreter refuses to run if the c/d maps of the two layouts disagree.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .values import U64
from .parse import Reg, Unsupported, Vec

_MATRIX_TYPE = {"a": "atype", "b": "btype", "c": "ctype", "d": "dtype"}


@lru_cache(maxsize=None)
def _maps():
    from ..wmma import maps
    return maps.all_maps()


def pick_map(shape, matrix, typ, layout, kind, arch):
    from ..wmma import maps
    cands = maps.find(_maps(), shape=shape, matrix=matrix, layout=layout, kind=kind, types=typ)
    if not cands:
        return None
    pref = [m for m in cands if arch in m.archs and m.evidence == "silicon"] or \
        [m for m in cands if m.evidence == "silicon"] or cands
    return pref[0]


class Frag:
    """A fragment map as arrays (the interface formal.kernel.provenance reads): per slot
    (lane, reg, elem) the cell (row, col) it holds."""

    def __init__(self, fmap, elem_bits: int, reg_bits: int | None = None):
        single = fmap.single()                                    # [32, elements]
        if (single == -2).any():
            # several cells in one slot: keep the first (duplicates carry the same value)
            for l in range(32):
                for i in range(fmap.elements):
                    if single[l, i] == -2:
                        r, c = fmap.slots[l][i][0]
                        single[l, i] = r * fmap.cols + c
        self.fmap = fmap
        self.rows, self.cols = fmap.rows, fmap.cols
        self.epr = fmap.elems_per_reg or 1
        self.elements = fmap.elements
        self.nregs = (fmap.elements + self.epr - 1) // self.epr
        self.elem_bits = elem_bits
        self.value_bits = elem_bits
        self.shift = 0
        self.reg_bits = reg_bits or max(32, elem_bits)          # .f64 fragments: one double per 64-bit register
        self.products = 1
        held = single >= 0
        lane, i = np.nonzero(held)
        cell = single[lane, i]
        self._en = {"lane": lane, "reg": i // self.epr, "elem": i % self.epr, "i": i,
                    "row": cell // fmap.cols, "col": cell % fmap.cols,
                    "product": np.zeros_like(lane), "bit_lo": (i % self.epr) * elem_bits}

    def enumerate(self):
        return self._en


def _elem_bits(form, matrix):
    from ..catalog import element_container
    t = getattr(form, _MATRIX_TYPE[matrix])
    return element_container(t, form.kind)[0] if t else 32


def frag_of(m, ins, form, matrix, layout, kind):
    key = (form.shape, matrix, getattr(form, _MATRIX_TYPE[matrix]), layout, kind, m.arch)
    cache = m.__dict__.setdefault("_wmma_frags", {})
    if key not in cache:
        t = getattr(form, _MATRIX_TYPE[matrix])
        fm = pick_map(form.shape, matrix, t, layout, kind, m.arch)
        if fm is None:
            raise Unsupported(ins.line, ins.text, f"no observed wmma fragment map for {form.shape} .{matrix} .{t} "
                                                  f".{layout} (formal.wmma.maps)")
        cache[key] = Frag(fm, _elem_bits(form, matrix))
    return cache[key]


def _regs(op, ins):
    items = list(op.items) if isinstance(op, Vec) else [op]
    if not all(isinstance(x, Reg) for x in items):
        raise Unsupported(ins.line, ins.text, "fragment registers expected")
    return [x.name for x in items]


def wmma(m, p, ins, exe, gw, thread_ids):
    from .memory import _read_bytes, _write_bytes, addresses, _space
    form = ins.form
    fam = form.family
    tids = thread_ids(m, gw)
    W = len(gw)
    if fam in ("wmma.load", "wmma.store"):
        from ..catalog import default_stride
        from ..wmma import memory as wm
        matrix = form.matrix
        store = fam == "wmma.store"
        fr = frag_of(m, ins, form, matrix if matrix != "d" else "d", form.layout, "store" if store else "load")
        regs = _regs(ins.ops[1] if store else ins.ops[0], ins)
        if len(regs) != fr.nregs:
            raise Unsupported(ins.line, ins.text, f"the fragment map has {fr.nregs} registers, the instruction {len(regs)}")
        addr_op = ins.ops[0] if store else ins.ops[1]
        ptr = addresses(m, ins, addr_op, tids.ravel()).reshape(W, 32)
        if len(ins.ops) > 2:
            stride = m.value(ins.ops[2], ins, 32)[tids].astype(np.int64)
        else:
            stride = np.full((W, 32), default_stride(form), np.int64)
        # "the same values of p and stride in every thread": else undefined
        if (ptr != ptr[:, :1]).any() or (stride != stride[:, :1]).any():
            w, l = map(int, np.argwhere((ptr != ptr[:, :1]) | (stride != stride[:, :1]))[0])
            m.witness("undefined", ins, tids[w, l], arrived="p or stride differs between the lanes of the warp",
                      wanted="the same p and stride in every thread (9.7.14.4.2)")
        view = wm.memory_view(form)
        f_index = wm.spec().layouts[view.layout].index
        en = fr.enumerate()
        eb = fr.elem_bits // 8
        if eb < 1:
            raise Unsupported(ins.line, ins.text, "sub-byte wmma elements")
        idx = np.asarray(f_index.eval({"row": en["row"][None, :], "col": en["col"][None, :],
                                       "stride": stride[:, :1]}), dtype=np.int64)       # [W, P]
        ea = ptr[:, en["lane"]] + (idx * eb).astype(U64)                                   # [W, P]
        tt = tids[:, en["lane"]]
        space = _space(ins)
        if not store:
            data, tg, srcs = _read_bytes(m, ins, space, ea.ravel(), tt.ravel(), eb)
            m.spread_undef(tids)
            data = data.reshape(W, -1, eb)
            if tg is not None:
                tg = tg.reshape(W, -1, eb)
            sub = np.zeros(m.T, bool)
            sub[tids.ravel()] = True
            rb = fr.reg_bits // 8
            for j, r in enumerate(regs):
                v = np.zeros((W, 32), dtype=U64)
                t4 = np.zeros((W, 32, rb), np.int64) if tg is not None else None
                sel = np.flatnonzero(en["reg"] == j)
                for k in sel:
                    e = int(en["elem"][k])
                    ln = int(en["lane"][k])
                    val = np.zeros(W, dtype=U64)
                    for b in range(eb):
                        val |= data[:, k, b].astype(U64) << U64(8 * b)
                    v[:, ln] |= val << U64(e * fr.elem_bits)
                    if t4 is not None:
                        t4[:, ln, e * eb:(e + 1) * eb] = tg[:, k, :]
                full = np.zeros(m.T, dtype=U64)
                full[tids.ravel()] = v.ravel()
                ft = None
                if t4 is not None:
                    ft = np.zeros((m.T, rb), np.int64)
                    ft[tids.ravel()] = t4.reshape(-1, rb)
                m.put(r, full, sub, ins, ft, p)
            return None
        # store: slot -> memory; a cell held by several slots is written once (first slot)
        cells = en["row"] * fr.cols + en["col"]
        _, first = np.unique(cells, return_index=True)
        data = np.zeros((W, len(first), eb), dtype=np.uint8)
        tg = np.zeros((W, len(first), eb), np.int64) if m.check else None
        for n, k in enumerate(first):
            j, e, ln = int(en["reg"][k]), int(en["elem"][k]), int(en["lane"][k])
            v = m.get(regs[j], ins)[tids[:, ln]]
            to = m.tags.get(regs[j]) if m.check else None
            for b in range(eb):
                data[:, n, b] = ((v >> U64(e * fr.elem_bits + 8 * b)) & U64(0xFF)).astype(np.uint8)
                if tg is not None and to is not None:
                    tg[:, n, b] = to[tids[:, ln], e * eb + b]
        m.spread_undef(tids)
        _write_bytes(m, ins, p, space, ea[:, first].ravel(), tt[:, first].ravel(), data.reshape(-1, eb),
                     None if tg is None else tg.reshape(-1, eb))
        return None
    if fam != "wmma.mma":
        raise Unsupported(ins.line, ins.text)
    fa = frag_of(m, ins, form, "a", form.alayout, "load")
    fb = frag_of(m, ins, form, "b", form.blayout, "load")
    fc = frag_of(m, ins, form, "c", "row", "load")
    fc2 = pick_map(form.shape, "c", form.ctype, "col", "load", m.arch)
    if fc2 is not None and not np.array_equal(fc2.single(), fc.fmap.single()):
        raise Unsupported(ins.line, ins.text, "the accumulator maps of .row and .col loads differ")
    fd = Frag(fc.fmap, _elem_bits(form, "d")) if form.dtype != form.ctype else fc
    if form.dtype != form.ctype:
        fdm = pick_map(form.shape, "c", form.dtype, "row", "load", m.arch)
        if fdm is None:
            raise Unsupported(ins.line, ins.text, f"no accumulator map for .{form.dtype}")
        fd = Frag(fdm, _elem_bits(form, "d"))
    regs = {k: _regs(op, ins) for k, op in zip("dabc", ins.ops[:4])}

    def matrix(fr, rs):
        en = fr.enumerate()
        vals = np.zeros((W, 32, len(rs)), dtype=U64)
        for j, r in enumerate(rs):
            vals[:, :, j] = m.get(r, ins)[tids]
        M = np.zeros((W, fr.rows, fr.cols), dtype=U64)
        v = (vals[:, en["lane"], en["reg"]] >> (en["elem"] * fr.elem_bits).astype(U64)) & \
            U64((1 << fr.elem_bits) - 1 if fr.elem_bits < 64 else 0xFFFFFFFFFFFFFFFF)
        M[:, en["row"], en["col"]] = v
        return M, vals

    A, av = matrix(fa, regs["a"])
    B, bv = matrix(fb, regs["b"])
    C, cv = matrix(fc, regs["c"])
    if m.mma_bits:
        from ..evaluate import EvalError, evaluate_matrices
        try:
            D = evaluate_matrices(form, A, B, C, arch=m.arch)
        except EvalError as e:
            raise Unsupported(ins.line, ins.text, str(e)) from None
    else:
        D = np.zeros((W, fd.rows, fd.cols), dtype=U64)
    dtags = None
    if m.prov is not None:
        dtags = m.prov.mma(ins, p, form, tids, regs, av, bv, cv, None, None, frags={"a": fa, "b": fb, "c": fc, "d": fd})
    en = fd.enumerate()
    sub = np.zeros(m.T, bool)
    sub[tids.ravel()] = True
    from .mma import undefined_d
    du = undefined_d(m, tids, regs, {"a": fa, "b": fb, "c": fc, "d": fd})
    D = np.asarray(D).astype(U64)
    for j, r in enumerate(regs["d"]):
        if du is not None:
            m._uin = np.zeros(m.T, np.int32)
            m._uin[tids] = du[:, :, j]
        v = np.zeros((W, 32), dtype=U64)
        sel = np.flatnonzero(en["reg"] == j)
        for k in sel:
            v[:, en["lane"][k]] |= D[:, en["row"][k], en["col"][k]] << U64(int(en["elem"][k]) * fd.elem_bits)
        full = np.zeros(m.T, dtype=U64)
        full[tids.ravel()] = v.ravel()
        m.put(r, full, sub, ins, None if dtags is None else dtags[j], p)
    return None
