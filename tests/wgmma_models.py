"""Independent matrix-level wgmma models (for tests/test_wgmma_vectors_audit.py).

Written from the behaviour docs/wgmma.md states the H200 settled -- not from formal.numerics:
plain Python integers, no formal import.  Every dense wgmma form is one block FMA of all K
products plus c (f16/bf16 k16, tf32 k8: the sm_90 HMMA block, 25 fraction bits below the
largest exponent; fp8 k32: the native block, 13 bits), each term truncated toward zero onto
the window's grid, the exact sum rounded once (RZ into .f32, RN into .f16; fp8 into .f32
keeps 13 fraction bits).  A sparse form multiplies the stored (non-zero) terms only.  Each
wrong variant changes one thing; ``model(opcode, A, B, C) -> D`` on raw encodings.
"""

import functools

import numpy as np

from wrong_models import _enc          # one rounding into .f32 / .f16, shared with the mma.sync models

# exponent bits, fraction bits, low container bits ignored, NaN/Inf style
_FMT = {"f16": (5, 10, 0, "ieee"), "bf16": (8, 7, 0, "ieee"), "tf32": (8, 10, 13, "ieee"),
        "f32": (8, 23, 0, "ieee"), "e5m2": (5, 2, 0, "ieee"), "e4m3": (4, 3, 0, "fn")}
_NAN = {"f32": 0x7FFFFFFF, "f16": 0x7FFF}
#: (inputs kind, accumulator) -> (fraction bits of the window, floor of the alignment exponent)
_BLOCK = {("f16", "f32"): (25, -133), ("f16", "f16"): (25, -21), ("bf16", "f32"): (25, -133),
          ("tf32", "f32"): (25, -133), ("f8", "f32"): (13, -133), ("f8", "f16"): (13, -21)}


@functools.lru_cache(maxsize=None)
def _dec_cached(code, t):
    return _dec_raw(code, t)


def _dec(code, t):
    return _dec_cached(int(code), t)


def _dec_raw(code, t):
    """("nan"|"inf"|"fin", sign, significand, exponent, fraction bits): a finite value is
    sig * 2**(exp - frac); subnormals and zeros sit at emin."""
    eb, mb, low, style = _FMT[t]
    code = int(code) >> low
    neg = (code >> (eb + mb)) & 1
    ef = (code >> mb) & ((1 << eb) - 1)
    fr = code & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    top = (1 << eb) - 1
    if style == "fn":                                   # e4m3: no Inf, one NaN mantissa
        if ef == top and fr == (1 << mb) - 1:
            return "nan", neg, 0, 0, mb
    elif ef == top:
        return ("nan" if fr else "inf"), neg, 0, 0, mb
    if ef == 0:
        return "fin", neg, fr, 1 - bias, mb
    return "fin", neg, fr | (1 << mb), ef - bias, mb


def block(terms, c, dt, F, floor, mode, keep=None):
    """One block FMA on decoded (a, b) pairs and decoded c; returns the dt code."""
    nan = c[0] == "nan"
    infs = {c[1]} if c[0] == "inf" else set()
    add = []                                                      # (sign, magnitude, lsb, exponent)
    for x, y in terms:
        if x[0] == "nan" or y[0] == "nan":
            nan = True
        elif x[0] == "inf" or y[0] == "inf":
            if (x[0] == "fin" and x[2] == 0) or (y[0] == "fin" and y[2] == 0):
                nan = True
            else:
                infs.add(x[1] ^ y[1])
        elif x[2] and y[2]:                                       # a zero product takes no part
            add.append((x[1] ^ y[1], x[2] * y[2], x[3] + y[3] - x[4] - y[4], x[3] + y[3]))
    if nan or len(infs) == 2:
        return _NAN[dt]
    if infs:
        return _enc(infs.pop(), 1, 1 << 12, dt, "rz")
    if c[0] == "fin" and c[2]:
        add.append((c[1], c[2], c[3] - c[4], c[3]))
    if not add:
        return 0
    E = max(floor, max(e for *_, e in add))
    grid = E - F
    S = 0
    for neg, mag, lsb, _ in add:
        m = mag << (lsb - grid) if lsb >= grid else mag >> (grid - lsb)
        S += -m if neg else m
    return _enc(int(S < 0), abs(S), grid, dt, mode, keep)


def _types(opcode):
    """(A type, B type, D type, K, sparse, satfinite) of a wgmma opcode."""
    parts = opcode.split(".")
    shape = next(p for p in parts if p.startswith("m64n"))
    K = int(shape.split("k")[1])
    d, a, b = [p for p in parts if p in ("f16", "f32", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8", "s32")][-3:]
    return a, b, d, K, ".sp." in opcode, "satfinite" in parts


def _stored(row, width, stored, fixed):
    """k indices one structured-sparse row multiplies: per group, its non-zero encodings, padded
    with the group's lowest free positions (``fixed``: the first ``stored`` of every group)."""
    out = []
    for g in range(0, len(row), width):
        if fixed:
            out += list(range(g, g + stored))
            continue
        nz = [g + i for i in range(width) if int(row[g + i])]
        free = [g + i for i in range(width) if g + i not in nz]
        out += sorted((nz + free)[:stored]) if len(nz) <= stored else nz
    return out


def _int(code, t):
    v = int(code)
    return v - 256 if t == "s8" and v >= 128 else v


def wgmma_model(name, n=None, F=None, keep="form", swap_rows=None, sparse_fixed=False, dense_sparse=False,
                floor=None):
    """The model (every default: what the H200 did) with one thing changed: ``n`` terms per block
    (blocks chained, each one's D the next one's c), ``F`` window bits, ``keep`` fraction bits of
    an .f32 result (None: all 23), ``swap_rows`` (r0, r1) of A exchanged (a fragment-layout bug),
    ``sparse_fixed``: a sparse form reads the first two of every four (ignores the metadata),
    ``dense_sparse``: a sparse form multiplies every k of the dense A, ``floor`` of the exponent."""
    def model(opcode, A, B, C):
        at, bt, dt, K, sparse, sat = _types(opcode)
        A, B, C = np.asarray(A), np.asarray(B), np.asarray(C)
        T, M, Ka = A.shape
        N = B.shape[2]
        if swap_rows:
            A = A.copy()
            A[:, list(swap_rows)] = A[:, list(swap_rows[::-1])]
        D = np.zeros((T, M, N), np.uint16 if dt == "f16" else np.uint32)
        fp8 = at in ("e4m3", "e5m2")
        width, stored = (2, 1) if at == "tf32" else (4, 2)
        for t in range(T):
            for m in range(M):
                row = A[t, m]
                zero_row = not row.any()
                ks = (_stored(row, width, stored, sparse_fixed) if sparse and not dense_sparse else range(Ka))
                if at in ("s8", "u8"):
                    for j in range(N):
                        s = sum(_int(row[k], at) * _int(B[t, k, j], bt) for k in ks) + _int_c(C[t, m, j])
                        D[t, m, j] = (max(-(1 << 31), min((1 << 31) - 1, s)) if sat else s) & 0xFFFFFFFF
                    continue
                da = [(k, _dec(row[k], at)) for k in ks]
                Fd, fl = _BLOCK[("f8" if fp8 else at, dt)]
                Fw = Fd if F is None else F
                fl = fl if floor is None else floor
                kp = (13 if fp8 and dt == "f32" else None) if keep == "form" else keep
                nb = len(da) if n is None else n
                mode = "rn" if dt == "f16" else "rz"
                for j in range(N):
                    if zero_row and not C[t, m, j] and not B[t, :, j].any():   # every term and c +0: D = +0
                        continue
                    acc = _dec(int(C[t, m, j]), dt)
                    out = 0
                    for k0 in range(0, len(da), nb):
                        terms = [(x, _dec(B[t, k, j], bt)) for k, x in da[k0:k0 + nb]]
                        out = block(terms, acc, dt, Fw, fl, mode, kp)
                        acc = _dec(out, dt)
                    D[t, m, j] = out
        return D
    model.__name__ = name
    return model


def _int_c(code):
    v = int(code)
    return v - (1 << 32) if v >= 1 << 31 else v
