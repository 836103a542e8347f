"""Exact, vectorised codecs for every element format in ``specs/formats.toml``.

Every finite encoding is decoded into an exact triple

    value = (-1)**neg * sig * 2**(exp - mantissa)

where ``sig`` is a non-negative integer significand (implicit bit included for
normal numbers) and ``exp`` is the *field* exponent, unbiased and pinned at the
format's ``emin`` for subnormals (so a subnormal keeps ``exp = emin`` and a
significand below ``2**mantissa``).  This is exactly the "exponent field, not
leading-one position" view that tensor-core alignment uses (numerics.md §2 step 2);
the true (normalised) exponent is available through :func:`true_exponent`.
Class flags ``nan``, ``inf``, ``zero`` accompany the triple.

Integer formats decode to ``sig = |v|``, ``exp = 0`` (``mantissa = 0``); ``b1``
decodes to its bit.

:func:`encode` is the inverse with correct rounding: it takes an exact value
``(-1)**neg * mag * 2**lsb`` (``mag`` a non-negative ``int64`` *or* a numpy
object array of Python ints of any size) and rounds it once into the format with
``rn`` (nearest, ties to even), ``rna`` (nearest, ties away), ``rz``, ``rm`` or
``rp``.  Gradual underflow, overflow according to a named policy, NaN/Inf masks
and a reduced output precision (e.g. the e8m13 accumulator of fp8 tensor cores,
written into an f32 container) are all parameters.

The engine hard-codes no PTX facts: widths, biases and special encodings are read
from ``specs/formats.toml`` (see :func:`get_format`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable

import numpy

from .xp import backend, fused, like, np, on_host

from ._spec import load_spec

ROUNDING_MODES = ("rn", "rna", "rz", "rm", "rp")
OVERFLOW_POLICIES = ("ieee", "inf", "satfinite")


# ---------------------------------------------------------------------------
# Format table
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Format:
    """One element format, as written in ``specs/formats.toml`` plus derived limits."""

    name: str
    cls: str                      # "float" | "int" | "bit"
    bits: int                     # width of the encoding (tf32: 32, of which 13 ignored)
    container: int
    signed: bool
    exponent: int = 0
    mantissa: int = 0
    bias: int = 0
    inf: bool = False
    nan: object = ()              # "ieee" or a tuple of codes
    subnormal: bool = True
    ignored_low_bits: int = 0
    source: str = ""
    # ---- derived (filled in __post_init__) ----
    field_bits: int = field(default=0, init=False)      # bits that carry information
    emin: int = field(default=0, init=False)            # exponent of the smallest normal
    emax: int = field(default=0, init=False)            # exponent of the largest finite
    maxfin_code: int = field(default=0, init=False)     # magnitude code of the largest finite
    inf_code: int = field(default=-1, init=False)       # magnitude code of +Inf (or -1)
    nan_code: int = field(default=-1, init=False)       # canonical NaN code (or -1)
    np_container: type = field(default=np.uint8, init=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        fb = self.bits - self.ignored_low_bits
        set_("field_bits", fb)
        cont = max(self.container, self.bits)
        set_("np_container", {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[
            8 if cont <= 8 else 16 if cont <= 16 else 32 if cont <= 32 else 64])
        if self.cls != "float":
            return
        ew, m = self.exponent, self.mantissa
        all_ones = (1 << ew) - 1
        set_("emin", (1 - self.bias) if self.subnormal else -self.bias)
        magmask = (1 << (fb - (1 if self.signed else 0))) - 1
        if self.nan == "ieee" or self.inf:
            maxfin = (all_ones << m) - 1
        else:
            nan_mags = {c & magmask for c in self.nan_codes()}
            maxfin = magmask
            while maxfin in nan_mags:
                maxfin -= 1
        set_("maxfin_code", maxfin)
        set_("emax", (maxfin >> m) - self.bias)
        if self.inf:
            set_("inf_code", all_ones << m)
        if self.nan == "ieee":
            set_("nan_code", (all_ones << m) | ((1 << m) - 1))
        elif self.nan:
            pos = [c for c in self.nan_codes() if c <= magmask]
            set_("nan_code", max(pos) if pos else max(self.nan_codes()))

    # -- helpers --------------------------------------------------------
    def nan_codes(self) -> tuple:
        if self.nan == "ieee" or not self.nan:
            return ()
        return tuple(int(c) for c in self.nan)

    @property
    def is_float(self) -> bool:
        return self.cls == "float"

    @property
    def sign_bit(self) -> int:
        return (1 << (self.field_bits - 1)) if self.signed else 0

    @property
    def int_min(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def int_max(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def __repr__(self) -> str:  # compact
        if self.is_float:
            return (f"Format({self.name}: e{self.exponent}m{self.mantissa} bias={self.bias}"
                    f" inf={self.inf} nan={self.nan!r})")
        return f"Format({self.name}: {self.cls}{self.bits} signed={self.signed})"


@functools.lru_cache(maxsize=None)
def format_table() -> dict:
    """All formats of ``specs/formats.toml`` by name."""
    spec = load_spec("formats")
    out = {}
    for name, t in spec.items():
        if not isinstance(t, dict) or "class" not in t:
            continue
        nan = t.get("nan", ())
        if isinstance(nan, list):
            nan = tuple(nan)
        out[name] = Format(
            name=name, cls=t["class"], bits=int(t["bits"]), container=int(t.get("container", t["bits"])),
            signed=bool(t.get("signed", False)), exponent=int(t.get("exponent", 0)),
            mantissa=int(t.get("mantissa", 0)), bias=int(t.get("bias", 0)), inf=bool(t.get("inf", False)),
            nan=nan, subnormal=bool(t.get("subnormal", True)),
            ignored_low_bits=int(t.get("ignored_low_bits", 0)), source=str(t.get("source", "")),
        )
    return out


def get_format(fmt) -> Format:
    if isinstance(fmt, Format):
        return fmt
    name = str(fmt).lstrip(".")
    try:
        return format_table()[name]
    except KeyError:
        raise KeyError(f"unknown element format {fmt!r}; specs/formats.toml has {sorted(format_table())}") from None


# ---------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------

#: alignment exponent that ``Decoded.ealign`` gives zeros and specials: far below any
#: real exponent, so they never win a maximum and shift out of any window
ZERO_EXP = -(1 << 20)
#: the same for the int16 exponents of the float32 product path (``Decoded.e16``): a sum of
#: up to four of them still fits int16 and stays far below every real exponent
E16_ZERO = -8000


class Decoded:
    """Exact decoded elements: value = (-1)**neg * sig * 2**(exp - fmt.mantissa).

    Fields: ``neg`` (bool), ``sig`` (int64 >= 0, 0 for NaN/Inf), ``exp`` (int64 field
    exponent, pinned at emin for subnormals and zeros), ``nan``, ``inf``, ``zero`` (bool).
    Derived: ``lsb``, ``val`` (signed float64 value: exact for every format narrower
    than f64), ``ealign`` (exp, or ZERO_EXP for zeros and specials), ``val32`` / ``e16``
    (``val`` as float32 and ``ealign`` as int16 with E16_ZERO: the float32 product path
    of :func:`formal.numerics.block.product_terms`, which checks that they are exact).  Formats with at
    most 2**16 encodings decode through a per-code table, one gather per field used.
    """

    _NAMES = ("neg", "sig", "exp", "nan", "inf", "zero")

    def __init__(self, fmt, neg=None, sig=None, exp=None, nan=None, inf=None, zero=None, *,
                 idx=None, table=None, bits32=None):
        self.fmt = fmt
        self._f = {"neg": neg, "sig": sig, "exp": exp, "nan": nan, "inf": inf, "zero": zero}
        self._idx, self._table = idx, table
        self._bits32 = bits32     # uint32 codes of an IEEE binary32 format (see _binary32_field)

    def _get(self, name):
        v = self._f.get(name)
        if v is None:
            if self._table is not None and name in self._table:
                v = like(self._table[name], self._idx)[self._idx]
            elif self._bits32 is not None and name not in ("val32", "e16"):
                v = _binary32_field(self, name)
            elif name == "val":
                x = np.ldexp(np.asarray(self.sig).astype(np.float64), self.lsb)
                v = np.where(self.neg, -x, x)
            elif name == "ealign":
                v = np.where(self.zero | self.nan | self.inf, ZERO_EXP, self.exp)
            elif name == "val32":
                v = np.asarray(self.val).astype(np.float32)
            elif name == "e16":
                ea = np.asarray(self.ealign)
                v = np.where(ea == ZERO_EXP, E16_ZERO, ea).astype(np.int16)
            else:
                raise AttributeError(name)
            self._f[name] = v
        return v

    def wide(self) -> bool:
        """Whether the significands are Python integers (object arrays), without decoding them:
        only a given object ``sig`` is (every format here fits int64)."""
        s = self._f.get("sig")
        return s is not None and np.asarray(s).dtype == object

    neg = property(lambda self: self._get("neg"))
    sig = property(lambda self: self._get("sig"))
    exp = property(lambda self: self._get("exp"))
    nan = property(lambda self: self._get("nan"))
    inf = property(lambda self: self._get("inf"))
    zero = property(lambda self: self._get("zero"))
    val = property(lambda self: self._get("val"))
    ealign = property(lambda self: self._get("ealign"))
    val32 = property(lambda self: self._get("val32"))
    e16 = property(lambda self: self._get("e16"))

    def erange(self, data: bool = False):
        """(min, max) of ``ealign`` over the nonzero finite elements, or None if there are
        none: the format's whole range for table-decoded elements unless ``data`` (no data
        pass, no device sync), else from the data."""
        if self._table is not None and not data:
            return self._table["erange"]
        ea = np.asarray(self.ealign)
        nz = ea != ZERO_EXP
        if not bool(np.any(nz)):
            return None
        return int(np.min(np.where(nz, ea, -ZERO_EXP))), int(np.max(ea))

    def has_special(self) -> bool:
        if self._bits32 is not None and self._f["nan"] is None:
            return bool(np.any((self._bits32 & np.uint32(0x7F800000)) == np.uint32(0x7F800000)))
        if self._table is not None:
            return bool(self._table["any_special"] and np.any(like(self._table["special"], self._idx)[self._idx]))
        return bool(np.any(self.nan | self.inf))

    @property
    def lsb(self) -> np.ndarray:
        """Exponent of the significand's unit: value = ±sig * 2**lsb."""
        return self.exp - self.fmt.mantissa

    @property
    def special(self) -> np.ndarray:
        return self.nan | self.inf

    @property
    def shape(self):
        return np.shape(self.sig)

    def kfirst(self) -> "Decoded":
        """The same elements with the last (K) axis moved first, C-contiguous."""
        mv = lambda x: np.ascontiguousarray(np.moveaxis(np.asarray(x), -1, 0))  # noqa: E731
        if self._table is not None:
            return Decoded(self.fmt, idx=mv(self._idx), table=self._table)
        if self._bits32 is not None:
            return Decoded(self.fmt, bits32=mv(self._bits32))
        d = Decoded(self.fmt, *(mv(getattr(self, n)) for n in self._NAMES))
        for extra in ("val", "ealign", "val32", "e16"):
            if self._f.get(extra) is not None:
                d._f[extra] = mv(self._f[extra])
        return d

    def __getitem__(self, key) -> "Decoded":
        return Decoded(self.fmt, *(np.asarray(getattr(self, n))[key] for n in self._NAMES))


class Taken(Decoded):
    """The elements of ``base`` rearranged by ``take`` (one indexing / axis move applied alike
    to every field), each field taken on demand from the base's: a gather of decoded rows
    instead of a decode per gathered element (sparse B rows, :func:`formal.numerics.engine.sparse_dot`).
    ``erange`` and ``has_special`` answer for the base's elements, a superset: a valid bound
    (the float32 product path reads erange as one) and a conservative flag."""

    def __init__(self, base: Decoded, take, shape, ranges: dict | None = None):
        super().__init__(base.fmt)
        self._base, self._take, self._shape = base, take, tuple(shape)
        self._ranges = {} if ranges is None else ranges      # the base's answers, shared by its views

    def _get(self, name):
        v = self._f.get(name)
        if v is None:
            v = self._take(np.broadcast_to(self._base._get(name), self._shape))
            self._f[name] = v
        return v

    def wide(self) -> bool:
        return self._base.wide()

    def erange(self, data: bool = False):
        if data not in self._ranges:
            self._ranges[data] = self._base.erange(data)
        return self._ranges[data]

    def has_special(self) -> bool:
        if "special" not in self._ranges:
            self._ranges["special"] = self._base.has_special()
        return self._ranges["special"]

    def kfirst(self) -> "Decoded":
        take = self._take
        return Taken(self._base, lambda x: np.ascontiguousarray(np.moveaxis(take(x), -1, 0)), self._shape,
                     self._ranges)


def _table(name: str):
    with backend(numpy):   # tables are built and cached on the host
        return _table_host(name)


@functools.lru_cache(maxsize=None)
def _table_host(name: str) -> dict:
    f = get_format(name)
    codes = np.arange(1 << f.field_bits, dtype=np.uint64) << np.uint64(f.ignored_low_bits)
    d = _decode_arith(codes, f)
    t = {n: getattr(d, n) for n in Decoded._NAMES}
    t["val"] = d.val
    t["ealign"] = d.ealign.astype(np.int32)
    real = t["ealign"] != ZERO_EXP
    t["erange"] = (int(t["ealign"][real].min()), int(t["ealign"][real].max())) if real.any() else None
    t["e16"] = np.where(real, t["ealign"], E16_ZERO).astype(np.int16)
    v32 = d.val.astype(np.float32)
    if np.array_equal(v32.astype(np.float64), d.val):   # every <= 16-bit format: exact
        t["val32"] = v32
    t["special"] = d.nan | d.inf
    t["any_special"] = bool(np.any(t["special"]))
    if f.cls in ("int", "bit"):
        t["ival"] = np.where(d.neg, -d.sig, d.sig).astype(np.int64)   # int_values: one gather
    for v in t.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return t


def decode(codes, fmt) -> Decoded:
    """Decode raw encodings (any unsigned/signed integer array, right-aligned) exactly."""
    f = get_format(fmt)
    x = np.asarray(codes)
    if x.dtype.kind not in "ui":
        raise TypeError(f"codes must be integers, got {x.dtype}")
    if f.field_bits <= 16:
        if f.ignored_low_bits:
            x = x >> f.ignored_low_bits
        if x.dtype.itemsize * 8 > f.field_bits or x.dtype.kind == "i":
            x = x & ((1 << f.field_bits) - 1)
        return Decoded(f, idx=x, table=_table(f.name))
    if x.dtype == np.uint32 and _is_binary32(f):
        return Decoded(f, bits32=x)
    if x.dtype == np.uint32 and _is_tf32(f):
        # a tf32 is the binary32 its container holds with the low 13 bits cleared: val and ealign
        # come from those bits (a NaN whose payload is only in the cleared bits reads as Inf, as
        # the field decode reads it); every other field decodes arithmetically from f's fields
        return Decoded(f, bits32=x & np.uint32(0xFFFFE000))
    return _decode_arith(x, f)


@fused
def _b32_outside(mag, lsb):
    """Where a value is not an exact float64 number of the form _encode_binary32 takes
    (element-wise only: CuPy's fused whole-array reductions are slow, np.any is not)."""
    return (mag >= (1 << 53)) | (lsb < -1022) | (lsb > 969)


def _not_exact_f64(mag, lsb) -> bool:
    """Whether some mag * 2**lsb is not an exact float64 of the form the float encoders take
    (or there is nothing to encode); on the host by three reductions, no temporaries."""
    if mag.size == 0:
        return True
    if on_host() and type(mag) is numpy.ndarray and type(lsb) is numpy.ndarray:
        return bool(mag.max() >= (1 << 53) or lsb.min() < -1022 or lsb.max() > 969)
    return bool(np.any(_b32_outside(mag, lsb)))


# binary32 <-> float64 without float32 arithmetic on subnormals.  CuPy compiles its kernels
# with -ftz=true, so on a GPU a subnormal float32 converted to float64 (cvt.ftz.f64.f32), or a
# float64 rounded to a subnormal float32, becomes zero; these helpers touch float32 values
# only where they are normal (or Inf), and build the rest from the bits with float64 and
# integer arithmetic, so numpy and CuPy give the same bits.

def _host_subnormals_exact() -> bool:
    """Whether this CPU converts a float32 subnormal to float64 exactly (no DAZ/FTZ mode set
    by some library built with fast-math); asked per call, it costs a microsecond."""
    return bool(numpy.array([1], numpy.uint32).view(numpy.float32).astype(numpy.float64)[0] == 2.0 ** -149)


def _b32_to_f64(u):
    if on_host() and type(u) is numpy.ndarray and u.dtype == numpy.uint32 and _host_subnormals_exact():
        with numpy.errstate(invalid="ignore"):   # host numpy: the hardware conversion is exact
            return u.view(numpy.float32).astype(numpy.float64)
    ef = (u >> 23) & 0xFF
    mant = u & 0x7FFFFF
    sig = np.where(ef == 0, mant, mant | 0x800000).astype(np.float64)
    v = np.ldexp(sig, np.maximum(ef, 1).astype(np.int32) - 150)
    v = np.where(ef == 0xFF, np.where(mant == 0, np.inf, np.nan), v)
    return np.where((u >> 31) == 1, -v, v)


@fused
def b32_to_f64(u):
    """Exact float64 value of binary32 bits ``u`` (uint32): subnormals, +-0 and +-Inf
    included; a NaN becomes a float64 NaN."""
    return _b32_to_f64(u)


def round_binary(v, p: int, emin: int):
    """float64 ``v`` rounded to nearest even onto a binary format of ``p`` significant bits
    and smallest normal exponent ``emin`` (unbounded above): the rounded value, exact, as a
    float64.  Float64 arithmetic only (frexp, ldexp and rint are exact); +-0, Inf and NaN
    pass through, a value that rounds to zero keeps its sign."""
    with np.errstate(over="ignore", invalid="ignore"):
        _, x = np.frexp(v)                            # |v| = f * 2**x, 0.5 <= f < 1
        s = np.maximum(x.astype(np.int32) - 1, emin) - (p - 1)   # exponent of the unit in the last place
        return np.ldexp(np.rint(np.ldexp(v, -s)), s)


def f64_to_b32(v):
    """binary32 bits (uint32) of float64 ``v`` rounded to nearest even, with gradual
    underflow and overflow to Inf; a NaN keeps its sign and the top 22 payload bits and
    is quieted (what an x86 CVTSD2SS, hence numpy, gives)."""
    v = np.asarray(v, np.float64)
    q = round_binary(v, 24, -126)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = q.astype(np.float32).view(np.uint32)   # exact: q is a binary32 number (or Inf)
    u64 = v.view(np.uint64)
    sign = (u64 >> np.uint64(32)).astype(np.uint32) & np.uint32(0x80000000)
    tiny = np.abs(q) < 2.0 ** -126
    if bool(np.any(tiny)):
        with np.errstate(over="ignore", invalid="ignore"):
            bits = np.where(tiny, sign | (np.abs(q) * 2.0 ** 149).astype(np.uint32), bits)
    nan = np.isnan(v)
    if bool(np.any(nan)):
        payload = ((u64 >> np.uint64(29)) & np.uint64(0x3FFFFF)).astype(np.uint32)
        bits = np.where(nan, sign | np.uint32(0x7FC00000) | payload, bits)
    return bits


def f64_to_b16(v):
    """binary16 bits (uint16) of float64 ``v`` rounded to nearest even (one rounding, not
    through float32), overflow to Inf; a NaN keeps its sign and the top 10 payload bits
    (at least one set), as numpy's double -> half conversion gives."""
    v = np.asarray(v, np.float64)
    q = round_binary(v, 11, -14)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = q.astype(np.float16).view(np.uint16)   # exact: q is a binary16 number (or Inf)
    nan = np.isnan(v)
    if bool(np.any(nan)):
        u64 = v.view(np.uint64)
        sign = ((u64 >> np.uint64(48)) & np.uint64(0x8000)).astype(np.uint16)
        payload = ((u64 >> np.uint64(42)) & np.uint64(0x3FF)).astype(np.uint16)
        payload = np.where(payload == 0, np.uint16(1), payload)
        bits = np.where(nan, sign | np.uint16(0x7C00) | payload, bits)
    return bits


@fused
def _b32_val(u):
    """b32_to_f64 with NaN and Inf as a zero of their sign (sig = 0, as in _decode_arith)."""
    if on_host() and type(u) is numpy.ndarray and u.dtype == numpy.uint32 and _host_subnormals_exact():
        with numpy.errstate(invalid="ignore"):
            v = u.view(numpy.float32).astype(numpy.float64)
        sp = (u & numpy.uint32(0x7F800000)) == numpy.uint32(0x7F800000)
        if bool(numpy.any(sp)):          # the sign bit of a NaN or an Inf, on a zero
            v[sp] = numpy.copysign(0.0, v[sp])
        return v
    v = _b32_to_f64(u)
    return np.where(((u >> 23) & 0xFF) == 0xFF, np.where((u >> 31) == 1, -0.0, 0.0), v)


@fused
def _b32_ealign(u):
    ef = ((u >> 23) & 0xFF).astype(np.int32)
    return np.where(((u & 0x7FFFFFFF) == 0) | (ef == 0xFF), ZERO_EXP, np.maximum(ef, 1) - 127)


@fused
def _b32_nan(u):
    return ((u & 0x7F800000) == 0x7F800000) & ((u & 0x7FFFFF) != 0)


@fused
def _b32_inf(u):
    return (u & 0x7FFFFFFF) == 0x7F800000


@fused
def _b32_zero(u):
    return (u & 0x7FFFFFFF) == 0


@fused
def _b32_neg(u):
    return (u >> 31) == 1


_B32_FLAGS = {"nan": _b32_nan, "inf": _b32_inf, "zero": _b32_zero, "neg": _b32_neg}


def _binary32_field(d: Decoded, name: str):
    """One field of binary32 elements, on demand.  ``val`` and ``ealign`` (all that the
    window and the f32 accumulator's c need) come from the bits (:func:`b32_to_f64`);
    NaN / Inf become a zero of their sign (sig = 0, as in :func:`_decode_arith`); ealign is
    the exponent field, pinned at 1 for subnormals, minus the bias (ZERO_EXP for zeros and
    specials); the flags are bit tests.  ``sig`` and ``exp`` decode every field arithmetically once."""
    u = d._bits32
    if name == "val":
        return _b32_val(u)
    if name == "ealign":
        return _b32_ealign(u)
    if name in _B32_FLAGS:
        return _B32_FLAGS[name](u)
    full = _decode_arith(u, d.fmt)
    for n in Decoded._NAMES:
        d._f[n] = full._f[n]
    return d._f[name]


def _decode_arith(codes, f: Format) -> Decoded:
    x = np.asarray(codes).astype(np.uint64)
    shape = x.shape
    if f.cls in ("int", "bit"):
        x = x & np.uint64((1 << f.bits) - 1)
        v = x.astype(np.int64)
        if f.signed:
            v = np.where(v >= (1 << (f.bits - 1)), v - (1 << f.bits), v)
        false = np.zeros(shape, bool)
        return Decoded(f, v < 0, np.abs(v), np.zeros(shape, np.int64), false, false.copy(), v == 0)
    if f.ignored_low_bits:
        x = x >> np.uint64(f.ignored_low_bits)
    fb = f.field_bits
    x = x & np.uint64((1 << fb) - 1)
    m, ew = f.mantissa, f.exponent
    if f.signed:
        neg = ((x >> np.uint64(fb - 1)) & np.uint64(1)).astype(bool)
        mag = x & np.uint64((1 << (fb - 1)) - 1)
    else:
        neg = np.zeros(shape, bool)
        mag = x
    ef = (mag >> np.uint64(m)).astype(np.int64)
    frac = (mag & np.uint64((1 << m) - 1)).astype(np.int64)
    all_ones = (1 << ew) - 1
    if f.nan == "ieee":
        nan = (ef == all_ones) & (frac != 0)
    elif f.nan_codes():
        nan = np.isin(x, np.array(f.nan_codes(), dtype=np.uint64))
    else:
        nan = np.zeros(shape, bool)
    inf = (ef == all_ones) & (frac == 0) if f.inf else np.zeros(shape, bool)
    if f.subnormal:
        normal = ef > 0
        sig = np.where(normal, frac | (1 << m), frac)
        exp = np.where(normal, ef - f.bias, 1 - f.bias)
    else:
        sig = frac | (1 << m)
        exp = ef - f.bias
    special = nan | inf
    sig = np.where(special, 0, sig).astype(np.int64)
    exp = np.where(special, f.emin, exp).astype(np.int64)
    zero = (sig == 0) & ~special
    return Decoded(f, neg, sig, exp, nan, inf, zero)


def bitlen(x: np.ndarray) -> np.ndarray:
    """Vectorised ``int.bit_length`` for non-negative int64 arrays (0 -> 0)."""
    x = np.asarray(x, dtype=np.int64)
    _, e = np.frexp(x.astype(np.float64))
    e = e.astype(np.int64)
    # float64 rounding may have bumped 2**k - 1 up to 2**k: correct by one.
    over = (e > 0) & ((x >> np.maximum(e - 1, 0)) == 0)
    return e - over


def true_exponent(d: Decoded) -> np.ndarray:
    """Exponent of the leading one (floor(log2|v|)) of finite non-zero elements."""
    return d.lsb + bitlen(d.sig) - 1


def to_float64(codes, fmt) -> np.ndarray:
    """Decode to numpy float64 (exact for every format here; NaN/Inf mapped)."""
    d = decode(codes, fmt)
    with np.errstate(over="ignore"):
        v = np.ldexp(d.sig.astype(np.float64), d.lsb.astype(np.int64).clip(-2000, 2000))
    v = np.where(d.inf, np.inf, v)
    v = np.where(d.neg, -v, v)
    return np.where(d.nan, np.nan, v)


# ---------------------------------------------------------------------------
# Encode
# ---------------------------------------------------------------------------

def _bitlen_obj(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.frompyfunc(int.bit_length, 1, 1)(x)).astype(np.int64)


def compress_sticky(mag, lsb, keep: int = 62):
    """Exact object (Python int) magnitudes -> int64 of at most ``keep`` bits.

    Bits dropped below are OR-ed into the new LSB (a sticky bit), which keeps every
    rounding mode correct as long as the final rounding position lies at least two
    bits above the new LSB (true for all formats here: f64 needs 53 + 2 <= 62).
    """
    mag = np.asarray(mag, dtype=object)
    lsb = np.asarray(lsb, dtype=np.int64)
    nb = _bitlen_obj(mag) if mag.size else np.zeros(mag.shape, np.int64)
    s = np.maximum(nb - keep, 0)
    if not np.any(s):
        return mag.astype(np.int64), lsb
    so = s.astype(object)
    hi = np.asarray(mag >> so, dtype=object)
    sticky = np.asarray((hi << so) != mag, dtype=bool)
    hi = np.asarray(hi | sticky.astype(np.int64).astype(object), dtype=object).astype(np.int64)
    return hi, lsb + s


def encode(neg, mag, lsb, fmt, mode: str = "rn", *, frac_bits: int | None = None,
           overflow: str = "ieee", ftz: bool = False, nan=None, inf=None,
           nan_code: int | None = None) -> np.ndarray:
    """Round the exact value ``(-1)**neg * mag * 2**lsb`` once into ``fmt``.

    mag        non-negative int64 array (< 2**63) or object array of Python ints.
    mode       rn | rna | rz | rm | rp.
    frac_bits  keep only this many fraction bits (<= fmt.mantissa); the low bits of the
               encoding are zero (e.g. 13 for an e8m13 accumulator in an f32 container).
               Subnormals keep the format's emin.
    overflow   "ieee": rn/rna -> Inf; rz -> max finite; rm/rp -> Inf on the side they round to.
               "inf": +-Inf whatever the mode (the tensor-core accumulators, numerics.md §2 step 8).
               "satfinite": clamp to +-max finite.  A format without Inf gets NaN where Inf
               would be produced, or max finite if it has no NaN either.
    ftz        results that are subnormal after rounding become zero of the same sign.
    nan, inf   optional boolean masks of special results (inf takes its sign from neg).
    nan_code   bits written for NaN (default: positive, exponent and fraction all ones).

    Unsigned formats: a negative non-zero value is NaN (-0 encodes as +0).  A format
    without zero (ue8m0) clamps results below its minimum (including 0) to the minimum.
    Integer formats: use :func:`encode_int`.
    """
    f = get_format(fmt)
    if f.cls != "float":
        raise TypeError(f"encode() is for floating formats; use encode_int for {f.name}")
    if mode not in ROUNDING_MODES:
        raise ValueError(f"rounding mode {mode!r} not in {ROUNDING_MODES}")
    if overflow not in OVERFLOW_POLICIES:
        raise ValueError(f"overflow policy {overflow!r} not in {OVERFLOW_POLICIES}")
    m = f.mantissa
    P = m if frac_bits is None else int(frac_bits)
    if not 0 <= P <= m:
        raise ValueError(f"frac_bits={P} outside 0..{m} for {f.name}")
    mag = np.asarray(mag)
    lsb = np.asarray(lsb, dtype=np.int64)
    mag, lsb = np.broadcast_arrays(mag, lsb)
    neg = np.broadcast_to(np.asarray(neg, dtype=bool), mag.shape)
    if mag.dtype == object:
        mag, lsb = compress_sticky(mag, lsb)
    else:
        mag = mag.astype(np.int64, copy=False)
        if P == m and _is_binary32(f) and mode != "rna":
            fast = _encode_binary32(neg, mag, lsb, f, mode, overflow, ftz, nan, inf, nan_code)
            if fast is not None:
                return fast
        elif P == m and mode == "rn" and _is_ieee16(f) and on_host() and type(mag) is numpy.ndarray:
            fast = _encode_rn16_host(neg, mag, lsb, f, overflow, ftz, nan, inf, nan_code)
            if fast is not None:
                return fast
    shape = mag.shape

    nb = bitlen(mag)
    top = lsb + nb - 1
    e = np.maximum(top, f.emin)
    sh = e - P - lsb                                   # bits to drop (may be negative)
    sr = np.clip(sh, 0, 63)
    kept = mag >> sr
    rem = mag - (kept << sr)
    R = np.where(sh < 0, mag << np.clip(-sh, 0, 63), kept)
    inexact = rem != 0
    in_range = (sh >= 1) & (sh <= 63)
    half = np.left_shift(np.int64(1), np.clip(sh - 1, 0, 62))
    if mode == "rn":
        inc = in_range & ((rem > half) | ((rem == half) & ((R & 1) == 1)))
    elif mode == "rna":
        inc = in_range & (rem >= half)
    elif mode == "rz":
        inc = np.zeros(shape, bool)
    elif mode == "rm":
        inc = inexact & neg
    else:  # rp
        inc = inexact & ~neg
    R = R + inc
    carry = R >> (P + 1) != 0
    R = np.where(carry, R >> 1, R)
    e = e + carry
    normal = R >= (1 << P)
    e = np.minimum(e, f.emax + 1)   # anything above emax overflows; keeps the code inside int64
    code = np.where(normal, ((e + f.bias) << m) + ((R - (1 << P)) << (m - P)), R << (m - P))
    if not f.subnormal:
        code = np.where(normal, code, 0)
    if ftz:
        code = np.where(normal, code, 0)

    # ---- overflow ----
    maxfin = f.maxfin_code & ~((1 << (m - P)) - 1)
    ovf = code > maxfin
    big = _overflow_code(f, neg, mode, overflow, maxfin, shape)
    code = np.where(ovf, big, code)

    # ---- specials ----
    if inf is not None:
        inf = np.broadcast_to(np.asarray(inf, bool), shape)
        if f.inf and overflow != "satfinite":
            icode = f.inf_code
        elif overflow == "satfinite" or f.nan_code < 0:
            icode = maxfin
        else:
            icode = -1  # becomes NaN below
        code = np.where(inf, icode, code)
    code = np.asarray(code, dtype=np.int64)
    sign = neg.astype(np.int64) if f.signed else np.zeros(shape, np.int64)
    isnan = code < 0
    if not f.signed:
        isnan = isnan | (neg & (code > 0) & (mag != 0))
    if nan is not None:
        isnan = isnan | np.broadcast_to(np.asarray(nan, bool), shape)
    code = code | (sign << (f.field_bits - 1))
    ncode = f.nan_code if nan_code is None else int(nan_code) >> f.ignored_low_bits
    if ncode < 0:  # format without NaN: largest positive finite stands in
        ncode = maxfin
    # in uint64: an f64 NaN code (e.g. 0xFFF8...) does not fit an int64 (numpy >= 2.5 refuses it)
    out = np.where(isnan, np.uint64(int(ncode) & 0xFFFFFFFFFFFFFFFF), code.astype(np.uint64))
    if f.ignored_low_bits:
        out = out << np.uint64(f.ignored_low_bits)
    if nan_code is not None and f.ignored_low_bits:
        out = np.where(isnan, np.uint64(int(nan_code)), out)
    return out.astype(f.np_container)


def _is_binary32(f: Format) -> bool:
    """The IEEE 754 binary32 layout (numpy's / CUDA's float32): its encodings are float32 bits."""
    return (f.cls == "float" and f.signed and (f.exponent, f.mantissa, f.bias) == (8, 23, 127) and f.inf
            and f.nan == "ieee" and f.subnormal and f.field_bits == 32 and not f.ignored_low_bits)


def _is_ieee16(f: Format) -> bool:
    """A 16-bit IEEE-style format (f16, bf16): sign, Inf, IEEE NaN, subnormals, no ignored bits."""
    return (f.cls == "float" and f.signed and f.inf and f.nan == "ieee" and f.subnormal and f.field_bits == 16
            and f.bits == 16 and not f.ignored_low_bits and 1 + f.exponent + f.mantissa == 16)


def _encode_rn16_host(neg, mag, lsb, f: Format, overflow, ftz, nan, inf, nan_code):
    """:func:`encode` into f16 / bf16 with rn on the host, or None when the value is not an
    exact float64 (the caller then runs the integer path).  The magnitude a = mag * 2**lsb is
    an exact float64 (zero or normal, as in :func:`_encode_binary32`); its bits are rounded to
    nearest even at the format's last place: the float64 fraction shifted right (the exponent
    rebiased), or for a subnormal result the significand with its leading one shifted
    further; a carry moves into the exponent, max finite rounds up to Inf."""
    if _not_exact_f64(mag, lsb):
        return None
    m, bias = f.mantissa, f.bias
    drop, rebias = 52 - m, 1023 - bias
    infc = ((1 << f.exponent) - 1) << m
    u = (mag.astype(numpy.float64) * ((lsb + 1023) << 52).view(numpy.float64)).view(numpy.uint64).reshape(-1)
    # normal results: round half to even by adding half - 1 plus the kept last bit, then shift
    one = numpy.uint64(1)
    r = (u + numpy.uint64((1 << (drop - 1)) - 1) + ((u >> numpy.uint64(drop)) & one)) >> numpy.uint64(drop)
    t = numpy.minimum(r.astype(numpy.int64) - (rebias << m), infc)
    low = u < numpy.uint64((rebias + 1) << 52)            # below the smallest normal (zero included)
    if bool(numpy.any(low)):
        ul = u[low]
        ex = (ul >> numpy.uint64(52)).astype(numpy.int64) - rebias
        mant = (ul & numpy.uint64((1 << 52) - 1)) | numpy.uint64(1 << 52)
        sh = numpy.minimum(drop + 1 - ex, 63).astype(numpy.uint64)        # > drop: the leading one goes too
        q = mant >> sh
        rem = mant & ((one << sh) - one)
        half = one << (sh - one)
        t[low] = (q + ((rem > half) | ((rem == half) & ((q & one) == one)))).astype(numpy.int64)
    t = t.reshape(mag.shape)
    if overflow == "satfinite":
        t = numpy.minimum(t, infc - 1)
    if ftz:
        t = numpy.where(t < (1 << m), 0, t)
    out = t.astype(numpy.uint16) | (numpy.asarray(neg, numpy.uint16) << numpy.uint16(15))
    if inf is not None:
        big = numpy.uint16(infc - 1 if overflow == "satfinite" else infc)
        out = numpy.where(numpy.broadcast_to(numpy.asarray(inf, bool), out.shape),
                          numpy.where(neg, big | numpy.uint16(0x8000), big), out)
    if nan is not None:
        ncode = f.nan_code if nan_code is None else int(nan_code)
        out = numpy.where(numpy.broadcast_to(numpy.asarray(nan, bool), out.shape), numpy.uint16(ncode & 0xFFFF), out)
    return out.astype(f.np_container, copy=False)


def _is_tf32(f: Format) -> bool:
    """binary32's sign and exponent with the top 10 fraction bits (the low 13 ignored)."""
    return (f.cls == "float" and f.signed and (f.exponent, f.mantissa, f.bias) == (8, 10, 127) and f.inf
            and f.nan == "ieee" and f.subnormal and f.ignored_low_bits == 13 and f.field_bits == 19)


def _encode_binary32(neg, mag, lsb, f: Format, mode, overflow, ftz, nan, inf, nan_code):
    """:func:`encode` into an IEEE binary32 format through float arithmetic (rn, rz, rm, rp),
    or None when the value is not an exact float64 (the caller then runs the integer path).

    v = (-1)**neg * mag * 2**lsb is an exact float64 when mag < 2**53 and -1022 <= lsb <= 969
    (2**lsb is then a normal float64 and the product neither rounds nor overflows; -0 for
    a negative zero).  :func:`f64_to_b32` rounds it to nearest even once, with gradual
    underflow and overflow to Inf, on numpy and CuPy alike.  The rz / rm / rp result is one
    of the two float32 numbers around v, as the RNE result r is: when r lies on the wrong
    side of v (|r| > |v| for rz, r > v for rm, r < v for rp), one step toward the direction
    gives it: the sign-magnitude code +-1 (across a binade, from Inf to the largest finite
    number, from +-0 to the smallest subnormal of the direction's sign).
    That is IEEE overflow; the "inf" policy also makes |v| >= 2**128 Inf (the only values
    whose unbounded rounding exceeds the largest finite one without r being Inf already),
    "satfinite" clamps Inf.  ftz, the nan / inf masks and the NaN code as in :func:`encode`.
    """
    if _not_exact_f64(mag, lsb):
        return None
    # 2**lsb built from its bits (a normal float64 for these lsb): exact, and no libm call
    v = mag.astype(np.float64) * ((lsb + 1023) << 52).view(np.float64)
    host_rz = mode == "rz" and on_host() and type(v) is numpy.ndarray
    if host_rz:     # v stays the magnitude |value|
        out = _rz_b32_host(v) | (numpy.asarray(neg, numpy.uint32) << numpy.uint32(31))
    else:
        v = np.where(neg, -v, v)
        out = f64_to_b32(v)
    if mode != "rn" and not host_rz:
        # nextafter on the bits: the magnitude code +-1 (Inf - 1 is the largest finite number)
        r64 = b32_to_f64(out)
        if mode == "rz":
            out = np.where(np.abs(r64) > np.abs(v), out - np.uint32(1), out)
        elif mode == "rm":      # down: a positive magnitude shrinks; +-0 and negatives grow negative
            down = np.where(r64 > 0, out - np.uint32(1), (out | np.uint32(1 << 31)) + np.uint32(1))
            out = np.where(r64 > v, down, out)
        else:                   # rp: up
            up = np.where(r64 < 0, out - np.uint32(1), (out & np.uint32(0x7FFFFFFF)) + np.uint32(1))
            out = np.where(r64 < v, up, out)
    sign = out & np.uint32(1 << 31)
    if overflow == "inf":
        out = np.where(np.abs(v) >= 2.0 ** 128, sign | np.uint32(0x7F800000), out)
    elif overflow == "satfinite":
        out = np.where((out & np.uint32(0x7FFFFFFF)) == np.uint32(0x7F800000), sign | np.uint32(0x7F7FFFFF), out)
    if ftz:
        out = np.where((out & np.uint32(0x7FFFFFFF)) < np.uint32(0x00800000), sign, out)
    if inf is not None:
        big = np.uint32(0x7F7FFFFF if overflow == "satfinite" else 0x7F800000)
        out = np.where(np.broadcast_to(np.asarray(inf, bool), out.shape), np.where(neg, big | np.uint32(1 << 31), big),
                       out)
    if nan is not None:
        ncode = f.nan_code if nan_code is None else int(nan_code)
        out = np.where(np.broadcast_to(np.asarray(nan, bool), out.shape), np.uint32(ncode & 0xFFFFFFFF), out)
    return out.astype(f.np_container, copy=False)


def _rz_b32_host(a):
    """binary32 bits of the float64 magnitude ``a`` (+0 or a normal float64) rounded toward
    zero with gradual underflow, a >= 2**128 to the largest finite number (IEEE RZ): the
    float64 bits truncated, integers only (host numpy; the device keeps f64_to_b32 and the
    step back).  A binary32 normal's bits are the float64's shifted right by 29, less the
    exponent bias difference (1023 - 127) << 23."""
    u = a.view(numpy.uint64)
    t = numpy.minimum((u >> numpy.uint64(29)).astype(numpy.int64) - (896 << 23), 0x7F7FFFFF)
    low = t < (1 << 23)
    if bool(numpy.any(low)):        # subnormal or zero: the significand in units of 2**-149
        ex = (u >> numpy.uint64(52)).astype(numpy.int64)
        mant = (u & numpy.uint64((1 << 52) - 1)) | numpy.uint64(1 << 52)
        sub = (mant >> numpy.clip(926 - ex, 0, 63).astype(numpy.uint64)).astype(numpy.int64)
        t = numpy.where(low, sub, t)
    return t.astype(numpy.uint32)


def _overflow_code(f: Format, neg, mode, overflow, maxfin, shape):
    """Magnitude code for an overflowing result (before the sign is attached); -1 = NaN."""
    if f.inf:
        infc = f.inf_code
    elif f.nan_code >= 0:
        infc = -1
    else:
        infc = maxfin
    if overflow == "satfinite":
        return np.full(shape, maxfin, np.int64)
    if overflow == "inf" or mode in ("rn", "rna"):
        return np.full(shape, infc, np.int64)
    if mode == "rz":
        return np.full(shape, maxfin, np.int64)
    if mode == "rm":
        return np.where(neg, infc, maxfin)
    return np.where(neg, maxfin, infc)  # rp


def encode_int(values, fmt, saturate: bool = False) -> np.ndarray:
    """Exact integers (int64 or object arrays) -> encoding: wrap modulo 2**bits or clamp."""
    f = get_format(fmt)
    v = np.asarray(values)
    if saturate:
        if v.dtype == object:
            v = np.minimum(np.maximum(v, f.int_min), f.int_max).astype(np.int64)
        else:
            v = np.clip(v.astype(np.int64), f.int_min, f.int_max)
    else:
        if v.dtype == object:
            v = (v & ((1 << f.bits) - 1)).astype(np.int64)
        v = v.astype(np.int64) & ((1 << f.bits) - 1)
    return (v.astype(np.int64) & ((1 << f.bits) - 1)).astype(np.uint64).astype(f.np_container)


def int_values(codes, fmt) -> np.ndarray:
    """Signed integer values of integer/bit encodings as int64."""
    d = decode(codes, fmt)
    if d._table is not None and "ival" in d._table:     # one gather through the per-code value table
        return like(d._table["ival"], d._idx)[d._idx]
    return np.where(d.neg, -d.sig, d.sig)


# ---------------------------------------------------------------------------
# Convenience conversions
# ---------------------------------------------------------------------------

def from_float64(values, fmt, mode: str = "rn", **kw) -> np.ndarray:
    """Round numpy float64 values into ``fmt`` (exactly: float64 is decoded first)."""
    v = np.asarray(values, dtype=np.float64)
    d = decode(v.view(np.uint64), "f64")
    return encode(d.neg, d.sig, d.lsb, fmt, mode, nan=d.nan, inf=d.inf, **kw)


def convert(codes, src, dst, mode: str = "rn", **kw) -> np.ndarray:
    """Exact re-encoding of ``src`` codes into ``dst`` (NaN/Inf carried, NaN canonical).

    A source with at most 2**16 encodings converts through a table of every code's result
    (the same ``encode``, once per code), gathered on the array with its broadcast axes
    collapsed: a broadcast view is converted once per distinct element, not per position.
    """
    f = get_format(src)
    x = np.asarray(codes)
    if f.field_bits <= 16 and x.dtype.kind in "ui" and all(isinstance(v, (int, str, bool, type(None)))
                                                           for v in kw.values()):
        small = x[tuple(slice(0, 1) if (st == 0 and n > 1) else slice(None) for st, n in zip(x.strides, x.shape))]
        if f.ignored_low_bits:
            small = small >> f.ignored_low_bits
        if small.dtype.itemsize * 8 > f.field_bits or small.dtype.kind == "i":
            small = small & ((1 << f.field_bits) - 1)
        lut = _convert_table(f.name, get_format(dst).name, mode, tuple(sorted(kw.items())))
        return np.broadcast_to(like(lut, small)[small], x.shape)
    d = decode(x, f)
    return encode(d.neg, d.sig, d.lsb, dst, mode, nan=d.nan, inf=d.inf, **kw)


def decode_converted(codes, src, dst, mode: str = "rn") -> Decoded:
    """``decode(convert(codes, src, dst, mode), dst)`` for a source with at most 2**16
    encodings, in one step: a decode table indexed by the *source* code (each field of
    ``dst``'s table gathered through the conversion table once per source code), so an
    fp8 -> f16 emulation gathers from 256-entry tables instead of converting every
    element and gathering from 65,536-entry ones."""
    f = get_format(src)
    x = np.asarray(codes)
    if f.field_bits > 16 or x.dtype.kind not in "ui" or get_format(dst).field_bits > 16:
        return decode(convert(x, src, dst, mode), dst)
    if f.ignored_low_bits:
        x = x >> f.ignored_low_bits
    if x.dtype.itemsize * 8 > f.field_bits or x.dtype.kind == "i":
        x = x & ((1 << f.field_bits) - 1)
    return Decoded(get_format(dst), idx=x, table=_composed_table(f.name, get_format(dst).name, mode))


def _composed_table(src: str, dst: str, mode: str):
    with backend(numpy):   # tables are built and cached on the host
        return _composed_table_host(src, dst, mode)


@functools.lru_cache(maxsize=None)
def _composed_table_host(src: str, dst: str, mode: str) -> dict:
    fd = get_format(dst)
    lut = _convert_table(src, dst, mode, ())
    idx = (lut >> fd.ignored_low_bits) & ((1 << fd.field_bits) - 1)
    t = {n: (v[idx] if isinstance(v, np.ndarray) else v) for n, v in _table(dst).items()}
    t["any_special"] = bool(np.any(t["special"]))
    for v in t.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return t


def _convert_table(src: str, dst: str, mode: str, kw: tuple):
    with backend(numpy):   # tables are built and cached on the host
        return _convert_table_host(src, dst, mode, kw)


@functools.lru_cache(maxsize=None)
def _convert_table_host(src: str, dst: str, mode: str, kw: tuple) -> np.ndarray:
    d = decode(all_codes(src), src)
    t = encode(d.neg, d.sig, d.lsb, dst, mode, nan=d.nan, inf=d.inf, **dict(kw))
    t.setflags(write=False)
    return t


def all_codes(fmt) -> np.ndarray:
    """Every encoding of a format with at most 2**16 encodings (container dtype)."""
    f = get_format(fmt)
    if f.field_bits > 16:
        raise ValueError(f"{f.name} has 2**{f.field_bits} encodings")
    return (np.arange(1 << f.field_bits, dtype=np.uint64) << np.uint64(f.ignored_low_bits)).astype(f.np_container)


def float_formats() -> Iterable[str]:
    return [n for n, f in format_table().items() if f.is_float]
