"""Register-level random inputs for hardware checks, in named regimes.

Elements are drawn independently, so inputs are generated directly in register bit
positions (element ``e`` of a register at bits ``[e*elem_bits + shift, +value_bits)``)
without any layout: the layout is the evaluator's business, not the generator's.

Regimes (the issue's list):

``bits``     any bit pattern (NaN, Inf, subnormals, zeros at their natural frequency)
``normal``   normal numbers near one (|x| in [1/4, 8)), random signs
``finite``   the whole finite range, subnormals and zeros included (no NaN/Inf)
``align``    large accumulators against small products (alignment, truncation)
``extreme``  integer extremes: elements at their bounds, accumulators near +-2^31
``special``  mostly ``normal`` with a sprinkling of NaN, +-Inf, +-0, subnormals, max
"""

from __future__ import annotations

import numpy as np

from ..catalog import Form, Operand
from ..specdata import load_spec

REGIMES = ("bits", "normal", "finite", "align", "extreme", "special", "tiny")


def _fmt(t: str) -> dict:
    return load_spec("formats")[t]


def _float_fields(t: str) -> tuple[int, int, int, int]:
    f = _fmt(t)
    bits = int(f["bits"])
    return bits, int(f["exponent"]), int(f["mantissa"]), int(f["bias"])


def _compose(sign, exp, man, t: str) -> np.ndarray:
    bits, eb, mb, _ = _float_fields(t)
    if t == "tf32":  # a tf32 lives in an f32 container: exponent/mantissa as f32
        eb, mb = 8, 23
    v = (sign.astype(np.uint64) << np.uint64(eb + mb)) | (exp.astype(np.uint64) << np.uint64(mb)) | man.astype(np.uint64)
    return v


def _mant_bits(t: str) -> int:
    return 23 if t == "tf32" else _float_fields(t)[2]


def _rand_float(rng: np.random.Generator, t: str, n: int, regime: str, role: str) -> np.ndarray:
    """n encodings of float type t (uint64 values)."""
    bits, eb, mb, bias = _float_fields(t)
    if t == "tf32":
        bits = 32
    mb_c = _mant_bits(t)
    emax_field = (1 << eb) - 1
    has_inf = bool(_fmt(t).get("inf", False))
    signed = bool(_fmt(t).get("signed", True))
    sign = rng.integers(0, 2, n) if signed else np.zeros(n, np.int64)
    man = rng.integers(0, 1 << mb_c, n, dtype=np.uint64)
    if regime == "bits":
        return rng.integers(0, 1 << bits, n, dtype=np.uint64)
    # largest finite exponent field
    top = emax_field - 1 if (has_inf or _fmt(t).get("nan") == "ieee") else emax_field
    if regime == "normal":
        exp = rng.integers(max(1, bias - 2), min(top, bias + 3) + 1, n)
    elif regime == "finite":
        exp = rng.integers(0, top + 1, n)
    elif regime == "align":
        # accumulators big, multiplicands small: products sit far below c
        if role in ("c",):
            lo, hi = bias + (top - bias) // 2, top
        else:
            lo, hi = max(1, bias - (bias // 2)), bias
        exp = rng.integers(lo, hi + 1, n)
    elif regime == "special":
        exp = rng.integers(max(1, bias - 2), min(top, bias + 3) + 1, n)
        pick = rng.random(n)
        v = _compose(sign, exp, man, t)
        specials = [0, 1, (top << mb_c) | ((1 << mb_c) - 1)]        # +0, min subnormal, max finite
        if has_inf:
            specials.append(emax_field << mb_c)                      # +Inf
        nan = _fmt(t).get("nan")
        if nan == "ieee":
            specials += [(emax_field << mb_c) | (1 << (mb_c - 1)), (emax_field << mb_c) | 1]
        elif isinstance(nan, list) and nan:
            specials += [x & ((1 << (bits - 1)) - 1) for x in nan]
        sp = np.array(specials, dtype=np.uint64)[rng.integers(0, len(specials), n)]
        sp |= (sign.astype(np.uint64) << np.uint64(bits - 1)) if signed else np.uint64(0)
        return np.where(pick < 0.06, sp, v)
    elif regime == "tiny":
        # the lowest binades, subnormals included: products and sums underflow, results are
        # subnormal (where float32 subnormal handling shows, e.g. a flush-to-zero device)
        exp = rng.integers(0, max(2, bias // 5) + 1, n)
    else:  # extreme for floats: the largest magnitudes
        exp = rng.integers(max(1, top - 2), top + 1, n)
    v = _compose(sign, exp, man, t)
    nan = _fmt(t).get("nan")
    if isinstance(nan, list) and nan:  # e4m3-style NaN encodings inside the top binade: step down
        mag = v & np.uint64((1 << (bits - 1)) - 1)
        for x in nan:
            v = np.where(mag == np.uint64(x & ((1 << (bits - 1)) - 1)), v - np.uint64(1), v)
    return v


def _rand_int(rng: np.random.Generator, t: str, n: int, regime: str, role: str) -> np.ndarray:
    f = _fmt(t)
    bits = int(f["bits"])
    signed = bool(f.get("signed", False))
    mask = (1 << bits) - 1
    if regime == "extreme":
        if t == "s32":
            # accumulators within a few products of the int32 bounds
            near = rng.integers(0, 1 << 16, n, dtype=np.int64)
            v = np.where(rng.random(n) < 0.5, (1 << 31) - 1 - near, -(1 << 31) + near)
            return (v.astype(np.int64) & mask).astype(np.uint64)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, mask)
        v = np.where(rng.random(n) < 0.5, lo, hi).astype(np.int64)
        v = np.where(rng.random(n) < 0.15, rng.integers(lo, hi + 1, n), v)
        return (v & mask).astype(np.uint64)
    return rng.integers(0, 1 << bits, n, dtype=np.uint64)


def random_elements(rng: np.random.Generator, t: str, n: int, regime: str, role: str = "a") -> np.ndarray:
    cls = _fmt(t)["class"]
    if cls == "float":
        return _rand_float(rng, t, n, regime, role)
    return _rand_int(rng, t, n, regime, role)


def random_operand(rng: np.random.Generator, op: Operand, T: int, regime: str, role: str) -> np.ndarray:
    """[T, 32, count] registers (uint32, or uint64 for 64-bit registers)."""
    n = T * 32 * op.count * op.elems_per_reg
    el = random_elements(rng, op.etype, n, regime, role).reshape(T, 32, op.count, op.elems_per_reg)
    vbits = int(_fmt(op.etype)["bits"]) if op.etype != "tf32" else 32
    el &= np.uint64((1 << vbits) - 1)
    sh = (np.arange(op.elems_per_reg, dtype=np.uint64) * np.uint64(op.elem_bits) + np.uint64(op.shift))
    regs = np.bitwise_or.reduce(el << sh, axis=-1)
    return regs.astype(np.uint64 if op.reg_bits == 64 else np.uint32)


def random_metadata(rng: np.random.Generator, form: Form, T: int) -> np.ndarray:
    """[T, 32] uint32 metadata where every nibble of every lane is a legal index pair
    (the legal values come from specs/metadata.toml via formal.metadata)."""
    from ..metadata import meta

    # canonical order: increasing index pairs (0,1),(0,2),...,(2,3), then the reversed pairs
    pool = sorted(meta(form).legal_nibbles,
                  key=lambda v: ((v & 3) > (v >> 2), min(v & 3, v >> 2), max(v & 3, v >> 2)))
    nib = np.array(pool, dtype=np.uint32)[rng.integers(0, len(pool), (T, 32, 8))]
    sh = (np.arange(8, dtype=np.uint32) * 4)
    return np.bitwise_or.reduce(nib << sh, axis=-1).astype(np.uint32)


def random_inputs(form: Form, T: int, regime: str, seed: int) -> dict[str, np.ndarray]:
    """Inputs for one batch of T warps: {'a','b','c'[, 'e']} register arrays."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; known: {', '.join(REGIMES)}")
    rng = np.random.Generator(np.random.PCG64(seed))
    ops = form.operands
    out = {name: random_operand(rng, ops[name], T, regime, name) for name in ("a", "b", "c")}
    if form.is_sparse:
        out["e"] = random_metadata(rng, form, T)
    return out
