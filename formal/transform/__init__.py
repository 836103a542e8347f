"""Proving layout transformations: from memory, and from one fragment to another.

The question a compiler engineer asks: *does my sequence of moves deliver exactly the
fragment this mma expects?*  :func:`prove_transform` answers it::

    >>> from formal.transform import prove_transform, tile, fragment
    >>> r = prove_transform(
    ...     tile(16, 16, 16, "row * 16 + col"),                       # shared f16 tile
    ...     ["ldmatrix.sync.aligned.m8n8.x4.shared.b16 {a0, a1, a2, a3}, [p];"],
    ...     fragment("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "a", ["a0", "a1", "a2", "a3"]),
    ...     values={"p": "2 * ((lane % 16) * 16 + (lane // 16) * 8)"})
    >>> r.status
    'proved'

A result is ``proved``; ``refuted`` with the first (lane, register, element) that holds the
wrong thing, what it holds, and the *path* that value took through the steps; or
``unknown`` (solver timeout -- never reported as proved).  Every verdict is reached twice,
by Z3 and by enumeration, and the two must agree.

Pieces:

* :mod:`formal.algebra` -- maps between named spaces (compose, invert, restrict, product,
  equality), the layout algebra everything here is built on;
* ``specs/movement.toml`` -- ldmatrix / stmatrix / movmatrix / shfl.sync / prmt / cvt
  packing / mov / ld.shared / st.shared semantics as formulas, with PTX sections;
* :mod:`formal.transform.recipe` -- the recipe file format (``recipes/README.md``);
* :mod:`formal.transform.triton` and :mod:`formal.transform.cute` -- Triton linear layouts and CuTe
  thread-value layouts in and out.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..expr import Formula
from .engine import DEFAULT_TIMEOUT_MS, Program, TransformResult, prove_program
from .recipe import Recipe, endpoint, library, library_dir, load, parse_json, parse_text  # noqa: F401
from .spaces import LayoutMap, MemLayout, RegLayout, TransformError, fragment_endpoint
from .steps import Step, make_step
from . import smem_layouts as _smem_layouts

_smem_layouts.register()      # prove --all: the ISA's examples and the peers' smem layouts

__all__ = ["prove_transform", "tile", "fragment", "registers", "TransformResult", "TransformError", "Recipe",
           "load", "library", "RegLayout", "MemLayout", "Program"]


def tile(rows: int, cols: int, bits: int, offset: str = "row * cols + col", base: int = 0, label: str = "") -> MemLayout:
    """A shared-memory tile: element (row, col) at byte ``base + offset(row, col) * bits / 8``.
    ``offset`` is a formula over ``row``, ``col`` (``rows`` and ``cols`` are bound)."""
    return endpoint({"kind": "tile", "rows": rows, "cols": cols, "bits": bits, "offset": offset, "base": base,
                     "label": label})


def fragment(opcode: str, operand: str, regs: Sequence[str] | None = None, row_offset: int = 0, col_offset: int = 0,
             **params) -> RegLayout:
    """The spec fragment of an mma / mma.sp operand held in registers ``regs``."""
    return fragment_endpoint(opcode, operand, regs, row_offset, col_offset, **params)


def registers(regs: Sequence[str], rows: int, cols: int, bits: int, row: str, col: str,
              let: Mapping[str, str] | None = None, label: str = "") -> RegLayout:
    """A user layout: ``row``/``col`` formulas over lane, reg, elem (and i = reg * epr + elem)."""
    return endpoint({"kind": "registers", "regs": list(regs), "rows": rows, "cols": cols, "bits": bits,
                     "row": row, "col": col, "let": dict(let or {}), "label": label})


def _as_endpoint(x, what: str):
    if isinstance(x, (RegLayout, MemLayout)):
        return x
    if isinstance(x, dict):
        return endpoint(x)
    try:
        from ..layout import Layout
    except ImportError:  # pragma: no cover
        Layout = None
    if Layout is not None and isinstance(x, Layout):
        return RegLayout([f"r{i}" for i in range(x.nregs)], LayoutMap(x), x.elem_bits, x.reg_bits, label=x.name)
    raise TransformError(f"{what} must be a RegLayout, MemLayout, formal.layout.Layout or endpoint dict, "
                         f"not {type(x).__name__}")


def prove_transform(source_layout, steps: Sequence[str | Step], target_layout, *,
                    values: Mapping[str, str] | None = None, regs: Mapping[str, int] | None = None,
                    wmma_maps: Mapping[str, Mapping[str, str]] | None = None,
                    timeout_ms: int = DEFAULT_TIMEOUT_MS, claim: str | None = None) -> TransformResult:
    """Prove that ``steps`` move the data laid out as ``source_layout`` (one endpoint or a
    list) into exactly ``target_layout``.

    ``steps`` are PTX instructions (strings) or Step objects; ``values`` defines per-lane
    integers the steps use (addresses, lanes, selectors) as formulas in ``lane``; ``regs``
    declares register widths other than 32 bits; ``wmma_maps`` gives, per wmma.load/.store
    opcode, the fragment map a wmma step assumes (``{"row": F, "col": F}`` over lane, reg,
    elem, i) -- PTX leaves it unspecified.
    """
    srcs = source_layout if isinstance(source_layout, (list, tuple)) else [source_layout]
    srcs = [_as_endpoint(s, "source") for s in srcs]
    tgt = _as_endpoint(target_layout, "target")
    vals = {}
    for k, v in (values or {}).items():
        f = Formula(str(v))
        if f.names - {"lane"}:
            raise TransformError(f"value {k} = {v}: may use only `lane`")
        vals[k] = f
    st = [s if isinstance(s, Step) else make_step(s) for s in steps]
    from .recipe import wmma_map_objects
    prog = Program(srcs, st, tgt, vals, dict(regs or {}), wmma_map_objects(dict(wmma_maps or {})))
    return prove_program(prog, timeout_ms=timeout_ms, claim=claim)
