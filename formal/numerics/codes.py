"""Raw encodings in numpy arrays: the one rule for what an array of ``bits``-wide codes may hold.

Used wherever user arrays of element encodings or register bits enter the engine
(``formal.evaluate``, ``formal.metadata.compress``), so the rule is the same everywhere:

* the array holds integers (no bool, float or object arrays);
* an unsigned array's values lie in ``[0, 2**bits)``;
* a signed array (``int8`` .. ``int64``, the natural dtypes for s8 and f16 data) is read
  as bit patterns of the element width: values in ``[-2**(bits-1), 2**bits)`` are taken
  modulo ``2**bits`` (``-1`` is all ones); anything else is an error, never truncated.

Valid unsigned input is returned as is (no copy), so the check costs one reduction.

    >>> import numpy as np
    >>> as_codes(np.array([-1, 300], np.int16), 16, "A").tolist()
    [65535, 300]
    >>> as_codes(np.array([300], np.int16), 8, "A")
    Traceback (most recent call last):
    ...
    formal.catalog.BadArgument: A holds 300, outside the 8-bit encodings (0..255, or -128..-1 as two's complement)
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..catalog import BadArgument


def _unsigned_for(bits: int) -> type:
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64


def as_codes(x: Any, bits: int, name: str, error: type[Exception] = BadArgument) -> np.ndarray:
    """``x`` as an unsigned array of ``bits``-bit codes, or ``error`` naming ``name``."""
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind not in "ui":
        raise error(f"{name} must hold raw encodings as integers, got dtype {arr.dtype}")
    width = arr.dtype.itemsize * 8
    if kind == "u":
        if width > bits and arr.size and int(arr.max()) >> bits:
            raise error(f"{name} holds {int(arr.max())}, outside the {bits}-bit encodings (0..{(1 << bits) - 1})")
        return arr
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -(1 << (bits - 1)) or hi >= 1 << bits:
            bad = lo if lo < -(1 << (bits - 1)) else hi
            raise error(f"{name} holds {bad}, outside the {bits}-bit encodings (0..{(1 << bits) - 1}, "
                        f"or {-(1 << (bits - 1))}..-1 as two's complement)")
    out = arr.astype(np.int64).view(np.uint64)
    if bits < 64:
        out = out & np.uint64((1 << bits) - 1)
    return out.astype(_unsigned_for(bits), copy=False)


def as_int(x: Any, name: str, error: type[Exception] = BadArgument) -> int:
    """A Python int from an integer scalar (not bool, float or a string), else ``error``."""
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise error(f"{name} must be an integer, got {type(x).__name__} {x!r}"[:200])
    return int(x)
