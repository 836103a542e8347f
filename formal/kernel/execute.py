"""One instruction on every thread of a mask: the dispatch of the kernel interpreter.

Scalar semantics come from ``specs/ptx_ops.toml`` (:mod:`formal.kernel.values`); data
movement from ``specs/movement.toml`` through the recipe engine's step classes
(:mod:`formal.transform.steps`: one definition per instruction); matrix instructions from
the catalog and :mod:`formal.evaluate`.  Anything else raises :class:`Unsupported` with
the line.
"""

from __future__ import annotations

import numpy as np

from . import tags as TG
from . import values as V
from .values import LOCAL_WINDOW, SHARED_WINDOW, U64, _type_of
from .memory import (_SPACES, _bytes_to_val, _check_align, _read_bytes, _shared_read_checks, _space, _val_to_bytes,  # noqa: F401
                     _write_bytes, addresses, resolve)
from .parse import Imm, Instr, Pair, Reg, Sym, Unsupported, Vec

_NOOP = ("membar", "prefetch", "prefetchu", "griddepcontrol", "nanosleep", "pmevent", "trap", "brkpt")


def execute(m, p: int, ins: Instr, exe: np.ndarray, mask: np.ndarray):
    """Run instruction p for the threads in ``exe``; returns a jump target or None."""
    h = ins.head
    if ins.unsupported is not None and exe.any():      # the front end's reason (a call it could not inline)
        raise Unsupported(ins.line, ins.text, ins.unsupported)
    f = _HANDLERS.get(h)
    if f is None:
        if h in _NOOP:
            if h == "trap" and exe.any():
                raise Unsupported(ins.line, ins.text, "trap executed")
            return None
        raise Unsupported(ins.line, ins.text, f"instruction {h} is not modelled")
    if not exe.any():
        return None
    try:
        return f(m, p, ins, exe)
    except NotImplementedError as e:
        raise Unsupported(ins.line, ins.text, str(e) or "form not modelled") from None


# ---------------------------------------------------------------------------------------
# helpers

def _t(ins):
    t = _type_of(ins.parts)
    if t is None:
        raise Unsupported(ins.line, ins.text, "no operand type")
    return t


def _reg(op, ins):
    if isinstance(op, Reg):
        return op.name
    raise Unsupported(ins.line, ins.text, f"destination {op} is not a register")


def _scalar_write(m, ins, p, exe, op, val, tags=None):
    if isinstance(op, Pair):
        raise Unsupported(ins.line, ins.text, "paired destination")
    m.put(_reg(op, ins), val, exe, ins, tags, p)


def _vbytes(v, n):
    v = np.asarray(v, dtype=U64)
    return np.stack([((v >> U64(8 * k)) & U64(0xFF)).astype(np.uint8) for k in range(n)], axis=1)


def read_as(m, ins, p, op, tags, vals, typ: str, offset: int = 0, what: str = "the source"):
    """The check domain's type discipline: the bytes ``offset..`` of operand ``op`` (tags [T, n],
    values [T]) read as PTX type ``typ`` by the executing threads.  A value encoded in another
    format (an f16 element read as .bf16, s8 as .u8, an f32 accumulator as .f16, ...) gets a
    deferred ``wrong-type`` witness (reported if the value reaches a stored output).  Returns
    the issue numbers per thread ([T] int64) or None."""
    if tags is None or m.exe is None:
        return None
    w = TG.fmt_bits(typ) // 8
    if w < 1 or offset + w > tags.shape[1]:
        return None
    tidx = np.flatnonzero(m.exe)
    tg = tags[tidx, offset:offset + w]
    if not tg.any():
        return None
    vb = _vbytes(np.asarray(vals, dtype=U64)[tidx] >> U64(8 * offset), w) if vals is not None else None
    bad, have = TG.read_check(tg, vb, typ)
    if not bad.any():
        return None
    k = int(np.flatnonzero(bad)[0])
    t = int(tidx[k])
    t0 = int(tg[k, 0])
    reg = op.name if isinstance(op, Reg) else ""
    desc = m.prov._describe(t0) if m.prov is not None else "a value"
    got = TG.fmt_name(int(have[k]))
    from .provenance import _encoded
    i = m.issue((p, "type", reg, offset), "wrong-type", ins, t, reg,
                f"{what} {desc} is {_encoded(m, t0, got)}; this instruction reads it as .{typ}"
                + ("" if TG.byte(t0) == 0 and w <= TG.fmt_bits(got) // 8 or not got else
                   f" ({w} bytes from byte {int(TG.byte(t0))} of the value)"),
                f"the value read as the type it is encoded in (.{got}), or converted to .{typ} first")
    out = np.zeros(m.T, np.int64)
    out[tidx[bad]] = i
    return out


def _poison(tg, iss):
    """Result tags carry the issue of a misread operand."""
    if tg is None or iss is None:
        return tg
    i = np.asarray(iss, np.int64)[:, None]
    return np.where(i > 0, TG.with_issue(tg, np.maximum(TG.issue(tg), i)), tg)


def _imax(*xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    out = xs[0]
    for x in xs[1:]:
        out = np.maximum(out, x)
    return out


# ---------------------------------------------------------------------------------------
# control flow

def _bra(m, p, ins, exe):
    tgt = ins.ops[-1]
    if not isinstance(tgt, Sym) or tgt.name not in m.fn.labels:
        raise Unsupported(ins.line, ins.text, "branch target is not a label of this function")
    return m.fn.labels[tgt.name]


def _ret(m, p, ins, exe):
    return None


def _bar(m, p, ins, exe):
    """bar.sync / barrier.sync [id[, count]], bar.arrive through formal.kernel.barriers,
    barrier.cluster.arrive / wait through formal.kernel.cluster: a thread waits (is parked) until
    the barrier completes.  The .aligned forms (bar.sync, barrier.sync.aligned, barrier.cluster.*.aligned)
    must be executed by whole warps."""
    parts = ins.parts
    if "warp" in parts:                 # bar.warp.sync: orders memory among the warp's threads
        m.wepoch[np.unique(m.gwarp[exe])] += 1
        return None
    if "red" in parts:
        raise Unsupported(ins.line, ins.text, "bar.red")
    if not exe.any():
        return None
    if "cluster" in parts:              # barrier.cluster.arrive / wait: formal.kernel.cluster
        bar_id = "cluster"
    else:
        ops = ins.ops
        if not ops:
            raise Unsupported(ins.line, ins.text, "a barrier without its id")
        idv = m.value(ops[0], ins, 32)[exe]
        if (idv != idv[0]).any():
            raise Unsupported(ins.line, ins.text, "barrier ids that differ between threads")
        bar_id = int(idv[0])
        count = None
        if len(ops) > 1:
            cv = m.value(ops[1], ins, 32)[exe]
            if (cv != cv[0]).any():
                raise Unsupported(ins.line, ins.text, "barrier thread counts that differ between threads")
            count = int(cv[0])
            if count % 32 or count <= 0:
                m.witness("undefined", ins, int(np.flatnonzero(exe)[0]), arrived=f"thread count {count}",
                          wanted="a positive multiple of the warp size (9.7.13.1)")
        wait = "arrive" not in parts
    aligned = ins.head == "bar" or "aligned" in parts
    if aligned:                         # whole warps, or undefined behaviour
        gw = np.unique(m.gwarp[exe])
        inw = np.zeros(m.T // 32 + 1, bool)
        inw[gw] = True
        bad = m.alive & ~exe & inw[m.gwarp] & m.valid
        if bad.any():
            m.witness("undefined", ins, int(np.flatnonzero(bad)[0]),
                      arrived="this thread of the warp does not execute the barrier with its warp",
                      wanted="every live thread of a warp executes an .aligned barrier together (9.7.13.1)")
    if bar_id == "cluster":
        (m.cluster.arrive if "arrive" in parts else m.cluster.wait)(ins, p, exe)
        return None
    m.barriers.bar(ins, p, exe, bar_id, count, wait)
    return None


# ---------------------------------------------------------------------------------------
# arithmetic

_BITWISE = ("and", "or", "xor", "not")


def _int_or_float(m, p, ins, exe):
    h, parts = ins.head, ins.parts
    t = _t(ins)
    n_src = {"neg": 1, "abs": 1, "not": 1, "mad": 3, "fma": 3, "ex2": 1, "lg2": 1, "rcp": 1, "rsqrt": 1,
             "sqrt": 1, "sin": 1, "cos": 1, "tanh": 1}.get(h, 2)
    srcs = ins.ops[1:1 + n_src]
    if len(ins.ops) != 1 + n_src:
        raise Unsupported(ins.line, ins.text, f"{h} takes {n_src} sources")
    if t == "pred":
        vals = [np.asarray(m.value(o, ins), dtype=bool) for o in srcs]
        r = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
             "not": lambda a: ~a}[h](*vals)
        _scalar_write(m, ins, p, exe, ins.ops[0], r)
        return None
    if t in ("f32", "f64", "f16", "bf16", "f16x2", "bf16x2"):
        return _float(m, p, ins, exe, t, srcs)
    w = V.type_bits(t)
    vals = [m.value(o, ins, w) for o in srcs]
    wide = "wide" in parts
    r = V.int_op(h, parts, t, *vals)
    tg = None
    if m.check:
        ts = [m.optags(o) for o in srcs]
        if any(x is not None for x in ts):
            nb = (2 * w if wide else w) // 8
            tg = _bytewise(h, srcs, ts, vals, w, m.T)
            if tg is None:
                d = TG.CONV if h in _BITWISE else TG.ARITH
                tg = TG.combine(ts, nb, d, m.T)
    _scalar_write(m, ins, p, exe, ins.ops[0], r, tg)
    return None


def _bytewise(h, srcs, ts, vals, w, T):
    """Tags of and/or/shl/shr when they only move or mask whole bytes (unpacking packed
    elements): byte k of the result holds what byte k' of a source held.  None when the
    operation does not act on whole bytes (the caller derives the tags then)."""
    nb = w // 8
    if nb < 1:
        return None
    def tags_of(i):
        t = ts[i]
        return np.zeros((T, nb), np.int64) if t is None else t[:, :nb]
    if h in ("shl", "shr") and isinstance(srcs[1], Imm) and srcs[1].value % 8 == 0 and ts[1] is None:
        k = min(srcs[1].value // 8, nb)
        a = tags_of(0)
        out = np.zeros((T, nb), np.int64)
        if h == "shl":
            out[:, k:] = a[:, :nb - k]
        else:
            out[:, :nb - k] = a[:, k:]
        return out
    if h == "and" and (ts[0] is None) != (ts[1] is None):
        di = 0 if ts[0] is not None else 1
        c = vals[1 - di]
        bytes_ = np.stack([((c >> U64(8 * k)) & U64(0xFF)) for k in range(nb)], axis=1)
        a = tags_of(di)
        keep = bytes_ == 0xFF
        drop = bytes_ == 0
        part = ~keep & ~drop
        out = np.where(keep, a, 0)
        return np.where(part & (a != 0), TG.with_deriv(a, TG.CONV), out)
    if h in ("or", "xor", "add") and ts[0] is not None and ts[1] is not None:
        a, b = tags_of(0), tags_of(1)
        # disjoint bytes: each byte of data from at most one operand, the other's byte zero
        va = np.stack([((vals[0] >> U64(8 * k)) & U64(0xFF)) for k in range(nb)], axis=1)
        vb = np.stack([((vals[1] >> U64(8 * k)) & U64(0xFF)) for k in range(nb)], axis=1)
        ok = ((a == 0) & (va == 0)) | ((b == 0) & (vb == 0))
        if ok.all():
            return np.where(a != 0, a, b)
        return None
    return None


def _rnd(parts):
    for r in ("rn", "rz", "rm", "rp"):
        if r in parts:
            return r
    return "rn"


def _float(m, p, ins, exe, t, srcs):
    h, parts = ins.head, ins.parts
    if "approx" in parts or "full" in parts or h in ("ex2", "lg2", "rcp", "rsqrt", "sin", "cos", "tanh"):
        if not m.check:
            raise Unsupported(ins.line, ins.text, ".approx / .full results are not specified bit for bit")
        return _approx(m, p, ins, exe, t, srcs)        # check: only the provenance matters
    fn = V.ops_table()["float"].get(h, {}).get("fn")
    if any(x in parts for x in ("NaN", "xorsign", "oob")):
        raise Unsupported(ins.line, ins.text, "the .NaN / .xorsign / .oob variants are not modelled")
    if fn is None:
        raise Unsupported(ins.line, ins.text, f"{h}.{t}")
    ftz, sat = "ftz" in parts, "sat" in parts
    w = V.type_bits(t)
    vals = [m.value(o, ins, w) for o in srcs]
    if t in ("f16x2", "bf16x2"):
        et = t[:-2]
        lo = V.float_op(fn, et, _rnd(parts), [v & U64(0xFFFF) for v in vals], ftz, sat)
        hi = V.float_op(fn, et, _rnd(parts), [(v >> U64(16)) & U64(0xFFFF) for v in vals], ftz, sat)
        r = (lo & U64(0xFFFF)) | ((hi & U64(0xFFFF)) << U64(16))
    else:
        r = V.float_op(fn, t, _rnd(parts), vals, ftz, sat)
    tg = None
    if m.check:
        ts = [m.optags(o) for o in srcs]
        if any(x is not None for x in ts):
            et = t[:-2] if t.endswith("x2") else t
            iss = _imax(*(read_as(m, ins, p, o, to, v, et, off) for o, to, v in zip(srcs, ts, vals)
                          for off in ((0, 2) if t.endswith("x2") else (0,))))
            tg = TG.combine(ts, w // 8, TG.ARITH, m.T)
            # a misread source: the result may still be an exact conversion (a bit trick, formal.kernel.exact)
            tg = m.exact.convert(ins, p, et, tg, iss) if m.prov is not None else _poison(tg, iss)
            if h == "add" and t in ("f32", "f64", "f16", "bf16") and m.prov is not None:
                # two partial accumulators (split-K, 3xTF32 passes) or accumulator + addend
                tg = m.prov.merge_add(ins, exe, ts, tg, w // 8)
            if h == "sub" and ts[0] is not None and ts[1] is not None:
                # x - cvt(x): the residual of a split (3xTF32)
                a0, b0 = ts[0][:, 0], ts[1][:, 0]
                res = (TG.key(a0) == TG.key(b0)) & (TG.deriv(a0) == TG.RAW) & (TG.deriv(b0) == TG.CONV) & (a0 != 0)
                if res.any():
                    tg = np.where(res[:, None], TG.with_deriv(tg, TG.RESID), tg)
    _scalar_write(m, ins, p, exe, ins.ops[0], r, tg)
    return None


_APPROX = {"ex2": np.exp2, "lg2": np.log2, "rcp": lambda x: 1 / x, "rsqrt": lambda x: 1 / np.sqrt(x),
           "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "div": lambda x, y: x / y}


def _approx(m, p, ins, exe, t, srcs):
    if t != "f32" or ins.head not in _APPROX:
        raise Unsupported(ins.line, ins.text, "approximate arithmetic")
    with np.errstate(all="ignore"):
        r = _APPROX[ins.head](*(V.to_float(m.value(o, ins, 32), "f32") for o in srcs))
    ts = [m.optags(o) for o in srcs]
    tg = TG.combine(ts, 4, TG.ARITH, m.T) if any(x is not None for x in ts) else None
    _scalar_write(m, ins, p, exe, ins.ops[0], V.from_f32(np.asarray(r, np.float32)), tg)
    return None


def _createpolicy(m, p, ins, exe):
    _scalar_write(m, ins, p, exe, ins.ops[0], np.zeros(m.T, U64))     # a cache hint: no effect on values
    return None


def _activemask(m, p, ins, exe):
    gw = m.gwarp
    bits = np.zeros(m.T, U64)
    lanes = np.flatnonzero(exe)
    mask_by_warp = {}
    for t in lanes:
        mask_by_warp[int(gw[t])] = mask_by_warp.get(int(gw[t]), 0) | (1 << int(m.lane[t]))
    for t in lanes:
        bits[t] = mask_by_warp[int(gw[t])]
    _scalar_write(m, ins, p, exe, ins.ops[0], bits)
    return None


def _vote(m, p, ins, exe):
    parts = ins.parts
    mode = next((x for x in parts if x in ("all", "any", "uni", "ballot")), None)
    if "sync" not in parts or mode is None:
        raise Unsupported(ins.line, ins.text, "vote without .sync")
    gw = _warps(m, ins, exe)
    tids = _thread_ids(m, gw)
    pv = np.asarray(m.value(ins.ops[1], ins), dtype=bool)[tids] & exe[tids]
    ex = exe[tids]
    if mode == "ballot":
        r = (pv.astype(np.uint64) << np.arange(32, dtype=np.uint64)[None, :]).sum(axis=1).astype(U64)
        out = np.zeros(m.T, U64)
        out[tids] = r[:, None]
        _scalar_write(m, ins, p, exe, ins.ops[0], out)
        return None
    anyv = pv.any(axis=1)
    allv = (pv | ~ex).all(axis=1)
    r = {"any": anyv, "all": allv, "uni": allv | ~anyv}[mode]
    out = np.zeros(m.T, bool)
    out[tids] = r[:, None]
    m.put(_reg(ins.ops[0], ins), out, exe, ins, None, p)
    return None


def _bits(m, p, ins, exe):
    h, parts = ins.head, ins.parts
    t = _t(ins)
    w = V.type_bits(t)
    srcs = ins.ops[1:]
    vals = [m.value(o, ins, w) for o in srcs]
    if h == "popc":
        r = V.popc(vals[0], w)
    elif h == "clz":
        r = V.clz(vals[0], w)
    elif h == "brev":
        r = V.brev(vals[0], w)
    elif h == "bfe":
        r = V.bfe(vals[0], vals[1], vals[2], t)
    elif h == "bfi":
        r = V.bfi(vals[0], vals[1], vals[2], vals[3], w)
    elif h == "lop3":
        if len(srcs) != 4:
            raise Unsupported(ins.line, ins.text, "lop3 with a predicate output")
        r = V.lop3(vals[0], vals[1], vals[2], vals[3], w)
    else:
        raise Unsupported(ins.line, ins.text)
    tg = None
    if m.check:
        ts = [m.optags(o) for o in srcs]
        if any(x is not None for x in ts):
            tg = TG.combine(ts, (32 if h in ("popc", "clz") else w) // 8, TG.CONV, m.T)
    _scalar_write(m, ins, p, exe, ins.ops[0], r, tg)
    return None


def _setp(m, p, ins, exe):
    parts = ins.parts
    t = _t(ins)
    cmp = parts[1]
    boolop = next((x for x in parts[2:] if x in ("and", "or", "xor")), None)
    w = V.type_bits(t)
    a, b = (m.value(o, ins, w) for o in ins.ops[1:3])
    r = V.compare(cmp, t, a, b)
    dst = ins.ops[0]
    q = None
    if isinstance(dst, Pair):
        dst, q = dst.first, dst.second
    if boolop:
        c = np.asarray(m.value(ins.ops[3], ins), dtype=bool)
        f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[boolop]
        pr, qr = f(r, c), f(~r, c)
    else:
        pr, qr = r, ~r
    m.put(_reg(dst, ins), pr, exe, ins, None, p)
    if q is not None:
        m.put(_reg(q, ins), qr, exe, ins, None, p)
    return None


def _selp(m, p, ins, exe):
    t = _t(ins)
    w = V.type_bits(t)
    a, b = (m.value(o, ins, w) for o in ins.ops[1:3])
    c = np.asarray(m.value(ins.ops[3], ins), dtype=bool)
    r = np.where(c, a, b)
    tg = None
    if m.check:
        ta, tb = m.optags(ins.ops[1]), m.optags(ins.ops[2])
        if ta is not None or tb is not None:
            nb = w // 8
            z = np.zeros((m.T, nb), np.int64)
            ta = z if ta is None else ta[:, :nb]
            tb = z if tb is None else tb[:, :nb]
            tg = np.where(c[:, None], ta, tb)
    _scalar_write(m, ins, p, exe, ins.ops[0], r, tg)
    return None


# ---------------------------------------------------------------------------------------
# mov / cvt / cvta

def _mov(m, p, ins, exe):
    t = _t(ins)
    d, a = ins.ops[0], ins.ops[1]
    if isinstance(d, Vec) or isinstance(a, Vec):
        return _mov_pack(m, p, ins, exe, t, d, a)
    w = V.type_bits(t)
    if t == "pred":
        _scalar_write(m, ins, p, exe, d, np.asarray(m.value(a, ins), dtype=bool))
        return None
    v = m.value(a, ins, w)
    _scalar_write(m, ins, p, exe, d, v, m.optags(a))
    return None


def _step(m, p, ins):
    st = m._steps.get(p)
    if st is None:
        from ..transform.spaces import TransformError
        from ..transform.steps import make_step
        text = _canonical(ins)
        try:
            st = make_step(text)
        except TransformError as e:
            raise Unsupported(ins.line, ins.text, str(e)) from None
        m._steps[p] = st
    return st


def _canonical(ins) -> str:
    """The instruction with placeholder operands of the right shape: the step classes read
    the qualifiers and operand counts from it (the kernel's own operands are bound here)."""
    op, h, ops = ins.opcode, ins.head, ins.ops
    def vec(o, name):
        n = len(o.items) if isinstance(o, Vec) else 1
        return "{" + ", ".join(f"{name}{i}" for i in range(n)) + "}"
    if h == "ldmatrix":
        return f"{op} {vec(ops[0], 'r')}, [p]"
    if h == "stmatrix":
        return f"{op} [p], {vec(ops[1], 'r')}"
    if h == "movmatrix":
        return f"{op} d, a"
    if h == "shfl":
        return f"{op} d, a, b, c, m"
    if h == "prmt":
        return f"{op} d, a, b, c"
    if h == "cvt":
        return f"{op} d, a, b"
    if h == "mov":
        d, a = ops[0], ops[1]
        return f"{op} {vec(d, 'x') if isinstance(d, Vec) else 'd'}, {vec(a, 'x') if isinstance(a, Vec) else 'a'}"
    return ins.text.replace("%", "")


def _mov_pack(m, p, ins, exe, t, d, a):
    st = _step(m, p, ins)            # the movement spec's mov: bit v*w+i of the scalar is bit i of part v
    W = V.type_bits(t)
    if isinstance(a, Vec):           # pack
        parts = list(a.items)
        n = len(parts)
        w = W // n
        bits = np.arange(0, W, w)
        vpart, vbit = st.part_of_bit(bits)
        out = np.zeros(m.T, dtype=U64)
        tg = np.zeros((m.T, W // 8), np.int64) if m.check else None
        any_tag = False
        for k, (v, sb) in enumerate(zip(np.atleast_1d(vpart), np.atleast_1d(vbit))):
            o = parts[int(v)]
            val = m.value(o, ins, w) & V.mask(w)
            out |= ((val >> U64(int(sb))) & V.mask(w)) << U64(int(bits[k]))
            if m.check and w >= 8:
                to = m.optags(o)
                if to is not None:
                    any_tag = True
                    tg[:, bits[k] // 8:(bits[k] + w) // 8] = to[:, :w // 8]
        _scalar_write(m, ins, p, exe, d, out, tg if any_tag else None)
        return None
    parts = list(d.items)            # unpack
    n = len(parts)
    w = W // n
    src = m.value(a, ins, W)
    ta = m.optags(a)
    for v, o in enumerate(parts):
        if o is None:
            continue
        # the bits of part v: where part_of_bit says v
        bits = np.arange(W)
        vp, vb = st.part_of_bit(bits)
        sel = bits[np.asarray(vp) == v]
        lo = int(sel.min())
        val = (src >> U64(lo)) & V.mask(w)
        tg = ta[:, lo // 8:(lo + w) // 8] if (ta is not None and w >= 8) else None
        m.put(_reg(o, ins), val, exe, ins, tg, p)
    return None


_CVT_PACK = ("f16x2", "bf16x2", "e4m3x2", "e5m2x2")


def _cvt(m, p, ins, exe):
    parts = ins.parts
    types = [x for x in parts[1:] if x in V.INT_TYPES or x in V.FLOAT_TYPES or x in _CVT_PACK]
    if len(types) != 2:
        raise Unsupported(ins.line, ins.text, "cvt needs .dtype.atype")
    dt, st_ = types
    rnd = next((x for x in parts[1:] if x in ("rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi", "rs")), None)
    kw = dict(sat="sat" in parts, relu="relu" in parts, ftz="ftz" in parts, satfinite="satfinite" in parts)
    if rnd == "rs":
        raise Unsupported(ins.line, ins.text, "stochastic rounding")
    if dt in _CVT_PACK and st_ == "f32":
        # packing: which operand lands in which half is the movement spec's (cvt pack entry)
        if dt in ("f16x2", "bf16x2"):
            stp = _step(m, p, ins)
            eb = 16
        else:
            eb = 8
            stp = None
        out = np.zeros(m.T, dtype=U64)
        tg = np.zeros((m.T, 2 * eb // 8), np.int64) if m.check else None
        any_tag = False
        for half in range(2):
            opi = int(stp.operand_of_half(half)) if stp is not None else (0 if half == 1 else 1)
            o = ins.ops[1 + opi]
            src = m.value(o, ins, 32)
            conv = V.cvt(dt[:-2], "f32", rnd, src, **kw)
            out |= (conv & V.mask(eb)) << U64(half * eb)
            if m.check:
                to = m.optags(o)
                if to is not None:
                    any_tag = True
                    c = TG.combine([to], eb // 8, TG.CONV, m.T)
                    c = TG.with_fmt(c, TG.fmt_code(dt[:-2])) * (c != 0)
                    c = _poison(_conv_deriv(to, c), read_as(m, ins, p, o, to, src, "f32"))
                    tg[:, half * eb // 8:(half + 1) * eb // 8] = c
        _scalar_write(m, ins, p, exe, ins.ops[0], out, tg if any_tag else None)
        return None
    if st_ in _CVT_PACK:
        if st_ in ("e4m3x2", "e5m2x2") and dt == "f16x2":
            a = m.value(ins.ops[1], ins, 16)
            out = np.zeros(m.T, dtype=U64)
            for half in range(2):
                conv = V.cvt("f16", st_[:-2], "rn", (a >> U64(8 * half)) & U64(0xFF))
                out |= (conv & U64(0xFFFF)) << U64(16 * half)
            tg = None
            if m.check:
                to = m.optags(ins.ops[1])
                if to is not None:
                    tg = np.zeros((m.T, 4), np.int64)
                    for half in range(2):
                        src = to[:, half:half + 1]
                        c = np.where(src != 0, TG.with_deriv(TG.with_byte(src, 0), TG.CONV), 0)
                        c = np.where(c != 0, TG.with_fmt(c, TG.fmt_code("f16")), 0)
                        c = _poison(_conv_deriv(src, c), read_as(m, ins, p, ins.ops[1], to, a, st_[:-2], half))
                        tg[:, 2 * half] = c[:, 0]
                        tg[:, 2 * half + 1] = np.where(c[:, 0] != 0, TG.with_byte(c[:, 0], 1), 0)
            _scalar_write(m, ins, p, exe, ins.ops[0], out, tg)
            return None
        raise Unsupported(ins.line, ins.text, f"cvt from .{st_}")
    src = m.value(ins.ops[1], ins, V.type_bits(st_))
    r = V.cvt(dt, st_, rnd, src, **kw)
    tg = None
    if m.check:
        to = m.optags(ins.ops[1])
        if to is not None and dt in V.INT_TYPES and st_ in V.INT_TYPES and not kw["sat"]:
            # integer to integer: the low bytes move; above the source, sign extension of a
            # signed source (the sign of its top byte) or zeros
            nb = max(V.type_bits(dt) // 8, 1)
            sb = max(V.type_bits(st_) // 8, 1)
            tg = np.zeros((m.T, nb), np.int64)
            tg[:, :min(nb, sb)] = to[:, :min(nb, sb)]
            if nb > sb and st_.startswith("s"):
                tg[:, sb:] = TG.sext_bytes(to[:, sb - 1], nb - sb, sb)
        elif to is not None:
            tg = TG.combine([to], max(V.type_bits(dt) // 8, 1), TG.CONV, m.T)
            if tg is not None:
                tg = np.where(tg != 0, TG.with_fmt(tg, TG.fmt_code(dt)), 0)
            tg = _poison(_conv_deriv(to, tg), read_as(m, ins, p, ins.ops[1], to, src, st_))
    _scalar_write(m, ins, p, exe, ins.ops[0], r, tg)
    return None


def _conv_deriv(src, out):
    """A conversion keeps a residual a residual (cvt.rna.tf32 of x - cvt(x))."""
    if out is None:
        return None
    was_resid = TG.deriv(src[:, 0]) == TG.RESID
    return np.where(was_resid[:, None] & (out != 0), TG.with_deriv(out, TG.RESID), out)


def _cvta(m, p, ins, exe):
    parts = ins.parts
    space = next((x for x in parts if x in _SPACES), None)
    t = _t(ins)
    v = m.value(ins.ops[1], ins, V.type_bits(t))
    to = "to" in parts
    base = {"global": 0, "shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": 0, "param": 0}[space]
    r = (v - U64(base)) if to else (v + U64(base))
    _scalar_write(m, ins, p, exe, ins.ops[0], r & V.mask(V.type_bits(t)))
    return None


# ---------------------------------------------------------------------------------------
# memory

def _vec_regs(op, ins):
    if isinstance(op, Vec):
        return list(op.items)
    return [op]


def _access(m, ins, exe, reg_op, addr_op):
    """What ld and st share: element type and width, the vector's registers, and the
    executing threads whose (aligned) addresses the access goes to."""
    t = _t(ins)
    w = V.type_bits(t)
    nv = next((int(x[1:]) for x in ins.parts if x in ("v2", "v4", "v8")), 1)
    eb = w // 8
    regs = _vec_regs(reg_op, ins)
    if len(regs) != nv:
        raise Unsupported(ins.line, ins.text, f".v{nv} needs {nv} registers")
    tidx = np.flatnonzero(exe)
    addr = addresses(m, ins, addr_op, tidx)
    ok = _check_align(m, ins, addr, tidx, nv * eb)
    return t, w, nv, eb, regs, _space(ins), tidx[ok], addr[ok]


def _ld(m, p, ins, exe):
    t, w, nv, eb, regs, space, tidx, addr = _access(m, ins, exe, ins.ops[0], ins.ops[1])
    data, tg, srcs = _read_bytes(m, ins, space, addr, tidx, nv * eb)
    sub = np.zeros(m.T, bool)
    sub[tidx] = True
    for j, r in enumerate(regs):
        if r is None:
            continue
        name = _reg(r, ins)
        rw = m.width(name, ins)
        v = np.zeros(m.T, dtype=U64)
        v[tidx] = _bytes_to_val(data[:, j * eb:(j + 1) * eb])
        if t.startswith("s") and rw > w:
            v = V.from_int(V.as_int(v, t), rw)
        full_tg = None
        if tg is not None:
            full_tg = np.zeros((m.T, max(rw // 8, eb)), np.int64)
            full_tg[tidx, :eb] = tg[:, j * eb:(j + 1) * eb]
            if t.startswith("s") and rw // 8 > eb:          # ld.s8 into a wider register: sign extension
                full_tg[tidx, eb:] = TG.sext_bytes(tg[:, j * eb + eb - 1], rw // 8 - eb, eb)
        m.put(name, v, sub, ins, full_tg, p)
        sl = m.srcline.get(name)
        if sl is None:
            sl = m.srcline[name] = np.full(m.T, -1, dtype=np.int64)
        sl[tidx] = srcs
    return None


def _st(m, p, ins, exe):
    t, w, nv, eb, srcs, space, tidx, addr = _access(m, ins, exe, ins.ops[1], ins.ops[0])
    data = np.zeros((len(tidx), nv * eb), dtype=np.uint8)
    tg = np.zeros((len(tidx), nv * eb), np.int64) if m.check else None
    ub = None
    for j, o in enumerate(srcs):
        v = m.value(o, ins, w)[tidx] if o is not None else np.zeros(len(tidx), U64)
        data[:, j * eb:(j + 1) * eb] = _val_to_bytes(v, eb)
        if tg is not None:
            to = m.optags(o)
            if to is not None:
                tg[:, j * eb:(j + 1) * eb] = to[tidx, :eb]
        uo = m.undef_of(o.name, tidx) if isinstance(o, Reg) else None
        if uo is not None and uo.any():              # each register's bytes keep their own origin
            if ub is None:
                ub = np.zeros((len(tidx), nv * eb), np.int32)
            ub[:, j * eb:(j + 1) * eb] = uo[:, None]
    _write_bytes(m, ins, p, space, addr, tidx, data, tg, udef=ub if ub is not None else
                 np.zeros((len(tidx), nv * eb), np.int32))
    if m.prov is not None:
        m.prov.on_store(ins, p, space, addr, tidx, eb, nv, srcs)
    return None


def _cp(m, p, ins, exe):
    parts = ins.parts
    if parts[1] == "async" and "bulk" in parts:
        from . import tma
        if "tensor" in parts:
            if "prefetch" in parts:                      # a cache hint, on a map the spec must describe
                tma._map_of(m, ins, ins.ops[0], np.flatnonzero(exe))
                return None
            return tma.bulk_tensor(m, p, ins, exe)
        if "commit_group" in parts or "wait_group" in parts:
            return tma.bulk_group(m, p, ins, exe)
        return tma.bulk_copy(m, p, ins, exe)
    if parts[1] != "async":
        raise Unsupported(ins.line, ins.text, "only cp.async and cp.async.bulk are modelled")
    if not hasattr(m, "commit"):
        m.commit = np.zeros(m.T, dtype=np.int64)
        m.done = np.zeros(m.T, dtype=np.int64)
    if "commit_group" in parts:
        m.commit[exe] += 1
        return None
    if "wait_group" in parts or "wait_all" in parts:
        if "wait_all" in parts:
            m.commit[exe] += 1
            n = 0
        else:
            n = int(ins.ops[0].value)
        tidx = np.flatnonzero(exe)
        m.done[tidx] = np.maximum(m.done[tidx], m.commit[tidx] - n)
        sh = m.shared
        pend = np.flatnonzero(sh.pending >= 0)
        if pend.size:
            wr = sh.writer[pend]
            fin = exe[wr] & (sh.pending[pend] < m.done[wr])
            k = pend[fin]
            sh.pending[k] = -1
            sh.epoch[k] = m.epoch[m.slot[sh.writer[k]]]
            sh.wwepoch[k] = m.wepoch[m.gwarp[sh.writer[k]]]
        return None
    if "mbarrier" in parts:
        raise Unsupported(ins.line, ins.text, "cp.async.mbarrier")
    tidx = np.flatnonzero(exe)
    dst = addresses(m, ins, ins.ops[0], tidx)
    src = addresses(m, ins, ins.ops[1], tidx)
    size_op = ins.ops[2]
    if not isinstance(size_op, Imm):
        raise Unsupported(ins.line, ins.text, "cp-size must be an immediate")
    n = size_op.value
    hint = any("cache_hint" in x for x in parts)      # the last operand is then a cache policy
    if len(ins.ops) > (4 if hint else 3):
        srcsize = np.asarray(m.value(ins.ops[3], ins, 32), dtype=np.int64)[tidx] & 0xFFFFFFFF \
            if not isinstance(ins.ops[3], Imm) else np.full(len(tidx), ins.ops[3].value, np.int64)
    else:
        srcsize = np.full(len(tidx), n, np.int64)
    ok = _check_align(m, ins, dst, tidx, n) & _check_align(m, ins, src, tidx, n)
    data = np.zeros((len(tidx), n), dtype=np.uint8)
    tg = np.zeros((len(tidx), n), np.int64) if m.check else None
    reads = ok & (srcsize > 0)
    if reads.any():
        d, t_, _ = _read_bytes(m, ins, "global", src[reads], tidx[reads], n)
        keep = np.arange(n)[None, :] < srcsize[reads][:, None]
        data[reads] = np.where(keep, d, 0)
        if tg is not None:
            tg[reads] = np.where(keep, t_, 0)
    _write_bytes(m, ins, p, "shared", dst[ok], tidx[ok], data[ok], None if tg is None else tg[ok],
                 pending=m.commit[tidx[ok]])
    return None


# ---------------------------------------------------------------------------------------
# warp-level movement (specs/movement.toml through formal.transform.steps)

def _warps(m, ins, exe):
    """Warps executing a warp-collective instruction; every live lane must be there."""
    gw = np.unique(m.gwarp[exe])
    inw = np.isin(m.gwarp, gw)
    bad = inw & m.valid & ~exe & m.alive
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        m.witness("undefined", ins, t, arrived="this lane does not execute the .sync.aligned instruction with its warp",
                  wanted="all threads of the warp execute it convergently (.aligned)")
    return gw


def _thread_ids(m, gw):
    return (gw[:, None] * 32 + np.arange(32)[None, :])      # [W, 32]


def _ldmatrix(m, p, ins, exe):
    st = _step(m, p, ins)
    gw = _warps(m, ins, exe)
    tids = _thread_ids(m, gw)                                   # [W, 32]
    W = len(gw)
    regs = _vec_regs(ins.ops[0] if ins.head == "ldmatrix" else ins.ops[1], ins)
    addr_op = ins.ops[1] if ins.head == "ldmatrix" else ins.ops[0]
    rowaddr = addresses(m, ins, addr_op, tids.ravel()).reshape(W, 32)
    L, J, E = np.meshgrid(np.arange(32), np.arange(st.nregs), np.arange(st.epr), indexing="ij")
    al, ix = st.gather(L, J, E)                                  # [32, nregs, epr]
    al, ix = np.asarray(al), np.asarray(ix)
    used = sorted(set(int(x) for x in al.ravel()))
    ra = rowaddr[:, used].astype(np.int64)
    bad = (ra % st.align) != 0
    if bad.any():
        w, l = map(int, np.argwhere(bad)[0])
        m.witness("undefined", ins, tids[w, used[l]], register=addr_op.base.name if isinstance(addr_op.base, Reg) else "",
                  arrived=f"row address {int(ra[w, l]):#x}", wanted=f"{st.align}-byte aligned row addresses (9.7.14.5.15)")
    if st.src_bits % 8:
        raise Unsupported(ins.line, ins.text, "sub-byte source formats")
    if m.prov is not None and m.prov.lanes and p not in m.prov.lane_done:
        # the same addressing over a symbolic lane (Z3), for the first warp at this instruction
        from .symbolic import prove_matrix_addressing
        m.prov.lane_done.add(p)
        m.prov.lane_proofs.append(prove_matrix_addressing(m, ins, st, tids[0], rowaddr[0]))
    eb = st.src_bits // 8
    db = st.dst_bits // 8
    # element address per (warp, lane, j, e)
    ea = rowaddr[:, al] + (ix * eb).astype(U64)[None]           # [W, 32, nregs, epr]
    space = _space(ins) or ""
    flat_t = np.broadcast_to(tids[:, :, None, None], ea.shape).ravel()
    if ins.head == "ldmatrix":
        data, tg, srcs = _read_bytes(m, ins, space, ea.ravel(), flat_t, eb)
        m.spread_undef(tids)
        data = data.reshape(W, 32, st.nregs, st.epr, eb)
        sub = np.zeros(m.T, bool)
        sub[tids.ravel()] = True
        for j, r in enumerate(regs):
            name = _reg(r, ins)
            v = np.zeros(m.T, dtype=U64)
            val = np.zeros((W, 32), dtype=U64)
            for e in range(st.epr):
                for b in range(eb):
                    val |= data[:, :, j, e, b].astype(U64) << U64(8 * (e * db + b))
            v[tids.ravel()] = val.ravel()
            full_tg = None
            if tg is not None:
                t5 = tg.reshape(W, 32, st.nregs, st.epr, eb)
                full_tg = np.zeros((m.T, 4), np.int64)
                for e in range(st.epr):
                    full_tg[tids.ravel(), e * db:e * db + eb] = t5[:, :, j, e, :].reshape(W * 32, eb)
            m.put(name, v, sub, ins, full_tg, p)
            sl = m.srcline.get(name)
            if sl is None:
                sl = m.srcline[name] = np.full(m.T, -1, dtype=np.int64)
            sl[tids.ravel()] = srcs.reshape(W, 32, st.nregs, st.epr)[:, :, j, 0].ravel()
        return None
    # stmatrix: register element (lane, j, e) -> memory
    data = np.zeros((W, 32, st.nregs, st.epr, eb), dtype=np.uint8)
    tg = np.zeros((W, 32, st.nregs, st.epr, eb), np.int64) if m.check else None
    for j, r in enumerate(regs):
        v = m.value(r, ins, 32)[tids]                             # [W, 32]
        to = m.optags(r)
        for e in range(st.epr):
            for b in range(eb):
                data[:, :, j, e, b] = ((v >> U64(8 * (e * db + b))) & U64(0xFF)).astype(np.uint8)
                if tg is not None and to is not None:
                    tg[:, :, j, e, b] = to[tids, e * db + b]
    m.spread_undef(tids)
    _write_bytes(m, ins, p, space, ea.ravel(), flat_t, data.reshape(-1, eb),
                 None if tg is None else tg.reshape(-1, eb))
    return None


def _movmatrix(m, p, ins, exe):
    st = _step(m, p, ins)
    gw = _warps(m, ins, exe)
    tids = _thread_ids(m, gw)
    a = m.value(ins.ops[1], ins, 32)
    ta = m.optags(ins.ops[1])
    L, E = np.meshgrid(np.arange(32), np.arange(2), indexing="ij")
    sl, se = (np.asarray(x) for x in st.gather(L, E))
    out = np.zeros(m.T, dtype=U64)
    tg = np.zeros((m.T, 4), np.int64) if ta is not None else None
    for e in range(2):
        src_t = tids[:, sl[:, e]]                                  # [W, 32]
        val = (a[src_t] >> (se[:, e].astype(U64) * U64(16))[None, :]) & U64(0xFFFF)
        out[tids] |= val << U64(16 * e)
        if tg is not None:
            for b in range(2):
                tg[tids, 2 * e + b] = ta[src_t, 2 * se[None, :, e] + b]
    sub = np.zeros(m.T, bool)
    sub[tids.ravel()] = True
    m.spread_undef(tids)
    m.put(_reg(ins.ops[0], ins), out, sub, ins, tg, p)
    return None


def _shfl(m, p, ins, exe):
    st = _step(m, p, ins)
    gw = _warps(m, ins, exe)
    tids = _thread_ids(m, gw)
    b = m.value(ins.ops[2], ins, 32)[tids].astype(np.int64)
    c = m.value(ins.ops[3], ins, 32)[tids].astype(np.int64)
    mask = m.value(ins.ops[4], ins, 32)[tids].astype(np.int64) & 0xFFFFFFFF
    lane = np.broadcast_to(np.arange(32)[None, :], tids.shape)
    j, pval = st.source(lane, b, c)
    j, pval = np.asarray(j), np.asarray(pval).astype(bool)
    src = np.where(pval, j, lane) & 31
    inmask = ((mask >> lane) & 1) == 1
    srcin = ((mask >> src) & 1) == 1
    ex = exe[tids]
    if (ex & ~inmask).any():
        w, l = map(int, np.argwhere(ex & ~inmask)[0])
        m.witness("undefined", ins, tids[w, l], arrived="the executing lane is not in membermask",
                  wanted="membermask includes every executing lane (9.7.9.6)")
    if (ex & ~srcin).any():
        w, l = map(int, np.argwhere(ex & ~srcin)[0])
        m.witness("undefined", ins, tids[w, l], arrived=f"reads lane {int(src[w, l])}, which is not in membermask",
                  wanted="the source lane in membermask (9.7.9.6)")
    uin = m._uin
    a = m.value(ins.ops[1], ins, 32)
    src_t = np.take_along_axis(tids, src, axis=1)
    m._uin = uin                                # a's undefined lanes count where they are read from
    if isinstance(ins.ops[1], Reg) and ins.ops[1].name in m.udef:
        ua = np.zeros(m.T, np.int32)
        ua[tids] = m.udef[ins.ops[1].name][src_t]
        m.note_undef(np.arange(m.T), ua)
    d = np.zeros(m.T, dtype=U64)
    d[tids] = a[src_t]
    ta = m.optags(ins.ops[1])
    tg = None
    if ta is not None:
        tg = np.zeros((m.T, 4), np.int64)
        tg[tids] = ta[src_t]
    dst = ins.ops[0]
    pr = None
    if isinstance(dst, Pair):
        dst, pr = dst.first, dst.second
    m.put(_reg(dst, ins), d, exe, ins, tg, p)
    if pr is not None:
        pv = np.zeros(m.T, bool)
        pv[tids] = pval
        m.put(_reg(pr, ins), pv, exe, ins, None, p)
    return None


def _prmt(m, p, ins, exe):
    st = _step(m, p, ins)
    a = m.value(ins.ops[1], ins, 32)
    b = m.value(ins.ops[2], ins, 32)
    c = m.value(ins.ops[3], ins, 32).astype(np.int64)
    src64 = (b.astype(U64) << U64(32)) | (a & U64(0xFFFFFFFF))
    ta, tb = m.optags(ins.ops[1]), m.optags(ins.ops[2])
    tsrc = None
    if ta is not None or tb is not None:
        z = np.zeros((m.T, 4), np.int64)
        tsrc = np.concatenate([z if ta is None else ta[:, :4], z if tb is None else tb[:, :4]], axis=1)
    out = np.zeros(m.T, dtype=U64)
    tg = np.zeros((m.T, 4), np.int64) if tsrc is not None else None
    for k in range(4):
        byte, sign = st.select(np.full(m.T, k), c)
        byte, sign = np.asarray(byte).astype(np.int64) & 7, np.asarray(sign).astype(bool)
        v = (src64 >> (U64(8) * byte.astype(U64))) & U64(0xFF)
        v = np.where(sign, np.where((v >> U64(7)) & U64(1) == 1, U64(0xFF), U64(0)), v)
        out |= v << U64(8 * k)
        if tg is not None:
            tk = tsrc[np.arange(m.T), byte]
            tg[:, k] = np.where(sign & (tk != 0), TG.with_deriv(tk, TG.ARITH) | (np.int64(TG.GARBLED) << 60), tk)
    _scalar_write(m, ins, p, exe, ins.ops[0], out, tg)
    return None


# ---------------------------------------------------------------------------------------
# matrix instructions

def _mma(m, p, ins, exe):
    from .mma import mma
    return mma(m, p, ins, exe, _warps(m, ins, exe), _thread_ids)


def _wmma(m, p, ins, exe):
    from .wmma import wmma
    return wmma(m, p, ins, exe, _warps(m, ins, exe), _thread_ids)


def _wgmma(m, p, ins, exe):
    from .wgmma import wgmma
    return wgmma(m, p, ins, exe)


def _fence(m, p, ins, exe):
    """fence.proxy.async orders the thread's generic-proxy accesses before later async-proxy ones
    (asynchrony.py); the other fences (fence.sc / acq_rel, fence.mbarrier_init, fence.proxy.tensormap)
    order nothing the interpreter does not already execute in order."""
    parts = ins.parts
    if len(parts) > 2 and parts[1] == "proxy" and parts[2] == "async":
        m.asy.proxy_fence(exe)
    elif len(parts) > 2 and parts[1] == "proxy" and parts[2].startswith("tensormap"):
        from .tma import tensormap_fence
        tensormap_fence(m, p, ins, exe)
    elif len(parts) > 1 and parts[1] == "mbarrier_init":
        m.cluster.fence_init(exe)
    return None


def _elect(m, p, ins, exe):
    """elect.sync d|p, membermask: one leader among the executing lanes of membermask; which one PTX
    leaves open (9.7.13.13), the interpreter takes the lowest (every lane learns its laneid)."""
    parts = ins.parts
    if "sync" not in parts or len(ins.ops) != 2 or not isinstance(ins.ops[0], Pair):
        raise Unsupported(ins.line, ins.text, "elect.sync d|p, membermask")
    gw = _warps(m, ins, exe)
    tids = _thread_ids(m, gw)
    mask = m.value(ins.ops[1], ins, 32)[tids].astype(np.int64) & 0xFFFFFFFF
    lane = np.arange(32)[None, :]
    ex = exe[tids]
    inmask = ((mask >> lane) & 1) == 1
    if (ex & ~inmask).any():
        w, l = map(int, np.argwhere(ex & ~inmask)[0])
        m.witness("undefined", ins, tids[w, l], arrived="the executing lane is not in membermask",
                  wanted="membermask includes every executing lane (9.7.13.13)")
    cand = ex & inmask
    leader = np.where(cand.any(axis=1), np.argmax(cand, axis=1), 0)
    d, pr = ins.ops[0].first, ins.ops[0].second
    if isinstance(d, Reg):
        out = np.zeros(m.T, U64)
        out[tids] = leader[:, None].astype(U64)
        m.put(_reg(d, ins), out, exe, ins, None, p)
    pv = np.zeros(m.T, bool)
    pv[tids] = cand & (lane == leader[:, None])
    m.put(_reg(pr, ins), pv, exe, ins, None, p)
    return None


def _setmaxnreg(m, p, ins, exe):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N: a register-allocation hint; no effect on values.
    Checked (9.7.19.5): N in 24..256 and a multiple of 8; whole warps; "the same setmaxnreg
    instruction must be executed by all warps in a warpgroup": the k-th setmaxnreg of each warp of
    a warpgroup is one instruction (warps may reach it at different times)."""
    n = ins.ops[0] if ins.ops else None
    if not isinstance(n, Imm):
        raise Unsupported(ins.line, ins.text, "setmaxnreg takes an integer constant")
    gw = _warps(m, ins, exe)
    v = int(n.value)
    if not (24 <= v <= 256 and v % 8 == 0):
        m.witness("undefined", ins, int(np.flatnonzero(exe)[0]), arrived=f"imm-reg-count {v}",
                  wanted="a register count in 24..256, a multiple of 8 (9.7.19.5)")
    rounds = m.asy.setmaxnreg
    for w in gw.tolist():
        mine = rounds.setdefault(w, [])
        mine.append(p)
        k = len(mine) - 1
        first = w - int(m.warp[w * 32]) % 4
        for o in range(first, first + 4):
            other = rounds.get(o)
            if o != w and other is not None and len(other) > k and other[k] != p:
                q = m.instrs[other[k]]
                m.witness("undefined", ins, w * 32, arrived=f"warp {int(m.warp[w * 32])} executes this setmaxnreg as its "
                          f"setmaxnreg #{k + 1}; warp {int(m.warp[o * 32])} of its warpgroup executed the one at line "
                          f"{q.line}", wanted="the same setmaxnreg instruction executed by all warps of a warpgroup "
                          "(9.7.19.5)", path=[(q.line, q.text), (ins.line, ins.text)])
                break
    return None


def _mapa(m, p, ins, exe):
    """mapa.shared::cluster d, a, rank: the address of a's offset in CTA ``rank`` of the cluster
    (formal.kernel.cluster's encoding)."""
    if "shared::cluster" not in ins.parts:
        raise Unsupported(ins.line, ins.text, "mapa of generic addresses")
    t = _t(ins)
    tidx = np.flatnonzero(exe)
    a = np.asarray(m.value(ins.ops[1], ins, V.type_bits(t)), dtype=U64)[tidx]
    rank = np.asarray(m.value(ins.ops[2], ins, 32), dtype=U64)[tidx].astype(np.int64) & 0xFFFFFFFF
    out = np.zeros(m.T, U64)
    out[tidx] = m.cluster.encode(ins, a, rank, tidx)
    _scalar_write(m, ins, p, exe, ins.ops[0], out)
    return None


def _tensormap(m, p, ins, exe):
    from .tma import tensormap
    return tensormap(m, p, ins, exe)


def _mbarrier(m, p, ins, exe):
    from .barriers import mbarrier
    return mbarrier(m, p, ins, exe)


def _unsupported(m, p, ins, exe):
    raise Unsupported(ins.line, ins.text)


_HANDLERS = {
    "bra": _bra, "ret": _ret, "exit": _ret, "bar": _bar, "barrier": _bar,
    "add": _int_or_float, "sub": _int_or_float, "mul": _int_or_float, "mad": _int_or_float,
    "div": _int_or_float, "rem": _int_or_float, "min": _int_or_float, "max": _int_or_float,
    "neg": _int_or_float, "abs": _int_or_float, "and": _int_or_float, "or": _int_or_float,
    "xor": _int_or_float, "not": _int_or_float, "shl": _int_or_float, "shr": _int_or_float,
    "fma": _int_or_float,
    "popc": _bits, "clz": _bits, "brev": _bits, "bfe": _bits, "bfi": _bits, "lop3": _bits,
    "setp": _setp, "selp": _selp, "mov": _mov, "cvt": _cvt, "cvta": _cvta,
    "ld": _ld, "ldu": _ld, "st": _st, "cp": _cp,
    "ldmatrix": _ldmatrix, "stmatrix": _ldmatrix, "movmatrix": _movmatrix, "shfl": _shfl, "prmt": _prmt,
    "mma": _mma, "wmma": _wmma, "wgmma": _wgmma, "fence": _fence, "elect": _elect,
    "setmaxnreg": _setmaxnreg, "mapa": _mapa, "mbarrier": _mbarrier, "tcgen05": _unsupported,
    "tensormap": _tensormap,
    "call": _unsupported, "atom": _unsupported, "red": _unsupported, "vote": _vote,
    "createpolicy": _createpolicy, "activemask": _activemask,
    "ex2": _int_or_float, "lg2": _int_or_float, "rcp": _int_or_float, "rsqrt": _int_or_float,
    "sqrt": _int_or_float, "sin": _int_or_float, "cos": _int_or_float, "tanh": _int_or_float,
}
