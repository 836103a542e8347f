"""Triton layouts as Triton prints them: the attribute text, whole CTA layouts, tiles.

* :func:`parse` -- ``#ttg.linear<{...}>`` text, JSON or a dict to bases;
* :func:`parse_whole` -- a whole layout (``#ttg.linear``, ``#ttg.nvidia_mma``, ``#ttg.dot_op``,
  with its ``tensor<...>`` type) to a :class:`WholeLayout`;
* :func:`audit_whole` -- cut it into instruction tiles and audit every tile against the spec;
* :func:`from_triton_json` -- bases to an algebra map ``(register, lane[, warp, block]) ->
  (row, col)``;
* :func:`to_reg_layout` -- that map as a transform endpoint (warp 0, block 0 of it);
* :func:`export` -- a spec layout (or any register layout) to Triton bases, after proving
  it GF(2)-linear (else an error naming the point where XOR-of-bases differs);
* :func:`check` -- a compiler's Triton layout against the spec fragment: Proved or the
  first (lane, register, element) where they differ.

A ``LinearLayout`` gives, for each hardware input dimension (``register``, ``lane``,
``warp``, ``block``), one basis vector per bit; the logical coordinate of a point is the XOR
of the bases of its set bits.  Each basis vector lists the output coordinates ``[dim0,
dim1]`` = ``[row, col]``.  ``register`` counts a thread's values in order (value ``i`` = PTX
element ``i``, the mma operand order: register ``i // epr``, element ``i % epr``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

from .. import algebra as alg
from ..algebra import AlgebraError, Map, Proof
from ..layout import Layout, LayoutError
from .spaces import LayoutMap, RegLayout, TransformError

HW_DIMS = ("register", "lane", "warp", "block")


class TritonError(AlgebraError, LayoutError):
    """Bad Triton input (exit code 2 in the CLI)."""


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
                try:
                    obj[name] = json.loads(val)
                except json.JSONDecodeError as e:
                    raise TritonError(f"#ttg.linear: {name} = {val[:60]}: not a list of integer vectors "
                                      f"({e.msg})") from None
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



def format_attribute(bases: Mapping[str, list]) -> str:
    parts = []
    for d in list(HW_DIMS) + [k for k in bases if k not in HW_DIMS]:
        v = bases.get(d, [])
        parts.append(f"{d} = [" + ", ".join("[" + ", ".join(str(x) for x in b) + "]" for b in v) + "]")
    return "#ttg.linear<{" + ", ".join(parts) + "}>"


# =========================================================================================
# Whole layouts as Triton prints them: #ttg.linear over a CTA tile, #ttg.nvidia_mma, #ttg.dot_op
#
# The encodings are converted to linear layouts following Triton's documented semantics
# (triton-lang/triton lib/Dialect/TritonGPU/IR/LinearLayoutConversions.cpp at commit
# 00385d09bfab45af36c92df84f985dd4f1b50554: nvidiaMmaTile, NvidiaMmaEncodingAttr::toLinearLayout,
# warpsNvidiaDot, nvidiaDotToLinearLayout, combineCtaCgaWithShape).  Per warp, an mma v2 tile
# is: kWidth registers along the inner dim, 4 lanes along the inner dim, 8 lanes along the
# outer dim, then registers repeating the tile (outer dim, then inner dim); the warps tile the
# CTA (dot operands broadcast along K); registers repeat the CTA tile over the tensor (inner dim
# first), and bases that fall outside the tensor become 0 (broadcast).  Tests compare this with
# Triton's own conversion (the installed triton wheel) on 270 configurations.
#
# mma v3 (wgmma, versionMajor = 3, instrShape = [16, N, K]): each warp's tile is [16, N] built as
# v2's accumulator tile, and the warps tile dim0 first (warps 0-3 of a warpgroup stack 16-row
# slices: the 64 rows of one wgmma), then dim1; a v3 dot operand (opIdx = 0 only: A in registers,
# B always comes from shared memory) is v2's A tile with the warps in that order (broadcast
# along K).  Checked against the installed Triton too (tests/test_layout_wgmma.py).

from dataclasses import dataclass, field


@dataclass
class WholeLayout:
    """A distributed layout of a whole tensor: (register, lane, warp, block) -> (dim0, dim1)
    as XOR of bases, plus what the encoding said about it (kind, kWidth, shape, dtype)."""

    bases: dict
    shape: tuple | None = None
    dtype: str | None = None
    kind: str = "linear"              # linear | mma | dot
    op_idx: int | None = None          # dot operands: 0 = A, 1 = B
    kwidth: int | None = None
    text: str = ""
    info: dict = field(default_factory=dict)

    @property
    def operand(self) -> str | None:
        return {"mma": "c", "dot": "ab"[self.op_idx or 0] if self.op_idx is not None else None}.get(self.kind)

    def covered(self) -> tuple[int, int]:
        """The tensor the bases span (each dim: the next power of two above the largest coordinate)."""
        mx = [0, 0]
        for vecs in self.bases.values():
            for v in vecs:
                mx = [mx[0] | v[0], mx[1] | v[1]]
        return tuple(1 << int(m).bit_length() for m in mx)


_DTYPE_BITS = {"f16": 16, "bf16": 16, "f32": 32, "tf32": 32, "f64": 64, "i8": 8, "s8": 8, "u8": 8, "i32": 32,
               "f8e4m3fn": 8, "f8e5m2": 8, "e4m3": 8, "e5m2": 8, "fp8e4nv": 8, "fp8e5": 8, "i4": 4, "u4": 4}


def _attr_body(text: str, start: int) -> tuple[str, int]:
    """The text between the '<' at ``start`` and its matching '>'."""
    depth = 0
    for k in range(start, len(text)):
        c = text[k]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
            if depth == 0:
                return text[start + 1:k], k + 1
    raise TritonError(f"unbalanced '<' in Triton attribute text {text[start:start + 60]!r}")


def _fields(body: str) -> dict[str, Any]:
    """``{versionMajor = 2, warpsPerCTA = [2, 2], parent = #mma, kWidth = 8}`` -> dict."""
    b = body.strip()
    if b.startswith("{") and b.endswith("}"):
        b = b[1:-1]
    out: dict[str, Any] = {}
    for m in re.finditer(r"(\w+)\s*=\s*(\[(?:[^\[\]]|\[[^\[\]]*\])*\]|#[\w.]+(?:<)?|[-\w.]+)", b):
        k, v = m.group(1), m.group(2)
        if v.startswith("["):
            try:
                out[k] = json.loads(v)
            except json.JSONDecodeError:
                raise TritonError(f"field {k} = {v}: not a list of integers") from None
        elif re.fullmatch(r"-?\d+", v):
            out[k] = int(v)
        else:
            out[k] = v
    return out


def _resolve(text: str, ref: str, aliases: dict[str, str]) -> str:
    seen = set()
    while ref.startswith("#") and not re.match(r"#(ttg|triton_gpu)\.", ref):
        name = ref[1:]
        if name in seen or name not in aliases:
            raise TritonError(f"Triton text refers to #{name}, which it does not define "
                              f"(paste its '#{name} = #ttg....' line too)")
        seen.add(name)
        ref = aliases[name]
    return ref


def _encoding_at(text: str, ref: str, aliases: dict[str, str]) -> tuple[str, dict]:
    """(kind, fields) of an attribute reference such as '#mma' or '#ttg.dot_op<{...}>'."""
    ref = _resolve(text, ref.strip(), aliases)
    m = re.match(r"#(?:ttg|triton_gpu)\.(\w+)", ref)
    if not m:
        raise TritonError(f"not a Triton layout attribute: {ref[:60]!r}")
    kind = m.group(1)
    k = ref.find("<", m.end() - 1)
    if k < 0:
        raise TritonError(f"#ttg.{kind} without a <{{...}}> body")
    body, _ = _attr_body(ref, k)
    f = _fields(body)
    for key, val in list(f.items()):
        if isinstance(val, str) and val.startswith("#"):
            # a nested attribute (parent = #mma or an inline #ttg.nvidia_mma<...>)
            pos = body.find(val)
            full = val
            if val.endswith("<"):
                inner, end = _attr_body(body, pos + len(val) - 1)
                full = val + inner + ">"
            f[key] = _encoding_at(text, full, aliases)
    return kind, f


def parse_whole(text: str, *, shape: Sequence[int] | None = None, dtype: str | None = None) -> WholeLayout:
    """A whole layout from the text Triton prints.

    Accepts ``#ttg.linear<{register = ..., lane = ..., warp = ..., block = ...}>``, an
    ``#ttg.nvidia_mma<{versionMajor = 2, ...}>`` or ``#ttg.dot_op<{opIdx = .., parent = #mma,
    kWidth = ..}>`` encoding (with its alias lines, ``#mma = #ttg.nvidia_mma<...>``), or a tensor
    type ``tensor<64x32xf16, #ttg.dot_op<...>>`` (which gives the shape and element type).
    ``shape`` (rows, cols) is needed for an encoding without a tensor type."""
    t = str(text)
    aliases = {}
    for m in re.finditer(r"^\s*#([\w.]+)\s*=\s*(#(?:ttg|triton_gpu)\.\w+<)", t, re.M):
        body, _ = _attr_body(t, m.end(2) - 1)
        aliases[m.group(1)] = m.group(2) + body + ">"
    tshape, tdtype = None, None
    tm = re.search(r"tensor<((?:\d+x)+)([\w!.]+)\s*,\s*(#[\w.]+(?:<)?)", t)
    if tm:
        tshape = tuple(int(x) for x in tm.group(1).rstrip("x").split("x"))
        tdtype = tm.group(2)
        ref = tm.group(3)
        if ref.endswith("<"):
            body, _ = _attr_body(t, tm.end(3) - 1)
            ref = ref + body + ">"
    else:
        # the last top-level attribute that is not only an alias definition, else the last alias
        rest = re.sub(r"^\s*#[\w.]+\s*=.*$", "", t, flags=re.M).strip()
        if rest:
            ref = rest
        elif aliases:
            ref = "#" + list(aliases)[-1]
        else:
            raise TritonError("no Triton layout attribute in the text (expected #ttg.linear<...>, "
                              "#ttg.nvidia_mma<...>, #ttg.dot_op<...> or tensor<...>)")
    if shape is not None:
        tshape = tuple(int(x) for x in shape)
    if dtype is not None:
        tdtype = dtype
    if tshape is not None and len(tshape) != 2:
        raise TritonError(f"tensor shape {tshape}: only 2-D tensors are supported")
    if tshape is not None and (min(tshape) < 1 or tshape[0] * tshape[1] > MAX_CELLS):
        raise TritonError(f"tensor shape {tshape[0]}x{tshape[1]}: expected positive sizes, at most {MAX_CELLS:,} cells")
    return _bounded(_parse_whole(t, ref, aliases, tshape, tdtype))


#: bounds of a whole layout (a CTA tile is far smaller): cells of the tensor, and log2 of the
#: (register, lane, warp, block) points the audit enumerates
MAX_CELLS, MAX_POINT_BITS = 1 << 24, 22


def _bounded(wl: "WholeLayout") -> "WholeLayout":
    n = sum(len(v) for v in wl.bases.values())
    if n > MAX_POINT_BITS:
        raise TritonError(f"the layout has 2^{n} (register, lane, warp, block) points; at most 2^{MAX_POINT_BITS} "
                          f"are audited (a CTA tile has far fewer)")
    for d, vecs in wl.bases.items():
        for v in vecs:
            if any(abs(x) >= MAX_CELLS for x in v):
                raise TritonError(f"{d} basis {v}: coordinates of at most {MAX_CELLS:,}")
    if wl.shape is not None and (min(wl.shape) < 1 or wl.shape[0] * wl.shape[1] > MAX_CELLS):
        raise TritonError(f"the layout covers {wl.shape[0]}x{wl.shape[1]}: at most {MAX_CELLS:,} cells")
    return wl


def _parse_whole(t: str, ref: str, aliases: dict, tshape, tdtype) -> "WholeLayout":
    kind, f = _encoding_at(t, ref, aliases) if not ref.lstrip().startswith("{") else ("linear", {})
    if kind == "linear":
        m = re.search(r"linear<", ref)
        b = parse(ref if m else t)
        for d in HW_DIMS:
            b.setdefault(d, [])
        for d, vecs in b.items():
            for v in vecs:
                if len(v) != 2:
                    raise TritonError(f"{d} basis {v} is not 2-D [dim0, dim1]")
        wl = WholeLayout(b, tshape, tdtype, "linear", text=t)
        if wl.shape is None:
            wl.shape = wl.covered()
        return wl
    if tshape is None:
        raise TritonError(f"#ttg.{kind} needs the tensor shape: paste the tensor<RxCxT, ...> type or give --shape")
    if kind == "nvidia_mma":
        return WholeLayout(mma_bases(f, tshape), tshape, tdtype, "mma", text=t, info=f)
    if kind == "dot_op":
        op = f.get("opIdx")
        parent = f.get("parent")
        if op not in (0, 1):
            raise TritonError(f"dot_op opIdx must be 0 or 1, got {op!r}")
        if not (isinstance(parent, tuple) and parent[0] == "nvidia_mma"):
            raise TritonError("dot_op: only an #ttg.nvidia_mma parent (mma v2 or v3) is supported")
        kw = f.get("kWidth")
        if not isinstance(kw, int) or kw < 1 or kw & (kw - 1):
            raise TritonError(f"dot_op kWidth must be a power of two, got {kw!r}")
        return WholeLayout(dot_bases(op, kw, parent[1], tshape), tshape, tdtype, "dot", op, kw, text=t,
                           info=dict(f, parent=parent[1]))
    raise TritonError(f"#ttg.{kind}: supported encodings are #ttg.linear, #ttg.nvidia_mma (v2, v3) and #ttg.dot_op")


def _log2(n: int, what: str) -> int:
    if not isinstance(n, int) or n < 1 or n & (n - 1):
        raise TritonError(f"{what} must be a power of two, got {n!r}")
    return n.bit_length() - 1


def _unit(dim: int, v: int) -> list[int]:
    return [v, 0] if dim == 0 else [0, v]


def _mma_tile(tile: Sequence[int], kwidth: int, order: Sequence[int]) -> tuple[dict, list[int]]:
    """nvidiaMmaTile: bases of one warp's tile and the size it spans per dim."""
    inner, outer = order[0], order[1]
    m, n = tile[outer], tile[inner]
    if m % 8 or n % (kwidth * 4):
        raise TritonError(f"mma tile {list(tile)} is not a multiple of 8 x (4 * kWidth = {4 * kwidth})")
    size = [1, 1]
    reg, lane = [], []

    def grow(lst, dim, count):
        for _ in range(_log2(count, "tile repeat")):
            lst.append(_unit(dim, size[dim]))
            size[dim] *= 2

    grow(reg, inner, kwidth)
    grow(lane, inner, 4)
    grow(lane, outer, 8)
    grow(reg, outer, m // 8)
    grow(reg, inner, n // (kwidth * 4))
    return {"register": reg, "lane": lane}, size


def _finish(b: dict, size: list[int], shape: Sequence[int], order: Sequence[int]) -> dict:
    """combineCtaCgaWithShape for one CTA: registers repeat the CTA tile over the tensor
    (order[0] first); bases beyond the tensor become 0 (broadcast)."""
    for d in order:
        while size[d] < shape[d]:
            b["register"].append(_unit(d, size[d]))
            size[d] *= 2
    for k, vecs in b.items():
        b[k] = [[x if x < shape[i] else 0 for i, x in enumerate(v)] for v in vecs]
    b.setdefault("block", [])
    return b


def _mma_params(f: dict) -> tuple[list[int], list[int]]:
    v = f.get("versionMajor")
    if v not in (2, 3):
        raise TritonError(f"nvidia_mma versionMajor = {v!r}: mma v2 (warp-level mma.sync) and v3 (wgmma) are "
                          "supported")
    warps = f.get("warpsPerCTA")
    instr = f.get("instrShape", [16, 8] if v == 2 else None)
    if not (isinstance(warps, list) and len(warps) == 2):
        raise TritonError(f"nvidia_mma warpsPerCTA must be [w0, w1], got {warps!r}")
    if v == 2 and list(instr) != [16, 8]:
        raise TritonError(f"nvidia_mma v2 instrShape {instr}: expected [16, 8]")
    if v == 3:
        if not (isinstance(instr, list) and len(instr) == 3 and instr[0] == 16 and isinstance(instr[1], int)
                and instr[1] % 8 == 0 and 8 <= instr[1] <= 256):
            raise TritonError(f"nvidia_mma v3 instrShape {instr!r}: expected [16, N, K], N a multiple of 8 up to 256")
        if not (isinstance(warps[0], int) and warps[0] >= 4 and warps[0] % 4 == 0):
            raise TritonError(f"nvidia_mma v3 warpsPerCTA {warps}: a warpgroup needs at least 4 warps along dim0")
    for w in warps:
        _log2(w, "warpsPerCTA entries")
    if f.get("CTAsPerCGA", [1, 1]) != [1, 1] or f.get("CTASplitNum", [1, 1]) != [1, 1]:
        raise TritonError("nvidia_mma with several CTAs per CGA: give the #ttg.linear form instead")
    return warps, instr


def mma_bases(f: dict, shape: Sequence[int]) -> dict:
    """Bases of ``#ttg.nvidia_mma<{versionMajor = 2, warpsPerCTA = [..], instrShape = [16, 8]}>``
    (or versionMajor = 3, instrShape = [16, N, K]: wgmma's accumulator)."""
    warps, instr = _mma_params(f)
    order = [1, 0]
    v3 = f.get("versionMajor") == 3
    b, size = _mma_tile(instr[:2], 2, order)      # the accumulator tile always has kWidth 2
    b["warp"] = []
    for d in (0, 1) if v3 else order:            # warps: dim1 first for mma v2, dim0 first for v3
        for _ in range(_log2(warps[d], "warpsPerCTA")):
            b["warp"].append(_unit(d, size[d]))
            size[d] *= 2
    return _finish(b, size, shape, order)


def dot_bases(op_idx: int, kwidth: int, mma: dict, shape: Sequence[int]) -> dict:
    """Bases of ``#ttg.dot_op<{opIdx, parent = #mma (v2), kWidth}>``: A is M x K, B is K x N."""
    warps, _ = _mma_params(mma)
    v3 = mma.get("versionMajor") == 3
    if v3 and op_idx != 0:
        raise TritonError("dot_op opIdx = 1 with an mma v3 parent: wgmma's B always comes from shared memory "
                          "(#ttg.nvmma_shared), it has no register layout")
    if op_idx == 0:
        tile, order = [16, kwidth * 8], [1, 0]
    else:
        tile, order = [kwidth * 8, 8], [0, 1]
    b, size = _mma_tile(tile, kwidth, order)
    kdim = 1 if op_idx == 0 else 0
    b["warp"] = []
    for d in (0, 1) if v3 else (1, 0):            # the mma's warp order; broadcast along K
        for _ in range(_log2(warps[d], "warpsPerCTA")):
            if d == kdim:
                b["warp"].append([0, 0])
            else:
                b["warp"].append(_unit(d, size[d]))
                size[d] *= 2
    return _finish(b, size, shape, order)


# ---------------------------------------------------------------------------- instruction tiles

_IMPLIED_FORMS = {   # element type of a dot operand -> the mma v2 form Triton emits for it
    "f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
    "bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
    "f32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
    "i8": "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
    "f8E4M3FN": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
    "f8E5M2": "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
}


_IMPLIED_WGMMA = {   # element type of an mma v3 dot operand -> the wgmma form (N from instrShape)
    "f16": ("k16", "f32.f16.f16"), "bf16": ("k16", "f32.bf16.bf16"), "f32": ("k8", "f32.tf32.tf32"),
    "tf32": ("k8", "f32.tf32.tf32"), "i8": ("k32", "s32.s8.s8"), "f8E4M3FN": ("k32", "f32.e4m3.e4m3"),
    "f8E5M2": ("k32", "f32.e5m2.e5m2"),
}


def _v3_n(wl: WholeLayout) -> int | None:
    info = wl.info.get("parent", wl.info) if wl.kind == "dot" else wl.info
    if info.get("versionMajor") != 3:
        return None
    return int(info["instrShape"][1])


def implied_form(wl: WholeLayout) -> str:
    """The mma form a dot-operand (or accumulator) encoding implies, from its element type; for
    mma v3 the wgmma form (A in registers) with the N of its instrShape."""
    if wl.kind not in ("dot", "mma"):
        raise TritonError("a #ttg.linear layout implies no instruction: name the opcode")
    dt = (wl.dtype or "").strip()
    n = _v3_n(wl)
    if n is not None:
        if wl.kind == "mma":
            k, types = {"f32": ("k16", "f32.f16.f16"), "": ("k16", "f32.f16.f16"), "f16": ("k16", "f16.f16.f16"),
                        "i32": ("k32", "s32.s8.s8")}.get(dt, (None, None))
            if k is None:
                raise TritonError(f"accumulator element type {dt!r}: name the opcode")
        else:
            if dt not in _IMPLIED_WGMMA:
                raise TritonError(f"dot operand element type {dt or '(none)'}: give the tensor<..xT, ..> type or --dtype "
                                  f"({', '.join(_IMPLIED_WGMMA)}), or name the opcode")
            k, types = _IMPLIED_WGMMA[dt]
        return f"wgmma.mma_async.sync.aligned.m64n{n}{k}.{types}"
    if wl.kind == "mma":
        if dt in ("f32", ""):
            return _IMPLIED_FORMS["f16"]
        if dt == "f16":
            return "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
        if dt == "i32":
            return _IMPLIED_FORMS["i8"]
        raise TritonError(f"accumulator element type {dt!r}: name the opcode")
    if dt not in _IMPLIED_FORMS:
        raise TritonError(f"dot operand element type {dt or '(none)'}: give the tensor<..xT, ..> type or --dtype "
                          f"({', '.join(_IMPLIED_FORMS)}), or name the opcode")
    return _IMPLIED_FORMS[dt]


def _spec_bases(ref) -> tuple[list, list] | None:
    """(element-bit bases, lane bases) of a spec fragment, if it is GF(2)-linear at 0."""
    if ref.at(0, 0, 0)[:2] != (0, 0):
        return None
    n = ref.elements
    e = n.bit_length() - 1
    if 1 << e != n:
        return None
    elem = [ref.at(0, *divmod(1 << p, ref.epr))[:2] for p in range(e)]
    lane = [ref.at(1 << p, 0, 0)[:2] for p in range(5)]
    return [list(x) for x in elem], [list(x) for x in lane]


def tile_bits(wl: WholeLayout, ref, bits: int | None = None) -> tuple[list[int], str]:
    """Which register bits of the whole layout index the instruction's element ``i`` (bit p of i
    -> register bit tile_bits[p]), and why.

    Dot operands with ``kWidth * bits > 32`` follow Triton's mma v2 lowering (MMAv2.cpp,
    getValuesFromDotOperandLayoutStruct, "largeK"): instruction j of a K tile takes the j-th
    32-bit slice of each run of kWidth values, so the register bits between one register and
    kWidth values select the instruction, not the element.  Otherwise: the register bits whose
    bases equal the spec's element bases, if there are such; else the lowest ones."""
    reg = wl.bases["register"]
    n = ref.elements
    e = n.bit_length() - 1
    if 1 << e != n:
        raise TritonError(f"{ref.name}: {n} elements per lane is not a power of two; no Triton tile")
    if e > len(reg):
        raise TritonError(f"the layout has {1 << len(reg)} values per thread; one {ref.name} tile needs {n}")
    kwidth = wl.kwidth if wl.kind == "dot" else None
    if wl.kind == "linear" and ref.operand in ("a", "b") and _spec_match(reg, ref) is None:
        # a dot operand pasted as #ttg.linear: kWidth = the run of unit K steps in the low registers
        kdim = 1 if ref.operand == "a" else 0
        run = 0
        while run < len(reg) and reg[run] == _unit(kdim, 1 << run):
            run += 1
        kwidth = 1 << run
    if kwidth:
        b = bits or _DTYPE_BITS.get((wl.dtype or "").lower().replace("e4m3fn", "e4m3"), ref.elem_bits)
        v = max(32 // b, 1)
        if kwidth > v:
            lo = _log2(v, "values per register")
            skip = _log2(kwidth, "kWidth") - lo
            picked = list(range(lo)) + list(range(lo + skip, e + skip))
            if picked[-1] >= len(reg):
                raise TritonError("the layout has too few registers for Triton's large-kWidth split")
            if reg[picked[-1]] == [0, 0]:
                # K smaller than the kWidth tile (its K repeat is a broadcast): the lowering's
                # "kIters > repK" branch takes the instruction's upper K half from the next
                # register of the same run and moves the broadcast copies to the end
                picked[-1] = lo
                return picked, (f"Triton mma v2 lowering, kWidth {kwidth} > {v} values per register, K smaller "
                                f"than the kWidth tile: register bits {picked} form one instruction's elements")
            return picked, (f"Triton mma v2 lowering, kWidth {kwidth} > {v} values per register: "
                            f"register bits {picked} form one instruction's elements")
        return list(range(e)), (f"Triton mma {'v3 (wgmma)' if ref.warps > 1 else 'v2'} lowering: the first {n} values "
                                f"of a thread form one instruction")
    picked = _spec_match(reg, ref)
    if picked is not None:
        return picked, f"register bits {picked} carry the spec's element bases"
    return list(range(e)), f"the first {n} values of a thread (no register bits carry the spec's element bases)"


def _spec_match(reg: list, ref) -> list[int] | None:
    """Register bits whose bases are the spec's element bases, in element-bit order, or None."""
    sb = _spec_bases(ref)
    if sb is None:
        return None
    picked: list[int] = []
    for w in sb[0]:
        hit = [k for k, r in enumerate(reg) if r == w and k not in picked]
        if not hit:
            return None
        picked.append(hit[0])
    return picked


@dataclass
class TileReport:
    index: int
    select: dict            # the non-tile register bits, warp and block that pick this tile
    origin: tuple           # (row, col) of the tile in the tensor
    status: str             # proved | refuted | unknown
    witness: dict | None
    detail: str
    same_as: int | None     # an earlier tile with the same local layout (proved once)

    def to_dict(self) -> dict:
        return {"tile": self.index, "select": self.select, "origin": list(self.origin), "status": self.status,
                "witness": self.witness, "detail": self.detail, "same_layout_as": self.same_as}


@dataclass
class WholeReport:
    form: str
    operand: str
    spec_entry: str
    shape: tuple
    bits: list
    how: str
    tiles: list
    coverage: dict

    @property
    def status(self) -> str:
        """proved | refuted | unknown | relabelled: every tile the spec's, or equal to it up to a
        relabelling of its axes (its partner operands must relabel them the same way: undecided
        from one operand, see :func:`audit_pair`)."""
        st = [t.status for t in self.tiles]
        if "refuted" in st or not self.coverage["complete"]:
            return "refuted"
        if "unknown" in st:
            return "unknown"
        return "relabelled" if "relabelled" in st else "proved"

    @property
    def relabelled_axes(self) -> list[str]:
        return sorted({ax for t in self.tiles if t.status == "relabelled" for ax in (t.witness or {}).get("relabelled", {})})

    def to_dict(self) -> dict:
        return {"form": self.form, "operand": self.operand, "spec_entry": self.spec_entry, "shape": list(self.shape),
                "tile_register_bits": self.bits, "tile_rule": self.how, "status": self.status,
                "tiles_total": len(self.tiles),
                "tiles_proved": sum(t.status == "proved" for t in self.tiles),
                "tiles_refuted": sum(t.status == "refuted" for t in self.tiles),
                "tiles_relabelled": sum(t.status == "relabelled" for t in self.tiles),
                "relabelled_axes": self.relabelled_axes,
                "coverage": self.coverage, "tiles": [t.to_dict() for t in self.tiles]}


def tile_verdict(lay, form, op: str, rep, compare_bits: bool, timeout_ms: int) -> tuple[str, dict | None, str]:
    """(status, witness, detail) of one audited tile: a refuted tile that equals the spec up to
    a relabelling of its axes (:func:`formal.transform.atom.relabelling`) is "relabelled", with the
    permutations and the first difference from the spec."""
    bad = next((r for r in rep.results if r.status != "proved"), None)
    if bad is None:
        return rep.status, None, "equal to the spec and bijective"
    wit = getattr(bad, "witness", None)
    detail = f"{bad.obligation.family}: {getattr(bad, 'reason', '') or ''}".strip(": ")
    if rep.status == "refuted":
        from .atom import relabelling

        ar = relabelling(form, op, lay, timeout_ms=timeout_ms)
        if ar is not None:
            axes = {ax: pi for ax, pi in ar.permutations.items() if pi != list(range(len(pi)))}
            return "relabelled", {"relabelled": axes, "differs_from_spec": wit}, (
                f"equal to the spec up to a relabelling of {' and '.join(axes)} (proved by audit-atom with the "
                f"other operands relabelled the same way)")
    return rep.status, wit, detail


def _xor(vecs: Sequence[Sequence[int]], idx, nb: int):
    """XOR of the bases picked by the bits of idx (numpy, vectorised) -> (dim0, dim1)."""
    import numpy as np

    idx = np.asarray(idx, dtype=np.int64)
    r = np.zeros_like(idx)
    c = np.zeros_like(idx)
    for k in range(nb):
        on = (idx >> k) & 1
        r ^= on * vecs[k][0]
        c ^= on * vecs[k][1]
    return r, c


def tiles(wl: WholeLayout, form_or_opcode, operand: str, **params):
    """Cut a whole layout into instruction tiles: yields (select, origin, local Layout)."""
    import numpy as np

    from ..layout import Layout, fragment

    ref = fragment(form_or_opcode, operand, **params)
    if ref.products > 1:
        raise TritonError(f"{ref.name}: forms with several products per warp have no Triton mma v2 layout")
    if ref.warps > 1 and form_or_opcode is not None:
        from .. import catalog as cat
        f = form_or_opcode if isinstance(form_or_opcode, cat.Form) else cat.parse(form_or_opcode)
        if f.family == "wgmma" and operand == "a":
            form_or_opcode = f.with_asource("reg")
    lane = wl.bases.get("lane", [])
    if len(lane) != 5:
        raise TritonError(f"the layout has {1 << len(lane)} lanes (5 lane bases); a warp has 32")
    # a warpgroup instruction (wgmma) spans the first log2(warps) warp bits: 4 consecutive warps
    wbits = (ref.warps - 1).bit_length()
    warp = wl.bases.get("warp", [])
    if len(warp) < wbits:
        raise TritonError(f"{ref.name} is a warpgroup fragment ({ref.warps} warps); the layout has {1 << len(warp)}")
    bits, how = tile_bits(wl, ref)
    reg = wl.bases["register"]
    rest = [("register", k) for k in range(len(reg)) if k not in bits]
    rest += [("warp", k) for k in range(wbits, len(warp))]
    rest += [("block", k) for k in range(len(wl.bases.get("block", [])))]
    e = len(bits)
    nthr = 32 << wbits
    L = np.repeat(np.arange(nthr), 1 << e)
    I = np.tile(np.arange(1 << e), nthr)
    lr, lc = _xor(lane + warp[:wbits], L, 5 + wbits)
    ir, ic = _xor([reg[b] for b in bits], I, e)
    loc_r, loc_c = lr ^ ir, lc ^ ic
    R, C = ref.rows, ref.cols
    out = []
    for t in range(1 << len(rest)):
        sel, orr, occ = {"register": 0, "warp": 0, "block": 0}, 0, 0
        for k, (d, pos) in enumerate(rest):
            if (t >> k) & 1:
                v = wl.bases[d][pos]
                orr ^= v[0]
                occ ^= v[1]
                sel[d] |= 1 << pos
        rows, cols = loc_r ^ orr, loc_c ^ occ
        r0, c0 = int(rows.min()) // R * R, int(cols.min()) // C * C
        recs = zip(L.tolist(), *np.divmod(I, ref.epr), (rows - r0).tolist(), (cols - c0).tolist())
        lay = Layout.from_table(list(recs), like=ref, name=f"tile {t}", params=dict(ref.params))
        out.append((sel, (r0, c0), lay, (rows, cols)))
    return out, bits, how, ref


def audit_whole(wl: WholeLayout, form_or_opcode=None, operand: str | None = None, *, compare_bits: bool = False,
                timeout_ms: int = 20000, **params) -> WholeReport:
    """Audit every instruction tile of a whole Triton layout against the spec (Z3 + enumeration
    per distinct tile; tiles with the same local layout share the proof).  Also checks that
    the tiles cover the tensor: every aligned instruction box is some tile's."""
    import numpy as np

    from .. import catalog as cat
    from ..layout import normalize_operand
    from ..prove import audit_layout as audit

    form = cat.parse(form_or_opcode or implied_form(wl)) if not isinstance(form_or_opcode, cat.Form) else form_or_opcode
    op = normalize_operand(operand) if operand else wl.operand
    if form.family == "wgmma":
        if op == "c":
            op = "d"                                   # wgmma's accumulator is d
        if op == "a":
            form = form.with_asource("reg")            # a Triton dot operand is A in registers
    if op is None:
        raise TritonError("a #ttg.linear layout: name the operand (--operand a|b|c|d)")
    if wl.kind == "dot" and op not in ("ab"[wl.op_idx],):
        raise TritonError(f"the encoding is a dot operand opIdx = {wl.op_idx} (operand {'ab'[wl.op_idx]}), "
                          f"not operand {op}")
    if wl.kind == "mma" and op not in ("c", "d"):
        raise TritonError(f"an #ttg.nvidia_mma encoding is the accumulator (operand c or d), not operand {op}")
    if wl.kind in ("mma", "dot") and (form.family == "wgmma") != (_v3_n(wl) is not None):
        raise TritonError(f"an mma v{3 if _v3_n(wl) is not None else 2} encoding is not {form.opcode}'s layout "
                          f"(v2 is warp-level mma.sync, v3 is wgmma)")
    if False:
        raise TritonError(f"an #ttg.nvidia_mma encoding is the accumulator (operand c or d), not operand {op}")
    found, bits, how, ref = tiles(wl, form, op, **params)
    reports, seen = [], {}
    shape = tuple(wl.shape or wl.covered())
    held = np.zeros(shape, dtype=np.int64)
    outside = None
    for k, (sel, origin, lay, (rows, cols)) in enumerate(found):
        ok = (rows >= 0) & (rows < shape[0]) & (cols >= 0) & (cols < shape[1])
        if not ok.all() and outside is None:
            outside = [int(rows[~ok][0]), int(cols[~ok][0])]
        np.add.at(held, (rows[ok], cols[ok]), 1)
        key = lay.map_key
        if key in seen:
            first = reports[seen[key]]
            reports.append(TileReport(k, sel, origin, first.status, first.witness, first.detail, first.index))
            continue
        rep = audit(lay, form, op, compare_bits=compare_bits, timeout_ms=timeout_ms, **params)
        seen[key] = len(reports)
        reports.append(TileReport(k, sel, origin, *tile_verdict(lay, form, op, rep, compare_bits, timeout_ms), None))
    miss = np.argwhere(held == 0)
    cov = {"cells": int(held.size), "held": int((held > 0).sum()), "complete": miss.size == 0 and outside is None,
           "first_missing": [int(x) for x in miss[0]] if miss.size else None, "first_outside": outside,
           "copies": sorted({int(x) for x in np.unique(held[held > 0])})}
    return WholeReport(form.opcode, op, ref.name, shape, bits, how, reports, cov)


@dataclass
class PairReport:
    """A and B dot operands audited together (:func:`audit_pair`)."""

    form: str
    a: WholeReport
    b: WholeReport
    pairs: list              # {"k": [...], "a_tiles": [...], "b_tiles": [...], "status", "K", "witness"}
    unpaired: list           # {"operand", "tile", "k"}: a tile whose k set no tile of the other holds

    @property
    def status(self) -> str:
        sts = [self.a.status, self.b.status]
        if "refuted" in sts or self.unpaired or any(p["status"] == "refuted" for p in self.pairs):
            return "refuted"
        if "unknown" in sts or any(p["status"] == "unknown" for p in self.pairs):
            return "unknown"
        return "proved"

    def to_dict(self) -> dict:
        return {"form": self.form, "status": self.status, "a": self.a.to_dict(), "b": self.b.to_dict(),
                "pairs": self.pairs, "unpaired": self.unpaired,
                "relabelled_axes": sorted(set(self.a.relabelled_axes) | set(self.b.relabelled_axes))}


def audit_pair(wa: WholeLayout, wb: WholeLayout, form_or_opcode=None, *, compare_bits: bool = False,
               timeout_ms: int = 20000) -> PairReport:
    """A and B of one ``tt.dot`` together: each operand's tiles are audited (:func:`audit_whole`),
    then every A tile is paired with the B tiles that hold the same set of k (what the
    instruction sums over; Triton's lowering gives the j-th instruction of a K tile the j-th
    slice of both operands) and each distinct pair is proved by :func:`formal.transform.atom.audit_atom`:
    A and B relabel K the same way, M and N are the spec's.  Relabelled tiles (large kWidth)
    are PROVED this way; an A tile with no B tile over its k set is refuted."""
    import numpy as np

    from .. import catalog as cat
    from .atom import audit_atom

    form = (form_or_opcode if isinstance(form_or_opcode, cat.Form) else
            cat.parse(form_or_opcode or implied_form(wa if wa.kind == "dot" else wb)))
    ra = audit_whole(wa, form, "a", compare_bits=compare_bits, timeout_ms=timeout_ms)
    rb = audit_whole(wb, form, "b", compare_bits=compare_bits, timeout_ms=timeout_ms)
    ta, _, _, _ = tiles(wa, form, "a")
    tb, _, _, _ = tiles(wb, form, "b")

    def kset(cells):
        return tuple(sorted({int(x) for x in np.asarray(cells).ravel()}))

    ga: dict = {}
    gb: dict = {}
    for i, (_, _, lay, (rows, cols)) in enumerate(ta):
        ga.setdefault(kset(cols), []).append((i, lay))
    for j, (_, _, lay, (rows, cols)) in enumerate(tb):
        gb.setdefault(kset(rows), []).append((j, lay))
    pairs, unpaired = [], []
    for ks, items in ga.items():
        if ks not in gb:
            unpaired += [{"operand": "a", "tile": i, "k": list(ks)} for i, _ in items[:1]]
    for ks, items in gb.items():
        if ks not in ga:
            unpaired += [{"operand": "b", "tile": j, "k": list(ks)} for j, _ in items[:1]]
    for ks in ga:
        if ks not in gb:
            continue
        done: dict = {}
        for i, la in ga[ks]:
            for j, lb in gb[ks]:
                key = (la.map_key, lb.map_key)
                if key in done:
                    continue
                rep = audit_atom(form, {"a": la, "b": lb}, timeout_ms=timeout_ms)
                bad = next((r for r in rep.results if r.status != "proved"), None)
                done[key] = True
                pairs.append({"k": list(ks), "a_tile": i, "b_tile": j, "status": rep.status,
                              "K": rep.permutations.get("K"), "detail": bad.obligation.family if bad else "atom",
                              "witness": getattr(bad, "witness", None) if bad is not None else None})
    return PairReport(form.opcode, ra, rb, pairs, unpaired)


# ---------------------------------------------------------------- linear maps, export, endpoints
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
    if isinstance(layout, RegLayout):
        return layout.map
    if isinstance(layout, Layout):
        return LayoutMap(layout)
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
