"""Memory of the interpreter: state spaces, address resolution, byte reads and writes with
the alignment, bounds, race and cp.async checks every access goes through."""

from __future__ import annotations

import numpy as np

from .values import GLOBAL_BASE, LOCAL_WINDOW, PARAM_BASE, SHARED_WINDOW, U64
from .parse import Addr, Reg, Unsupported

_SPACES = ("global", "shared", "local", "param", "const")


def _space(ins):
    for x in ins.parts[1:]:
        b = x.split("::")[0]
        if b in _SPACES:
            return b
    return ""


def addresses(m, ins, op, tidx) -> np.ndarray:
    if not isinstance(op, Addr):
        raise Unsupported(ins.line, ins.text, "address operand expected")
    if op.base is None:
        base = np.zeros(len(tidx), dtype=U64)
    elif isinstance(op.base, Reg):
        base = np.asarray(m.get(op.base.name, ins), dtype=U64)[tidx]
        m.check_defined(op.base.name, ins, tidx, f"the address register {op.base.name}")
    else:
        base = np.full(len(tidx), m.sym_value(op.base.name, ins), dtype=U64)
    return (base + U64(op.offset & ((1 << 64) - 1))).astype(U64)


def resolve(m, ins, space, addr, tidx, nbytes, rows=None):
    """-> list of (region, threads, flat byte index [k], space, rows of the input); OOB
    accesses get a witness and are dropped."""
    addr = addr.astype(np.int64)
    if rows is None:
        rows = np.arange(len(addr))
    out = []
    if space == "":
        sh = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + (1 << 40))
        lo = (addr >= LOCAL_WINDOW) & (addr < LOCAL_WINDOW + (1 << 40))
        gl = ~sh & ~lo
        for sel, sp, off in ((gl, "global", 0), (sh, "shared", SHARED_WINDOW), (lo, "local", LOCAL_WINDOW)):
            if sel.any():
                out += resolve(m, ins, sp, (addr[sel] - off).astype(U64), tidx[sel], nbytes, rows[sel])
        return out
    if space == "global":
        flat = addr - GLOBAL_BASE
        ok = np.zeros(len(flat), bool)
        for (b, o, nb) in m.buffers:
            ok |= (flat >= o) & (flat + nbytes <= o + nb)
        for name, o in m.gvar_off.items():
            v = next(v for v in m.mod.vars if v.name == name)
            ok |= (flat >= o) & (flat + nbytes <= o + v.size)
        reg = m.heap
    elif space == "shared":
        slot = m.slot[tidx]
        if (addr >= m.S).any():                    # .shared::cluster addresses (cluster.py)
            from .cluster import check_remote_generic
            slot, addr, _ = m.cluster.target(ins, addr, tidx)
            check_remote_generic(m, ins, slot, tidx)
        ok = (addr >= 0) & (addr + nbytes <= m.S)
        flat = slot * m.S + addr
        reg = m.shared
    elif space == "local":
        if m.local is None:
            raise Unsupported(ins.line, ins.text, "local memory without a .local declaration")
        ok = (addr >= 0) & (addr + nbytes <= m.L)
        flat = tidx * m.L + addr
        reg = m.local
    elif space == "param":
        a = np.where(addr >= PARAM_BASE, addr - PARAM_BASE, addr)
        ok = (a >= 0) & (a + nbytes <= m.params.size)
        flat, reg = a, m.params
    else:
        ok = (addr >= 0) & (addr + nbytes <= m.const.size)
        flat, reg = addr, m.const
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        m.witness("out-of-bounds", ins, tidx[bad], arrived=f"{space} address {int(addr[bad]):#x} ({nbytes} bytes)",
                  wanted="an address inside a declared buffer / variable")
    if ok.any():
        out.append((reg, tidx[ok], flat[ok], space, rows[ok]))
    return out


def _check_align(m, ins, addr, tidx, size):
    bad = (addr.astype(np.int64) % size) != 0
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        m.witness("undefined", ins, tidx[k], arrived=f"address {int(addr[k]):#x}",
                  wanted=f"a {size}-byte aligned address (9.7.9.8: accesses must be naturally aligned)")
    return ~bad


def _shared_read_checks(m, ins, reg, tt, idx2):
    """RAW ordering: a byte written by another thread in this barrier epoch, a cp.async
    destination whose group has not been waited for, or a TMA destination whose mbarrier phase
    the reader has not waited for."""
    m.barriers.read_check(ins, tt, idx2)
    pend = reg.pending[idx2]
    if (pend >= 0).any():
        k = int(np.flatnonzero((pend >= 0).any(axis=1))[0])
        src = int(reg.src[idx2[k, 0]])
        m.witness("async-pending", ins, tt[k], arrived="the destination of a cp.async not yet waited for"
                  + (f" (issued at line {m.instrs[src].line})" if src >= 0 else ""),
                  wanted="cp.async.wait_group / wait_all before the read (9.7.9.25)",
                  path=([(m.instrs[src].line, m.instrs[src].text)] if src >= 0 else []) + [(ins.line, ins.text)])
    wr = reg.writer[idx2]
    ep = reg.epoch[idx2]
    cur = m.epoch[m.slot[tt]][:, None]
    warp_ordered = (m.gwarp[np.maximum(wr, 0)] == m.gwarp[tt][:, None]) & \
        (reg.wwepoch[idx2] < m.wepoch[m.gwarp[tt]][:, None])
    race = (wr >= 0) & (wr != tt[:, None]) & (ep >= cur) & (pend < 0) & ~warp_ordered
    if race.any():
        k = int(np.flatnonzero(race.any(axis=1))[0])
        j = int(np.flatnonzero(race[k])[0])
        w = int(wr[k, j])
        src = int(reg.src[idx2[k, j]])
        m.witness("race", ins, tt[k], arrived=f"shared byte {int(idx2[k, j] % m.S)} written by thread {int(m.tid[0][w])}"
                  f" (warp {int(m.warp[w])}, lane {int(m.lane[w])})"
                  + (f" at line {m.instrs[src].line}" if src >= 0 else "") + " with no barrier in between",
                  wanted="the write ordered before the read by bar.sync (9.7.13.1)",
                  path=([(m.instrs[src].line, m.instrs[src].text)] if src >= 0 else []) + [(ins.line, ins.text)])


def _read_bytes(m, ins, space, addr, tidx, n, check_shared=True):
    """Bytes [k, n] (uint8) and tags [k, n] at addr for threads tidx (0 where out of bounds)."""
    data = np.zeros((len(tidx), n), dtype=np.uint8)
    tg = np.zeros((len(tidx), n), dtype=np.int64) if m.check else None
    srcs = np.full(len(tidx), -1, dtype=np.int64)
    for reg, tt, flat, sp, rows in resolve(m, ins, space, addr, tidx, n):
        idx2 = flat[:, None] + np.arange(n)[None, :]
        data[rows] = reg.data[idx2]
        if tg is not None:
            tg[rows] = reg.tags[idx2]
        srcs[rows] = reg.src[idx2[:, 0]]
        if reg.udef is not None:
            m.note_undef(tt, reg.udef[idx2].max(axis=1))
        if sp == "shared" and check_shared:
            _shared_read_checks(m, ins, reg, tt, idx2)
            reg.reader[idx2] = tt[:, None]
            reg.repoch[idx2] = m.epoch[m.slot[tt]][:, None]
            reg.rwepoch[idx2] = m.wepoch[m.gwarp[tt]][:, None]
    return data, tg, srcs


def _write_bytes(m, ins, p, space, addr, tidx, data, tg, pending=None, udef=None):
    """``udef`` [k, n]: undefined origins per byte written (default: what the instruction read)."""
    n = data.shape[1]
    for reg, tt, flat, sp, rows in resolve(m, ins, space, addr, tidx, n):
        idx2 = flat[:, None] + np.arange(n)[None, :]
        if sp == "shared":
            m.asy.check_overwrite(ins, idx2, tt)
            m.barriers.generic_write(idx2)
            # WAR: another thread read this byte in the current barrier epoch
            rd = reg.reader[idx2]
            warp_ordered = (m.gwarp[np.maximum(rd, 0)] == m.gwarp[tt][:, None]) & \
                (reg.rwepoch[idx2] < m.wepoch[m.gwarp[tt]][:, None])
            war = (rd >= 0) & (rd != tt[:, None]) & (reg.repoch[idx2] >= m.epoch[m.slot[tt]][:, None]) & ~warp_ordered
            if war.any():
                k, j = map(int, np.argwhere(war)[0])
                r = int(rd[k, j])
                m.witness("race", ins, tt[k], arrived=f"overwrites shared byte {int(idx2[k, j] % m.S)} that thread "
                          f"{int(m.tid[0][r])} (warp {int(m.warp[r])}, lane {int(m.lane[r])}) read with no barrier in between",
                          wanted="the read ordered before the overwrite by bar.sync (9.7.13.1)")
        reg.data[idx2] = data[rows]
        if udef is not None:
            u = udef[rows]
        else:
            u = m._uin[tt][:, None] if m._uin is not None else None
        if u is not None and u.any():
            if reg.udef is None:
                reg.udef = np.zeros(reg.size, np.int32)
            reg.udef[idx2] = u
        elif reg.udef is not None:
            reg.udef[idx2] = 0
        if reg.tags is not None:
            reg.tags[idx2] = tg[rows] if tg is not None else 0
        reg.line[idx2] = ins.line
        reg.src[idx2] = p
        if hasattr(reg, "writer"):
            reg.writer[idx2] = tt[:, None]
        if sp == "shared":
            reg.wtime[idx2] = m.executed
            reg.aproxy[idx2] = False
            reg.wwepoch[idx2] = m.wepoch[m.gwarp[tt]][:, None]
            reg.epoch[idx2] = m.epoch[m.slot[tt]][:, None]
            reg.pending[idx2] = -1 if pending is None else pending[rows][:, None]


def _bytes_to_val(b):
    n = b.shape[1]
    v = np.zeros(b.shape[0], dtype=U64)
    for i in range(n):
        v |= b[:, i].astype(U64) << U64(8 * i)
    return v


def _val_to_bytes(v, n):
    v = np.asarray(v, dtype=U64)
    return np.stack([((v >> U64(8 * i)) & U64(0xFF)).astype(np.uint8) for i in range(n)], axis=1)
