"""Inputs and a float64 reference for kernel specs beyond plain dense buffers.

``corpus_inputs(spec, seed)`` is :func:`formal.kernel.spec.make_inputs` plus the buffers whose
spec asks for generated contents (``generate = "sparse_meta_2of4"``: legal 2:4 metadata nibbles).

``contract_reference(spec, inputs, outputs)`` evaluates every contract in float64 from the
raw encodings and returns, per output buffer, the largest error relative to the magnitude
of its dot product (sum |a*b| + |c|): a sanity check of a run (GPU or interpreter), not
a bit-exact one.  A sparse lhs (``sparse = "2:4"``, ``metadata = "E"``) is decompressed
first; a contract operand that is another contract's output (``chained``) is read from
the outputs, as the kernel stores it.
"""

from __future__ import annotations

import numpy as np

from ..numerics.formats import get_format, int_values, to_float64
from .spec import KernelSpec, SpecError, make_inputs, raw_dtype

# two distinct positions idx0 < idx1 of four, as nibble idx0 | idx1 << 2
_META_2OF4 = np.array([0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110], dtype=np.uint8)


def corpus_inputs(spec: KernelSpec, seed: int = 0) -> dict[str, np.ndarray]:
    out = make_inputs(spec, seed)
    for i, b in enumerate(spec.buffers):
        gen = b.extra.get("generate")
        if gen is None:
            continue
        if gen != "sparse_meta_2of4":
            raise SpecError(f"{spec.source}: buffer {b.name!r}: unknown generate = {gen!r}")
        rng = np.random.default_rng([seed, i, 24])
        out[b.name] = _META_2OF4[rng.integers(0, len(_META_2OF4), size=b.shape)].astype(raw_dtype(b.type))
    return out


def decode(raw: np.ndarray, type_name: str) -> np.ndarray:
    fmt = get_format(type_name)
    if fmt.is_float:
        return np.asarray(to_float64(raw, fmt), dtype=np.float64).reshape(raw.shape)
    return np.asarray(int_values(raw, fmt), dtype=np.float64).reshape(raw.shape)


def decompress_2of4(values: np.ndarray, meta: np.ndarray) -> np.ndarray:
    """(M, K/2) stored values + (M, K/4) nibbles -> the logical (M, K) matrix."""
    m, half = values.shape
    dense = np.zeros((m, 2 * half), dtype=values.dtype)
    rows = np.arange(m)[:, None]
    for j in range(2):
        col = 4 * np.arange(half // 2)[None, :] + ((meta.astype(np.int64) >> (2 * j)) & 3)
        dense[rows, col] = values[:, j::2]
    return dense


def contract_reference(spec: KernelSpec, inputs: dict, outputs: dict) -> dict[str, float]:
    errors = {}
    chained = set(spec.extra.get("chained", []))
    for c in spec.contracts:
        def operand(name: str) -> np.ndarray:
            b = spec.buffer(name)
            raw = outputs[name] if name in chained else inputs[name]
            v = decode(np.asarray(raw), b.type)
            if b.extra.get("sparse") == "2:4":
                meta = spec.buffer(b.extra["metadata"])
                v = decompress_2of4(v, np.asarray(inputs[meta.name]))
            return v
        lhs, rhs = operand(c.lhs), operand(c.rhs)
        lhs = np.swapaxes(lhs, -1, -2) if c.lhs_t else lhs
        rhs = np.swapaxes(rhs, -1, -2) if c.rhs_t else rhs
        ref = lhs @ rhs
        mag = np.abs(lhs) @ np.abs(rhs)
        if c.addend:
            z = decode(np.asarray(inputs[c.addend]), spec.buffer(c.addend).type)
            ref, mag = ref + z, mag + np.abs(z)
        got = decode(np.asarray(outputs[c.out]), spec.buffer(c.out).type)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.abs(got - ref) / np.maximum(mag, 1e-30)
        errors[c.out] = float(np.nanmax(np.where(np.isfinite(got), rel, np.inf)))
    return errors
