"""Kernel specs: how to launch a PTX kernel and what it must compute.

A spec is a small TOML file (or the equivalent dict)::

    entry = "mm"                  # the .entry (optional when the module has one)
    grid = [2, 2, 1]              # launch configuration (1 to 3 numbers each)
    block = [128, 1, 1]
    shared_bytes = 49152          # dynamic shared memory (extern .shared arrays), default 0
    [params]                      # parameters by PTX name, or "#3" for the 4th
    mm_param_3 = 128              # an integer (or a float: f32 / f64 by the parameter's width)
    mm_param_4 = [128, 128, 8]    # 32-bit words, little-endian: a by-value struct (CuTe shapes)
    mm_param_5 = "0x80000000_00000080"   # the whole parameter as one hex number
    [params.mm_param_6]           # a by-value struct, field by field: byte offset = {type = value}
    0 = { s32 = [128, 128, 64] }
    16 = { f32 = 1.0 }
    [[buffer]]                    # a global buffer behind a pointer parameter
    name = "A"
    param = "mm_param_0"          # a pointer parameter no buffer names is passed as null
    offset = 0                    # byte offset of the pointer inside a by-value struct parameter
    type = "f16"                  # element type as PTX names it
    shape = [128, 64]
    strides = [64, 1]             # in elements; default row-major
    [[view]]                      # another layout over a buffer's memory (in-place contracts)
    name = "D"
    buffer = "C"
    layout = "col"                # "row" / "col", or strides = [...]; shape and offset (elements) optional
    # sparse = "2:4", metadata = "E", logical_shape = [M, K]: a compressed structured-sparse
    # lhs and its metadata buffer (one nibble idx0 | idx1 << 2 per 4-column chunk, u8);
    # generate = "sparse_meta_2of4" makes make_inputs write legal metadata
    [contract]
    C = "A @ B"                   # also "A @ B + C", "A.T @ B", "A @ B.T"
    cluster = [1, 1, 1]           # CTAs per cluster (only 1-CTA clusters are executed)
    [[tensormap]]                 # a CUtensorMap passed by value (TMA), as cuTensorMapEncodeTiled takes it
    param = "mm_param_0"          # the .param (.align 64 .b8 [128]); offset = byte of the map in it
    buffer = "A"                  # the buffer whose base address is the map's globalAddress
    type = "f16"                  # tensorDataType: u8 u16 u32 s32 u64 s64 f16 f32 f64 bf16 f32_ftz tf32 tf32_ftz
    dims = [256, 128]             # globalDim, innermost first (as CUDA)
    strides = [512]               # globalStrides in bytes of dims 1 .. rank-1
    box = [64, 64]                # boxDim, innermost first
    element_strides = [1, 1]      # default all 1
    interleave = "none"           # none | 16B | 32B
    swizzle = "128B"              # none | 32B | 64B | 128B
    oob_fill = "zero"             # zero | nan (NAN_REQUEST_ZERO_FMA)
    l2_promotion = "128B"         # none | 64B | 128B | 256B (no effect on values)
    A buffer reached only through a tensor map needs no ``param``.

Unknown keys are errors naming the closest valid key.  Buffers of rank 3 are batched (``[batch, rows, cols]``); the contract applies per batch.
Inputs and outputs are raw encodings: unsigned integers of the element's width
(:func:`raw_dtype`), in the buffer's shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..numerics.formats import format_table, get_format

MAX_ELEMENTS = 1 << 28      # a buffer larger than this is a spec error, not an allocation
MAX_THREADS = 1 << 24       # grid x block
MAX_SPEC_BYTES = 1 << 20    # a kernel spec is small


class SpecError(ValueError):
    """A kernel spec that cannot be used; the message names the key."""


@dataclass(frozen=True)
class Buffer:
    name: str
    param: str
    type: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)   # keys this module does not interpret
    offset: int = 0                 # byte offset of the pointer inside a by-value struct parameter
    view_of: str | None = None      # a view: the buffer whose memory it looks at
    elem_offset: int = 0            # a view: its first element, in elements from the buffer's start

    @property
    def bits(self) -> int:
        return get_format(self.type).bits

    @property
    def span(self) -> int:
        """Elements from the first to one past the last addressed element."""
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.strides))

    @property
    def nbytes(self) -> int:
        return (self.span * self.bits + 7) // 8


@dataclass(frozen=True)
class Contract:
    """``out = lhs[.T] @ rhs[.T] [+ addend]``."""

    out: str
    lhs: str
    rhs: str
    lhs_t: bool = False
    rhs_t: bool = False
    addend: str | None = None
    text: str = ""


TENSORMAP_TYPES = {"u8": 1, "u16": 2, "u32": 4, "s32": 4, "u64": 8, "s64": 8, "f16": 2, "f32": 4, "f64": 8,
                   "bf16": 2, "f32_ftz": 4, "tf32": 4, "tf32_ftz": 4}
SWIZZLE_BYTES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
INTERLEAVE_BYTES = {"none": 0, "16B": 16, "32B": 32}


@dataclass(frozen=True)
class TensorMap:
    """A CUtensorMap parameter (cuTensorMapEncodeTiled's arguments; dimension 0 innermost)."""

    param: str
    buffer: str
    type: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]            # bytes, dims 1 .. rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str = "none"
    swizzle: str = "none"
    oob_fill: str = "zero"
    l2_promotion: str = "none"
    offset: int = 0                     # byte of the map inside the parameter

    @property
    def elem_bytes(self) -> int:
        return TENSORMAP_TYPES[self.type]

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one full-box copy writes to shared memory (out-of-bounds elements included)."""
        n = self.elem_bytes
        for b, e in zip(self.box, self.element_strides):
            n *= -(-b // e)
        return n


@dataclass(frozen=True)
class KernelSpec:
    entry: str | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    params: Mapping[str, int]
    buffers: tuple[Buffer, ...]
    contracts: tuple[Contract, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<dict>"
    views: tuple[Buffer, ...] = ()
    tensormaps: tuple[TensorMap, ...] = ()
    cluster: tuple[int, int, int] = (1, 1, 1)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers + self.views:
            if b.name == name:
                return b
        raise SpecError(f"{self.source}: no buffer named {name!r}")

    def base(self, name: str) -> Buffer:
        """The buffer whose memory ``name`` (a buffer or a view) is."""
        b = self.buffer(name)
        return self.buffer(b.view_of) if b.view_of else b

    @property
    def threads(self) -> int:
        return int(np.prod(self.grid)) * int(np.prod(self.block))


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERAND = r"([A-Za-z_][A-Za-z0-9_]*)(\.T)?"
_CONTRACT = re.compile(rf"\s*{_OPERAND}\s*@\s*{_OPERAND}\s*(?:\+\s*([A-Za-z_][A-Za-z0-9_]*)\s*)?$")


def _dim3(v: Any, key: str, src: str) -> tuple[int, int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list) or not 1 <= len(v) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in v):
        raise SpecError(f"{src}: {key} must be a list of 1 to 3 integers, got {_short(v)}")
    v = list(v) + [1] * (3 - len(v))
    if any(x < 1 or x > (1 << 31) - 1 for x in v):
        raise SpecError(f"{src}: {key} entries must be between 1 and 2^31-1, got {v}")
    return tuple(v)  # type: ignore[return-value]


def _short(v: Any, n: int = 60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def _int(v: Any, key: str, src: str, lo: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise SpecError(f"{src}: {key} must be an integer >= {lo}, got {_short(v)}")
    return v


TOP_KEYS = ("entry", "grid", "block", "shared_bytes", "params", "buffer", "view", "contract", "chained", "note",
            "tensormap", "cluster")
TENSORMAP_KEYS = ("param", "offset", "buffer", "type", "dims", "strides", "box", "element_strides", "interleave",
                  "swizzle", "oob_fill", "l2_promotion")
BUFFER_KEYS = ("name", "param", "offset", "type", "shape", "strides", "sparse", "metadata", "logical_shape",
               "generate", "note", "meaning")
VIEW_KEYS = ("name", "buffer", "layout", "shape", "strides", "offset", "note")


def _known_keys(d: Mapping, known: tuple, where: str) -> None:
    """An unknown key (a typo: ``stides``, ``shred_bytes``) is an error naming the closest valid one."""
    import difflib
    for k in d:
        if k not in known:
            close = difflib.get_close_matches(str(k), known, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(f"{where}: unknown key {_short(k, 40)}{hint}; known: {', '.join(known)}")


def _strides(d: Mapping, shape: tuple, where: str, src: str, name: str) -> tuple:
    st = d["strides"]
    if not isinstance(st, list) or len(st) != len(shape):
        raise SpecError(f"{where}: strides must be a list of {len(shape)} integers")
    return tuple(_int(x, f"buffer {name!r} strides", src, 0) for x in st)


def _shape(v: Any, where: str, src: str, name: str) -> tuple:
    if not isinstance(v, list) or not 1 <= len(v) <= 4:
        raise SpecError(f"{where}: shape must be a list of 1 to 4 integers")
    return tuple(_int(x, f"buffer {name!r} shape", src, 1) for x in v)


def _check_size(b: Buffer, where: str) -> None:
    n = 1
    for x in b.shape:
        n *= x
    if n > MAX_ELEMENTS or b.span > MAX_ELEMENTS:
        raise SpecError(f"{where}: {n} elements (a span of {b.span}) is more than the limit {MAX_ELEMENTS}")


def _buffer(d: Any, i: int, src: str) -> Buffer:
    where = f"{src}: buffer #{i + 1}"
    if not isinstance(d, dict):
        raise SpecError(f"{where} must be a table")
    if isinstance(d.get("name"), str) and _NAME.fullmatch(d["name"]):
        where = f"{src}: buffer {d['name']!r}"
    _known_keys(d, BUFFER_KEYS, where)
    for k in ("name", "type", "shape"):
        if k not in d:
            raise SpecError(f"{where} lacks the key {k!r}")
    name, param, typ = d["name"], d.get("param", ""), d["type"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SpecError(f"{where}: name must be an identifier, got {_short(name)}")
    if param != "" and (not isinstance(param, str) or not (_NAME.fullmatch(param) or re.fullmatch(r"#\d{1,6}", param))):
        raise SpecError(f"{where}: param must be a parameter name or '#N', got {_short(param)}")
    if not isinstance(typ, str) or typ.lstrip(".") not in format_table():
        raise SpecError(f"{where}: unknown element type {_short(typ)}; known: {', '.join(sorted(format_table()))}")
    typ = typ.lstrip(".")
    shape = _shape(d["shape"], where, src, name)
    if "strides" in d:
        strides = _strides(d, shape, where, src, name)
    else:
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    offset = _int(d.get("offset", 0), f"buffer {name!r} offset", src)
    if offset > 1 << 20:
        raise SpecError(f"{where}: offset {offset} is beyond any parameter (4 KiB at most)")
    b = Buffer(name, param, typ, shape, strides, {k: v for k, v in d.items() if k not in
                                                  ("name", "param", "type", "shape", "strides", "offset")}, offset)
    if get_format(typ).bits < 8:
        raise SpecError(f"{where}: {typ} elements are narrower than a byte; give the buffer as bytes (u8) or words")
    _check_size(b, where)
    return b


def _layout_strides(layout: Any, shape: tuple, where: str) -> tuple:
    if layout not in ("row", "col"):
        raise SpecError(f"{where}: layout must be \"row\" or \"col\", got {_short(layout)}")
    if len(shape) < 2:
        raise SpecError(f"{where}: a layout needs a rank-2 (or batched rank-3) shape")
    r, c = shape[-2:]
    inner = (c, 1) if layout == "row" else (1, r)
    outer = tuple(int(np.prod(shape[i + 1:-2])) * r * c for i in range(len(shape) - 2))
    return outer + inner


def _view(d: Any, i: int, src: str, bases: dict) -> Buffer:
    where = f"{src}: view #{i + 1}"
    if not isinstance(d, dict):
        raise SpecError(f"{where} must be a table")
    if isinstance(d.get("name"), str) and _NAME.fullmatch(d["name"]):
        where = f"{src}: view {d['name']!r}"
    _known_keys(d, VIEW_KEYS, where)
    for k in ("name", "buffer"):
        if k not in d:
            raise SpecError(f"{where} lacks the key {k!r}")
    name, base = d["name"], d["buffer"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SpecError(f"{where}: name must be an identifier, got {_short(name)}")
    if base not in bases:
        raise SpecError(f"{where}: buffer = {_short(base)} names no [[buffer]] (buffers: {', '.join(bases) or 'none'})")
    bb = bases[base]
    shape = _shape(d["shape"], where, src, name) if "shape" in d else bb.shape
    if "strides" in d and "layout" in d:
        raise SpecError(f"{where}: give layout or strides, not both")
    if "strides" in d:
        strides = _strides(d, shape, where, src, name)
    else:
        strides = _layout_strides(d.get("layout", "row"), shape, where)
    off = _int(d.get("offset", 0), f"view {name!r} offset", src)
    v = Buffer(name, bb.param, bb.type, shape, strides, {}, bb.offset, base, off)
    _check_size(v, where)
    if off + v.span > bb.span:
        raise SpecError(f"{where}: reaches element {off + v.span - 1} of {base}, which has {bb.span}")
    return v


def _injective(b: Buffer) -> bool:
    """Distinct elements at distinct addresses (a contract operand must not alias itself)."""
    if any(s == 0 for s, n in zip(b.strides, b.shape) if n > 1):
        return False
    n = int(np.prod(b.shape))
    if n > 1 << 22:
        return True                           # too big to enumerate here; the decoder checks each element
    idx = np.zeros(1, dtype=np.int64)
    for s, k in zip(b.strides, b.shape):
        idx = (idx[:, None] + np.arange(k, dtype=np.int64)[None, :] * s).ravel()
    return len(np.unique(idx)) == n


def parse_contract(out: str, text: Any, src: str = "<dict>") -> Contract:
    if not isinstance(text, str):
        raise SpecError(f"{src}: contract {out!r} must be a string like \"A @ B + C\"")
    m = _CONTRACT.match(text)
    if not m:
        raise SpecError(f"{src}: contract {out} = {_short(text)} is not of the form "
                        "'X[.T] @ Y[.T] [+ Z]'")
    return Contract(out, m.group(1), m.group(3), bool(m.group(2)), bool(m.group(4)), m.group(5), text.strip())


def load_spec(spec: str | Path | Mapping[str, Any], source: str | None = None) -> KernelSpec:
    """Read a spec from a TOML file path, TOML text or a dict; validate every key.  ``source``
    names a dict in messages (default ``<dict>``)."""
    src = "<dict>"
    if isinstance(spec, (str, Path)):
        p = Path(spec)
        is_file = False
        try:
            is_file = p.is_file()
        except OSError:
            is_file = False
        if is_file:
            src = str(p)
            try:
                if p.stat().st_size > MAX_SPEC_BYTES:
                    raise SpecError(f"{src}: {p.stat().st_size:,} bytes, more than a kernel spec may have "
                                    f"({MAX_SPEC_BYTES:,})")
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise SpecError(f"{src}: not a TOML kernel spec ({_short(str(e), 200)})") from None
            except RecursionError:
                raise SpecError(f"{src}: nested too deeply to be a kernel spec") from None
        else:
            src = "<text>"
            if len(str(spec)) > MAX_SPEC_BYTES:
                raise SpecError(f"no such spec file, and too long to be TOML text ({len(str(spec)):,} characters)")
            try:
                data = tomllib.loads(str(spec))
            except tomllib.TOMLDecodeError as e:
                raise SpecError(f"no such spec file and not TOML text: {_short(str(spec))} ({_short(str(e), 200)})") from None
            except RecursionError:
                raise SpecError("the spec text is nested too deeply") from None
    elif isinstance(spec, Mapping):
        data = dict(spec)
        src = source or src
    else:
        raise SpecError(f"a kernel spec is a path, TOML text or a dict, not {type(spec).__name__}")
    try:
        return _load(data, src)
    except RecursionError:
        raise SpecError(f"{src}: nested too deeply to be a kernel spec") from None


def _load(data: dict, src: str) -> KernelSpec:
    _known_keys(data, TOP_KEYS, src)
    entry = data.get("entry")
    if entry is not None and (not isinstance(entry, str) or not entry):
        raise SpecError(f"{src}: entry must be a non-empty string")
    for k in ("grid", "block"):
        if k not in data:
            raise SpecError(f"{src}: the key {k!r} is required")
    grid = _dim3(data["grid"], "grid", src)
    block = _dim3(data["block"], "block", src)
    if int(np.prod(block)) > 1024:
        raise SpecError(f"{src}: block has {int(np.prod(block))} threads, more than 1024")
    if int(np.prod(grid)) * int(np.prod(block)) > MAX_THREADS:
        raise SpecError(f"{src}: grid x block is more than {MAX_THREADS} threads")
    shared = _int(data.get("shared_bytes", 0), "shared_bytes", src)
    if shared > 232448:
        raise SpecError(f"{src}: shared_bytes {shared} exceeds the 227 KiB a CTA can have")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise SpecError(f"{src}: [params] must be a table")
    for k, v in params.items():
        if not (_NAME.fullmatch(k) or re.fullmatch(r"#\d{1,6}", k)):
            raise SpecError(f"{src}: parameter key {_short(k)} is neither a name nor '#N'")
        param_value(v, f"{src}: parameter {k}")          # the form; widths are checked against the module
    bufs = data.get("buffer", [])
    if not isinstance(bufs, list):
        raise SpecError(f"{src}: buffers are given as [[buffer]] tables")
    buffers = tuple(_buffer(b, i, src) for i, b in enumerate(bufs))
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise SpecError(f"{src}: buffer names repeat: {names}")
    params_used = [(b.param, b.offset) for b in buffers if b.param]
    if len(set(params_used)) != len(params_used):
        dup = next(p for p in params_used if params_used.count(p) > 1)
        raise SpecError(f"{src}: two buffers name the same parameter {dup[0]}" + (f" at offset {dup[1]}" if dup[1] else "")
                        + "; a second layout over one buffer's memory is a [[view]]")
    views_raw = data.get("view", [])
    if not isinstance(views_raw, list):
        raise SpecError(f"{src}: views are given as [[view]] tables")
    bases = {b.name: b for b in buffers}
    views = tuple(_view(v, i, src, bases) for i, v in enumerate(views_raw))
    allnames = names + [v.name for v in views]
    if len(set(allnames)) != len(allnames):
        raise SpecError(f"{src}: buffer and view names repeat: {allnames}")
    contract = data.get("contract", {})
    if not isinstance(contract, dict):
        raise SpecError(f"{src}: [contract] must be a table")
    contracts = tuple(parse_contract(k, v, src) for k, v in contract.items())
    outs = [c.out for c in contracts]
    for c in contracts:
        for n in (c.out, c.lhs, c.rhs) + ((c.addend,) if c.addend else ()):
            if n not in allnames:
                raise SpecError(f"{src}: contract {c.out} = {c.text!r} names {n!r}, which is no buffer or view "
                                f"(buffers: {', '.join(allnames) or 'none'})")
    if len(set(outs)) != len(outs):
        raise SpecError(f"{src}: two contracts write {outs}")
    by = {b.name: b for b in buffers + views}
    for c in contracts:
        for n in {c.out, c.lhs, c.rhs, c.addend} - {None}:
            if not _injective(by[n]):
                raise SpecError(f"{src}: contract {c.out} = {c.text!r}: the strides of {n} "
                                f"{list(by[n].strides)} put two elements at one address")
    chained = data.get("chained", [])
    if not isinstance(chained, list) or any(x not in outs for x in chained):
        raise SpecError(f"{src}: chained must list contract outputs ({', '.join(outs) or 'none'}), got {_short(chained)}")
    extra = {k: v for k, v in data.items() if k in ("chained", "note")}
    tms = data.get("tensormap", [])
    if not isinstance(tms, list):
        raise SpecError(f"{src}: tensor maps are given as [[tensormap]] tables")
    tensormaps = tuple(_tensormap(t, i, src, bases) for i, t in enumerate(tms))
    for b in buffers:
        # a chained contract's output the kernel keeps in registers (attention's S) is in no memory
        if not b.param and not any(t.buffer == b.name for t in tensormaps) and b.name not in chained:
            raise SpecError(f"{src}: buffer {b.name!r} has no param and no [[tensormap]] names it (a chained "
                            "contract's output held in registers only is listed in chained)")
    used = [(t.param, t.offset) for t in tensormaps] + params_used
    if len(set(used)) != len(used):
        raise SpecError(f"{src}: two tensor maps / buffers name the same parameter bytes: {used}")
    cluster = _dim3(data.get("cluster", [1, 1, 1]), "cluster", src)
    return KernelSpec(entry, grid, block, shared, dict(params), buffers, contracts, extra, src, views, tensormaps,
                      cluster)


def _tensormap(d: Any, i: int, src: str, bases: dict) -> TensorMap:
    """One [[tensormap]], checked as cuTensorMapEncodeTiled checks its arguments (cuda.h, CUDA 13)."""
    where = f"{src}: tensormap #{i + 1}"
    if not isinstance(d, dict):
        raise SpecError(f"{where} must be a table")
    _known_keys(d, TENSORMAP_KEYS, where)
    for k in ("param", "buffer", "type", "dims", "box"):
        if k not in d:
            raise SpecError(f"{where} lacks the key {k!r}")
    param, buf, typ = d["param"], d["buffer"], d["type"]
    if not isinstance(param, str) or not (_NAME.fullmatch(param) or re.fullmatch(r"#\d{1,6}", param)):
        raise SpecError(f"{where}: param must be a parameter name or '#N', got {_short(param)}")
    if buf not in bases:
        raise SpecError(f"{where}: buffer {_short(buf)} is no [[buffer]] (buffers: {', '.join(bases) or 'none'})")
    if typ not in TENSORMAP_TYPES:
        raise SpecError(f"{where}: type {_short(typ)}: one of {', '.join(TENSORMAP_TYPES)}")

    def ints(k, n=None, lo=1, hi=1 << 40):
        v = d[k]
        if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise SpecError(f"{where}: {k} must be a list of integers, got {_short(v)}")
        if n is not None and len(v) != n:
            raise SpecError(f"{where}: {k} has {len(v)} entries, the map's rank needs {n}")
        if any(not lo <= x <= hi for x in v):
            raise SpecError(f"{where}: {k} {v}: each in {lo}..{hi}")
        return tuple(v)
    dims = ints("dims", None, 1, 1 << 32)
    rank = len(dims)
    if rank > 5:
        raise SpecError(f"{where}: rank {rank}: a tensor map has 1 to 5 dimensions")
    strides = ints("strides", rank - 1, 16, (1 << 40) - 1) if rank > 1 else ()
    if rank > 1 and "strides" not in d:
        raise SpecError(f"{where} lacks the key 'strides' (bytes, dims 1 .. rank-1)")
    if any(x % 16 for x in strides):
        raise SpecError(f"{where}: strides {list(strides)} must be multiples of 16 bytes")
    box = ints("box", rank, 1, 256)
    es = ints("element_strides", rank, 1, 8) if "element_strides" in d else (1,) * rank
    opts = {}
    for k, table, dflt in (("interleave", INTERLEAVE_BYTES, "none"), ("swizzle", SWIZZLE_BYTES, "none"),
                           ("oob_fill", {"zero": 0, "nan": 1}, "zero"),
                           ("l2_promotion", {"none": 0, "64B": 1, "128B": 2, "256B": 3}, "none")):
        v = d.get(k, dflt)
        if v not in table:
            raise SpecError(f"{where}: {k} {_short(v)}: one of {', '.join(table)}")
        opts[k] = v
    eb = TENSORMAP_TYPES[typ]
    if opts["interleave"] == "none" and box[0] * eb % 16:
        raise SpecError(f"{where}: box[0] x {eb} bytes = {box[0] * eb} must be a multiple of 16 (no interleave)")
    sw = SWIZZLE_BYTES[opts["swizzle"]]
    if sw and opts["interleave"] == "none" and box[0] * eb > sw:
        raise SpecError(f"{where}: the inner box dimension ({box[0] * eb} bytes) exceeds the {sw}-byte swizzle span")
    off = _int(d.get("offset", 0), "tensormap offset", src)
    if off % 64:
        raise SpecError(f"{where}: offset {off} must be a multiple of 64 (a CUtensorMap is 64-byte aligned)")
    return TensorMap(param, buf, typ, dims, strides, box, es, opts["interleave"], opts["swizzle"], opts["oob_fill"],
                     opts["l2_promotion"], off)


def param_value(v: Any, where: str) -> None:
    """The forms a [params] value may take (see the module docstring); raises SpecError."""
    if isinstance(v, bool):
        raise SpecError(f"{where} must be a number, a list of 32-bit words, a hex string or a table of fields, "
                        f"got {_short(v)}")
    if isinstance(v, (int, float)):
        return
    if isinstance(v, list):
        if not v or len(v) > 1024 or not all(isinstance(w, int) and not isinstance(w, bool)
                                             and -(1 << 31) <= w < (1 << 32) for w in v):
            raise SpecError(f"{where}: a list gives 32-bit words (integers in -2^31 .. 2^32-1), got {_short(v)}")
        return
    if isinstance(v, str):
        h = v.replace("_", "")
        if not re.fullmatch(r"0[xX][0-9a-fA-F]{1,2048}", h):
            raise SpecError(f"{where}: a string gives the parameter as one hex number \"0x...\", got {_short(v)}")
        return
    if isinstance(v, dict):
        for off, fld in v.items():
            if not re.fullmatch(r"\d{1,5}", str(off)):
                raise SpecError(f"{where}: field keys are byte offsets (0, 8, 16, ...), got {_short(off)}")
            if not isinstance(fld, dict) or len(fld) != 1:
                raise SpecError(f"{where}: field {off} must be {{TYPE = VALUE}} (e.g. {{ u32 = 5 }}, "
                                f"{{ f32 = [1.0, 2.0] }}), got {_short(fld)}")
            (typ, val), = fld.items()
            if typ not in FIELD_TYPES:
                import difflib
                close = difflib.get_close_matches(typ, list(FIELD_TYPES), n=1)
                raise SpecError(f"{where}: field {off}: unknown type {_short(typ)}"
                                + (f" (did you mean {close[0]!r}?)" if close else "")
                                + f"; known: {', '.join(FIELD_TYPES)}")
            vals = val if isinstance(val, list) else [val]
            if not vals or len(vals) > 4096 or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                       for x in vals):
                raise SpecError(f"{where}: field {off}: a number or a list of numbers, got {_short(val)}")
        return
    raise SpecError(f"{where} must be a number, a list of 32-bit words, a hex string or a table of fields, "
                    f"got {_short(v)}")


FIELD_TYPES = {f"{k}{w}": w // 8 for k in "usb" for w in (8, 16, 32, 64)} | {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def check_inputs(spec: KernelSpec, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Input arrays for a run: each names a buffer (not a view) and holds raw encodings of its element
    type (integers of its width; a float array is values, not encodings: an error) in its shape.
    Returns them as the unsigned raw dtype (negative values of a signed array as two's complement)."""
    out = {}
    names = [b.name for b in spec.buffers]
    for k, arr in inputs.items():
        if k not in names:
            v = next((v for v in spec.views if v.name == k), None)
            if v is not None:
                raise SpecError(f"input {k!r} is a view of buffer {v.view_of}: give {v.view_of}'s contents")
            raise SpecError(f"input array {_short(k, 40)} names no buffer of the spec (buffers: {', '.join(names) or 'none'})")
        b = spec.buffer(k)
        a = np.asarray(arr)
        dt = raw_dtype(b.type)
        if a.dtype.kind not in "ui":
            raise SpecError(f"input {k}: dtype {a.dtype}; inputs are raw encodings of .{b.type} (integers of "
                            f"{b.bits} bits, e.g. {np.dtype(dt).name}), not values")
        if tuple(a.shape) != tuple(b.shape):
            raise SpecError(f"input {k} has shape {list(a.shape)}, the spec says {list(b.shape)}")
        if a.size:
            lo, hi = int(a.min()), int(a.max())
            if hi >= (1 << b.bits) or lo < -(1 << (b.bits - 1)):
                raise SpecError(f"input {k}: values {lo} .. {hi} are not {b.bits}-bit encodings of .{b.type}")
        out[k] = a.astype(dt) if a.dtype.kind == "u" or a.size == 0 or lo >= 0 else \
            (a.astype(np.int64) & ((1 << b.bits) - 1)).astype(dt)
    return out


def raw_dtype(type_name: str) -> type:
    """The unsigned numpy dtype that holds one raw encoding of ``type_name``."""
    bits = get_format(type_name).bits
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64


def make_inputs(spec: KernelSpec, seed: int = 0, names: list[str] | None = None,
                regime: str = "normal") -> dict[str, np.ndarray]:
    """Deterministic raw-encoded inputs for the named buffers (default: every buffer).

    ``regime="normal"``: floats are finite values of moderate magnitude (no overflow in
    a K <= 4096 dot product), integers uniform over their range; ``"bits"``: uniform
    raw encodings (NaN, Inf, subnormals included).
    """
    from ..numerics.formats import from_float64

    out = {}
    for i, b in enumerate(spec.buffers):
        if names is not None and b.name not in names:
            continue
        rng = np.random.default_rng([seed, i])
        fmt = get_format(b.type)
        dt = raw_dtype(b.type)
        n = int(np.prod(b.shape))
        if regime == "bits" or not fmt.is_float:
            codes = rng.integers(0, 1 << fmt.bits, size=n, dtype=np.uint64)
        elif regime == "normal":
            vals = rng.choice([-1.0, 1.0], n) * rng.uniform(0.125, 2.0, n)
            codes = np.asarray(from_float64(vals, fmt), dtype=np.uint64)
        else:
            raise SpecError(f"unknown input regime {regime!r} (normal, bits)")
        out[b.name] = codes.astype(dt).reshape(b.shape)
        if b.extra.get("generate") == "sparse_meta_2of4":
            # legal 2:4 metadata: two distinct positions idx0 < idx1 of four, nibble idx0 | idx1 << 2
            legal = np.array([0b0100, 0b1000, 0b1100, 0b1001, 0b1101, 0b1110], dtype=np.uint8)
            out[b.name] = legal[rng.integers(0, len(legal), size=b.shape)].astype(dt)
        elif b.extra.get("generate") is not None:
            raise SpecError(f"{spec.source}: buffer {b.name!r}: unknown generate = {b.extra['generate']!r} "
                            "(known: sparse_meta_2of4)")
    return out


def spec_toml(data: Mapping[str, Any]) -> str:
    """The TOML text of a spec given as a dict (the form :func:`load_spec` reads): the launch keys,
    ``[params]`` (scalar values), each ``[[buffer]]``, ``[contract]``."""
    import json

    def val(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return str(v)

    lines = []
    for k in ("entry", "grid", "block", "shared_bytes"):
        lines.append(f"{k} = {val(data[k])}")
    for k, v in data.items():
        if k not in ("entry", "grid", "block", "shared_bytes", "params", "buffer", "contract") and not isinstance(v, dict):
            lines.append(f"{k} = {val(v)}")
    lines.append("")
    lines.append("[params]")
    lines += [f"{k} = {val(v)}" for k, v in data.get("params", {}).items()]
    for b in data["buffer"]:
        lines.append("")
        lines.append("[[buffer]]")
        lines += [f"{k} = {val(v)}" for k, v in b.items()]
    lines.append("")
    lines.append("[contract]")
    lines += [f"{k} = {val(v)}" for k, v in data["contract"].items()]
    for k, v in data.items():
        if isinstance(v, dict) and k not in ("params", "contract"):
            lines.append("")
            lines.append(f"[{k}]")
            lines += [f"{k2} = {val(v2)}" for k2, v2 in v.items()]
    return "\n".join(lines) + "\n"
