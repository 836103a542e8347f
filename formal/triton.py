"""Triton linear layouts in and out.

Triton describes a distributed layout as a ``LinearLayout``: for each hardware input
dimension (``register``, ``lane``, ``warp``, ``block``) one basis vector per bit, and the
logical coordinate of a point is the XOR of the bases of its set bits.  In TTGIR it is
printed as an attribute::

    #ttg.linear<{register = [[0, 1], [8, 0], [0, 8]], lane = [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]], warp = [], block = []}>

Each basis vector lists the output coordinates ``[dim0, dim1]`` = ``[row, col]``.
``register`` counts a thread's values in order (value ``i`` = PTX element ``i``, the
mma operand order: register ``i // epr``, element ``i % epr``).

* :func:`parse` -- that text, or JSON ``{"register": [...], "lane": [...], ...}``, to bases;
* :func:`from_triton_json` -- bases to an algebra map ``(register, lane[, warp, block]) ->
  (row, col)``;
* :func:`to_reg_layout` -- that map as a transform endpoint (warp 0, block 0 of it);
* :func:`export` -- a spec layout (or any register layout) to Triton bases, after proving
  it GF(2)-linear (else an error naming the point where XOR-of-bases differs);
* :func:`check` -- a compiler's Triton layout against the spec fragment: Proved or the
  first (lane, register, element) where they differ.
"""

from __future__ import annotations

import json
import re
from typing import Mapping, Sequence

from . import algebra as alg
from .algebra import AlgebraError, Map, Proof

HW_DIMS = ("register", "lane", "warp", "block")


class TritonError(AlgebraError):
    pass


def parse(text_or_obj: str | Mapping) -> dict[str, list[list[int]]]:
    """Bases from ``#ttg.linear<{...}>`` text, a JSON string, or a dict."""
    if isinstance(text_or_obj, Mapping):
        obj = dict(text_or_obj)
    else:
        t = str(text_or_obj).strip()
        m = re.search(r"linear<\{(.*)\}>", t, re.S)
        if m:
            body = m.group(1)
            obj = {}
            for name, val in re.findall(r"(\w+)\s*=\s*(\[(?:[^\[\]]|\[[^\[\]]*\])*\])", body):
                obj[name] = json.loads(val)
        else:
            try:
                obj = json.loads(t)
            except json.JSONDecodeError as e:
                raise TritonError(f"not a #ttg.linear attribute or JSON bases: {e.msg}") from None
    if "bases" in obj and isinstance(obj["bases"], Mapping):
        obj = dict(obj["bases"])
    out = {}
    for k, v in obj.items():
        if k in ("out_dims", "rows", "cols"):
            continue
        if not isinstance(v, list) or any(not isinstance(b, list) or any(not isinstance(x, int) for x in b) for b in v):
            raise TritonError(f"bases of {k!r} must be a list of integer vectors, got {v!r}")
        out[k] = v
    if "lane" not in out:
        raise TritonError("a distributed Triton layout needs lane bases")
    return out


def from_triton_json(bases: str | Mapping, rows: int, cols: int, name: str = "triton") -> Map:
    """The linear map ``(register, lane, warp, block) -> (row, col)`` of Triton bases.

    Dims with no bases are omitted; every basis vector must have 2 coordinates."""
    b = parse(bases)
    ins, lin = [], {}
    for d in list(HW_DIMS) + [k for k in b if k not in HW_DIMS]:
        vecs = b.get(d, [])
        if not vecs and d != "register":
            continue
        for v in vecs:
            if len(v) != 2:
                raise TritonError(f"{d} basis {v} is not 2-D [dim0, dim1]")
        ins.append((d, 1 << len(vecs)))
        lin[d] = [{"row": v[0], "col": v[1]} for v in vecs]
    return alg.linear_map(ins, [("row", rows), ("col", cols)], lin, name=name)


def to_reg_layout(lin: Map, regs: Sequence[str], bits: int, reg_bits: int = 32, label: str = ""):
    """Warp 0 / block 0 of a Triton map as a transform register endpoint; ``register``
    index i is register i // epr, element i % epr with epr = reg_bits // bits."""
    from .transform.spaces import RegLayout, TransformError

    m = lin
    fix = {d.name: 0 for d in m.ins if d.name in ("warp", "block")}
    if fix:
        m = m.restrict(**fix)
    sizes = {d.name: d.size for d in m.ins}
    if sizes.get("lane") != 32:
        raise TransformError(f"Triton layout has {sizes.get('lane')} lanes; a warp has 32 (5 lane bases)")
    epr = max(1, reg_bits // bits)
    n = sizes["register"]
    if n % epr or n // epr != len(regs):
        raise TransformError(f"Triton layout has {n} values per thread = {n // epr if n % epr == 0 else '?'} "
                             f"registers of {epr} x {bits}-bit, but {len(regs)} register names were given")
    m = m.split("register", [("reg", n // epr), ("elem", epr)])
    # order the inputs lane, reg, elem
    m2 = alg.Composed(alg.identity([("lane", 32), ("reg", n // epr), ("elem", epr)]), m)
    return RegLayout(list(regs), m2, bits, reg_bits, label=label or "Triton linear layout")


def _register_map(m: Map) -> Map:
    """(lane, reg, elem) -> (row, col)  as  (register, lane) -> (row, col)."""
    names = [d.name for d in m.ins]
    if set(names) == {"lane", "reg", "elem"}:
        m = m.fuse(["reg", "elem"], "register")
    elif set(names) == {"lane", "i"}:
        m = m.rename(i="register")
    elif set(names) != {"lane", "register"}:
        raise TritonError(f"cannot export a map over {names} (need lane, reg, elem)")
    sizes = {d.name: d.size for d in m.ins}
    order = alg.identity([("register", sizes["register"]), ("lane", sizes["lane"])])
    return alg.Composed(order, m)


def export(layout, timeout_ms: int = alg.DEFAULT_TIMEOUT_MS, attribute: bool = False) -> dict | str:
    """Triton bases of a register layout (a ``formal.layout.Layout``, a transform
    ``RegLayout`` or an algebra map over lane, reg, elem).  Proves the layout is
    GF(2)-linear first; raises :class:`TritonError` with the first point where XOR of the
    bases differs otherwise.  ``attribute=True`` returns ``#ttg.linear<{...}>`` text."""
    m = _as_map(layout)
    rm = _register_map(m)
    held = _partial(rm)
    if held:
        raise TritonError(f"layout holds no element at {held}: a linear layout is total")
    p = alg.is_linear(rm, timeout_ms)
    if p.status != "proved":
        raise TritonError(f"layout is not GF(2)-linear (not a Triton linear layout): {p.detail or p.witness}")
    bases = alg.linear_bases(rm)
    out = {"register": [[b["row"], b["col"]] for b in bases["register"]],
           "lane": [[b["row"], b["col"]] for b in bases["lane"]], "warp": [], "block": []}
    if attribute:
        return format_attribute(out)
    return out


def format_attribute(bases: Mapping[str, list]) -> str:
    parts = []
    for d in list(HW_DIMS) + [k for k in bases if k not in HW_DIMS]:
        v = bases.get(d, [])
        parts.append(f"{d} = [" + ", ".join("[" + ", ".join(str(x) for x in b) + "]" for b in v) + "]")
    return "#ttg.linear<{" + ", ".join(parts) + "}>"


def _partial(m: Map) -> dict | None:
    b = m.box()
    mask = m.domain_mask(b)
    if mask.all():
        return None
    i = int((~mask).nonzero()[0][0])
    return {k: int(v[i]) for k, v in b.items()}


def _as_map(layout) -> Map:
    if isinstance(layout, Map):
        return layout
    try:
        from .transform.spaces import LayoutMap, RegLayout
        if isinstance(layout, RegLayout):
            return layout.map
        from .layout import Layout
        if isinstance(layout, Layout):
            return LayoutMap(layout)
    except ImportError:  # pragma: no cover
        pass
    raise TritonError(f"cannot export {type(layout).__name__} (need a Layout, RegLayout or Map)")


def check(bases: str | Mapping, layout, timeout_ms: int = alg.DEFAULT_TIMEOUT_MS) -> Proof:
    """Prove a Triton layout equal to a spec layout (same (lane, register) -> (row, col)
    for every lane and value), or give the first (lane, register, element) where not."""
    spec = _as_map(layout)
    sizes = {d.name: d.size for d in spec.ins}
    outs = {d.name: d.size for d in spec.outs}
    lin = from_triton_json(bases, outs["row"], outs["col"])
    lsz = {d.name: d.size for d in lin.ins}
    if lsz.get("lane") != 32:
        raise TritonError(f"Triton layout has {lsz.get('lane')} lanes (need 32)")
    fix = {d: 0 for d in lsz if d in ("warp", "block")}
    if fix:
        lin = lin.restrict(**fix)
    n = sizes["reg"] * sizes["elem"]
    if {d.name: d.size for d in lin.ins}["register"] != n:
        return Proof("refuted", "Triton layout == spec layout", witness={"values_per_thread": lsz["register"]},
                     detail=f"Triton layout has {lsz['register']} values per thread, the spec {n}")
    lin = lin.split("register", [("reg", sizes["reg"]), ("elem", sizes["elem"])])
    lin = alg.Composed(alg.identity([("lane", 32), ("reg", sizes["reg"]), ("elem", sizes["elem"])]), lin)
    lin.name = "triton"
    p = spec.equals(lin, timeout_ms, names=("spec", "triton"))
    p.claim = f"Triton layout == {getattr(spec, 'name', '') or 'spec layout'}"
    return p
