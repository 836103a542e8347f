"""The wgmma matrix descriptor (PTX ISA 9.1 §9.7.15.5.1.2.2) as a bit-field codec.

Fields, bit ranges and units come from ``specs/wgmma_smem.toml``::

    >>> d = decode(0x4000004000010040)
    >>> d.start_bytes, d.lbo_bytes, d.sbo_bytes, d.mode.name, d.base_offset
    (1024, 16, 1024, '128B', 0)
    >>> hex(encode(d))
    '0x4000004000010040'
    >>> hex(make(start=1024, lbo=16, sbo=1024, swizzle="128B"))
    '0x4000004000010040'

``decode`` takes any 64-bit value (bits the table does not describe are kept in
``reserved`` and reported); ``encode`` of a :class:`Descriptor` or a mapping of field values
raises :class:`DescriptorError` naming the first field out of range; ``make`` takes byte
quantities (16-byte aligned, below 2^18) and applies matrix-descriptor-encode.  The same
table gives Z3 terms (:func:`z3_decode`, :func:`z3_encode`) over 64-bit vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields, replace
from typing import Any, Mapping

from . import spec as S
from .spec import SmemError

FIELD_NAMES = ("start", "lbo", "sbo", "base_offset", "swizzle")


class DescriptorError(SmemError):
    """A descriptor value or field out of range; ``field`` names it."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Descriptor:
    """Field values as stored (start, lbo, sbo in 16-byte units; swizzle as its 2-bit code)."""

    start: int = 0
    lbo: int = 0
    sbo: int = 0
    base_offset: int = 0
    swizzle: int = 0
    reserved: int = 0        # the undescribed bits, in place (0 for a legal descriptor)

    # -- units -------------------------------------------------------------------------
    @property
    def start_bytes(self) -> int:
        return self.start * S.field("start").unit_bytes

    @property
    def lbo_bytes(self) -> int:
        return self.lbo * S.field("lbo").unit_bytes

    @property
    def sbo_bytes(self) -> int:
        return self.sbo * S.field("sbo").unit_bytes

    @property
    def mode(self) -> S.Mode:
        return S.mode_by_code(self.swizzle)

    @property
    def value(self) -> int:
        return encode(self)

    def with_start(self, start_bytes: int) -> "Descriptor":
        return replace(self, start=_bytes_field("start", start_bytes))

    def to_dict(self) -> dict[str, Any]:
        return {"value": f"{self.value:#018x}", "start": self.start, "start_bytes": self.start_bytes,
                "lbo": self.lbo, "lbo_bytes": self.lbo_bytes, "sbo": self.sbo, "sbo_bytes": self.sbo_bytes,
                "base_offset": self.base_offset, "swizzle": self.swizzle, "swizzle_mode": self.mode.name,
                "reserved": f"{self.reserved:#x}"}


def _check_u64(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise DescriptorError(f"a descriptor is a 64-bit integer, got {value!r}") from None
    if not 0 <= value < 1 << 64:
        raise DescriptorError(f"descriptor value {value:#x} is outside 64 bits")
    return value


def decode(value: int) -> Descriptor:
    """Split a 64-bit descriptor into its fields (never fails for a 64-bit value)."""
    v = _check_u64(value)
    vals = {f.name: (v >> f.lo) & (f.limit - 1) for f in S.fields()}
    return Descriptor(**vals, reserved=v & S.reserved_mask())


def encode(d: Descriptor | Mapping[str, int]) -> int:
    """The 64-bit value of field values; every field is checked against its width."""
    if isinstance(d, Descriptor):
        vals = {f.name: getattr(d, f.name) for f in dc_fields(Descriptor)}
    else:
        unknown = set(d) - set(FIELD_NAMES) - {"reserved"}
        if unknown:
            raise DescriptorError(f"unknown descriptor field {sorted(unknown)[0]!r} "
                                  f"(fields: {', '.join(FIELD_NAMES)})", sorted(unknown)[0])
        vals = {**{n: 0 for n in FIELD_NAMES}, "reserved": 0, **dict(d)}
    out = 0
    for f in S.fields():
        x = vals[f.name]
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < f.limit:
            raise DescriptorError(f"descriptor field {f.name} = {x!r} is out of range: bits {f.hi}-{f.lo} hold "
                                  f"0..{f.limit - 1}", f.name)
        out |= x << f.lo
    r = vals.get("reserved", 0)
    if not isinstance(r, int) or r & ~S.reserved_mask():
        raise DescriptorError(f"reserved = {r!r} sets bits outside the undescribed ranges "
                              f"(mask {S.reserved_mask():#x})", "reserved")
    return out | r


def _bytes_field(name: str, nbytes: int) -> int:
    f = S.field(name)
    unit = f.unit_bytes
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise DescriptorError(f"{name} must be an integer number of bytes, got {nbytes!r}", name)
    if nbytes < 0 or nbytes >= f.limit * unit:
        raise DescriptorError(f"{name} = {nbytes} bytes is out of range: the {f.width}-bit field holds "
                              f"0..{(f.limit - 1) * unit} bytes in {unit}-byte units", name)
    if nbytes % unit:
        raise DescriptorError(f"{name} = {nbytes} bytes is not a multiple of {unit} (the field holds bytes >> 4)",
                              name)
    return nbytes // unit


def make(start: int = 0, lbo: int = 0, sbo: int = 0, swizzle: str | int = "none", base_offset: int = 0) -> int:
    """A descriptor from byte quantities (matrix-descriptor-encode, with range checks instead of
    the ISA's silent ``& 0x3FFFF``) and a swizzle mode name ('128B', 'none', ...)."""
    m = S.mode(swizzle)
    f = S.field("base_offset")
    if isinstance(base_offset, bool) or not isinstance(base_offset, int) or not 0 <= base_offset < f.limit:
        raise DescriptorError(f"base_offset = {base_offset!r} is out of range: bits {f.hi}-{f.lo} hold "
                              f"0..{f.limit - 1}", "base_offset")
    return encode(Descriptor(_bytes_field("start", start), _bytes_field("lbo", lbo), _bytes_field("sbo", sbo),
                             base_offset, m.code))


def isa_encode(x: int) -> int:
    """The ISA's matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4, as written (wraps silently)."""
    from ..expr import Formula
    return int(Formula(S.raw()["descriptor"]["encode"]).eval({"x": int(x)}))


def is_legal(value: int) -> bool:
    """Every undescribed bit zero (the only constraint the codec itself can check)."""
    return decode(value).reserved == 0


def warnings(d: Descriptor) -> list[str]:
    """What in a decoded descriptor the text or the silicon says is not meaningful."""
    out = []
    if d.reserved:
        bits = [i for i in range(64) if d.reserved >> i & 1]
        out.append(f"undescribed bits {bits} are set (the table of §9.7.15.5.1.2.2 does not describe them)")
    m = d.mode
    if m.B == 0 and d.base_offset:
        out.append("base offset is nonzero with no swizzle: 'valid for all swizzling modes except the no-swizzle "
                   "mode'")
    elif m.B and d.base_offset >> m.B:
        out.append(f"base offset {d.base_offset}: with the {m.name} swizzle only its low {m.B} bit(s) take part "
                   f"(silicon, docs/wgmma.md)")
    if d.start_bytes % m.pattern_bytes and m.B and d.base_offset == 0:
        out.append(f"start address {d.start_bytes:#x} is not on a {m.pattern_bytes}-byte boundary: the swizzle uses "
                   f"absolute address bits, so the tile must have been written with the pattern anchored at a "
                   f"{m.pattern_bytes}-byte boundary (a K step inside an atom, as CuTe/Triton do)")
    return out


# ------------------------------------------------------------------------------------- Z3

def z3_decode(v) -> dict[str, Any]:
    """Field terms (zero-extended to 64 bits) of a 64-bit vector ``v``."""
    import z3
    out = {f.name: z3.ZeroExt(64 - f.width, z3.Extract(f.hi, f.lo, v)) for f in S.fields()}
    out["reserved"] = v & z3.BitVecVal(S.reserved_mask(), 64)
    return out


def z3_encode(vals: Mapping[str, Any]):
    """The 64-bit vector of field terms (each taken modulo its width, as the hardware's wires)."""
    import z3
    out = z3.BitVecVal(0, 64)
    for f in S.fields():
        x = vals[f.name]
        x = x if isinstance(x, z3.BitVecRef) else z3.BitVecVal(int(x), 64)
        if x.size() != 64:
            x = z3.ZeroExt(64 - x.size(), x)
        out = out | ((x & z3.BitVecVal(f.limit - 1, 64)) << f.lo)
    r = vals.get("reserved", 0)
    r = r if isinstance(r, z3.BitVecRef) else z3.BitVecVal(int(r), 64)
    return out | (r & z3.BitVecVal(S.reserved_mask(), 64))
