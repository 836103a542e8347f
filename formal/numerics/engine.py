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

from .xp import backend, like, module_for, np, on_host, to_host

from . import block as B
from .archs import get_model
from .formats import Decoded, convert, decode, decode_converted, encode_int, get_format, int_values, to_float64
from .params import BlockFMA, Emulated, ExactRound, FmaChain, FmaPipe, IntegerDot, Narrowed, Popc, UnsupportedPath

#: products per chunk: keeps the [K, chunk] temporaries inside the CPU caches
CHUNK_TERMS = 1 << 20
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
    shared = [i for i in range(nb) if a2.shape[i] > 1 and b2.shape[i] > 1] or list(range(nb))
    inner = max(shared, key=lambda i: (batch[i], i))
    perm = [i for i in range(nb) if i != inner] + [inner]
    ops = [None if x is None else x.transpose(perm + list(range(nb, x.ndim))) for x in ops]
    pb = [batch[i] for i in perm]
    chunk = _CHUNK.get(type(p), CHUNK_TERMS) if on_host() else DEVICE_CHUNK_TERMS
    # chunks of about `chunk` products: slices of the inner axis with every other axis
    # whole (each a/b element decoded once), unless those slices would be short; then whole
    # slices of the outermost axis that allows it (a GEMM step: a few tile rows, each with
    # its long inner axis).  Every output depends on its own batch position only.
    K1 = max(K, 1)
    total = math.prod(pb) * K1
    step = pb[-1] if total <= chunk else max(1, chunk * pb[-1] // total)
    rest = [math.prod(pb[i + 1:]) * K1 for i in range(nb)]
    ax = nb - 1
    if step < min(pb[-1], MIN_INNER):
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
    return d


def _decode_via(x, t: str, via: str, p) -> Decoded:
    """_decode_input(convert(x, t, via, "rn"), via, p), through one composed table."""
    if via == "tf32":
        return _decode_input(convert(x, t, via, "rn"), via, p)
    d = decode_converted(x, t, via, "rn")
    if isinstance(p, BlockFMA) and not p.pin_subnormals:
        d = B.unpin_subnormals(d)
    return d


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


_NP_FLOAT = {"f16": (np.float16, np.uint16), "f32": (np.float32, np.uint32)}


def add_rounded(x, xtype, y, ytype, out, mode="rn", *, nan_code=None, zero_sign="ieee"):
    """IEEE x + y rounded once into ``out`` (an FADD / HADD / DADD)."""
    if mode == "rn" and zero_sign == "ieee" and out in _NP_FLOAT and xtype in _NP_FLOAT and ytype in _NP_FLOAT:
        # f16/f32 in and out, round to nearest: the exact sum rounded to odd in float64,
        # then one RNE cast (correct for targets of <= 51 bits; Boldo & Melquiond 2008);
        # IEEE specials, zero signs and overflow come from the float arithmetic itself
        with np.errstate(over="ignore", invalid="ignore"):
            fx = np.asarray(x).astype(_NP_FLOAT[xtype][1]).view(_NP_FLOAT[xtype][0]).astype(np.float64)
            fy = np.asarray(y).astype(_NP_FLOAT[ytype][1]).view(_NP_FLOAT[ytype][0]).astype(np.float64)
            r = _rn_odd_sum(fx, fy).astype(_NP_FLOAT[out][0])
        codes = r.view(_NP_FLOAT[out][1])
        nan = np.isnan(r)
        if np.any(nan):
            ncode = get_format(out).nan_code if nan_code is None else int(nan_code)
            codes = np.where(nan, _NP_FLOAT[out][1](ncode), codes)
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
    out = np.asarray(r, np.uint64)
    for name in reversed(p.nan_priority):   # the first in priority is applied last and wins
        x = np.asarray(ops[name], np.uint64)
        out = np.where(_f64_isnan(x), x | F64_QUIET, out)
    return out


def _two_prod(x, y):
    """Dekker: x*y = ph + pl exactly (no overflow, pl not below the normal range)."""
    sx = 134217729.0 * x
    xh = sx - (sx - x)
    xl = x - xh
    sy = 134217729.0 * y
    yh = sy - (sy - y)
    yl = y - yh
    ph = x * y
    return ph, ((xh * yh - ph) + xh * yl + xl * yh) + xl * yl


def _round_sum3(ph, pl, c, mode):
    """ph + pl + c (exact doubles; ph + pl an exact product) rounded once to binary64 in
    ``mode``, with an unbounded exponent: s1 + e1 = ph + c and s2 + e2 = e1 + pl exactly
    (TwoSum); v = s2 + e2 rounded to odd; result = s1 + v rounded in ``mode`` (the
    emulated FMA of Boldo & Melquiond, IEEE TC 2008; directed modes step by one ulp
    using TwoSum's error of the last add).  Returns (z, exact_zero)."""
    s1 = ph + c
    t = s1 - ph
    e1 = (ph - (s1 - t)) + (c - t)
    s2 = e1 + pl
    t = s2 - e1
    e2 = (e1 - (s2 - t)) + (pl - t)
    even = (s2.view(np.uint64) & np.uint64(1)) == 0
    v = np.where((e2 != 0) & even, np.nextafter(s2, np.where(e2 > 0, np.inf, -np.inf)), s2)
    z = s1 + v
    if mode != "rn":
        t = z - s1
        err = (s1 - (z - t)) + (v - t)
        if mode == "rz":
            z = np.where((err != 0) & (np.signbit(err) != np.signbit(z)), np.nextafter(z, 0.0), z)
        elif mode == "rm":
            z = np.where(err < 0, np.nextafter(z, -np.inf), z)
        elif mode == "rp":
            z = np.where(err > 0, np.nextafter(z, np.inf), z)
        else:
            raise ValueError(f"rounding mode {mode!r}")
    return z, z == 0


def _zero_fix(z, zsum, fa, fb, fc, mode):
    """Signs of exact-zero results (IEEE 754 §6.3) and zero products (result = c)."""
    pzero = (fa == 0) | (fb == 0)
    czero = fc == 0
    pneg = np.signbit(fa) ^ np.signbit(fb)
    rm = mode == "rm"
    zneg = np.where(pzero & czero, np.where(pneg == np.signbit(fc), pneg, rm), rm)
    z = np.where(zsum, np.where(zneg, -0.0, 0.0), z)
    return np.where(pzero & ~czero, fc, z)


#: exponent-field window of the direct path: |a|, |b| in [2**-450, 2**451), |c| < 2**901
_DIRECT_AB = 450
_DIRECT_C = 900


def fma_f64_codes(a, b, c, mode="rn", nan_code=None):
    """Correctly rounded binary64 fma on encodings (uint64 arrays that broadcast together).

    Three tiers, all exact (tests compare them with :func:`fma_f64` and the Fraction
    reference in every rounding mode):

    * direct: |a|, |b| in [2**-450, 2**451) and |c| < 2**901 -- Dekker's exact product
      and :func:`_round_sum3` on the numbers themselves (no overflow, nothing below
      the normal range: every partial error is a multiple of 2**-1008);
    * scaled: other finite inputs -- significands in [1/2, 1) (``frexp``), both addends
      scaled to the larger one's exponent (an addend more than 2**150 below the other
      only acts as a sticky bit and is replaced by +-2**-160), :func:`_round_sum3`,
      then overflow to Inf or the largest finite number per mode;
    * exact: results below 2**-1020 (near or in the subnormal range) -- :func:`fma_f64`
      with Python integers.

    NaN / Inf inputs are classified directly (NaN results are ``nan_code``).
    """
    a, b, c = np.broadcast_arrays(np.asarray(a, np.uint64), np.asarray(b, np.uint64), np.asarray(c, np.uint64))
    shape = a.shape
    a, b, c = (np.ascontiguousarray(x).reshape(-1) for x in (a, b, c))
    out = np.empty(a.shape, np.uint64)
    ex = lambda x: ((x >> np.uint64(52)) & np.uint64(0x7FF)).astype(np.int64) - 1023  # noqa: E731
    xa, xb, xc = ex(a), ex(b), ex(c)
    direct = ((np.abs(xa) <= _DIRECT_AB) & (np.abs(xb) <= _DIRECT_AB) & (np.abs(xc) <= _DIRECT_C))
    direct |= (np.abs(xa) <= _DIRECT_AB) & (np.abs(xb) <= _DIRECT_AB) & ((c << np.uint64(1)) == 0)  # c = +-0
    fin = (xa < 1024) & (xb < 1024) & (xc < 1024)
    slow = np.zeros(a.shape, bool)
    with np.errstate(all="ignore"):
        alld = bool(direct.all())
        if alld or np.any(direct):
            # every element direct (the common case): whole arrays, no gather / scatter
            i = slice(None) if alld else np.flatnonzero(direct)
            fa, fb, fc = a[i].view(np.float64), b[i].view(np.float64), c[i].view(np.float64)
            ph, pl = _two_prod(fa, fb)
            z, zsum = _round_sum3(ph, pl, fc, mode)
            z = _zero_fix(z, zsum, fa, fb, fc, mode)
            out[i] = z.view(np.uint64)
            slow[i] = (np.abs(z) < 2.0 ** -1020) & ~zsum & (fa != 0) & (fb != 0)
        if alld:
            fin = direct   # direct inputs are finite
        scaled = fin & ~direct
        if np.any(scaled):
            i = np.flatnonzero(scaled)
            out[i], sl = _fma_scaled(a[i].view(np.float64), b[i].view(np.float64), c[i].view(np.float64), mode)
            slow[i] = sl
        if not np.all(fin):      # NaN / Inf inputs: the IEEE outcome without arithmetic
            i = np.flatnonzero(~fin)
            fa, fb, fc = a[i].view(np.float64), b[i].view(np.float64), c[i].view(np.float64)
            anynan = np.isnan(fa) | np.isnan(fb) | np.isnan(fc)
            inv_mul = (np.isinf(fa) & (fb == 0)) | (np.isinf(fb) & (fa == 0))
            pinf = (np.isinf(fa) | np.isinf(fb)) & ~inv_mul & ~anynan
            psign = np.signbit(fa) ^ np.signbit(fb)
            nan = anynan | inv_mul | (pinf & np.isinf(fc) & (psign != np.signbit(fc)))
            neg = np.where(pinf, psign, np.signbit(fc))
            r = np.where(neg, np.uint64(0xFFF0000000000000), np.uint64(0x7FF0000000000000))
            out[i] = np.where(nan, np.uint64(nan_code if nan_code is not None else 0x7FFFFFFFFFFFFFFF), r)
    if np.any(slow):
        j = np.flatnonzero(slow)
        out[j] = _exact_fma(a[j], b[j], c[j], mode, nan_code)
    return out.reshape(shape)


def _exact_fma(a, b, c, mode, nan_code):
    """fma_f64 on codes; Python integers live on the host, so device arrays go there and back."""
    if on_host():
        return fma_f64(decode(a, "f64"), decode(b, "f64"), decode(c, "f64"), mode, nan_code)
    with backend(numpy):
        r = fma_f64(decode(to_host(a), "f64"), decode(to_host(b), "f64"), decode(to_host(c), "f64"), mode, nan_code)
    return np.asarray(r)


def _fma_scaled(fa, fb, fc, mode):
    """The scaled tier of :func:`fma_f64_codes` (finite inputs): (codes, needs-exact mask)."""
    ma, ea = np.frexp(fa)
    mb, eb = np.frexp(fb)
    mc, ec = np.frexp(fc)
    pzero = (fa == 0) | (fb == 0)
    czero = fc == 0
    ep = (ea + eb).astype(np.int64)
    ec = ec.astype(np.int64)
    ph, pl = _two_prod(ma, mb)   # |ma|, |mb| in [1/2, 1): exact
    E = np.where(pzero, ec, np.where(czero, ep, np.maximum(ep, ec)))
    dp = ep - E
    dc = ec - E
    tiny = 2.0 ** -160
    ph_s = np.where(pzero, 0.0, np.where(dp < -150, np.copysign(tiny, ph), np.ldexp(ph, np.maximum(dp, -150))))
    pl_s = np.where(pzero | (dp < -150), 0.0, np.ldexp(pl, np.maximum(dp, -150)))
    cs = np.where(czero, 0.0, np.where(dc < -150, np.copysign(tiny, mc), np.ldexp(mc, np.maximum(dc, -150))))
    z, zsum = _round_sum3(ph_s, pl_s, cs, mode)
    et = np.frexp(z)[1].astype(np.int64) + E          # result = m * 2**et, m in [1/2, 1)
    res = np.ldexp(z, np.clip(E, -2000, 2000))
    neg = np.signbit(z)
    to_max = (mode == "rz") | ((mode == "rm") & ~neg) | ((mode == "rp") & neg)
    res = np.where(et > 1024, np.where(to_max, np.copysign(np.finfo(np.float64).max, z), np.copysign(np.inf, z)),
                   res)
    res = _zero_fix(res, zsum, fa, fb, fc, mode)
    slow = (et <= -1020) & ~zsum & ~pzero
    return res.view(np.uint64), slow


def _fma_step_direct(ak, bk, acc, mode, batch):
    """One chain step ``fma(ak, bk, acc)`` when every element is in the direct tier of
    :func:`fma_f64_codes` (then no NaN, Inf or overflow can occur, so the NaN rule has
    nothing to do); else None.  The same arithmetic as that tier, on ``ak``/``bk`` as
    they broadcast (an [M, 1] column times a [1, N] row: the Dekker splits run on the
    distinct elements only) and without gathers; results that need the exact tier are
    redone there."""
    fa, fb = np.asarray(ak, np.uint64).view(np.float64), np.asarray(bk, np.uint64).view(np.float64)
    fc = np.asarray(acc, np.uint64).view(np.float64)
    lo, hi = 2.0 ** -_DIRECT_AB, 2.0 ** (_DIRECT_AB + 1)     # exponent field in [-450, 450]
    with np.errstate(all="ignore"):
        for x in (fa, fb):
            m = np.abs(x)
            if not np.all((m >= lo) & (m < hi)):
                return None
        m = np.abs(fc)
        if not np.all(((m >= 2.0 ** -_DIRECT_C) & (m < 2.0 ** (_DIRECT_C + 1))) | (m == 0)):
            return None
        ph, pl = _two_prod(fa, fb)
        z, zsum = _round_sum3(ph, pl, fc, mode)
        if np.any(zsum):                    # a, b are nonzero here: only exact-zero sums need the sign rule
            z = _zero_fix(z, zsum, fa, fb, fc, mode)
        z = np.broadcast_to(z, batch)
        out = np.ascontiguousarray(z).view(np.uint64)
        tiny = np.abs(z) < 2.0 ** -1020
        if np.any(tiny):
            j = np.nonzero(tiny & ~np.broadcast_to(zsum, batch))
            if len(j[0]):
                out = out.copy()
                A, B, C = (np.broadcast_to(np.asarray(x, np.uint64), batch)[j] for x in (ak, bk, acc))
                out[j] = _exact_fma(A, B, C, mode, None)
    return out


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
    nan_code = p.default_nan if p.nan_rule == "propagate" else p.nan_bits
    for k in ks:
        ak, bk = a[..., k], b[..., k]
        r = _fma_step_direct(ak, bk, acc, mode, batch)
        if r is None:
            r = fma_f64_codes(ak, bk, acc, mode, nan_code)
            r = f64_nan_select(p, r, {"a": ak, "b": bk, "c": acc})
        acc = r
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
    (each exact, |x|, |y| < 2**200): TwoSum gives the exact error e of s = RN64(x+y);
    rounding s to odd (step one ulp toward e when e != 0 and s is even) keeps the
    exact sum's rounding into any format of <= 51 bits, so one more RN cast to
    float32 is the correctly rounded result (round-to-odd, Boldo & Melquiond 2008)."""
    return _rn_odd_sum(x, y).astype(np.float32)


def _f32_codes(v, nan_code):
    out = np.ascontiguousarray(v, np.float32).view(np.uint32)
    if nan_code is not None:
        out = np.where(np.isnan(v), np.uint32(nan_code), out)
    return out


def _run_fma_pipe(a, b, c, sa, sb, p: FmaPipe, ctx):
    """sm_90 m8n8k4 .f16: FMUL/FFMA chains per k group, FADDs with c, optional F2FP (FmaPipe)."""
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
                part = prod.astype(np.float32)        # FMUL: exact in f32
            elif p.start == "fma_zero":
                part = _rn32_sum(prod, np.zeros(batch))   # FFMA(a, b, +0): -0 + +0 = +0
            else:
                raise ValueError(f"FmaPipe start {p.start!r}")
            for k in g[1:]:
                part = _rn32_sum(va[..., k] * vb[..., k], part.astype(np.float64))
            acc = _rn32_sum(acc, part.astype(np.float64)).astype(np.float64)
        acc = np.broadcast_to(acc, batch)
        if ctx["dtype"] == "f32":
            return _f32_codes(acc.astype(np.float32), p.nan_bits)
        if ctx["dtype"] == "f16":
            h = acc.astype(np.float32).astype(np.float16)   # F2FP.F16.F32: round to nearest even
            out = np.ascontiguousarray(h).view(np.uint16)
            if p.out_nan_bits is not None:
                out = np.where(np.isnan(h), np.uint16(p.out_nan_bits), out)
            return out
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

_CHUNK.update({FmaChain: 1 << 17, FmaPipe: 1 << 17})
