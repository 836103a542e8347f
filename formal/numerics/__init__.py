"""Arithmetic core of the evaluator: exact codecs and per-architecture MMA models.

Public API
----------
Codecs (:mod:`.formats`)
    ``get_format(name)``, ``format_table()``, ``decode(codes, fmt) -> Decoded``,
    ``encode(neg, mag, lsb, fmt, mode, ...)``, ``encode_int``, ``convert``,
    ``from_float64``, ``to_float64``.
Matrix-level arithmetic (:mod:`.engine`)
    ``dot_terms(a, b, c, *, atype, btype, ctype, dtype, arch="sm_90", ...)``,
    ``mma_matrices(A, B, C, **kw)``, ``fma_f64``.
Models (:mod:`.archs`, :mod:`.sm90`, :mod:`.params`)
    ``MODELS`` (name -> ArchModel with ``.name``, ``.evidence``, ``.sources``, ``.paths``),
    ``get_model``; parameter records ``BlockFMA``, ``Emulated``, ``FmaChain``, ``FmaPipe``,
    ``Narrowed``, ``IntegerDot``, ``Popc``, ``ExactRound``; ``SOURCES`` (citation keys).
Scalar reference (:mod:`.reference`)
    ``dot_scalar``, ``mma_scalar`` (Fraction-based, one element at a time).
Probes (:mod:`.probes`)
    ``PROBES``: hardware experiments that decide between hypotheses.
"""
from .archs import ALIASES, MODELS, get_model
from .engine import add_rounded, dot_terms, fma_f64, mma_matrices
from .formats import (Decoded, Format, convert, decode, encode, encode_int, format_table, from_float64,
                      get_format, int_values, to_float64)
from .params import (SOURCES, ArchModel, BlockFMA, Emulated, ExactRound, FmaChain, FmaPipe, IntegerDot, Narrowed,
                     Popc, UnsupportedPath)
from .reference import dot_scalar, mma_scalar
from .xp import DeviceUnavailable

__all__ = [
    "dot_terms", "mma_matrices", "fma_f64", "add_rounded", "MODELS", "ALIASES", "get_model",
    "ArchModel", "BlockFMA", "Emulated", "FmaChain", "FmaPipe", "IntegerDot", "Narrowed", "Popc", "ExactRound", "SOURCES",
    "UnsupportedPath", "Format", "Decoded", "format_table", "get_format", "decode", "encode", "encode_int",
    "convert", "from_float64", "to_float64", "int_values", "dot_scalar", "mma_scalar", "DeviceUnavailable",
]
