"""CuTe thread-value layouts ``(T, V) -> index`` in and out.

CuTe writes an mma operand as a layout ``((T shape), (V shape)) : ((T stride), (V
stride))`` from (thread, value) to the column-major index ``m + M * n`` of the M x N tile
(``// (T32,V4) -> (M16,N8)`` in ``mma_traits_sm80.hpp``).  Coordinates of a mode are
colexicographic (first sub-mode fastest) and the index is the sum of coordinate x stride.
Value ``v`` is PTX element ``i`` (register ``i // epr``, element ``i % epr``).

* :func:`parse` -- a shape:stride string (formal.cute's parser, the one audits use);
* :func:`cute_map` -- the algebra map ``(lane, i) -> (row, col)``;
* :func:`cute_endpoint` -- a transform register endpoint from a CuTe layout;
* :func:`export` -- the spec layout (or any register layout) as the shortest CuTe TV
  layout, after proving the map equals that layout (Z3 + enumeration); layouts that are
  not a sum of per-bit strides (e.g. XOR swizzles) are refused with the first point that
  differs.

(``formal/cute.py`` is the importer used for layout audits; this module adds the algebra map,
the transform endpoint and export.)
"""

from __future__ import annotations

from typing import Any, Sequence

from .. import algebra as alg
from .. import cute as _cute
from ..algebra import AlgebraError, Map
from ..layout import LayoutError


class CuteError(AlgebraError):
    pass


def parse(s: str) -> tuple[Any, Any]:
    """``"((4,8),(2,2,2)):((32,1),(16,8,128))"`` -> (shape, stride) nested tuples (formal.cute's
    parser, which also reads ``Layout<Shape<...>, Stride<...>>``)."""
    try:
        return _cute.parse(s)
    except LayoutError as e:
        raise CuteError(str(e)) from None


def _flat(t) -> list[int]:
    return [x for y in t for x in _flat(y)] if isinstance(t, tuple) else [t]


size = _cute.size


def _mode_formula(var: str, shape, stride) -> str:
    terms, div = [], 1
    for s, d in zip(_flat(shape), _flat(stride)):
        if s > 1 and d != 0:
            terms.append(f"((({var}) // {div}) % {s}) * {d}")
        div *= s
    return " + ".join(terms) or "0"


def cute_map(layout: str, rows: int, cols: int, name: str = "", transpose: bool = False) -> Map:
    """(lane, i) -> (row, col) of a TV layout into a column-major rows x cols tile
    (``transpose``: the layout indexes the cols x rows transpose, as CuTe's N x K B)."""
    shape, stride = parse(layout)
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise CuteError(f"a TV layout has two modes (thread, value): {layout}")
    nt, nv = size(shape[0]), size(shape[1])
    if nt != 32:
        raise CuteError(f"thread mode has {nt} threads, a warp has 32")
    idx = f"({_mode_formula('lane', shape[0], stride[0])}) + ({_mode_formula('i', shape[1], stride[1])})"
    if transpose:
        f = {"row": f"({idx}) // {cols}", "col": f"({idx}) % {cols}"}
    else:
        f = {"row": f"({idx}) % {rows}", "col": f"({idx}) // {rows}"}
    return alg.from_formulas([("lane", 32), ("i", nv)], [("row", rows), ("col", cols)], f,
                             name=name or f"cute {layout}")


def cute_endpoint(layout: str, rows: int, cols: int, regs: Sequence[str], bits: int, reg_bits: int = 32,
                  label: str = "", transpose: bool = False):
    from .spaces import RegLayout, TransformError

    m = cute_map(layout, rows, cols, transpose=transpose)
    epr = max(1, reg_bits // bits)
    nv = m.ins[1].size
    if nv % epr or nv // epr != len(regs):
        raise TransformError(f"CuTe layout has {nv} values = {nv / epr:g} registers of {epr} x {bits}-bit; "
                             f"{len(regs)} register names given")
    m = m.split("i", [("reg", nv // epr), ("elem", epr)])
    return RegLayout(list(regs), m, bits, reg_bits, label=label or f"CuTe {layout}")


def _modes(strides: list[int]) -> list[tuple[int, int]]:
    """Per-bit strides -> coalesced (size, stride) modes (merge while stride doubles)."""
    out: list[list[int]] = []
    for s in strides:
        if out and out[-1][1] * out[-1][0] == s and out[-1][1] != 0:
            out[-1][0] *= 2
        elif out and out[-1][1] == 0 and s == 0:
            out[-1][0] *= 2
        else:
            out.append([2, s])
    return [(a, b) for a, b in out]


def _fmt_mode(modes: list[tuple[int, int]]) -> tuple[str, str]:
    if not modes:
        return "1", "0"
    if len(modes) == 1:
        return str(modes[0][0]), str(modes[0][1])
    return "(" + ",".join(str(a) for a, _ in modes) + ")", "(" + ",".join(str(b) for _, b in modes) + ")"


def export(layout, timeout_ms: int = alg.DEFAULT_TIMEOUT_MS, transpose: bool = False) -> str:
    """The CuTe TV layout string of a register layout, proved equal to it.

    PTX orientation by default (A: M x K, B: K x N).  CuTe writes B as N x K: pass
    ``transpose=True`` to export (col, row) -- e.g. CuTe's BLayout of an mma."""
    from ..triton import _as_map

    m = _as_map(layout)
    if transpose:
        m = m.rename(row="col", col="row")
        m = alg.Composed(m, alg.identity([d for d in m.outs if d.name == "row"] + [d for d in m.outs if d.name == "col"]))
    names = [d.name for d in m.ins]
    if set(names) == {"lane", "reg", "elem"}:
        m = m.fuse(["reg", "elem"], "i")
    sizes = {d.name: d.size for d in m.ins}
    outs = {d.name: d.size for d in m.outs}
    rows, cols = outs["row"], outs["col"]
    m = alg.Composed(alg.identity([("lane", sizes["lane"]), ("i", sizes["i"])]), m)
    b = m.box()
    mask = m.domain_mask(b)
    if not mask.all():
        i = int((~mask).nonzero()[0][0])
        raise CuteError(f"layout holds nothing at lane {b['lane'][i]}, value {b['i'][i]}: a TV layout is total")
    for d, n in sizes.items():
        if n & (n - 1):
            raise CuteError(f"{d} has {n} points; export handles power-of-two modes")

    def idx(lane, i):
        o = m.eval({"lane": lane, "i": i})
        return o["row"] + rows * o["col"]

    if idx(0, 0) != 0:
        raise CuteError("(thread 0, value 0) is not at index 0: not a CuTe layout")
    ts = [idx(1 << b, 0) for b in range(sizes["lane"].bit_length() - 1)]
    vs = [idx(0, 1 << b) for b in range(sizes["i"].bit_length() - 1)]
    (tsh, tst), (vsh, vst) = _fmt_mode(_modes(ts)), _fmt_mode(_modes(vs))
    text = f"({tsh},{vsh}):({tst},{vst})"
    cm = cute_map(text, rows, cols)
    p = m.equals(cm, timeout_ms, names=("layout", "cute"))
    if p.status != "proved":
        raise CuteError(f"not a CuTe (sum of strides) layout: {p.detail or p.witness}")
    return text
