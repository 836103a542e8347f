"""Provenance tags: what a byte of a register or of memory holds, as one int64.

=========  ======  ==============================================================
bits       field
=========  ======  ==============================================================
60..62     kind    0 none (not data: addresses, counters, constants), 1 element of an
                   input buffer, 2 accumulator (an entry of the accumulator table),
                   3 garbled (arithmetic mixed several elements; the first is kept)
58..59     deriv   how the value was formed from its element: 0 the element itself,
                   1 converted (cvt, e.g. .rna.tf32, f16 -> f32), 2 residual (x - cvt(x),
                   the small part of a 3xTF32 split), 3 other arithmetic
52..57     buf     buffer number + 1 (elements)
46..51     fmt     the format the value is encoded in (:data:`FORMATS`: a buffer's declared
                   type when loaded, the destination type of a ``cvt``, an mma's ``.dtype``
                   for accumulators); ``sext`` marks a byte that is the sign extension of
                   the element (``ld.s8`` into a wider register, ``cvt.s32.s8``)
35..45     issue   0, or the number of a deferred witness (``Machine.issue``) this value
                   carries: a value read as another type than it is encoded in; reported
                   only if the value reaches a stored output
3..34      idx     element index in the buffer (elements), or accumulator id
0..2       byte    byte of the element this byte holds
=========  ======  ==============================================================
"""

from __future__ import annotations

import numpy as np

NONE, ELEM, ACC, GARBLED = 0, 1, 2, 3
RAW, CONV, RESID, ARITH = 0, 1, 2, 3
DERIV_NAMES = {RAW: "the element", CONV: "converted", RESID: "residual (x - cvt(x))", ARITH: "arithmetic"}

_KIND_SH, _DERIV_SH, _BUF_SH, _FMT_SH, _ISSUE_SH, _IDX_SH = 60, 58, 52, 46, 35, 3
_IDX_MASK = (1 << 32) - 1
MAX_ISSUE = (1 << 11) - 1

# value formats a tag can name (code = position; 0: not known)
FORMATS = ("", "f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "ue8m0", "ue4m3",
           "s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "b1", "sext")
_CODE = {n: i for i, n in enumerate(FORMATS)}
SEXT = _CODE["sext"]
_WIDTH = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8, "e3m2": 8, "e2m3": 8,
          "e2m1": 4, "ue8m0": 8, "ue4m3": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32,
          "u32": 32, "s64": 64, "u64": 64, "b1": 1}
_KEEP = ~((np.int64(3) << _DERIV_SH) | (np.int64((1 << 6) - 1) << _FMT_SH) | (np.int64(MAX_ISSUE) << _ISSUE_SH)
          | np.int64(7))


def fmt_code(name: str | None) -> int:
    """The code of a PTX type name (0 for a bit type or anything else that does not say how a
    value is encoded)."""
    return _CODE.get((name or "").lstrip("."), 0)


def fmt_name(code: int) -> str:
    return FORMATS[int(code)] if 0 <= int(code) < len(FORMATS) else ""


def fmt_bits(name: str) -> int:
    return _WIDTH.get(name, 0)


def is_int(name: str) -> bool:
    return name[:1] in ("s", "u") and name in _WIDTH and name != "ue8m0" and name != "ue4m3"


def make(kind, buf, idx, byte, deriv=0, fmt=0) -> np.ndarray:
    return ((np.int64(kind) << _KIND_SH) | (np.asarray(deriv, np.int64) << _DERIV_SH)
            | (np.asarray(buf, np.int64) << _BUF_SH) | (np.asarray(fmt, np.int64) << _FMT_SH)
            | (np.asarray(idx, np.int64) << _IDX_SH) | np.asarray(byte, np.int64))


def kind(t):
    return (np.asarray(t) >> _KIND_SH) & 7


def deriv(t):
    return (np.asarray(t) >> _DERIV_SH) & 3


def buf(t):
    return (np.asarray(t) >> _BUF_SH) & 63


def fmt(t):
    return (np.asarray(t) >> _FMT_SH) & 63


def issue(t):
    return (np.asarray(t) >> _ISSUE_SH) & MAX_ISSUE


def idx(t):
    return (np.asarray(t) >> _IDX_SH) & _IDX_MASK


def byte(t):
    return np.asarray(t) & 7


def key(t):
    """Element identity without byte, derivation, format and issue (kind, buf, idx)."""
    return np.asarray(t) & _KEEP


def with_deriv(t, d):
    t = np.asarray(t)
    return (t & ~(np.int64(3) << _DERIV_SH)) | (np.asarray(d, np.int64) << _DERIV_SH)


def with_fmt(t, f):
    t = np.asarray(t)
    return (t & ~(np.int64(63) << _FMT_SH)) | (np.asarray(f, np.int64) << _FMT_SH)


def with_issue(t, i):
    """Data bytes (t != 0) carry issue i (0 clears); constant bytes stay 0."""
    t = np.asarray(t)
    out = (t & ~(np.int64(MAX_ISSUE) << _ISSUE_SH)) | (np.asarray(i, np.int64) << _ISSUE_SH)
    return np.where(t != 0, out, 0)


def with_byte(t, b):
    return (np.asarray(t) & ~np.int64(7)) | np.asarray(b, np.int64)


def combine(arrs: list, nbytes: int, op_deriv: int, T: int) -> np.ndarray | None:
    """Tags of an arithmetic result from its data operands' tags ([T, n] arrays or None).

    One source element -> that element (derivation op_deriv, or RESID for x - cvt(x)); several
    -> GARBLED (keeping the first); none -> None (the result is not data).  An issue any
    operand carries stays with the result."""
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
    iss = issue(allt).max(axis=1)
    d = np.full(T, op_deriv, dtype=np.int64)
    out = with_deriv(t0, d)
    garbled = ((np.int64(GARBLED) << _KIND_SH) | (t0 & ~(np.int64(7) << _KIND_SH)))
    out = np.where(single, out, np.where(has, garbled, 0))
    out = with_issue(out, iss)
    res = np.where(has[:, None], with_byte(out[:, None], np.arange(nbytes)[None, :] % 8), 0)
    return res.astype(np.int64)


# --------------------------------------------------------------------------- reading a value as a type

def compatible(have: str, read_as: str) -> bool:
    """A value encoded in ``have`` read as ``read_as`` (same width): the same value?

    tf32 is f32 with a shorter significand: an f32 value read as tf32 is the documented
    tf32-precision reading (mma .tf32 ignores the low 13 bits), a tf32 value read as f32 is
    exact."""
    if have == read_as:
        return True
    return {have, read_as} == {"f32", "tf32"}


def read_check(tags: np.ndarray, vbytes: np.ndarray | None, read_as: str) -> tuple[np.ndarray, np.ndarray]:
    """Bytes ``tags`` [N, w] (and their values [N, w] uint8, for zero extension) read as the
    w-byte type ``read_as``: which rows hold an element (or accumulator) encoded in another
    format than the reader assumes?  Returns (bad [N], the format code the value has [N]).

    Rows whose first byte is not data, or whose format is unknown, are not judged here.  A
    value wider than its element is the element plus extension bytes: sign extension
    (``sext`` bytes of the same element) of a signed integer read as a signed type, or zero
    bytes above an unsigned integer."""
    tags = np.asarray(tags, np.int64)
    N, w = tags.shape
    bad = np.zeros(N, bool)
    t0 = tags[:, 0]
    f0 = fmt(t0)
    judged = ((kind(t0) == ELEM) | (kind(t0) == ACC)) & (f0 != 0) & (f0 != SEXT)
    if not judged.any() or fmt_bits(read_as) == 0:
        return bad, f0
    for code in np.unique(f0[judged]):
        have = fmt_name(code)
        sel = judged & (f0 == code)
        hw = fmt_bits(have)
        if hw % 8:
            continue                                     # sub-byte formats: not judged
        hb = hw // 8
        ts = tags[sel] if not sel.all() else tags
        ok = byte(ts[:, 0]) == 0
        for b in range(1, min(hb, w)):
            ok &= ts[:, b] == ts[:, 0] + b                   # byte b of the same value (byte 0 is 0)
        if w == hb:
            ok &= compatible(have, read_as)
        elif w < hb:
            ok &= False
        elif not (is_int(have) and is_int(read_as)):
            ok &= False
        elif have.startswith("s"):
            ok &= read_as.startswith("s")
            for b in range(hb, w):
                ok &= (fmt(ts[:, b]) == SEXT) & (key(ts[:, b]) == key(ts[:, 0]))
        else:
            for b in range(hb, w):
                ok &= ts[:, b] == 0
                if vbytes is not None:
                    ok &= vbytes[sel, b] == 0
        bad[np.flatnonzero(sel)[~ok]] = True
    return bad, f0


def sext_bytes(top: np.ndarray, n: int, start: int) -> np.ndarray:
    """Tags of n sign-extension bytes above a value whose most significant byte has tag
    ``top`` [N]: the sign of an element byte (or of its own sign extension) is the element's;
    the sign of a constant byte is a constant."""
    top = np.asarray(top, np.int64)
    data = (top != 0) & ((kind(top) == ELEM) | (kind(top) == ACC))
    t = with_fmt(top, SEXT)
    out = np.stack([np.where(data, with_byte(t, (start + j) % 8), 0) for j in range(n)], axis=1) \
        if n else np.zeros((len(top), 0), np.int64)
    return out
