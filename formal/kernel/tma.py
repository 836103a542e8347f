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

* **Clusters** (formal.kernel.cluster): a ``.shared::cluster`` destination / mbarrier may be another
  CTA's; ``.multicast::cluster`` writes the box to every CTA of ``ctaMask`` at the destination's
  CTA-relative offset and completes its bytes on the mbarrier at the same offset of each of them.
* **Tensor maps in memory** (built on the device): the 128-byte object holds the fields
  ``tensormap.replace`` edits (:data:`FIELDS`, in the interpreter's own encoding: the driver's is
  opaque, and a correct kernel only reaches it through ``tensormap.replace`` and TMA).  Host maps are
  encoded the same way in the parameter block, so a kernel may copy one and replace fields.  Bytes
  all zero are a blank object: the fields a TMA copy needs and no replace set are undecodable (exit
  3, naming the field); the enumerations interleave / fill / swizzle atomicity read their value 0
  (none / zero fill / 16B), which the H100 runs of Triton's device-built maps agree with.  A map
  written through the generic proxy is used by the TMA unit only after
  ``tensormap.cp_fenceproxy`` / ``fence.proxy.tensormap::generic.release`` and an acquire fence of
  the using thread (or of its CTA before a barrier): else a ``proxy-fence`` witness.

Not modelled (exit 3): im2col, interleaved maps, an inner box narrower than the swizzle span, NaN
out-of-bounds fill, reductions (``cp.reduce.async.bulk``).
"""

from __future__ import annotations

import numpy as np

from .parse import Imm, Reg, TensorAddr, Unsupported
from .values import GLOBAL_BASE, PARAM_BASE, U64


# ---------------------------------------------------------------------------------------
# the 128-byte tensor-map object: (byte offset, bytes, count) of each field, in the interpreter's
# encoding; bit (SET, bit) says a field (one per dimension for the per-dimension ones) holds a value
FIELDS = {"global_address": (0, 8, 1), "global_dim": (8, 4, 5), "global_stride": (28, 8, 4),
          "box_dim": (60, 4, 5), "element_stride": (80, 4, 5), "rank": (100, 4, 1), "elemtype": (104, 1, 1),
          "interleave_layout": (105, 1, 1), "swizzle_mode": (106, 1, 1), "swizzle_atomicity": (107, 1, 1),
          "fill_mode": (108, 1, 1)}
MAGIC, MAGIC_AT, SET_AT = b"PTXFTMAP", 112, 120
_BIT = {}
for _f, (_o, _w, _n) in FIELDS.items():
    for _i in range(_n):
        _BIT[(_f, _i)] = len(_BIT)
# the ISA's tensormap.replace codes (its "new_val validity" table; Triton's device descriptors use them)
ELEMTYPES = ["u8", "u16", "u32", "s32", "u64", "s64", "f16", "f32", "f32_ftz", "f64", "bf16", "tf32", "tf32_ftz"]
SWIZZLES = ["none", "32B", "64B", "128B"]
INTERLEAVES = ["none", "16B", "32B"]
FILLS = ["zero", "nan"]


def encode_map(t, address: int) -> bytes:
    """A spec [[tensormap]] (a host-encoded map) as the 128 bytes of the interpreter's encoding."""
    b = bytearray(128)
    vals = {"global_address": [address], "global_dim": list(t.dims), "global_stride": list(t.strides),
            "box_dim": list(t.box), "element_stride": list(t.element_strides), "rank": [t.rank - 1],
            "elemtype": [ELEMTYPES.index(t.type)], "interleave_layout": [INTERLEAVES.index(t.interleave)],
            "swizzle_mode": [SWIZZLES.index(t.swizzle)], "swizzle_atomicity": [0],
            "fill_mode": [FILLS.index(t.oob_fill)]}
    bits = 0
    for f, vs in vals.items():
        o, w, _ = FIELDS[f]
        for i, v in enumerate(vs):
            b[o + i * w:o + (i + 1) * w] = int(v).to_bytes(w, "little")
            bits |= 1 << _BIT[(f, i)]
    b[MAGIC_AT:MAGIC_AT + 8] = MAGIC
    b[SET_AT:SET_AT + 8] = bits.to_bytes(8, "little")
    return bytes(b)


def decode_map(m, ins, raw: bytes, where: str):
    """128 bytes -> (TensorMap, global address); Unsupported naming what cannot be decoded."""
    from .spec import TensorMap
    if raw[MAGIC_AT:MAGIC_AT + 8] != MAGIC and any(raw):
        raise Unsupported(ins.line, ins.text, f"the 128 bytes at {where} are not a tensor map (neither a host "
                                              "map nor an object built by tensormap.replace)")
    bits = int.from_bytes(raw[SET_AT:SET_AT + 8], "little") if any(raw) else 0

    def get(f, i=0, default=None):
        o, w, _ = FIELDS[f]
        if not bits >> _BIT[(f, i)] & 1:
            if default is None:
                raise Unsupported(ins.line, ins.text, f"the tensor map at {where}: field {f}"
                                  + (f"[{i}]" if FIELDS[f][2] > 1 else "") + " was never set (no host map, no "
                                  "tensormap.replace): its value is the driver's encoding of a blank object, not modelled")
            return default
        return int.from_bytes(raw[o + i * w:o + (i + 1) * w], "little")

    rank = get("rank") + 1
    code = {f: get(f, 0, 0) for f in ("interleave_layout", "swizzle_mode", "swizzle_atomicity", "fill_mode")}
    et = get("elemtype")
    for f, table in (("elemtype", ELEMTYPES), ("interleave_layout", INTERLEAVES), ("swizzle_mode", SWIZZLES),
                     ("fill_mode", FILLS), ("swizzle_atomicity", ["16B"])):
        v = et if f == "elemtype" else code[f]
        if v >= len(table):
            raise Unsupported(ins.line, ins.text, f"the tensor map at {where}: {f} = {v} (not modelled on sm_90)")
    addr = get("global_address")
    t = TensorMap(param="", buffer=_buffer_at(m, addr), type=ELEMTYPES[et],
                  dims=tuple(get("global_dim", i) for i in range(rank)),
                  strides=tuple(get("global_stride", i) for i in range(rank - 1)),
                  box=tuple(get("box_dim", i) for i in range(rank)),
                  element_strides=tuple(get("element_stride", i) for i in range(rank)),
                  interleave=INTERLEAVES[code["interleave_layout"]], swizzle=SWIZZLES[code["swizzle_mode"]],
                  oob_fill=FILLS[code["fill_mode"]])
    return t, addr


def _buffer_at(m, addr: int) -> str:
    for (b, o, nb) in m.buffers[:len(m.spec.buffers)]:
        if GLOBAL_BASE + o <= addr < GLOBAL_BASE + o + nb:
            return b.name
    return ""


# what tensormap.replace accepts (the ISA's new_val validity, for the tiled sm_90 forms)
_LIMITS = {"rank": (0, 4), "box_dim": (1, 256), "element_stride": (1, 8), "global_dim": (1, 1 << 32),
           "elemtype": (0, len(ELEMTYPES) - 1), "swizzle_mode": (0, 3), "interleave_layout": (0, 2),
           "fill_mode": (0, 1), "swizzle_atomicity": (0, 0)}


def tensormap(m, p: int, ins, exe):
    """tensormap.replace.tile.<field>[.space].b1024.<type> [addr], [ord,] new_val, and
    tensormap.cp_fenceproxy (a 128-byte copy shared -> global that releases it to the tensormap proxy)."""
    from .memory import _read_bytes, _write_bytes, addresses
    parts = ins.parts
    tidx = np.flatnonzero(exe)
    space = next((x.split("::")[0] for x in parts[3:] if x.split("::")[0] in ("global", "shared")), "")
    if parts[1] == "cp_fenceproxy":
        if "global" not in parts or "shared::cta" not in parts:
            raise Unsupported(ins.line, ins.text, "tensormap.cp_fenceproxy other than .global.shared::cta")
        dst = addresses(m, ins, ins.ops[0], tidx)
        src = addresses(m, ins, ins.ops[1], tidx)
        n = int(m.value(ins.ops[2], ins, 32)[tidx[0]]) if len(ins.ops) > 2 else 128
        if n != 128:
            raise Unsupported(ins.line, ins.text, f"a copy of {n} bytes (a tensor map is 128)")
        # the .sync.aligned warp copies one object: once per distinct (CTA, destination, source)
        key = np.stack([m.slot[tidx].astype(np.int64), dst.astype(np.int64), src.astype(np.int64)], axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        for k in sorted(first.tolist()):
            t = tidx[k:k + 1]
            data, tg, _ = _read_bytes(m, ins, "shared", src[k:k + 1], t, 128)
            _write_bytes(m, ins, p, "global", dst[k:k + 1], t, data, tg)
            m.tma_release[int(dst[k])] = (m.executed, ins.line, ins.text)
        return None
    if parts[1] != "replace" or "tile" not in parts:
        raise Unsupported(ins.line, ins.text, "tensormap instruction")
    field = parts[3]
    if field not in FIELDS:
        raise Unsupported(ins.line, ins.text, f"tensormap field {field}")
    o, w, count = FIELDS[field]
    val = np.asarray(m.value(ins.ops[-1], ins, 64), dtype=U64)[tidx]
    if "b32" in parts:
        val = val & U64(0xFFFFFFFF)
    ordv = np.zeros(len(tidx), np.int64)
    if count > 1:
        if len(ins.ops) != 3 or not isinstance(ins.ops[1], Imm):
            raise Unsupported(ins.line, ins.text, "the ordinal must be an integer constant")
        ordv[:] = int(ins.ops[1].value)
    addr = addresses(m, ins, ins.ops[0], tidx)
    for k, t in enumerate(tidx.tolist()):
        i, v = int(ordv[k]), int(val[k])
        if i >= count:
            m.witness("undefined", ins, t, arrived=f"ordinal {i} of {field}", wanted=f"0..{count - 1}")
            continue
        lo, hi = _LIMITS.get(field, (0, (1 << 64) - 1))
        bad = not lo <= v <= hi
        if field == "global_stride":
            bad = v % 16 != 0 or v >= 1 << 40
        if field == "global_address":
            bad = v % 16 != 0
        if bad:
            m.witness("undefined", ins, t, arrived=f"tensormap.replace {field} = {v}",
                      wanted=f"a value the tensor map accepts ({field}: "
                      + ("a multiple of 16 below 2^40" if field == "global_stride" else "16-byte aligned"
                         if field == "global_address" else f"{lo}..{hi}") + ")")
        a = addr[k:k + 1]
        tt = np.array([t])
        data, tg, _ = _read_bytes(m, ins, space, a, tt, 128)
        raw = bytearray(data[0].tobytes())
        if raw[MAGIC_AT:MAGIC_AT + 8] != MAGIC:
            if any(raw):
                raise Unsupported(ins.line, ins.text, "tensormap.replace on 128 bytes that are not a tensor map (a "
                                                      "host map or a blank, zeroed object)")
            raw[MAGIC_AT:MAGIC_AT + 8] = MAGIC
        raw[o + i * w:o + (i + 1) * w] = (v & ((1 << (8 * w)) - 1)).to_bytes(w, "little")
        bits = int.from_bytes(raw[SET_AT:SET_AT + 8], "little") | 1 << _BIT[(field, i)]
        raw[SET_AT:SET_AT + 8] = bits.to_bytes(8, "little")
        _write_bytes(m, ins, p, space, a, tt, np.frombuffer(bytes(raw), np.uint8)[None, :], None)
    return None


def tensormap_fence(m, p: int, ins, exe) -> None:
    """fence.proxy.tensormap::generic.{release,acquire}.<scope> [addr], 128."""
    from .memory import addresses
    tidx = np.flatnonzero(exe)
    if not ins.ops:
        raise Unsupported(ins.line, ins.text, "a tensormap proxy fence without its address")
    addr = addresses(m, ins, ins.ops[0], tidx)
    if "release" in ins.parts:
        for a in np.unique(addr).tolist():
            m.tma_release[int(a)] = (m.executed, ins.line, ins.text)
    elif "acquire" in ins.parts:
        for k, t in enumerate(tidx.tolist()):
            m.tma_acquire.setdefault(int(addr[k]), []).append((t, m.executed, int(m.epoch[m.slot[t]])))
    else:
        raise Unsupported(ins.line, ins.text, "a tensormap proxy fence that neither releases nor acquires")


def _device_map(m, ins, a: int, t: int):
    """The tensor map in memory at generic address ``a`` (not a parameter), for thread ``t``."""
    from .values import LOCAL_WINDOW, SHARED_WINDOW
    hit = m.devmaps.get(a)
    if a >= GLOBAL_BASE and a < min(PARAM_BASE, SHARED_WINDOW, LOCAL_WINDOW):
        flat = a - GLOBAL_BASE
        if flat < 0 or flat + 128 > m.heap.size:
            raise Unsupported(ins.line, ins.text, f"the tensor map at {a:#x} is outside global memory")
        raw = m.heap.data[flat:flat + 128].tobytes()
        if hit is None or hit[0] != raw:
            tm, base = decode_map(m, ins, raw, f"global address {a:#x}")
            hit = m.devmaps[a] = (raw, (-1, tm, base))
        src = int(m.heap.src[flat])
        if src >= 0:                           # written by the kernel: released, then acquired
            _check_tensormap_fences(m, ins, a, t, m.instrs[src])
        return hit[1]
    raise Unsupported(ins.line, ins.text, f"the tensor map at address {a:#x} is none of the spec's "
                                          "[[tensormap]] parameters nor in global memory")


def _check_tensormap_fences(m, ins, a: int, t: int, writer) -> None:
    rel = m.tma_release.get(a)
    acq = [x for x in m.tma_acquire.get(a, []) if rel is not None and x[1] >= rel[0]
           and (x[0] == t or (m.slot[x[0]] == m.slot[t] and x[2] < m.epoch[m.slot[t]]))]
    if rel is not None and acq:
        return
    m.witness("proxy-fence", ins, t,
              arrived=f"the tensor map at global address {a:#x} was written at line {writer.line} through the generic "
              "proxy" + (", and never released to the tensormap proxy" if rel is None else
                         f", released at line {rel[1]}, and not acquired by this thread (or its CTA before a barrier)"),
              wanted="tensormap.cp_fenceproxy or fence.proxy.tensormap::generic.release after the writes, and "
              "fence.proxy.tensormap::generic.acquire before the TMA that uses the map (9.7.13.4)",
              path=[(writer.line, writer.text)] + ([(rel[1], rel[2])] if rel and rel[1] != writer.line else [])
              + [(ins.line, ins.text)])


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
    for k, v in enumerate(a):
        hit = m.tmaps.get(int(v))
        if hit is None:
            hit = _device_map(m, ins, int(v), int(tidx[k]))
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
    C = m.cluster
    dsts = addresses(m, ins, ins.ops[0], tidx).astype(np.int64)
    bars = addresses(m, ins, ins.ops[2], tidx).astype(np.int64)
    dslot, doff, dok = C.target(ins, dsts, tidx)
    bslot, boff, bok = C.target(ins, bars, tidx)
    multicast = "multicast::cluster" in ins.parts
    if multicast:
        if len(ins.ops) < 4:
            raise Unsupported(ins.line, ins.text, "multicast without its ctaMask operand")
        masks = np.asarray(m.value(ins.ops[3], ins, 16), dtype=U64)[tidx].astype(np.int64) & 0xFFFF
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
        if not (dok[k] and bok[k]):
            continue
        if multicast:
            # the box and its complete_tx go to the same CTA-relative offsets of every CTA in the mask
            ranks = [r for r in range(16) if masks[k] >> r & 1]
            out = [r for r in ranks if r >= C.size]
            if out or not ranks:
                m.witness("out-of-bounds", ins, t_, arrived=f"ctaMask {int(masks[k]):#06x}" + (
                    f" names CTA rank {out[0]}" if out else " is empty"),
                    wanted=f"a non-empty mask of the cluster's {C.size} CTAs (bits 0..{C.size - 1})")
            cl = C.clin[m.slot[t_]]
            targets = [(int(C.slot_of[cl, r]), int(boff[k])) for r in ranks if r < C.size]
        else:
            if dslot[k] != bslot[k]:
                m.witness("undefined", ins, t_, arrived=f"destination in CTA {m.ctas[int(dslot[k])]}, mbarrier in CTA "
                          f"{m.ctas[int(bslot[k])]}", wanted="the mbarrier in the destination CTA (9.7.9.25.5.2)")
            targets = [(int(dslot[k]), int(boff[k]))]
        j, saddr = _layout(m, ins, t, int(doff[k]), t_)
        if (saddr < 0).any() or (saddr >= m.S).any():
            m.witness("out-of-bounds", ins, t_, arrived=f"the box reaches shared address {int(saddr.max()):#x}",
                      wanted=f"inside the CTA's {m.S} bytes of shared memory")
            continue
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
        for slot, bo in targets:
            key = (slot, bo)
            C.remote(ins, key, t_, "a TMA copy's complete_tx" + (" (multicast)" if multicast else ""))
            flat = slot * m.S + saddr                                     # [n, eb]
            m.asy.check_overwrite(ins, flat, np.full(len(flat), t_))
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
