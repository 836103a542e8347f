"""Sparse metadata of ``mma.sp`` / ``mma.sp::ordered_metadata`` (PTX ISA 9.7.14.6).

Every fact comes from ``specs/metadata.toml`` (granularity, legal nibbles, which lanes'
``e`` are read and which bits hold which (row, chunk), which chunk each stored A element
belongs to); this package is the engine.

=====================  ===========================================================
``meta(form)``         the compiled spec of one form (:mod:`.spec`)
``check_word``         is one lane's 32-bit e legal? which chunk/bits/rule if not
``compress``           dense structured-sparse A -> (a_regs, e_regs); ``NotSparse``
``decompress``         (a_regs, e_regs) -> dense A; ``InvalidMetadata``
``gather_terms``       per output row: stored A elements and their logical k
``sparse_terms``       the same from a dense A (matrix level)
``UndefinedBehavior``  base of ``InvalidMetadata`` / ``UndefinedSelector`` (``.witness``)
``obligations``        Z3 proofs per form/selector (:mod:`.proofs`)
``scan``               brute-force count over all 2^32 words (:mod:`.scan`)
``witness``            solver-derived minimal counterexamples (:mod:`.witness`)
=====================  ===========================================================

Worked example (``mma.sp::ordered_metadata.m16n8k16.f32.f16.f16.f32``, selector 0): lane
``4g`` holds the metadata of its group; its nibble n (bits [4n+3:4n]) covers row
``g + 8*(n >> 2)``, columns ``4*(n & 3) .. +3``.  A row-0 chunk with non-zeros in
columns 1 and 3 is nibble ``0b1101`` (idx0 = 1 for the first stored element, idx1 = 3).
"""

from .check import CheckResult, check_word
from .scan import ScanResult, scan
from .spec import ORDERED, FormMeta, SpecError, meta
from .storage import (InvalidMetadata, MetadataWitness, NotSparse, SelectorWitness, UndefinedBehavior,
                      UndefinedSelector, compress, decompress, gather_terms, is_sparse, sparse_terms)

__all__ = [
    "CheckResult", "FormMeta", "InvalidMetadata", "MetadataWitness", "NotSparse", "ORDERED", "Result", "ScanResult",
    "SelectorWitness", "SpecError",
    "UndefinedBehavior", "UndefinedSelector", "all_obligations", "check_word", "compress", "decompress",
    "gather_terms", "is_sparse", "meta", "obligations", "scan", "sparse_terms",
]

_LAZY = ("Result", "all_obligations", "obligations")     # the Z3 proofs load on first use


def __getattr__(name: str):
    if name in _LAZY:
        from . import proofs

        return getattr(proofs, name)
    raise AttributeError(f"module 'formal.metadata' has no attribute {name!r}")


try:                 # ptx-formal prove: the metadata.* obligation families
    from .registry import register as _register
except ImportError:  # pragma: no cover - formal.prove unavailable: the package still works
    _register = None
if _register is not None:
    _register()
