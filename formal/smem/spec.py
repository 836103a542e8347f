"""``specs/wgmma_smem.toml`` as typed tables (descriptor fields, swizzle modes, canonical
layouts, operands, model choices).  Nothing here knows a PTX fact the file does not state."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..catalog import BadArgument
from ..specdata import load_spec

SPEC = "wgmma_smem"


class SmemError(BadArgument):
    """Bad input to formal.smem (a field out of range, an unknown mode, ...): exit 2 in the CLI."""


@dataclass(frozen=True)
class Field:
    name: str
    lo: int
    width: int
    unit_bytes: int          # 16 for start/lbo/sbo (the field holds bytes >> 4), 0 otherwise
    what: str
    quote: str

    @property
    def hi(self) -> int:
        return self.lo + self.width - 1

    @property
    def limit(self) -> int:
        return 1 << self.width

    @property
    def mask(self) -> int:
        return (self.limit - 1) << self.lo


@dataclass(frozen=True)
class Mode:
    """A swizzle mode: Swizzle<B, M, S> on byte addresses."""
    name: str                # none | 32B | 64B | 128B
    code: int                # the descriptor's 2-bit code
    B: int
    M: int
    S: int
    width_bytes: int         # bytes of one swizzled row (16 for none)
    pattern_bytes: int       # the repeating pattern: 2^(M+S+B) (128 for none)
    cute: str

    @property
    def W(self) -> int:
        """Swizzle width in 16-byte chunks (1, 2, 4, 8)."""
        return self.width_bytes // 16


@dataclass(frozen=True)
class Canonical:
    major: str               # K | MN
    swizzle: str             # mode name
    isa: str                 # the ISA's cell, verbatim
    isa_swizzle: str
    shape: tuple             # ((expr, ...), (expr, ...)): mode 0 = mn, mode 1 = k
    stride: tuple


@dataclass(frozen=True)
class OperandSpec:
    name: str                # a | b | a.sp | b.sp
    what: str
    mn: Any                  # 64 or "N"
    k_bytes: int
    types: tuple | None


def _tup(x) -> tuple:
    return tuple(_tup(y) for y in x) if isinstance(x, list) else str(x)


@lru_cache(maxsize=1)
def raw() -> dict:
    return load_spec(SPEC)


@lru_cache(maxsize=1)
def fields() -> tuple[Field, ...]:
    return tuple(Field(f["name"], int(f["lo"]), int(f["width"]), int(f.get("unit_bytes", 0)), f["what"], f["quote"])
                 for f in raw()["descriptor"]["field"])


def field(name: str) -> Field:
    for f in fields():
        if f.name == name:
            return f
    raise SmemError(f"no descriptor field {name!r} (fields: {', '.join(f.name for f in fields())})")


@lru_cache(maxsize=1)
def reserved() -> tuple[tuple[int, int], ...]:
    """(lo, width) of the bits the descriptor table does not describe."""
    return tuple((int(r["lo"]), int(r["width"])) for r in raw()["descriptor"]["reserved"])


def reserved_mask() -> int:
    m = 0
    for lo, w in reserved():
        m |= ((1 << w) - 1) << lo
    return m


@lru_cache(maxsize=1)
def modes() -> tuple[Mode, ...]:
    return tuple(Mode(m["name"], int(m["code"]), int(m["B"]), int(m["M"]), int(m["S"]), int(m["width_bytes"]),
                      int(m["pattern_bytes"]), m["cute"]) for m in raw()["swizzle"]["mode"])


_MODE_ALIASES = {"0": "none", "interleave": "none", "no": "none", "16": "none", "16b": "none",
                 "32": "32B", "64": "64B", "128": "128B"}


def mode(name_or_code: str | int) -> Mode:
    """A swizzle mode by name ('128B', '128', 'none'), by bytes (128, 0) or by descriptor code
    (``code=True`` is not needed: use :func:`mode_by_code`)."""
    key = str(name_or_code).strip()
    key = _MODE_ALIASES.get(key.lower(), key)
    for m in modes():
        if m.name.lower() == key.lower():
            return m
    raise SmemError(f"unknown swizzle mode {name_or_code!r} (none, 32B, 64B, 128B)")


def mode_by_code(code: int) -> Mode:
    for m in modes():
        if m.code == code:
            return m
    raise SmemError(f"swizzle code {code} is not 0..3")


@lru_cache(maxsize=1)
def canonicals() -> tuple[Canonical, ...]:
    return tuple(Canonical(c["major"], c["swizzle"], c["isa"], c["isa_swizzle"], _tup(c["shape"]), _tup(c["stride"]))
                 for c in raw()["canonical"]["layout"])


def canonical(major: str, swizzle: str) -> Canonical:
    major = normalize_major(major)
    sw = mode(swizzle).name
    for c in canonicals():
        if c.major == major and c.swizzle == sw:
            return c
    raise SmemError(f"no canonical layout for {major}-major, swizzle {sw}")


def normalize_major(major: str) -> str:
    m = str(major).strip().upper()
    if m in ("K", "K-MAJOR", "KMAJOR"):
        return "K"
    if m in ("MN", "M", "N", "MN-MAJOR", "M-MAJOR", "N-MAJOR", "MNMAJOR"):
        return "MN"
    raise SmemError(f"major-ness must be K or MN, got {major!r}")


@lru_cache(maxsize=1)
def operand_specs() -> tuple[OperandSpec, ...]:
    return tuple(OperandSpec(o["name"], o["what"], o["mn"], int(o["k_bytes"]),
                             tuple(o["types"]) if "types" in o else None)
                 for o in raw()["operands"]["operand"])


def type_bits() -> dict[str, int]:
    return {k: int(v) for k, v in raw()["operands"]["bits"].items()}


def mn_major_types() -> tuple[str, ...]:
    return tuple(raw()["operands"]["mn_major_types"])


@lru_cache(maxsize=1)
def choices() -> dict[str, dict]:
    return {c["name"]: c for c in raw()["choice"]}


def atom_shape(major: str, swizzle: str, bits: int) -> tuple[int, int]:
    """Table 38's swizzle atom in elements, (mn extent, k extent)."""
    a = raw()["atoms"][normalize_major(major)][mode(swizzle).name]
    T = 128 // bits
    return (a[0] * T, a[1]) if normalize_major(major) == "MN" else (a[0], a[1] * T)
