"""Checks of a wgmma silicon run (formal/hw/wgmma_probe.py) against the spec's models.

Shared by tools/wgmma_record.py (the whole run -> proofs/evidence/wgmma_silicon.json) and
tests/test_wgmma_silicon.py (the checked-in slice).  Each check reads what the silicon did
from the outputs (the probe decoders need no layout model) and compares it with the spec.
"""
from __future__ import annotations

import numpy as np

from formal.hw import wgmma_probe as wp
from formal.numerics import mma_matrices

SIGN = {"f16": 0x8000, "bf16": 0x8000, "tf32": 0x80000000, "e4m3": 0x80, "e5m2": 0x80}


def spec_d(n: int, dtype: str):
    """(row, col) of accumulator slot (thread, register, half) per the spec's D fragment."""
    return wp.d_map(n, dtype)


def spec_a_index(atype: str, K: int) -> np.ndarray:
    """[64, K] -> thread * E + element that holds A[m][k] per the spec's A fragment."""
    r, c = wp.a_map(atype)
    E = r.shape[1]
    want = np.full((64, K), -1, np.int64)
    want[r, c] = np.arange(128)[:, None] * E + np.arange(E)[None, :]
    return want


def smem_address(info: dict) -> np.ndarray:
    """Byte address of every operand element under the descriptor (the silicon-decided model:
    canonical layouts of PTX ISA 9.1 §9.7.15.5.1.2.1, LBO unused for swizzled K-major, the
    swizzle XORs byte-address bits [4, 4+B) with bits [7, 7+B) of (address - 128 * base offset)
    on the absolute shared-memory address)."""
    c, bits, K = info["cfg"], info["bits"], info["K"]
    S, sw, lbo, sbo = c["start"], c["sw"], c["lbo"], c["sbo"]
    rows = info["n"] if info["operand"] == "B" else 64
    mn = np.arange(rows)[:, None]
    k = np.arange(K)[None, :]
    T = 128 // bits
    if info["major"] == "K":
        if sw == 0:
            a = S + (mn % 8) * 16 + (mn // 8) * sbo + ((k % T) * bits) // 8 + (k // T) * lbo
        else:
            a = S + (mn % 8) * sw + (mn // 8) * sbo + (k * bits) // 8
    else:
        W = sw // 16 if sw else 1
        if sw == 0:
            a = S + ((mn % T) * bits) // 8 + (mn // T) * sbo + (k % 8) * 16 + (k // 8) * lbo
        else:
            a = S + ((mn % (W * T)) * bits) // 8 + (mn // (W * T)) * lbo + (k % 8) * sw + (k // 8) * sbo
    a = a.astype(np.int64)
    if sw:
        mask = (sw // 16) - 1
        a = a ^ ((((a - 128 * c["base"]) >> 7) & mask) << 4)
    return a if info["operand"] == "A" else a.T


def operand_matrices(p):
    """A [T,64,K], B [T,K,N], C [T,64,N] codes a numerics probe fed the instruction."""
    k, inp = p.kernel, p.inputs
    T, n, K = inp["img"].shape[0], k.n, k.k
    r, c = wp.a_map(k.atype)
    E = r.shape[1]
    bits = wp.EBITS[k.atype]
    per = 32 // bits
    regs = inp["a"].astype(np.uint64)
    el = ((regs[:, :, :, None] >> (np.arange(per, dtype=np.uint64) * np.uint64(bits)))
          & np.uint64((1 << bits) - 1)).reshape(T, 128, E)
    A = np.zeros((T, 64, K), np.uint64)
    A[:, r, c] = el
    bb = wp.EBITS[k.btype]
    byte, bit, _, _ = wp.kmajor_offsets(n, K, bb)
    img = inp["img"].astype(np.uint64)
    if bb >= 8:
        v = np.zeros((T, n, K), np.uint64)
        for j in range(bb // 8):
            v |= img[:, byte + j] << np.uint64(8 * j)
    else:
        v = (img[:, byte] >> bit.astype(np.uint64)) & np.uint64(1)
    C = wp.unpack_d(k.dtype, n, inp["c"].astype(np.uint32)).astype(np.uint64)
    return A, np.swapaxes(v, 1, 2), C


def evaluated(p, ctas=None) -> np.ndarray:
    """The spec's D (sm_90 model, M = 64) for a numerics probe: imm-scale -1 flips the input's
    sign bit, scale-d = 0 reads c as +0."""
    k = p.kernel
    A, B, C = operand_matrices(p)
    fl = p.inputs["flags"].astype(bool)
    if ctas is not None:
        A, B, C, fl = A[:ctas], B[:ctas], C[:ctas], fl[:ctas]
    if k.scale_a < 0:
        A = A ^ np.uint64(SIGN[k.atype])
    if k.scale_b < 0:
        B = B ^ np.uint64(SIGN[k.btype])
    C = np.where(fl[:, None, None], C, np.uint64(0))
    cdt = np.uint16 if k.dtype == "f16" else np.uint32
    ab = np.uint32 if k.atype == "tf32" else np.uint8 if wp.EBITS[k.atype] <= 8 else np.uint16
    return mma_matrices(A.astype(ab), B.astype(ab), C.astype(cdt), atype=k.atype, btype=k.btype, ctype=k.dtype,
                        dtype=k.dtype, arch="sm_90", satfinite=k.satfinite, bitop="and" if k.atype == "b1" else None,
                        shape=(64, k.n, k.k))


def _a_regs_elements(k, a_regs, K):
    """A registers [T,128,4] -> the matrix [T, 64, K] they hold under the spec's A fragment."""
    r, c = wp.a_map(k.atype)
    E = r.shape[1]
    bits = wp.EBITS[k.atype]
    per = 32 // bits
    regs = a_regs.astype(np.uint64)
    T = regs.shape[0]
    el = ((regs[:, :, :, None] >> (np.arange(per, dtype=np.uint64) * np.uint64(bits)))
          & np.uint64((1 << bits) - 1)).reshape(T, 128, E)
    A = np.zeros((T, 64, K), np.uint64)
    A[:, r, c] = el
    return A


def sparse_expected(p, ctas=None) -> np.ndarray:
    """The spec's D for a sparse probe: per warp, the mma.sp twin's stored terms (values and
    logical k) times B[k], summed by the sm_90 model over the stored order."""
    from formal.numerics import dot_terms

    k, inp = p.kernel, p.inputs
    sl = slice(None) if ctas is None else slice(0, ctas)
    a, e = inp["a"][sl], inp["e"][sl]
    vals, kidx = wp.sparse_terms(k.dtype, k.atype, k.btype, a, e, k.sel)        # [T,64,K/2]
    T, n, K = a.shape[0], k.n, k.k
    bb = wp.EBITS[k.btype]
    byte, _, _, _ = wp.kmajor_offsets(n, K, bb)
    img = inp["img"][sl].astype(np.uint64)
    v = np.zeros((T, n, K), np.uint64)
    for j in range(bb // 8):
        v |= img[:, byte + j] << np.uint64(8 * j)
    B = np.swapaxes(v, 1, 2)                                                       # [T, K, N]
    bt = B[np.arange(T)[:, None, None], kidx]                                      # [T, 64, K/2, N]
    at = np.broadcast_to(vals[..., None], bt.shape)
    C = wp.unpack_d(k.dtype, n, inp["c"][sl].astype(np.uint32)).astype(np.uint64)
    fl = inp["flags"][sl].astype(bool)
    C = np.where(fl[:, None, None], C, np.uint64(0))
    cdt = np.uint16 if k.dtype == "f16" else np.uint32
    ab = np.uint32 if k.atype == "tf32" else np.uint8 if wp.EBITS[k.atype] <= 8 else np.uint16
    return dot_terms(np.moveaxis(at, 3, 2).astype(ab), np.moveaxis(bt, 3, 2).astype(ab), C.astype(cdt),
                     atype=k.atype, btype=k.btype, ctype=k.dtype, dtype=k.dtype, arch="sm_90", satfinite=k.satfinite,
                     shape=(64, n, K), sparse=True)


def observed_d(p, d) -> np.ndarray:
    D = wp.unpack_d(p.kernel.dtype, p.kernel.n, d)
    return D.astype(np.uint16) if p.kernel.dtype == "f16" else D


def check_all(probes, outs, numerics_ctas=None) -> dict:
    """Verdicts per probe family: counts of probes / elements that agree with the spec."""
    v = {"d_fragments": [0, 0], "a_fragments": [0, 0], "descriptor_readouts": [0, 0], "numerics_outputs": {},
         "disagreeing": []}
    for p in probes:
        if p.key not in outs:
            continue
        d = outs[p.key]
        kind = p.info["kind"]
        if kind == "dlayout":
            r, c = wp.observed_d_coords(p, d)
            R, C = spec_d(p.info["n"], p.info["dtype"])
            ok = np.array_equal(r, np.broadcast_to(R, r.shape)) and np.array_equal(c, np.broadcast_to(C, c.shape))
            v["d_fragments"][0] += ok
            v["d_fragments"][1] += 1
        elif kind == "alayout":
            ok = np.array_equal(wp.observed_a_index(p, d), spec_a_index(p.info["atype"], p.info["K"]))
            v["a_fragments"][0] += ok
            v["a_fragments"][1] += 1
        elif kind in ("sparse_layout", "sparse_random"):
            got = observed_d(p, d if numerics_ctas is None else d[:numerics_ctas])
            want = sparse_expected(p, None if kind == "sparse_layout" else numerics_ctas)
            ok = np.array_equal(got, want)
            e = v.setdefault("sparse_outputs", {}).setdefault(kind, [0, 0])
            e[0] += int((got == want).sum())
            e[1] += int(got.size)
        elif kind == "readout":
            got, want = wp.observed_readout(p, d), smem_address(p.info)
            inside = want + max(1, p.info["bits"] // 8) <= 16384       # the probe's address-coded region
            ok = np.array_equal(got[inside], want[inside])
            v["descriptor_readouts"][0] += ok
            v["descriptor_readouts"][1] += 1
        else:
            k = p.kernel
            path = ("f8" if k.atype in ("e4m3", "e5m2") else k.atype) + "." + k.dtype
            got = observed_d(p, d if numerics_ctas is None else d[:numerics_ctas])
            want = evaluated(p, numerics_ctas)
            ok = np.array_equal(got, want)
            e = v["numerics_outputs"].setdefault(path, [0, 0])
            e[0] += int((got == want).sum())
            e[1] += int(got.size)
        if not ok and len(v["disagreeing"]) < 20:
            v["disagreeing"].append(p.key)
    return v
