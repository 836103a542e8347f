"""Where a wgmma operand element lives in shared memory: descriptor + canonical layout + swizzle.

The map ``(mn, k) -> bit address`` of an operand element is ONE formula of
``formal/expr.py``, assembled from ``specs/wgmma_smem.toml`` (the canonical layout's
shape:stride, the swizzle ``x ^ (((src >> (M+S)) & (2^B-1)) << M)``, and the model choices),
so the same text gives the numpy evaluator (:func:`addresses`, :func:`gather`) and the Z3
term the prover uses (:func:`z3_address`).  Its free names are ``mn``, ``k`` and the
descriptor's fields as stored: ``sa`` (start, 16-byte units), ``lbo``, ``sbo`` (16-byte
units), ``bo`` (base offset).  The result is a BIT address (8 * byte + bit), so b1 operands
need no special case; ``>> 3`` is the byte.

Model choices (:class:`Model`; what the text says and what the silicon did are recorded in
the spec's ``[[choice]]`` tables):

* ``swizzle_on``: ``absolute`` (XOR bits of the shared-memory address; silicon) or
  ``relative`` (of the offset from the descriptor's start address);
* ``base_offset``: ``phase`` (the XOR source is ``address - 128 * base_offset``; silicon),
  ``added`` or ``ignored``;
* ``lbo_k_swizzled``: ``ignored`` (the ISA's layout; silicon for dense forms) or ``used``
  (the K mode steps to the next swizzle atom by LBO, Triton's reading).

Example (the 128-byte-swizzled K-major f16 B operand of ``m64n64k16``)::

    >>> from formal.smem import codec, operand
    >>> d = codec.make(start=0, lbo=16, sbo=1024, swizzle="128B")
    >>> element_address(d, operand("b", "f16", n=64), 1, 0)     # row 1, k 0: chunk 0 ^ 1
    (144, 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

import numpy as np

from ..expr import Formula
from . import codec
from . import spec as S
from .spec import SmemError

INPUTS = ("mn", "k", "sa", "lbo", "sbo", "bo")


# ------------------------------------------------------------------------------------- model

@dataclass(frozen=True)
class Model:
    swizzle_on: str = "absolute"
    base_offset: str = "phase"
    lbo_k_swizzled: str = "ignored"

    def __post_init__(self) -> None:
        ch = S.choices()
        for name in ("swizzle_on", "base_offset", "lbo_k_swizzled"):
            v = getattr(self, name)
            if v not in ch[name]["options"]:
                raise SmemError(f"model choice {name} = {v!r}: one of {', '.join(ch[name]['options'])}")

    @classmethod
    def default(cls) -> "Model":
        """The spec's defaults (= what the silicon settled)."""
        ch = S.choices()
        return cls(**{k: ch[k]["default"] for k in ("swizzle_on", "base_offset", "lbo_k_swizzled")})

    @classmethod
    def parse(cls, text: str | None) -> "Model":
        """``'swizzle_on=relative,base_offset=added'`` (unnamed choices keep their default)."""
        if not text:
            return cls.default()
        kv = {}
        for part in str(text).split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise SmemError(f"model choice {part.strip()!r}: write NAME=VALUE "
                                f"(swizzle_on, base_offset, lbo_k_swizzled)")
            k, v = (x.strip() for x in part.split("=", 1))
            if k not in ("swizzle_on", "base_offset", "lbo_k_swizzled"):
                raise SmemError(f"unknown model choice {k!r} (swizzle_on, base_offset, lbo_k_swizzled)")
            kv[k] = v
        d = cls.default()
        return cls(**{**{k: getattr(d, k) for k in ("swizzle_on", "base_offset", "lbo_k_swizzled")}, **kv})

    def label(self) -> str:
        return f"swizzle_on={self.swizzle_on},base_offset={self.base_offset},lbo_k_swizzled={self.lbo_k_swizzled}"


SILICON = Model()


# ------------------------------------------------------------------------------------- operands

@dataclass(frozen=True)
class Operand:
    """An operand tile in shared memory: ``mn`` x ``k`` elements of ``bits`` bits, ``major``-major."""

    mn: int
    k: int
    bits: int
    major: str
    name: str = ""

    def __post_init__(self) -> None:
        if self.bits not in (1, 8, 16, 32):
            raise SmemError(f"element width {self.bits} bits: wgmma operands are 1, 8, 16 or 32 bits")
        if self.mn < 1 or self.k < 1:
            raise SmemError(f"operand tile {self.mn} x {self.k} is empty")
        object.__setattr__(self, "major", S.normalize_major(self.major))

    @property
    def T(self) -> int:
        return 128 // self.bits

    @property
    def k_bytes(self) -> int:
        return self.k * self.bits // 8

    def describe(self) -> str:
        who = {"a": "A", "b": "B", "a.sp": "sparse A (stored)", "b.sp": "sparse B"}.get(self.name, "operand")
        return f"{who} {self.mn} x {self.k} ({'MN' if self.major == 'MN' else 'K'}-major, {self.bits}-bit)"


def operand(name: str = "b", atype: str = "f16", n: int | None = None, major: str = "K") -> Operand:
    """The shared-memory tile of a wgmma operand: ``name`` a | b | a.sp | b.sp, the element type,
    N for B (8..256), the major-ness (MN only for f16/bf16: 9.7.15.5.2)."""
    specs = {o.name: o for o in S.operand_specs()}
    if name not in specs:
        raise SmemError(f"operand {name!r}: one of {', '.join(specs)}")
    o = specs[name]
    bits = S.type_bits().get(atype)
    if bits is None:
        raise SmemError(f"element type {atype!r}: one of {', '.join(S.type_bits())}")
    if o.types is not None and atype not in o.types:
        raise SmemError(f"operand {name} does not take {atype} (takes {', '.join(o.types)})")
    maj = S.normalize_major(major)
    if maj == "MN" and atype not in S.mn_major_types():
        raise SmemError(f"MN-major (imm-trans = 1) is only for {'/'.join(S.mn_major_types())} operands "
                        f"(PTX ISA 9.1 §9.7.15.5.2), not {atype}")
    if o.mn == "N":
        if n is None:
            raise SmemError(f"operand {name} needs N (the shape's N, 8..256)")
        if not (8 <= n <= 256 and n % 8 == 0):
            raise SmemError(f"N = {n}: wgmma N is 8..256 in steps of 8")
        mn = n
    else:
        mn = int(o.mn)
    return Operand(mn, o.k_bytes * 8 // bits, bits, maj, name)


# ------------------------------------------------------------------------------------- the formula

def _mode_term(var: str, shape: tuple, stride: tuple) -> str:
    """A CuTe mode (sub-shapes, sub-strides) at coordinate ``var``; the last sub-mode is unbounded
    (the ISA's m and k: 'the number of repeating patterns')."""
    terms, div = [], "1"
    n = len(shape)
    for i, (s, d) in enumerate(zip(shape, stride)):
        q = var if div == "1" else f"({var} // ({div}))"
        t = q if i == n - 1 else f"({q} % ({s}))"
        if s != "1" or i == n - 1:
            terms.append(f"{t} * ({d})")
        div = s if div == "1" else f"({div}) * ({s})"
    return " + ".join(terms) or "0"


def layout_modes(major: str, swizzle: str, model: Model = SILICON) -> tuple[tuple, tuple]:
    """(shape, stride) of the canonical layout under the model (strides in elements)."""
    c = S.canonical(major, swizzle)
    shape, stride = c.shape, c.stride
    if c.major == "K" and S.mode(swizzle).B and model.lbo_k_swizzled != "ignored":
        opt = S.choices()["lbo_k_swizzled"]["options"][model.lbo_k_swizzled]
        shape = (shape[0], tuple(opt["shape_k"]))
        stride = (stride[0], tuple(opt["stride_k"]))
    return shape, stride


@lru_cache(maxsize=512)
def address_formula(major: str, swizzle: str, bits: int, model: Model = SILICON) -> Formula:
    """The bit address of operand element (mn, k) as one formula over ``INPUTS``."""
    major = S.normalize_major(major)
    m = S.mode(swizzle)
    shape, stride = layout_modes(major, m.name, model)
    ch = S.choices()
    x = ch["swizzle_on"]["options"][model.swizzle_on]
    src = ch["base_offset"]["options"][model.base_offset]["src"]
    let = {
        "T": str(128 // bits), "W": str(m.W), "B": str(m.B), "M": str(m.M), "S": str(m.S), "BITS": str(bits),
        "start": "sa * 16", "base_offset": "bo",
        "LBO": "lbo * T", "SBO": "sbo * T",                      # 16-byte units -> elements
        "el": f"{_mode_term('mn', shape[0], stride[0])} + {_mode_term('k', shape[1], stride[1])}",
        "bitaddr": "start * 8 + el * BITS",
        "addr": "bitaddr >> 3",
        "x": x["x"],
        "src": src,
        "swz": S.raw()["swizzle"]["formula"],
    }
    return Formula(f"(swz + ({x['rebase']})) * 8 + (bitaddr & 7)", let=let)


def _fields(desc: int | codec.Descriptor) -> codec.Descriptor:
    return desc if isinstance(desc, codec.Descriptor) else codec.decode(int(desc))


def _env(d: codec.Descriptor) -> dict[str, int]:
    return {"sa": d.start, "lbo": d.lbo, "sbo": d.sbo, "bo": d.base_offset}


def addresses(desc: int | codec.Descriptor, op: Operand, model: Model = SILICON) -> tuple[np.ndarray, np.ndarray]:
    """(byte, bit) of every element of the operand tile, arrays [mn, k] (bit = 0 unless b1)."""
    d = _fields(desc)
    f = address_formula(op.major, d.mode.name, op.bits, model)
    env = {"mn": np.arange(op.mn, dtype=np.int64)[:, None], "k": np.arange(op.k, dtype=np.int64)[None, :], **_env(d)}
    a = np.broadcast_to(np.asarray(f.eval(env), dtype=np.int64), (op.mn, op.k))
    return a >> 3, a & 7


def element_address(desc: int | codec.Descriptor, op: Operand, mn: int, k: int,
                    model: Model = SILICON) -> tuple[int, int]:
    """(byte, bit) of one element."""
    if not (0 <= mn < op.mn and 0 <= k < op.k):
        raise SmemError(f"element ({mn}, {k}) is outside the {op.mn} x {op.k} operand tile")
    d = _fields(desc)
    a = int(address_formula(op.major, d.mode.name, op.bits, model).eval({"mn": mn, "k": k, **_env(d)}))
    return a >> 3, a & 7


def z3_address(major: str, swizzle: str, bits: int, env: Mapping[str, Any], model: Model = SILICON, width: int = 32):
    """The bit-address term; ``env`` maps ``INPUTS`` to Z3 bit-vectors or ints."""
    import z3
    e = {k: (v if isinstance(v, z3.BitVecRef) else z3.BitVecVal(int(v), width)) for k, v in env.items()}
    return address_formula(S.normalize_major(major), S.mode(swizzle).name, bits, model).z3(e, width)


def swizzle(addr, mode: str | S.Mode, src=None):
    """Swizzle<B,4,3> of byte address(es) ``addr`` (XOR source ``src``, default the address)."""
    m = mode if isinstance(mode, S.Mode) else S.mode(mode)
    f = Formula(S.raw()["swizzle"]["formula"], let={"B": str(m.B), "M": str(m.M), "S": str(m.S)})
    return f.eval({"x": addr, "src": addr if src is None else src})


# ------------------------------------------------------------------------------------- gather

def _dtype(bits: int):
    return {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32}[bits]


def gather(image: np.ndarray, desc: int | codec.Descriptor, op: Operand, model: Model = SILICON,
           image_base: int = 0) -> np.ndarray:
    """The element codes [..., mn, k] an operand reads from shared-memory image(s).

    ``image``: uint8 array [..., nbytes] = shared memory from byte address ``image_base`` on
    (the descriptor's start address is a shared-memory address); leading axes are a batch of
    images read through the same descriptor.  Multi-byte elements are little-endian; a b1
    element is bit (address & 7) of its byte.  An element outside the image is an error
    naming the first such element."""
    img = np.asarray(image)
    if img.dtype != np.uint8 or img.ndim < 1:
        raise SmemError(f"image must be a uint8 array [..., bytes], got {img.dtype} with shape {img.shape}")
    byte, bit = addresses(desc, op, model)
    off = byte - int(image_base)
    nb = max(1, op.bits // 8)
    bad = (off < 0) | (off + nb > img.shape[-1])
    if bad.any():
        i, j = (int(x[0]) for x in np.nonzero(bad))
        raise SmemError(f"operand element (mn={i}, k={j}) is read from shared byte {int(byte[i, j]):#x}, outside the "
                        f"image [{image_base:#x}, {image_base + img.shape[-1]:#x})")
    if op.bits == 1:
        return ((img[..., off] >> bit.astype(np.uint8)) & 1).astype(np.uint8)
    out = np.zeros(img.shape[:-1] + off.shape, dtype=np.uint64)
    for j in range(nb):
        out |= img[..., off + j].astype(np.uint64) << np.uint64(8 * j)
    return out.astype(_dtype(op.bits))


def read_operand(image: np.ndarray, desc: int | codec.Descriptor, operand_name: str, atype: str, n: int | None = None,
                 major: str = "K", model: Model = SILICON, image_base: int = 0) -> np.ndarray:
    """What the evaluator calls: operand A as [..., 64, K] (M x K), operand B as [..., K, N]."""
    op = operand(operand_name, atype, n, major)
    g = gather(image, desc, op, model, image_base)
    return np.swapaxes(g, -1, -2) if operand_name.startswith("b") else g


def canonical_text(major: str, swizzle: str, bits: int, lbo_bytes: int, sbo_bytes: int,
                   model: Model = SILICON) -> str:
    """The canonical layout with T, W, LBO and SBO substituted (strides in elements), m and k left
    symbolic, e.g. 'Swizzle<3, 4, 3> o ((8,m),(8,2k)):((64,SBO=128),(1,8))'."""
    c = S.canonical(major, swizzle)
    shape, stride = layout_modes(major, swizzle, model)
    T, W = 128 // bits, S.mode(swizzle).W
    env = {"T": T, "W": W, "LBO": lbo_bytes * 8 // bits, "SBO": sbo_bytes * 8 // bits}

    def show(e: str, is_stride: bool) -> str:
        f = Formula(e)
        if f.names <= set(env):
            v = int(f.eval(env))
            return f"{v}" if e.strip() not in ("LBO", "SBO") else f"{e.strip()}={v}"
        return e.replace(" * ", "").replace("T", str(T)).replace("W", str(W))

    def mode(xs, st):
        return "(" + ",".join(show(x, st) for x in xs) + ")"
    sh = "(" + ",".join(mode(m, False) for m in shape) + ")"
    st = "(" + ",".join(mode(m, True) for m in stride) + ")"
    used = {x for m in stride for x in m}
    unused = [n for n in ("LBO", "SBO") if n not in used]
    return f"{c.isa_swizzle} o {sh}:{st}" + (f"  ({', '.join(unused)} not used)" if unused else "")


# ------------------------------------------------------------------------------------- canonical strides

@dataclass(frozen=True)
class Packed:
    """The canonical layout packed as CuTe's tile_to_shape of the Table 38 atom (MN first)."""
    lbo: int            # bytes
    sbo: int
    footprint: int      # bytes of the whole tile (atoms)
    atom: tuple         # (mn, k) elements of one atom
    atom_bytes: int
    atoms: tuple        # (along mn, along k)


def packed(major: str, swizzle: str, bits: int, mn: int, k: int, model: Model = SILICON) -> Packed:
    """LBO/SBO (bytes) that pack an mn x k tile densely: atom (i, j) at (i + j * atoms_mn) *
    atom_bytes.  Which of LBO/SBO is the MN step is read off the canonical layout (the symbol in
    its mn mode); a symbol the layout does not use gets 16 (CuTe's 'assumed to be 1')."""
    major = S.normalize_major(major)
    am, ak = S.atom_shape(major, swizzle, bits)
    ab = am * ak * bits // 8
    nm, nk = -(-mn // am), -(-k // ak)
    shape, stride = layout_modes(major, swizzle, model)
    steps = {"LBO": 16, "SBO": 16}
    for mode_strides, step in ((stride[0], ab), (stride[1], nm * ab)):
        for s in mode_strides:
            if s in steps:
                steps[s] = step
    return Packed(steps["LBO"], steps["SBO"], nm * nk * ab, (am, ak), ab, (nm, nk))
