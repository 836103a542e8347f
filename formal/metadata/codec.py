"""One chunk: nibble <-> positions of its stored elements, on Python ints, numpy and Z3.

The same code runs on three kinds of values, so that what Z3 proves about the encoder
and decoder is the code that ``compress``/``decompress`` execute, not a re-statement:

* ``encode_nibble(fm, nz, order)`` picks the nibble for a chunk whose non-zero columns
  are the bits of ``nz``: the first candidate (legal nibbles in a fixed preference
  order: lowest columns first) whose stored columns cover ``nz``.  A chunk with fewer
  non-zeros than stored slots is padded with the lowest zero columns.
* ``place(fm, nib, vals, mode)`` puts stored values ``vals[j]`` at their logical columns
  and returns the ``width`` column values of the chunk.  ``mode`` is the reading:
  ``literal`` (the spec: stored j -> offset(j, nib); with a repeated index, the sum),
  ``last`` (a later stored element overwrites an earlier one), ``sorted`` (stored j ->
  j-th smallest index), ``idx0``/``idx1`` (tf32: decode one index only).  Only
  ``literal`` is PTX semantics, and only for legal nibbles; the others are readings of
  undefined behaviour compared by :mod:`formal.metadata.witness`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .spec import FormMeta, ORDERED


def _is_z3(*xs) -> bool:
    try:
        import z3
    except ModuleNotFoundError:  # pragma: no cover
        return False
    return any(isinstance(x, z3.ExprRef) for x in xs)


def ite(c, a, b):
    """if-then-else on Python values, numpy arrays or Z3 terms."""
    if _is_z3(c, a, b):
        import z3

        return z3.If(c, a, b)
    if isinstance(c, np.ndarray) or isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.where(c, a, b)
    return a if c else b


def offset(fm: FormMeta, j: int, nib):
    """Column (inside the chunk) of stored element j; works on ints, arrays and Z3 terms."""
    if _is_z3(nib):
        return fm.gran.offset.z3({"j": j, "nib": nib}, width=nib.size())
    return fm.gran.offset.eval({"j": j, "nib": nib})


def support_mask(fm: FormMeta, nib: int) -> int:
    """Bit p set when a stored element of nibble ``nib`` lands on column p."""
    m = 0
    for p in fm.offsets(nib):
        m |= 1 << p
    return m


def ascending(fm: FormMeta, nib: int) -> bool:
    offs = fm.offsets(nib)
    return len(offs) == 1 or offs[0] < offs[-1]


def candidates(fm: FormMeta, order: str = "ascending") -> tuple[int, ...]:
    """Legal nibbles for ``order``, most preferred first (lowest columns first).

    ``ascending``: stored elements in increasing column order (the only order that
    ::ordered_metadata allows, and the default); ``descending``: the reversed pairs that
    plain ``.sp`` also accepts.
    """
    if order not in ("ascending", "descending"):
        raise ValueError(f"order must be 'ascending' or 'descending', not {order!r}")
    if order == "descending":
        if fm.variant == ORDERED:
            raise ValueError("::ordered_metadata requires indices increasing from the LSB; "
                             "descending order is plain .sp only")
        if fm.gran.stored == 1 or fm.gran.id == "1:2":
            raise ValueError(f"granularity {fm.gran.id} has one index pair per element; there is no reversed order")
    key = ("candidates", order)
    if key not in fm._cache:
        want = (lambda v: ascending(fm, v)) if order == "ascending" else (lambda v: not ascending(fm, v))
        cands = [v for v in fm.legal_nibbles if want(v)]
        fm._cache[key] = tuple(sorted(cands, key=lambda v: (sorted(fm.offsets(v)), v)))
    return fm._cache[key]


def encode_nibble(fm: FormMeta, nz, order: str = "ascending", invalid: int = 0):
    """The nibble for a chunk with non-zero-column mask ``nz`` (``invalid`` if none fits)."""
    full = (1 << fm.gran.width) - 1
    const = (lambda v: v)
    if _is_z3(nz):
        import z3

        const = (lambda v: z3.BitVecVal(v, nz.size()))
    out: Any = const(invalid)
    for c in reversed(candidates(fm, order)):
        fits = (nz & (full & ~support_mask(fm, c))) == 0
        out = ite(fits, const(c), out)
    return out


def gather(fm: FormMeta, nib, cols: list):
    """Stored values of a chunk: ``cols[offset(j, nib)]`` for j = 0 .. stored-1."""
    out = []
    for j in range(fm.gran.stored):
        off = offset(fm, j, nib)
        v: Any = cols[0] * 0 if not _is_z3(cols[0]) else cols[0] - cols[0]
        for p in range(fm.gran.width - 1, -1, -1):
            v = ite(off == p, cols[p], v)
        out.append(v)
    return out


def _shr(x, k: int):
    if _is_z3(x):
        import z3

        return z3.LShR(x, k)
    return x >> k


def _ule(a, b):
    if _is_z3(a, b):
        import z3

        return z3.ULE(a, b)
    return a <= b


def _swap(nib):
    return ((nib & 3) << 2) | _shr(nib, 2)


def place(fm: FormMeta, nib, vals: list, mode: str = "literal") -> list:
    """The chunk's ``width`` column values when stored values ``vals`` meet nibble ``nib``."""
    zero = vals[0] - vals[0]
    if mode == "sum":                   # the literal placement: collisions add up
        mode = "literal"
    if mode == "sorted":
        nib = ite(_ule(nib & 3, _shr(nib, 2)), nib, _swap(nib))
        mode = "literal"
    if mode in ("idx0", "idx1"):
        if fm.gran.stored != 1:
            raise ValueError(f"mode {mode} is for 1:2 (tf32) chunks")
        idx = (nib & 3) if mode == "idx0" else _shr(nib, 2)
        offs = [_shr(idx, 1)]
        mode = "literal"
    else:
        offs = [offset(fm, j, nib) for j in range(fm.gran.stored)]
    cols = []
    for p in range(fm.gran.width):
        if mode == "literal":           # collisions add up (the 'sum' reading)
            v = zero
            for j, off in enumerate(offs):
                v = v + ite(off == p, vals[j], zero)
        elif mode == "last":            # a later stored element overwrites an earlier one
            v = zero
            for j, off in enumerate(offs):
                v = ite(off == p, vals[j], v)
        else:
            raise ValueError(f"unknown placement mode {mode!r}")
        cols.append(v)
    return cols


def representable(fm: FormMeta, nz):
    """Granularity predicate on a non-zero mask (ints, arrays or Z3 terms)."""
    if _is_z3(nz):
        import z3

        r = fm.gran.representable.z3({"nz": nz}, width=nz.size())
        return r if isinstance(r, z3.BoolRef) else r != 0
    return fm.gran.representable.eval({"nz": nz})
