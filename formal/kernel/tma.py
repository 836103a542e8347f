"""TMA in the kernel interpreter: ``cp.async.bulk.tensor`` through the spec's tensor maps (9.7.9.25).

A tensor map is a kernel parameter (``[[tensormap]]`` in the spec, formal.kernel.spec.TensorMap);
the interpreter knows it by its address (the parameter's generic or param-space address).

* **Load** (global -> shared, ``mbarrier::complete_tx::bytes``): the box at the coordinates
  (dimension 0 innermost; ``ceil(box / element stride)`` elements per dimension, coordinate
  ``c + j * element stride``) is written densely to shared memory, dimension 0 innermost, each
  byte at ``swizzle(dst + offset)`` -- the map's swizzle acts on the absolute shared address, as
  the wgmma descriptor's does (docs/wgmma.md).  Elements outside the tensor are filled with zero.
  The copy is done when issued: its bytes are written through the async proxy, belong to the
  mbarrier's current phase, and the mbarrier receives the box's bytes as ``complete_tx``.  A
  thread may read them (generic load, wgmma operand) only after a wait of its own on that
  mbarrier has seen the phase complete; before, the read is an ``async-pending`` witness.
* **Store** (shared -> global, ``bulk_group``): the box is read from shared memory through the
  async proxy (a generic-proxy write not followed by ``fence.proxy.async`` of its writer is a
  ``proxy-fence`` witness) and written to the tensor's in-bounds elements.  Its shared-memory
  reads stay in flight until ``cp.async.bulk.wait_group[.read]`` covers its bulk group: an
  overwrite before is an ``in-flight`` witness.

Not modelled (exit 3): im2col, interleaved maps, multicast to other CTAs, an inner box narrower
than the swizzle span, NaN out-of-bounds fill, reductions (``cp.reduce.async.bulk``).
"""

from __future__ import annotations

import numpy as np

from .parse import Addr, Imm, Reg, TensorAddr, Unsupported, Vec
from .values import GLOBAL_BASE, PARAM_BASE, U64


def tensormap_table(m) -> dict:
    """{address: (index, TensorMap, global base)}: param-space and generic addresses of each map."""
    out = {}
    bases = {b.name: GLOBAL_BASE + o for (b, o, nb) in m.buffers[:len(m.spec.buffers)]}
    for i, t in enumerate(m.spec.tensormaps):
        off = m.param_off[t.param] + t.offset
        # param-space address (mov.b32 %r, param keeps the offset), its generic form (cvta.param) and
        # the 64-bit symbol value
        out[off] = out[PARAM_BASE + off] = (i, t, bases[t.buffer])
    return out


def _map_of(m, ins, op, tidx):
    if not isinstance(op, TensorAddr) or not isinstance(op.base, Reg):
        raise Unsupported(ins.line, ins.text, "a tensor-map operand that is not a register")
    a = np.asarray(m.get(op.base.name, ins), dtype=U64)[tidx]
    out = []
    for v in a:
        hit = m.tmaps.get(int(v))
        if hit is None:
            raise Unsupported(ins.line, ins.text, f"the tensor map at address {int(v):#x} is none of the spec's "
                                                  "[[tensormap]] parameters (a map built on the device?)")
        out.append(hit)
    coords = op.coords.items
    if not all(isinstance(c, (Reg, Imm)) for c in coords):
        raise Unsupported(ins.line, ins.text, "tensor coordinates")
    cv = np.stack([np.asarray(m.value(c, ins, 32), dtype=U64)[tidx] for c in coords], axis=1)
    cv = cv.astype(np.int64) & 0xFFFFFFFF
    cv = np.where(cv >= 1 << 31, cv - (1 << 32), cv)                         # .s32 coordinates
    return out, cv


def _box(t):
    """Per box element (dense order, dimension 0 innermost): offsets j [n, rank]."""
    counts = [-(-b // e) for b, e in zip(t.box, t.element_strides)]
    grids = np.meshgrid(*[np.arange(c) for c in reversed(counts)], indexing="ij")
    j = np.stack([g.ravel() for g in reversed(grids)], axis=1)               # [n, rank], dim 0 fastest
    return j, counts


def _layout(m, ins, t, dst: int, tid: int):
    """Shared byte address of every byte of the box (swizzled), [n elements, eb]."""
    from .. import smem as S
    if t.interleave != "none":
        raise Unsupported(ins.line, ins.text, "interleaved tensor maps")
    j, counts = _box(t)
    eb = t.elem_bytes
    off = np.arange(len(j))[:, None] * eb + np.arange(eb)[None, :]
    addr = dst + off
    if t.swizzle != "none":
        sw = S.spec.mode(t.swizzle)
        if counts[0] * eb != sw.width_bytes:
            raise Unsupported(ins.line, ins.text, f"an inner box of {counts[0] * eb} bytes with the {t.swizzle} "
                                                  "swizzle (only a box as wide as the swizzle span is modelled)")
        addr = np.asarray(S.swizzle(addr, sw), dtype=np.int64)
    if dst % 128:
        m.witness("undefined", ins, tid, arrived=f"shared destination {dst:#x}",
                  wanted="a 128-byte aligned shared-memory address for cp.async.bulk.tensor (9.7.9.25.5.2)")
    return j, addr


def _global(t, base: int, c: np.ndarray, j: np.ndarray):
    """Global byte address of each box element and whether it is inside the tensor."""
    g = c[None, :] + j * np.asarray(t.element_strides)[None, :]
    inside = ((g >= 0) & (g < np.asarray(t.dims)[None, :])).all(axis=1)
    addr = base + g[:, 0] * t.elem_bytes
    for d in range(1, t.rank):
        addr = addr + g[:, d] * t.strides[d - 1]
    return np.where(inside, addr, 0).astype(np.int64), inside


def bulk_tensor(m, p: int, ins, exe):
    parts = ins.parts
    if "im2col" in parts or "im2col_no_offs" in parts:
        raise Unsupported(ins.line, ins.text, "im2col tensor copies")
    if "multicast::cluster" in parts:
        raise Unsupported(ins.line, ins.text, "multicast to the CTAs of a cluster (only 1-CTA clusters are executed)")
    dst_space = parts[5] if len(parts) > 5 else ""          # cp.async.bulk.tensor.Nd.<dst>.<src>
    tidx = np.flatnonzero(exe)
    if dst_space.startswith("shared"):
        return _load(m, p, ins, tidx)
    if dst_space == "global":
        return _store(m, p, ins, tidx)
    raise Unsupported(ins.line, ins.text, "cp.async.bulk.tensor direction")


def _load(m, p, ins, tidx):
    from .memory import _read_bytes, addresses
    if "mbarrier::complete_tx::bytes" not in ins.parts:
        raise Unsupported(ins.line, ins.text, "a tensor load without mbarrier completion")
    dsts = addresses(m, ins, ins.ops[0], tidx).astype(np.int64)
    bars = addresses(m, ins, ins.ops[2], tidx).astype(np.int64)
    maps, coords = _map_of(m, ins, ins.ops[1], tidx)
    reg = m.shared
    B = m.barriers
    for k, t_ in enumerate(tidx):
        t_ = int(t_)
        i, t, base = maps[k]
        if coords.shape[1] != t.rank:
            raise Unsupported(ins.line, ins.text, f"{coords.shape[1]} coordinates for a rank-{t.rank} tensor map")
        if t.oob_fill != "zero":
            raise Unsupported(ins.line, ins.text, "NaN out-of-bounds fill")
        j, saddr = _layout(m, ins, t, int(dsts[k]), t_)
        gaddr, inside = _global(t, base, coords[k], j)
        eb = t.elem_bytes
        n = len(j)
        data = np.zeros((n, eb), np.uint8)
        tg = np.zeros((n, eb), np.int64) if m.check else None
        if inside.any():
            rows = np.flatnonzero(inside)
            d, tgs, _ = _read_bytes(m, ins, "global", gaddr[rows].astype(U64), np.full(len(rows), t_), eb)
            data[rows] = d
            if tg is not None:
                tg[rows] = tgs
        if (saddr < 0).any() or (saddr >= m.S).any():
            m.witness("out-of-bounds", ins, t_, arrived=f"the box reaches shared address {int(saddr.max()):#x}",
                      wanted=f"inside the CTA's {m.S} bytes of shared memory")
            continue
        flat = int(m.slot[t_]) * m.S + saddr                                     # [n, eb]
        m.asy.check_overwrite(ins, flat, np.full(len(flat), t_))
        key = B._key(ins, int(bars[k]), t_)
        b = B.get(ins, key, t_)
        phase = B.complete_tx(ins, key, t_, t.box_bytes)
        reg.data[flat] = data
        if reg.tags is not None:
            reg.tags[flat] = tg
        reg.line[flat] = ins.line
        reg.src[flat] = p
        reg.writer[flat] = -1                 # the async proxy's write: ordered by the mbarrier, not bar.sync
        reg.pending[flat] = -1
        reg.aproxy[flat] = True
        if reg.udef is not None:
            reg.udef[flat] = 0
        m.barriers.tma_written(flat, b, phase)
    return None


def _store(m, p, ins, tidx):
    from .memory import _shared_read_checks, _write_bytes
    if "bulk_group" not in ins.parts:
        raise Unsupported(ins.line, ins.text, "a tensor store without bulk_group completion")
    if any(x.startswith("reduce") or x in ("add", "min", "max") for x in ins.parts):
        raise Unsupported(ins.line, ins.text, "reductions")
    maps, coords = _map_of(m, ins, ins.ops[0], tidx)
    from .memory import addresses
    srcs = addresses(m, ins, ins.ops[1], tidx).astype(np.int64)
    reg = m.shared
    for k, t_ in enumerate(tidx):
        t_ = int(t_)
        i, t, base = maps[k]
        j, saddr = _layout(m, ins, t, int(srcs[k]), t_)
        gaddr, inside = _global(t, base, coords[k], j)
        flat = int(m.slot[t_]) * m.S + saddr
        if (saddr < 0).any() or (saddr >= m.S).any():
            m.witness("out-of-bounds", ins, t_, arrived="the box reaches outside the CTA's shared memory",
                      wanted=f"inside the CTA's {m.S} bytes of shared memory")
            continue
        fl = flat.reshape(-1)
        reader = np.full(len(fl), t_)
        _shared_read_checks(m, ins, reg, reader, fl[:, None])
        m.asy.check_async_read(ins, reg, fl, reader, "the TMA store")
        m.asy.bulk_reading(p, fl, t_)
        rows = np.flatnonzero(inside)
        if not len(rows):
            continue
        data = reg.data[flat[rows]]
        tg = reg.tags[flat[rows]] if reg.tags is not None else None
        ub = reg.udef[flat[rows]] if reg.udef is not None else np.zeros(data.shape, np.int32)
        _write_bytes(m, ins, p, "global", gaddr[rows].astype(U64), np.full(len(rows), t_), data, tg, udef=ub)
        if m.prov is not None:
            m.prov.on_tma_store(ins, p, gaddr[rows], t_, t, flat[rows])
    return None


def bulk_group(m, p: int, ins, exe):
    """cp.async.bulk.commit_group / wait_group[.read] N (the bulk async-groups of the thread)."""
    parts = ins.parts
    asy = m.asy
    if "commit_group" in parts:
        asy.bk_commit[exe] += 1
        return None
    n = ins.ops[0] if ins.ops else None
    if not isinstance(n, Imm):
        raise Unsupported(ins.line, ins.text, "wait_group N must be an integer constant")
    asy.bk_done[exe] = np.maximum(asy.bk_done[exe], asy.bk_commit[exe] - int(n.value))
    return None


def bulk_copy(m, p: int, ins, exe):
    """Non-tensor bulk copies and prefetches."""
    parts = ins.parts
    if "prefetch" in parts:
        return None                      # a cache hint
    raise Unsupported(ins.line, ins.text, "non-tensor cp.async.bulk copies")
