"""Vectorised matrix-level MMA arithmetic: :func:`dot_terms` and :func:`mma_matrices`.

``dot_terms`` computes one output element per batch position from the K terms that
feed it; the architecture model (:mod:`formal.numerics.archs`) chooses the parameter
record and this module runs it.  Everything is numpy over whole batches; the only
Python loops are over blocks / groups / FMA steps (at most K of them).
"""
from __future__ import annotations

import itertools
import math

import numpy

from .xp import backend, current, like, module_for, np, on_host, to_host

from . import block as B
from .archs import get_model
from .formats import (Decoded, Taken, b32_to_f64, convert, decode, decode_converted, encode_int, f64_to_b16,
                      f64_to_b32, get_format, int_values, round_binary, to_float64)
from .params import BlockFMA, Emulated, ExactRound, FmaChain, FmaPipe, IntegerDot, Narrowed, Popc, UnsupportedPath

#: products per chunk: keeps the [K, chunk] temporaries inside the CPU caches
CHUNK_TERMS = 1 << 20
#: outputs per chunk on the host: caps the [batch] temporaries of the per-output steps (c, the
#: window, the encode) too, which dominate when K is small (tf32: 8 terms per block)
CHUNK_OUTPUTS = 1 << 15
#: products per chunk on a GPU (kernel launches amortised; ~10 temporaries of 8 bytes each)
DEVICE_CHUNK_TERMS = 1 << 28
#: shortest inner-axis slice worth a chunk (shorter ones: chunks of outer axes instead)
MIN_INNER = 64
#: the f64 chain holds ~20 live [chunk] temporaries per FMA step: smaller chunks stay in L2
_CHUNK: dict = {}

def dot_terms(a, b, c, *, atype, btype, ctype, dtype, arch="sm_90", satfinite=False,
              bitop=None, rounding=None, kind=None, scale_a=None, scale_b=None, stype=None,
              shape=None, sparse=False, scale_vec=None, device=None):
    """D = A·B + C for one output element per batch position, bit-exact per ``arch``.

    a, b: uint arrays [..., K] of element encodings (right-aligned: an e2m1 is 0..15, a
    tf32 is its full 32-bit f32 container, f64 is uint64); the leading dimensions of a, b
    and c broadcast together.  c: uint array [...] in ``ctype`` encoding.  The K axis is
    in the instruction's k order (sparse mma: the compressed order of the stored
    non-zeros, b already gathered at the matching logical k).
    scale_a / scale_b: optional uint8 arrays [..., K], the block-scale factor (``stype``)
    of each term, already expanded per k.  ``scale_vec`` ("1X"/"2X"/"4X") only matters for
    the ``scale_mode="block_exact"`` hypothesis (block size K // n).
    shape = (M, N, K) of the instruction: it selects a shape-specific record where the
    model has one (sm_90 ``m8n8k4`` .f16 runs on the FMA pipe, not the tensor core), so
    pass it whenever the instruction is known.  arch: a name in ``MODELS`` or an ArchModel.
    Returns d [...] as uint in dtype encoding (uint16 f16, uint32 f32/s32, uint64 f64).
    device: None/"cpu" (numpy) or "cuda": the same code on CuPy arrays (:mod:`.xp`); the
    result is a CuPy array when an input was one, else copied back to numpy.
    """
    if device is None and on_host() and any(hasattr(x, "__cuda_array_interface__") for x in (a, b, c)):
        device = "cuda"   # CuPy inputs compute where they live
    if device not in (None, "cpu"):
        xp = module_for(device)
        back = not any(hasattr(x, "__cuda_array_interface__") for x in (a, b, c))
        put = lambda x: None if x is None else (to_host(x) if xp is numpy else xp.asarray(x))  # noqa: E731
        dev = xp
        if isinstance(get_model(arch).path(atype, btype, ctype, dtype, kind, scaled=scale_a is not None,
                                           shape=shape)[1], ExactRound):
            xp = numpy   # the exact model sums with Python integers: it runs on the host
        with backend(xp):
            out = dot_terms(put(a), put(b), put(c), atype=atype, btype=btype, ctype=ctype, dtype=dtype, arch=arch,
                            satfinite=satfinite, bitop=bitop, rounding=rounding, kind=kind, scale_a=put(scale_a),
                            scale_b=put(scale_b), stype=stype, shape=shape, sparse=sparse, scale_vec=scale_vec)
        return to_host(out) if back else dev.asarray(out)
    model = get_model(arch)
    atype, btype, ctype, dtype = (str(t).lstrip(".") for t in (atype, btype, ctype, dtype))
    scaled = scale_a is not None or scale_b is not None
    key, p = model.path(atype, btype, ctype, dtype, kind, scaled=scaled, shape=shape)
    # broadcast views (stride 0) shrink to their distinct elements: decoding, conversion and
    # the batch layout below then see the real data, and products broadcast it once
    a = _compact(np.asarray(a))
    b = _compact(np.asarray(b))
    c = _compact(np.asarray(c))
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"a has K={a.shape[-1]}, b has K={b.shape[-1]}")
    K = a.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1], c.shape)
    if scaled:
        if scale_a is None or scale_b is None or stype is None:
            raise ValueError("block scaling needs scale_a, scale_b and stype")
        scale_a = _compact(np.asarray(scale_a))
        scale_b = _compact(np.asarray(scale_b))
    ctx = dict(atype=atype, btype=btype, ctype=ctype, dtype=dtype, satfinite=satfinite, bitop=bitop,
               rounding=rounding, kind=kind, stype=stype, shape=shape, sparse=sparse, scale_vec=scale_vec,
               key=key, K=K)
    run = _EXECUTORS[type(p)]
    nb = len(batch)
    if nb == 0:  # a single output: give everything a batch axis of 1
        lift = lambda x: None if x is None else x[None]  # noqa: E731
        return run(lift(a), lift(b), lift(c), lift(scale_a), lift(scale_b), p, ctx)[0]
    # Layout: the batch axis along which a and b both vary (T for mma_matrices) goes
    # last, so every broadcast product [K, ..., T] has a long contiguous inner loop; the
    # work is chunked along that axis to stay in cache.
    ops = [(a, 1), (b, 1), (c, 0), (scale_a, 1), (scale_b, 1)]
    ops = [None if x is None else x.reshape((1,) * (nb - (x.ndim - e)) + x.shape) for x, e in ops]
    a2, b2 = ops[0], ops[1]
    both = [i for i in range(nb) if a2.shape[i] > 1 and b2.shape[i] > 1]
    inner = max(both or range(nb), key=lambda i: (batch[i], i))
    longest = max(range(nb), key=lambda i: (batch[i], i))
    if on_host() and batch[inner] < MIN_INNER and batch[longest] > batch[inner]:
        inner = longest     # a short shared axis (wgmma's T) would make every CPU inner loop short
    perm = [i for i in range(nb) if i != inner] + [inner]
    ops = [None if x is None else x.transpose(perm + list(range(nb, x.ndim))) for x in ops]
    pb = [batch[i] for i in perm]
    chunk = min(_CHUNK.get(type(p), CHUNK_TERMS), CHUNK_OUTPUTS * max(K, 1)) if on_host() else DEVICE_CHUNK_TERMS
    # chunks of about `chunk` products: slices of the inner axis with every other axis
    # whole (each a/b element decoded once), unless those slices would be short and the
    # inner axis is not shared by a and b (a GEMM step, an outer product of tiles; wgmma's
    # N); then whole slices of the outermost axis that allows it (a few tile rows, or a
    # few wgmma instances, each with its long inner axis).  Where the inner axis is shared
    # (warps, T), outer slices would decode the other operand again per slice.  Every
    # output depends on its own batch position only.
    K1 = max(K, 1)
    total = math.prod(pb) * K1
    step = pb[-1] if total <= chunk else max(1, chunk * pb[-1] // total)
    rest = [math.prod(pb[i + 1:]) * K1 for i in range(nb)]
    ax = nb - 1
    if step < min(pb[-1], MIN_INNER) and (not both or inner not in both):
        ax = next((i for i in range(nb - 1) if rest[i] <= chunk), nb - 1)
        if ax < nb - 1:
            step = chunk // rest[ax]
    if ax == nb - 1 and step >= pb[-1]:
        out = np.asarray(run(*ops, p, ctx))
    else:
        out = None
        for pre in itertools.product(*(range(n) for n in pb[:ax])) if ax < nb - 1 else [()]:
            for i in range(0, pb[ax], step):
                sl = slice(i, min(pb[ax], i + step))
                if ax < nb - 1:
                    idx = tuple(slice(j, j + 1) for j in pre) + (sl,) + (slice(None),) * (nb - 1 - ax)
                else:
                    idx = (slice(None),) * (nb - 1) + (sl,)
                r = np.asarray(run(*[None if x is None else _slice_lead(x, idx) for x in ops], p, ctx))
                if out is None:
                    out = np.empty(pb, r.dtype)
                out[idx] = np.broadcast_to(r, out[idx].shape)
    out = np.broadcast_to(out, pb)
    return np.ascontiguousarray(out.transpose(tuple(int(i) for i in numpy.argsort(perm))))


def _compact(x):
    """``x`` with every broadcast (stride-0) axis of length > 1 cut to length 1 (a view)."""
    if x is None or 0 not in x.strides:
        return x
    return x[tuple(slice(0, 1) if (st == 0 and n > 1) else slice(None) for st, n in zip(x.strides, x.shape))]


def _slice_lead(x, idx):
    """Slice the batch axes of an operand, leaving the ones it broadcasts along whole."""
    return x[tuple(slice(None) if n == 1 else i for i, n in zip(idx, x.shape))]


def mma_matrices(A, B, C, **kw):
    """Dense wrapper: A [T,M,K], B [T,K,N], C [T,M,N] -> D [T,M,N] (calls dot_terms).

    Optional ``scale_a`` [T,M,K] and ``scale_b`` [T,K,N] (already expanded per k).
    """
    # array methods only (no array-module call): numpy or CuPy inputs, dot_terms moves them
    arr = lambda x: x if hasattr(x, "swapaxes") else numpy.asarray(x)  # noqa: E731
    a = arr(A)[..., :, None, :]                         # [T, M, 1, K]
    b = arr(B).swapaxes(-1, -2)[..., None, :, :]        # [T, 1, N, K]
    kw = dict(kw)
    for s, f in (("scale_a", lambda x: x[..., :, None, :]),
                 ("scale_b", lambda x: x.swapaxes(-1, -2)[..., None, :, :])):
        if kw.get(s) is not None:
            kw[s] = f(arr(kw[s]))
    return dot_terms(a, b, arr(C), **kw)


def sparse_dot(vals, kidx, b, c, **kw):
    """D of a sparse form (mma.sp, wgmma .sp): output (m, n) sums stored term j of row m,
    ``vals[..., m, j]``, times ``b[..., kidx[..., m, j], n]``, the terms in the stored
    (hardware) k order.  vals, kidx [T, M, Ks]; b [T, K, N]; c [T, M, N] -> d [T, M, N].

    It is :func:`dot_terms` over the gathered rows of b.  On the host, the block-FMA paths
    decode b once and gather its decoded rows (fields taken on demand, formats.Taken):
    decoding commutes with the gather, and a gather of codes costs a decode per product."""
    kw = dict(kw)
    vals, kidx = numpy.asarray(vals), numpy.asarray(kidx)
    fast = False
    if kw.get("device") in (None, "cpu") and on_host() and kw.get("scale_a") is None \
            and not any(hasattr(x, "__cuda_array_interface__") for x in (b, c)):
        t = [str(kw[k]).lstrip(".") for k in ("atype", "btype", "ctype", "dtype")]
        _, p = get_model(kw.get("arch", "sm_90")).path(*t, kw.get("kind"), scaled=False, shape=kw.get("shape"))
        fast = isinstance(p, BlockFMA)
    if not fast:
        bt = b[numpy.arange(b.shape[0])[:, None, None], kidx.astype(numpy.int64)]      # [T, M, Ks, N]
        at = numpy.broadcast_to(vals[..., None], bt.shape)
        return dot_terms(numpy.moveaxis(at, 3, 2), numpy.moveaxis(bt, 3, 2), c, **kw)
    atype, btype, ctype, dtype = t
    b, c = numpy.asarray(b), numpy.asarray(c)
    T, M, Ks = vals.shape
    N = b.shape[-1]
    if kidx.shape != vals.shape or b.ndim != 3 or b.shape[0] != T or c.shape != (T, M, N):
        raise ValueError(f"sparse_dot shapes: vals {vals.shape}, kidx {kidx.shape}, b {b.shape}, c {c.shape}")
    db = _decode_input(b, btype, p)                                   # [T, K, N], each element once
    R = T * M                                                         # output rows (t, m)
    row_t = numpy.repeat(numpy.arange(T), M)
    va, ki, cr = vals.reshape(R, Ks), kidx.reshape(R, Ks).astype(numpy.intp), c.reshape(R, N)
    out = None
    ranges: dict = {}
    step = max(1, min(CHUNK_TERMS // max(Ks * N, 1), CHUNK_OUTPUTS // max(N, 1)))
    for r0 in range(0, R, step):
        sl = slice(r0, min(R, r0 + step))
        ti, kk = row_t[sl][None, :], ki[sl].T                          # [1, r], [Ks, r]
        # field [T, K, N] -> rows [Ks, r, N] (K-first, contiguous), seen as [r, N, Ks]
        take = lambda x, ti=ti, kk=kk: numpy.moveaxis(x[ti, kk], 0, -1)  # noqa: E731
        da = _decode_input(va[sl][:, None, :], atype, p)               # [r, 1, Ks]
        prod = B.product_terms([da, Taken(db, take, b.shape, ranges)])
        d = B.chain(prod, cr[sl], ctype, dtype, p)
        if out is None:
            out = numpy.empty((R, N), d.dtype)
        out[sl] = d
    return out.reshape(T, M, N)


# ---------------------------------------------------------------------------
# Decoding helpers
# ---------------------------------------------------------------------------

def _decode_input(x, t: str, p) -> Decoded:
    """Decode A/B elements, applying the model's input conversion (tf32) and pinning."""
    if t == "tf32":
        conv = getattr(p, "tf32_conversion", "truncate")
        if conv == "rn":
            d = decode(convert(x, "f32", "tf32", "rn"), "tf32")
        elif conv == "truncate":
            d = decode(x, "tf32")
            if getattr(p, "tf32_nan", "blind") == "keep":
                n32 = decode(x, "f32").nan
                d = Decoded(d.fmt, d.neg, np.where(n32, 0, d.sig), d.exp, d.nan | n32, d.inf & ~n32, d.zero & ~n32)
        else:
            raise ValueError(f"tf32_conversion {conv!r}")
    else:
        d = decode(x, t)
    if isinstance(p, BlockFMA) and not p.pin_subnormals:
        d = B.unpin_subnormals(d)
    return _zero_factors(d, p)


def _zero_factors(d: Decoded, p) -> Decoded:
    """``zero_factor_exp`` set (a wrong variant): exact zeros get that alignment exponent, so
    a zero product takes part in the maximum of step 5 (its value stays 0)."""
    z = getattr(p, "zero_factor_exp", None) if isinstance(p, BlockFMA) else None
    if z is None:
        return d
    out = Decoded(d.fmt, d.neg, d.sig, d.exp, d.nan, d.inf, d.zero)
    out._f["ealign"] = np.where(np.asarray(d.zero), z, np.asarray(d.ealign))
    return out


def _decode_via(x, t: str, via: str, p) -> Decoded:
    """_decode_input(convert(x, t, via, "rn"), via, p), through one composed table."""
    if via == "tf32":
        return _decode_input(convert(x, t, via, "rn"), via, p)
    d = decode_converted(x, t, via, "rn")
    if isinstance(p, BlockFMA) and not p.pin_subnormals:
        d = B.unpin_subnormals(d)
    return _zero_factors(d, p)


def _zeros(shape, dtype):
    return np.zeros(shape, get_format(dtype).np_container)


# ---------------------------------------------------------------------------
# Executors
# ---------------------------------------------------------------------------

def _run_block(a, b, c, sa, sb, p: BlockFMA, ctx):
    da = _decode_input(a, ctx["atype"], p)
    db = _decode_input(b, ctx["btype"], p)
    if ctx["key"] == "scaled.f32":
        dsa = decode(sa, ctx["stype"])
        dsb = decode(sb, ctx["stype"])
        if p.scale_mode == "block_exact":
            return _run_scaled_block_exact(da, db, dsa, dsb, c, p, ctx)
        prod = B.product_terms([da, db, dsa, dsb])
    else:
        prod = B.product_terms([da, db])
    return B.chain(prod, c, ctx["ctype"], ctx["dtype"], p)


def scale_block_size(K, kind, stype, scale_vec):
    if scale_vec is None:
        k = (kind or "").lstrip(".").replace("kind::", "")
        scale_vec = {"mxf8f6f4": "1X", "mxf4": "2X"}.get(k, "4X" if stype == "ue4m3" else "2X")
    nvec = int(str(scale_vec).lstrip(".").replace("scale_vec::", "").rstrip("X"))
    return max(1, K // nvec)


def _run_scaled_block_exact(da, db, dsa, dsb, c, p: BlockFMA, ctx):
    """Hypothesis (b) of numerics.md §5: exact per-scale-block partial sums, then one window.

    Each partial sum times its two scales becomes one window addend whose alignment
    exponent is its leading one.  It is held with W = 53 significant bits; a longer one is
    truncated toward zero first, which cannot change the window's own magnitude
    truncation (the window keeps F + 1 <= W bits below the leading one).
    """
    if p.truncation != "magnitude":
        raise ValueError("scale_mode='block_exact' is defined for truncation='magnitude' only")
    K = ctx["K"]
    bs = scale_block_size(K, ctx["kind"], ctx["stype"], ctx["scale_vec"])
    prod = B.product_terms([da, db])
    sc = B.product_terms([dsa, dsb])          # scale products, per k
    W = 53
    negs, mags, es, nans, pinfs, ninfs = [], [], [], [], [], []
    for k0 in range(0, K, bs):
        part = prod.take(slice(k0, k0 + bs))
        S, L = B.exact_sum([part])
        s = sc.take(slice(k0, k0 + 1))
        neg = np.asarray(S < 0, bool)
        if S.dtype == object:
            mag = np.asarray(np.where(neg, -S, S), dtype=object) * np.asarray(s.mag[0], dtype=object)
            nb = np.asarray(np.frompyfunc(int.bit_length, 1, 1)(mag)).astype(np.int64)
            cut = np.maximum(nb - W, 0)
            mag = np.asarray(mag >> cut.astype(object), dtype=object).astype(np.int64)
        else:
            mag = np.abs(S) * np.asarray(s.mag[0], np.int64)   # < 2**62: partial sums of fp4/fp6/fp8
            nb = B.bitlen(mag)
            cut = np.maximum(nb - W, 0)
            mag = mag >> cut
        lsb = L + cut + (np.asarray(s.e[0], np.int64) - s.fb)
        nb = B.bitlen(mag)
        nz = mag != 0
        mags.append(np.where(nz, mag << np.clip(W - nb, 0, 63), 0))
        es.append(np.where(nz, lsb + nb - 1, B.NEG_E))
        negs.append(neg)
        sp = B._specials([part, s], neg.shape)
        if sp is None:
            sp = (np.zeros(neg.shape, bool),) * 3
        nans.append(sp[0])
        pinfs.append(sp[1] & ~sp[2])
        ninfs.append(sp[1] & sp[2])
    t = B.Terms(np.stack(negs), np.stack(mags), np.stack(es), W - 1,
                np.stack(nans), np.stack(pinfs), np.stack(ninfs))
    return B.chain(t, c, ctx["ctype"], ctx["dtype"], p.but(n=None))


def _run_emulated(a, b, c, sa, sb, p: Emulated, ctx):
    """numerics.md §3.4: fp8 -> f16 (exact), one HMMA per k group, then D = d + c (IEEE)."""
    via = p.via
    groups = [list(g) for g in p.groups_for(ctx["K"])]
    # the k axis permuted once (on the operands as they broadcast) so that every HMMA's
    # group is a contiguous run of products: a slice, not a gather of the product arrays
    perm = [k for g in groups for k in g]
    if perm != list(range(ctx["K"])):
        a, b = np.take(a, perm, axis=-1), np.take(b, perm, axis=-1)
    da, db = (_decode_via(x, ctx[t], via, p.hmma) for x, t in ((a, "atype"), (b, "btype")))
    prod = B.product_terms([da, db])
    batch = prod.batch_shape
    dtype = ctx["dtype"]
    if p.c_add == "window":
        d, dty = c, ctx["ctype"]
    else:
        d, dty = _zeros(batch, dtype), dtype
    k0 = 0
    for g in groups:
        d = B.chain(prod.take(slice(k0, k0 + len(g))), d, dty, dtype, p.hmma)
        k0 += len(g)
        dty = dtype
    if p.c_add == "window":
        return d
    return add_rounded(d, dtype, c, ctx["ctype"], dtype, p.c_add, nan_code=p.add_nan_bits,
                       zero_sign=p.add_zero_sign)


def _ieee_in(codes, fmt: str):
    """Exact float64 values of f16 / f32 codes (no float32 arithmetic on subnormals)."""
    if fmt == "f32":
        return b32_to_f64(np.asarray(codes).astype(np.uint32))
    return np.asarray(codes).astype(np.uint16).view(np.float16).astype(np.float64)


_IEEE_OUT = {"f16": f64_to_b16, "f32": f64_to_b32}


def add_rounded(x, xtype, y, ytype, out, mode="rn", *, nan_code=None, zero_sign="ieee"):
    """IEEE x + y rounded once into ``out`` (an FADD / HADD / DADD)."""
    if mode == "rn" and zero_sign == "ieee" and out in _IEEE_OUT and xtype in _IEEE_OUT and ytype in _IEEE_OUT:
        # f16/f32 in and out, round to nearest: the exact sum rounded to odd in float64,
        # then one RNE rounding (correct for targets of <= 51 bits; Boldo & Melquiond 2008);
        # IEEE specials, zero signs and overflow come from the float arithmetic itself
        s = _rn_odd_sum(_ieee_in(x, xtype), _ieee_in(y, ytype))
        codes = _IEEE_OUT[out](s)
        nan = np.isnan(s)
        if np.any(nan):
            ncode = get_format(out).nan_code if nan_code is None else int(nan_code)
            codes = np.where(nan, codes.dtype.type(ncode), codes)
        return codes
    tx = B.value_terms(decode(x, xtype))
    ty = B.value_terms(decode(y, ytype))
    return B.exact_round([tx, ty], get_format(out), mode, overflow="ieee", nan_code=nan_code,
                         zero_sign=zero_sign)


def fma_f64(a: Decoded, b: Decoded, c: Decoded, mode="rn", nan_code=None):
    """Correctly rounded IEEE binary64 fused multiply-add, vectorised and exact.

    The 106-bit product is formed exactly with Python integers (numpy object arrays);
    the sum is exact; one rounding (any mode) with gradual underflow and IEEE overflow.
    """
    neg = a.neg ^ b.neg
    zero = a.zero | b.zero | a.nan | b.nan | a.inf | b.inf
    mag = np.asarray(np.asarray(a.sig, dtype=object) * np.asarray(b.sig, dtype=object), dtype=object)
    neg = np.asarray(neg)
    e = np.asarray(np.where(zero, B.NEG_E, a.exp + b.exp))
    pt = B.Terms(neg[None], mag[None], e[None], 104)
    nan, inf = B._special_flags([a, b])
    if np.any(nan | inf):
        shape = mag.shape
        pt.nan = np.broadcast_to(nan, shape)[None]
        pt.pinf = np.broadcast_to(inf & ~neg, shape)[None]
        pt.ninf = np.broadcast_to(inf & neg, shape)[None]
    ct = B.value_terms(c)
    return B.exact_round([pt, ct], get_format("f64"), mode, overflow="ieee", nan_code=nan_code,
                         zero_sign="ieee")


F64_EXP = np.uint64(0x7FF0000000000000)
F64_MANT = np.uint64(0x000FFFFFFFFFFFFF)
F64_QUIET = np.uint64(1 << 51)


def _f64_isnan(x):
    x = np.asarray(x, np.uint64)
    return ((x & F64_EXP) == F64_EXP) & ((x & F64_MANT) != 0)


def f64_nan_select(p: FmaChain, r, ops: dict):
    """Apply ``p.nan_rule`` to one FMA step: r = the step's result codes (NaN results
    already ``p.default_nan``), ops = {"a", "b", "c"} -> operand codes.  With
    "propagate", the first NaN operand in ``p.nan_priority`` is returned quieted."""
    if p.nan_rule == "canonical":
        return r
    if p.nan_rule != "propagate":
        raise ValueError(f"nan_rule {p.nan_rule!r}")
    return _quiet_nans(np.asarray(r, np.uint64), ops, tuple(reversed(p.nan_priority)))


def _quiet_nans(out, ops: dict, order):
    """``out`` with each NaN operand of ``ops`` (quieted) in its place, ``order`` naming the
    operands with the first in priority LAST (it is applied last and wins)."""
    for name in order:
        x = np.asarray(ops[name], np.uint64)
        nan = _f64_isnan(x)
        if np.any(nan):
            out = np.where(nan, x | F64_QUIET, out)
    return out


# ---------------------------------------------------------------------------
# f64: correctly rounded FMAs in float64 arithmetic
# ---------------------------------------------------------------------------
#
# fma(a, b, c) runs on scaled numbers: a = ma * 2**ea and b = mb * 2**eb with |ma|, |mb| in
# [1/2, 1) (frexp), so Dekker's product ma * mb = ph + pl is exact and far from overflow and
# the subnormal range whatever a and b are.  c is scaled by the same 2**-(ea + eb), its
# exponent relative to the product's clamped to [-_L, _L]: beyond that the smaller addend
# only acts as a sticky bit (it lies far below the other's last bit), and a stand-in of the
# same sign that is still far below rounds the same.  The sum is rounded once in the scaled
# domain (:func:`_round_sum3`) and scaled back by one ldexp: exact, unless the result
# overflows (Inf, or the largest finite number per mode) or lies below 2**-1020 (near the
# subnormal range, where ldexp would round a second time: those few elements go to the
# Python-integer :func:`fma_f64`).  NaN and Inf operands need no test of their own: the
# scaled sum ph + C is the IEEE outcome (Inf*0 and Inf-Inf give NaN), mapped afterwards to
# the NaN codes of the model.  Only element-wise IEEE float64 and integer operations: the
# same code is exact on CuPy (:mod:`.xp`), one kernel per operation.  Never fuse it into one
# kernel (cupy.fuse): a compiler may contract x*y - z into an FMA, which breaks Dekker's product.

#: exponent given to a zero factor: the product then lies far below any c
_ZERO_E = -4000
#: clamp of c's exponent relative to the product's: the scaled c stays below 2**1022
_L = 1022
#: results below this go to the exact tier (double rounding near the subnormal range)
_TINY = 2.0 ** -1020
_F64_MAX = float(numpy.finfo(numpy.float64).max)


def _veltkamp(m):
    """(m, hi, lo): Veltkamp's split hi + lo = m (26 + 27 bits) for Dekker's product
    (exact where |m| < 2**1000; Inf and NaN give NaN halves, unused)."""
    with numpy.errstate(invalid="ignore", over="ignore"):
        s = m * 134217729.0          # 2**27 + 1
        hi = s - (s - m)
        return m, hi, m - hi


def _f64_factor(x):
    """An FMA factor (uint64 codes, any shape): (m, hi, lo, e) with x = m * 2**e and |m| in
    [1/2, 1) for finite nonzero x; m = +-0 with e = ``_ZERO_E`` for a zero; m = x (Inf, NaN)
    otherwise; hi + lo = m (:func:`_veltkamp`)."""
    xp = current()
    m, e = xp.frexp(xp.asarray(x, xp.uint64).view(xp.float64))
    e = xp.where(m == 0, xp.int32(_ZERO_E), e).astype(xp.int32)
    return _veltkamp(m) + (e,)


def _f64_split(x):
    """The direct tier's factor: (x, hi, lo, None), x itself with :func:`_veltkamp`'s split
    (the direct tier takes |x| in [2**-450, 2**451) only)."""
    xp = current()
    return _veltkamp(xp.asarray(x, xp.uint64).view(xp.float64)) + (None,)


def _direct_ks(e):
    """Per k (the first axis of ``e``, frexp exponents from :func:`_f64_factor`): whether
    every factor of that k lies in the direct tier's [2**-450, 2**451)."""
    xp = current()
    ok = ((e >= -449) & (e <= 451)).reshape(e.shape[0], max(1, e.size) // max(1, e.shape[0]))
    return [bool(v) for v in to_host(xp.all(ok, axis=1))]


def _round_sum3(ph, pl, c, mode):
    """ph + pl + c (exact doubles; ph + pl an exact product; no overflow) rounded once to
    binary64 in ``mode``, with an unbounded exponent: s1 + e1 = ph + c and s2 + e2 = e1 + pl
    exactly (TwoSum); v = s2 + e2 rounded to odd; z = RN(s1 + v) (the emulated FMA of Boldo &
    Melquiond, IEEE TC 2008); directed modes step z by one ulp toward TwoSum's error of that
    last add.  Returns (z, s1).  Rounding to odd and the steps are integer operations on the
    codes (nextafter costs some twenty adds)."""
    xp = current()
    i64 = xp.int64
    s1 = ph + c
    t = s1 - ph
    e1 = (ph - (s1 - t)) + (c - t)
    s2 = e1 + pl
    t = s2 - e1
    e2 = (e1 - (s2 - t)) + (pl - t)
    # round to odd: truncate s2 (one code down in magnitude where e2 points the other way),
    # then set the last bit when the sum was inexact
    i2 = s2.view(i64)
    nz = e2 != 0
    v = ((i2 - (((i2 ^ e2.view(i64)) < 0) & nz)) | nz).view(xp.float64)
    z = s1 + v
    if mode == "rn":
        return z, s1
    t = z - s1
    err = (s1 - (z - t)) + (v - t)
    zi = z.view(i64)
    if mode == "rz":      # one code toward zero where the error points the other way
        zi = zi - (((zi ^ err.view(i64)) < 0) & (err != 0))
    elif mode == "rm":    # (zi >> 63) | 1 is the sign of z: -1 or 1
        zi = zi - (err < 0) * ((zi >> 63) | 1)
    elif mode == "rp":
        zi = zi + (err > 0) * ((zi >> 63) | 1)
    else:
        raise ValueError(f"rounding mode {mode!r}")
    return zi.view(xp.float64), s1


def _fma_f64_step(a, b, c, fa, fb, mode, nan_code, prop=()):
    """fma(a, b, c), correctly rounded in ``mode``: a, b, c uint64 codes that broadcast
    together, fa and fb the factors a and b from :func:`_f64_factor`.  NaN results are
    ``nan_code``, except that ``prop`` (names among "a", "b", "c", the first in priority
    LAST) returns a NaN operand quieted (FmaChain's nan_rule="propagate").

    Direct tier: with fa, fb from :func:`_f64_split` (|a|, |b| in [2**-450, 2**451)) and
    |c| < 2**900 the numbers need no scaling: the product is exact (every partial product
    >= 2**-1004, normal), nothing overflows, and an error below the normal range only
    arises in sums that are then exact; results near the subnormal range are redone as in
    the scaled tier.  The caller checks the ranges."""
    xp = current()
    ma, ah, al, ea = fa
    mb, bh, bl, eb = fb
    c = xp.asarray(c, xp.uint64)
    with numpy.errstate(all="ignore"):
        fc = c.view(xp.float64)
        ph = ma * mb
        pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl
        if ea is None:      # the direct tier
            z, s1 = _round_sum3(ph, pl, fc, mode)
            res = z
        else:
            # d = c's exponent relative to the product's; the scaled sum is ph + pl + mc * 2**d
            # with d clamped to [-_L, _L], and the result comes back by 2**F: F = ep unless c
            # dominates by more than 2**_L (then F = ec - _L and the product is the stand-in)
            mc, ec = xp.frexp(fc)
            d = xp.minimum(ec - (ea + eb), _L)
            z, s1 = _round_sum3(ph, pl, xp.ldexp(mc, xp.maximum(d, -_L)), mode)
            res = xp.ldexp(z, ec - d)
        special = None
        if not xp.all(xp.isfinite(res)):
            bad = ~xp.isfinite(res)
            special = ~xp.isfinite(s1)      # a NaN or Inf operand: s1 is the IEEE outcome
            if mode != "rn":                # overflow: the largest finite number toward zero
                neg = xp.signbit(z)
                to_max = {"rz": True, "rm": ~neg, "rp": neg}[mode]
                res = xp.where(bad & ~special & to_max, xp.copysign(_F64_MAX, z), res)
            res = xp.where(special, s1, res)
        small = xp.abs(res) < _TINY
        redo = None
        if xp.any(small):
            # the few results below 2**-1020, gathered: an exact zero sum takes IEEE 754 §6.3's
            # sign (only zero + zero of one sign keeps it); the others are redone with Python
            # integers, unless the product is zero (the result is then c, exact)
            j = xp.nonzero(small)
            zj, pj, cj = (xp.broadcast_to(x, res.shape)[j] for x in (z, ph, fc))
            zero = zj == 0
            pneg, cneg = xp.signbit(pj), xp.signbit(cj)
            zneg = xp.where((pj == 0) & (cj == 0) & (pneg == cneg), pneg, mode == "rm")
            res[j] = xp.where(zero, xp.where(zneg, -0.0, 0.0), res[j])
            keep = ~zero & (pj != 0)
            redo = tuple(i[keep] for i in j)
        out = res.view(xp.uint64)
        if special is not None:
            out = xp.where(xp.isnan(res), xp.uint64(nan_code), out)
            out = _quiet_nans(out, {"a": a, "b": b, "c": c}, prop)
        if redo is not None and redo[0].size:
            codes = [xp.broadcast_to(xp.asarray(x, xp.uint64), out.shape)[redo] for x in (a, b, c)]
            out[redo] = _exact_fma(*codes, mode, nan_code)
    return out


def fma_f64_codes(a, b, c, mode="rn", nan_code=None):
    """Correctly rounded binary64 fma on encodings (uint64 arrays that broadcast together):
    the float64 algorithm of :func:`_fma_f64_step`, exact in every rounding mode (tests
    compare it with :func:`fma_f64` and the Fraction reference); NaN results are
    ``nan_code`` (default 0x7FFFFFFFFFFFFFFF)."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.uint64), np.asarray(b, np.uint64), np.asarray(c, np.uint64))
    shape = a.shape
    a, b, c = (x.reshape(-1) for x in (a, b, c))     # 1-d: scalars too
    nan_code = 0x7FFFFFFFFFFFFFFF if nan_code is None else nan_code
    out = _fma_f64_step(a, b, c, _f64_factor(a), _f64_factor(b), mode, nan_code)
    return np.ascontiguousarray(np.broadcast_to(out, a.shape)).reshape(shape)


def _exact_fma(a, b, c, mode, nan_code):
    """fma_f64 on codes; Python integers live on the host, so device arrays go there and back."""
    if on_host():
        return fma_f64(decode(a, "f64"), decode(b, "f64"), decode(c, "f64"), mode, nan_code)
    with backend(numpy):
        r = fma_f64(decode(to_host(a), "f64"), decode(to_host(b), "f64"), decode(to_host(c), "f64"), mode, nan_code)
    return np.asarray(r)


def _run_f64(a, b, c, sa, sb, p: FmaChain, ctx):
    mode = (ctx["rounding"] or "rn").lstrip(".")
    a = np.asarray(a, np.uint64)
    b = np.asarray(b, np.uint64)
    K = ctx["K"]
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1], c.shape)
    ks = range(K) if p.order == "ascending" else range(K - 1, -1, -1)
    if p.c_first:
        acc = np.broadcast_to(np.asarray(c, np.uint64), batch)
    else:
        acc = np.full(batch, 1 << 63, np.uint64)  # -0: the neutral element of IEEE addition
    if p.nan_rule not in ("propagate", "canonical"):
        raise ValueError(f"nan_rule {p.nan_rule!r}")
    nan_code = p.default_nan if p.nan_rule == "propagate" else p.nan_bits
    prop = tuple(reversed(p.nan_priority)) if p.nan_rule == "propagate" else ()
    step_nan = 0x7FFFFFFFFFFFFFFF if nan_code is None else nan_code    # fma_f64_codes' default
    # every k's factors decoded and split once, on the operands' own (unbroadcast) shapes,
    # k first so that each step reads contiguous rows; the direct tier where a step allows it
    kfirst = lambda x: np.ascontiguousarray(np.moveaxis(x, -1, 0))  # noqa: E731
    a, b = kfirst(a), kfirst(b)
    fa, fb = _f64_factor(a), _f64_factor(b)
    da, db = _f64_split(a), _f64_split(b)
    direct = [x and y for x, y in zip(_direct_ks(fa[3]), _direct_ks(fb[3]))]
    top = lambda x: float(np.max(np.abs(x.view(np.float64)))) if x.size else 0.0  # noqa: E731
    cmax = top(acc)
    for k in ks:
        if direct[k] and cmax < 2.0 ** 900:
            f1, f2 = tuple(x[k] for x in da[:3]) + (None,), tuple(x[k] for x in db[:3]) + (None,)
        else:
            f1, f2 = tuple(x[k] for x in fa), tuple(x[k] for x in fb)
        acc = _fma_f64_step(a[k], b[k], acc, f1, f2, mode, step_nan, prop)
        cmax = top(acc)
    if not p.c_first:
        r = add_rounded(acc, "f64", c, "f64", "f64", mode, nan_code=nan_code)
        acc = f64_nan_select(p, r, {"a": acc, "b": np.broadcast_to(np.asarray(c, np.uint64), batch),
                                    "c": acc})
    return np.broadcast_to(acc, batch).astype(np.uint64)


# ---------------------------------------------------------------------------
# FP32 code on the FMA pipe (sm_90 m8n8k4 .f16)
# ---------------------------------------------------------------------------

def _rn_odd_sum(x, y):
    """x + y (float64, each exact, |x|, |y| < 2**200) rounded to odd at 53 bits (see _rn32_sum)."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = x + y
        bb = s - x
        e = (x - (s - bb)) + (y - bb)
        fix = np.isfinite(s) & (e != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
        if np.any(fix):
            s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s


def _rn32_sum(x, y):
    """binary32 round-to-nearest-even of the exact sum x + y of two float64 numbers
    (each exact, |x|, |y| < 2**200), as a float64 (Inf on overflow): TwoSum gives the
    exact error e of s = RN64(x+y); rounding s to odd (step one ulp toward e when e != 0
    and s is even) keeps the exact sum's rounding into any format of <= 51 bits, so one
    more RN rounding to binary32 is the correctly rounded result (round-to-odd, Boldo &
    Melquiond 2008)."""
    q = round_binary(_rn_odd_sum(x, y), 24, -126)
    return np.where(np.abs(q) >= 2.0 ** 128, np.copysign(np.inf, q), q)


def _run_fma_pipe(a, b, c, sa, sb, p: FmaPipe, ctx):
    """sm_90 m8n8k4 .f16: FMUL/FFMA chains per k group, FADDs with c, optional F2FP (FmaPipe).
    Values are float64 holding binary32 numbers (no float32 arithmetic: see formats.f64_to_b32)."""
    if p.work != "f32":
        raise ValueError(f"FmaPipe work format {p.work!r}")
    va = to_float64(a, ctx["atype"])      # f16 -> f64 exact (HADD2.F32 is exact)
    vb = to_float64(b, ctx["btype"])
    acc = to_float64(c, ctx["ctype"])     # f16 or f32 c, exact
    batch = np.broadcast_shapes(va.shape[:-1], vb.shape[:-1], acc.shape)
    acc = np.broadcast_to(acc, batch).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        for g in p.groups:
            k0 = g[0]
            prod = va[..., k0] * vb[..., k0]          # exact: 11-bit x 11-bit significands
            if p.start == "mul":
                part = prod                           # FMUL: exact in f32 (a normal binary32 number)
            elif p.start == "fma_zero":
                part = _rn32_sum(prod, np.zeros(batch))   # FFMA(a, b, +0): -0 + +0 = +0
            else:
                raise ValueError(f"FmaPipe start {p.start!r}")
            for k in g[1:]:
                part = _rn32_sum(va[..., k] * vb[..., k], part)
            acc = _rn32_sum(acc, part)
        acc = np.broadcast_to(acc, batch)
        nan = np.isnan(acc)
        if ctx["dtype"] == "f32":
            out = f64_to_b32(acc)
            return out if p.nan_bits is None else np.where(nan, np.uint32(p.nan_bits), out)
        if ctx["dtype"] == "f16":
            out = f64_to_b16(acc)                     # F2FP.F16.F32: round to nearest even
            return out if p.out_nan_bits is None else np.where(nan, np.uint16(p.out_nan_bits), out)
    raise ValueError(f"FmaPipe: dtype {ctx['dtype']!r}")


def _run_narrowed(a, b, c, sa, sb, p: Narrowed, ctx):
    """sm_90 wmma f16 D from an f32 C: the inner record into ``p.via`` (HMMA.16816.F32), then one
    IEEE conversion into D (F2FP.F16.F32, round to nearest even)."""
    inner = _EXECUTORS[type(p.inner)]
    d = inner(a, b, c, sa, sb, p.inner, dict(ctx, dtype=p.via))
    return convert(np.asarray(d), p.via, ctx["dtype"], p.rounding, nan_code=p.nan_bits)


def _run_int(a, b, c, sa, sb, p: IntegerDot, ctx):
    va = int_values(a, ctx["atype"])
    vb = int_values(b, ctx["btype"])
    vc = int_values(c, ctx["ctype"])
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1], c.shape)
    if ctx["satfinite"] and p.saturation == "per_step":
        acc = np.broadcast_to(vc, batch).astype(np.int64)
        lo, hi = -(1 << 31), (1 << 31) - 1
        for k in range(ctx["K"]):
            acc = np.clip(acc + va[..., k] * vb[..., k], lo, hi)
        return encode_int(acc, ctx["dtype"], saturate=True)
    total = vc + np.einsum("...k,...k->...", va, vb)
    return encode_int(np.broadcast_to(total, batch), ctx["dtype"], saturate=bool(ctx["satfinite"]))


_POPC8 = numpy.array([bin(i).count("1") for i in range(256)], np.uint8)


def _pack_bits(x):
    """Bit 0 of each element, 8 consecutive k per uint8 (K padded with zeros to a multiple of 8)."""
    x = np.asarray(x).astype(np.uint8) & 1
    if on_host():
        return numpy.packbits(x, axis=-1)   # the same packing (first k in the high bit), in C
    K = x.shape[-1]
    if K % 8:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (8 - K % 8,), np.uint8)], axis=-1)
    w = np.asarray(numpy.array([128, 64, 32, 16, 8, 4, 2, 1], np.uint8))
    return np.sum(x.reshape(x.shape[:-1] + (x.shape[-1] // 8, 8)) * w, axis=-1, dtype=np.uint8)


def _popcount8(x):
    """Set bits of each uint8 (numpy >= 2's bitwise_count, else a table)."""
    return np.bitwise_count(x) if hasattr(np, "bitwise_count") else like(_POPC8, x)[x]


def _run_popc(a, b, c, sa, sb, p: Popc, ctx):
    op = (ctx["bitop"] or "").lstrip(".")
    if op not in ("and", "xor"):
        raise ValueError("b1 mma needs bitop='and' or 'xor'")
    # the K bits of each operand packed into bytes (on the operands as they broadcast), then
    # one AND/XOR and one population count per byte instead of per bit
    va, vb = _pack_bits(a), _pack_bits(b)
    bits = (va & vb) if op == "and" else (va ^ vb)
    total = int_values(c, ctx["ctype"]) + _popcount8(bits).sum(axis=-1, dtype=np.int64)
    batch = np.broadcast_shapes(a.shape[:-1], b.shape[:-1], c.shape)
    return encode_int(np.broadcast_to(total, batch), ctx["dtype"])


def _run_exact(a, b, c, sa, sb, p: ExactRound, ctx):
    key = ctx["key"]
    if key == "int":
        return _run_int(a, b, c, sa, sb, IntegerDot(), ctx)
    if key == "b1":
        return _run_popc(a, b, c, sa, sb, Popc(), ctx)
    mode = p.rounding
    if key == "f64" and ctx["rounding"]:
        mode = ctx["rounding"].lstrip(".")
    da = _decode_input(a, ctx["atype"], p)
    db = _decode_input(b, ctx["btype"], p)
    factors = [da, db]
    if key == "scaled.f32":
        factors += [decode(sa, ctx["stype"]), decode(sb, ctx["stype"])]
    if key == "f64":
        factors = [Decoded(d.fmt, d.neg, d.sig.astype(object), d.exp, d.nan, d.inf, d.zero) for d in factors]
    prod = B.product_terms(factors)
    ct = B.value_terms(decode(c, ctx["ctype"]))
    return B.exact_round([prod, ct], get_format(ctx["dtype"]), mode, overflow="ieee",
                         nan_code=p.nan_bits, zero_sign=p.zero_sign)


_EXECUTORS = {BlockFMA: _run_block, Emulated: _run_emulated, FmaChain: _run_f64, FmaPipe: _run_fma_pipe,
              Narrowed: _run_narrowed, IntegerDot: _run_int, Popc: _run_popc, ExactRound: _run_exact}

__all__ = ["dot_terms", "mma_matrices", "fma_f64", "add_rounded", "UnsupportedPath"]

# b1: a product is one bit (K / 8 bytes per output): a bigger chunk keeps the number of
# Python-level chunks of a wgmma m64n256k256 batch at one per instance
_CHUNK.update({FmaChain: 1 << 18, FmaPipe: 1 << 17, Popc: 1 << 22})
