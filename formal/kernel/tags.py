"""Provenance tags: what a byte of a register or of memory holds, as one int64.

=========  ======  ==============================================================
bits       field
=========  ======  ==============================================================
60..62     kind    0 none (not data: addresses, counters, constants), 1 element of an
                   input buffer, 2 accumulator (an entry of the accumulator table),
                   3 garbled (arithmetic mixed several elements; the first is kept)
56..59     deriv   how the value was formed from its element: 0 the element itself,
                   1 converted (cvt, e.g. .rna.tf32, f16 -> f32), 2 residual (x - cvt(x),
                   the small part of a 3xTF32 split), 3 other arithmetic
50..55     buf     buffer number + 1 (elements)
3..49      idx     element index in the buffer (elements), or accumulator id
0..2       byte    byte of the element this byte holds
=========  ======  ==============================================================
"""

from __future__ import annotations

import numpy as np

NONE, ELEM, ACC, GARBLED = 0, 1, 2, 3
RAW, CONV, RESID, ARITH = 0, 1, 2, 3
DERIV_NAMES = {RAW: "the element", CONV: "converted", RESID: "residual (x - cvt(x))", ARITH: "arithmetic"}

_KIND_SH, _DERIV_SH, _BUF_SH, _IDX_SH = 60, 56, 50, 3
_IDX_MASK = (1 << 47) - 1


def make(kind, buf, idx, byte, deriv=0) -> np.ndarray:
    return ((np.int64(kind) << _KIND_SH) | (np.asarray(deriv, np.int64) << _DERIV_SH)
            | (np.asarray(buf, np.int64) << _BUF_SH) | (np.asarray(idx, np.int64) << _IDX_SH)
            | np.asarray(byte, np.int64))


def kind(t):
    return (np.asarray(t) >> _KIND_SH) & 7


def deriv(t):
    return (np.asarray(t) >> _DERIV_SH) & 15


def buf(t):
    return (np.asarray(t) >> _BUF_SH) & 63


def idx(t):
    return (np.asarray(t) >> _IDX_SH) & _IDX_MASK


def byte(t):
    return np.asarray(t) & 7


def key(t):
    """Element identity without byte and derivation (kind, buf, idx)."""
    t = np.asarray(t)
    return t & ~((np.int64(15) << _DERIV_SH) | np.int64(7))


def with_deriv(t, d):
    t = np.asarray(t)
    return (t & ~(np.int64(15) << _DERIV_SH)) | (np.asarray(d, np.int64) << _DERIV_SH)


def with_byte(t, b):
    return (np.asarray(t) & ~np.int64(7)) | np.asarray(b, np.int64)


def combine(arrs: list, nbytes: int, op_deriv: int, T: int) -> np.ndarray | None:
    """Tags of an arithmetic result from its data operands' tags ([T, n] arrays or None).

    One source element -> that element (derivation op_deriv, or RESID for x - cvt(x)); several
    -> GARBLED (keeping the first); none -> None (the result is not data)."""
    arrs = [a for a in arrs if a is not None]
    if not arrs:
        return None
    allt = np.concatenate(arrs, axis=1) if len(arrs) > 1 else arrs[0]
    data = allt != 0
    if not data.any():
        return None
    k = np.where(data, key(allt), np.int64(-1))
    hi = k.max(axis=1)
    lo = np.where(data, k, np.iinfo(np.int64).max).min(axis=1)
    has = hi >= 0
    single = has & (hi == lo)
    first = np.argmax(data, axis=1)
    t0 = allt[np.arange(T), first]
    d = np.full(T, op_deriv, dtype=np.int64)
    out = with_deriv(t0, d)
    garbled = ((np.int64(GARBLED) << _KIND_SH) | (t0 & ~(np.int64(7) << _KIND_SH)))
    out = np.where(single, out, np.where(has, garbled, 0))
    res = np.where(has[:, None], with_byte(out[:, None], np.arange(nbytes)[None, :] % 8), 0)
    return res.astype(np.int64)
