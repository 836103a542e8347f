"""ptx-formal: a formal specification of PTX warp-level matrix instructions.

The PTX content lives in ``specs/*.toml``; this package is the engine.  Entry points:

* catalog (``formal.catalog``): :func:`parse`, :func:`legality`, :func:`forms`
* layouts (``formal.layout``): :func:`fragment`, :func:`pack`, :func:`unpack`,
  :func:`audit_layout` (in ``formal.prove``, with the proofs)
* sparse metadata (``formal.metadata``): :func:`compress`, :func:`decompress`
* evaluation (``formal.evaluate``): :func:`evaluate`, :func:`evaluate_matrices`
* vectors and model audits (``formal.vectors``; ``formal.audit`` is ``formal.vectors.audit``): :func:`audit`
* layout transformations (``formal.transform``): :func:`prove_transform`
* wmma memory semantics (``formal.wmma``)

Heavy modules (z3, the numerics) load on first use, so ``import formal`` stays cheap.
"""

from .catalog import (  # noqa: F401
    BadArgument,
    Form,
    Legality,
    MalformedOpcode,
    Operand,
    Reason,
    forms,
    legality,
    parse,
    parse_instruction,
)

__version__ = "0.1.0"

_LAZY = {
    "fragment": ("formal.layout", "fragment"),
    "pack": ("formal.layout", "pack"),
    "unpack": ("formal.layout", "unpack"),
    "Layout": ("formal.layout", "Layout"),
    "LayoutError": ("formal.layout", "LayoutError"),
    "audit_layout": ("formal.prove", "audit_layout"),
    "evaluate": ("formal.evaluate", "evaluate"),
    "evaluate_matrices": ("formal.evaluate", "evaluate_matrices"),
    "evaluate_gemm": ("formal.evaluate", "evaluate_gemm"),
    "EvalError": ("formal.evaluate", "EvalError"),
    "compress": ("formal.metadata", "compress"),
    "decompress": ("formal.metadata", "decompress"),
    "UndefinedBehavior": ("formal.metadata", "UndefinedBehavior"),
    "prove_transform": ("formal.transform", "prove_transform"),
    "audit": ("formal.vectors.audit", "audit"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = importlib.import_module(mod)
        if mod.rsplit(".", 1)[1] != name:   # formal.evaluate / formal.audit are callable modules
            value = getattr(value, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'formal' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
