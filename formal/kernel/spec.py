"""Kernel specs: how to launch a PTX kernel and what it must compute.

A spec is a small TOML file (or the equivalent dict)::

    entry = "mm"                  # the .entry (optional when the module has one)
    grid = [2, 2, 1]              # launch configuration (1 to 3 numbers each)
    block = [128, 1, 1]
    shared_bytes = 49152          # dynamic shared memory (extern .shared arrays), default 0
    [params]                      # scalar parameters by PTX name, or "#3" for the 4th
    mm_param_3 = 128
    [[buffer]]                    # a global buffer behind a pointer parameter
    name = "A"
    param = "mm_param_0"          # a pointer parameter no buffer names is passed as null
    type = "f16"                  # element type as PTX names it
    shape = [128, 64]
    strides = [64, 1]             # in elements; default row-major
    # sparse = "2:4", metadata = "E", logical_shape = [M, K]: a compressed structured-sparse
    # lhs and its metadata buffer (one nibble idx0 | idx1 << 2 per 4-column chunk, u8);
    # generate = "sparse_meta_2of4" makes make_inputs write legal metadata
    [contract]
    C = "A @ B"                   # also "A @ B + C", "A.T @ B", "A @ B.T"

Buffers of rank 3 are batched (``[batch, rows, cols]``); the contract applies per batch.
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

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise SpecError(f"{self.source}: no buffer named {name!r}")

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


def _buffer(d: Any, i: int, src: str) -> Buffer:
    where = f"{src}: buffer #{i + 1}"
    if not isinstance(d, dict):
        raise SpecError(f"{where} must be a table")
    for k in ("name", "param", "type", "shape"):
        if k not in d:
            raise SpecError(f"{where} lacks the key {k!r}")
    name, param, typ = d["name"], d["param"], d["type"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SpecError(f"{where}: name must be an identifier, got {_short(name)}")
    where = f"{src}: buffer {name!r}"
    if not isinstance(param, str) or not (_NAME.fullmatch(param) or re.fullmatch(r"#\d+", param)):
        raise SpecError(f"{where}: param must be a parameter name or '#N', got {_short(param)}")
    if not isinstance(typ, str) or typ.lstrip(".") not in format_table():
        raise SpecError(f"{where}: unknown element type {_short(typ)}; known: {', '.join(sorted(format_table()))}")
    typ = typ.lstrip(".")
    shape = d["shape"]
    if not isinstance(shape, list) or not 1 <= len(shape) <= 4:
        raise SpecError(f"{where}: shape must be a list of 1 to 4 integers")
    shape = tuple(_int(x, f"buffer {name!r} shape", src, 1) for x in shape)
    if "strides" in d:
        st = d["strides"]
        if not isinstance(st, list) or len(st) != len(shape):
            raise SpecError(f"{where}: strides must be a list of {len(shape)} integers")
        strides = tuple(_int(x, f"buffer {name!r} strides", src, 0) for x in st)
    else:
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    b = Buffer(name, param, typ, shape, strides, {k: v for k, v in d.items()
                                                  if k not in ("name", "param", "type", "shape", "strides")})
    if int(np.prod(shape)) > MAX_ELEMENTS or b.span > MAX_ELEMENTS:
        raise SpecError(f"{where}: {int(np.prod(shape))} elements is more than the limit {MAX_ELEMENTS}")
    return b


def parse_contract(out: str, text: Any, src: str = "<dict>") -> Contract:
    if not isinstance(text, str):
        raise SpecError(f"{src}: contract {out!r} must be a string like \"A @ B + C\"")
    m = _CONTRACT.match(text)
    if not m:
        raise SpecError(f"{src}: contract {out} = {_short(text)} is not of the form "
                        "'X[.T] @ Y[.T] [+ Z]'")
    return Contract(out, m.group(1), m.group(3), bool(m.group(2)), bool(m.group(4)), m.group(5), text.strip())


def load_spec(spec: str | Path | Mapping[str, Any]) -> KernelSpec:
    """Read a spec from a TOML file path, TOML text or a dict; validate every key."""
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
                data = tomllib.loads(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise SpecError(f"{src}: not a TOML kernel spec ({e})") from None
        else:
            src = "<text>"
            try:
                data = tomllib.loads(str(spec))
            except tomllib.TOMLDecodeError as e:
                raise SpecError(f"no such spec file and not TOML text: {_short(str(spec))} ({e})") from None
    elif isinstance(spec, Mapping):
        data = dict(spec)
    else:
        raise SpecError(f"a kernel spec is a path, TOML text or a dict, not {type(spec).__name__}")

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
        if not (_NAME.fullmatch(k) or re.fullmatch(r"#\d+", k)):
            raise SpecError(f"{src}: parameter key {_short(k)} is neither a name nor '#N'")
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise SpecError(f"{src}: parameter {k} must be a number, got {_short(v)}")
    bufs = data.get("buffer", [])
    if not isinstance(bufs, list):
        raise SpecError(f"{src}: buffers are given as [[buffer]] tables")
    buffers = tuple(_buffer(b, i, src) for i, b in enumerate(bufs))
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise SpecError(f"{src}: buffer names repeat: {names}")
    params_used = [b.param for b in buffers]
    if len(set(params_used)) != len(params_used):
        raise SpecError(f"{src}: two buffers name the same parameter: {params_used}")
    contract = data.get("contract", {})
    if not isinstance(contract, dict):
        raise SpecError(f"{src}: [contract] must be a table")
    contracts = tuple(parse_contract(k, v, src) for k, v in contract.items())
    for c in contracts:
        for n in (c.out, c.lhs, c.rhs) + ((c.addend,) if c.addend else ()):
            if n not in names:
                raise SpecError(f"{src}: contract {c.out} = {c.text!r} names {n!r}, which is no buffer")
    known = {"entry", "grid", "block", "shared_bytes", "params", "buffer", "contract"}
    extra = {k: v for k, v in data.items() if k not in known}
    return KernelSpec(entry, grid, block, shared, dict(params), buffers, contracts, extra, src)


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
