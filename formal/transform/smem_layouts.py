"""Users' shared-memory layouts as CuTe and Triton print them, and the audit against formal.smem.

A :class:`UserLayout` is a map ``(mn, k) -> bit address`` over the user's tile (mn along M or N,
k along K), as a formula (numpy and Z3), with the swizzle mode it uses.  Two front ends:

* :func:`parse_cute` -- a GMMA atom by name (``GMMA::Layout_K_SW128_Atom<half_t>``) or as CuTe
  prints a composed layout (``Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)``; mode 0 is
  MN, mode 1 is K, as CuTe's A (M,K) and B (N,K) smem layouts).  With ``smem_ptr[..]`` the
  swizzle acts on byte addresses (CuTe's swizzle pointer); without it, on the layout's element
  offsets.  :func:`cute_tile` is ``tile_to_shape(atom, (MN, K))`` (MN first, CuTe's default);
* :func:`parse_triton` -- ``#ttg.nvmma_shared<{swizzlingByteWidth = .., transposed = ..,
  elementBitWidth = ..}>`` over a tensor shape (``!ttg.memdesc<RxCxT, ...>`` or given) of
  operand a (M x K) or b (K x N).

:func:`audit` cuts the user's tile into wgmma operand tiles (A: 64 x K, B: N x K) and proves
that the descriptor a compiler builds for each (start = the tile's first element, LBO/SBO
read off the layout as CuTe's make_gmma_desc and Triton's getDescriptor do; or the user's
descriptor advanced by the tile's offset on the low word, as CuTe's DescriptorIterator does)
reads exactly the user's bytes: PROVED, or REFUTED with the first (tile, mn, k) at the wrong
address.  One Z3 query (symbolic tile indices) and one enumeration decide it, and must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import algebra as alg
from ..expr import Formula
from ..smem import address as A
from ..smem import codec
from ..smem import spec as S
from ..smem.spec import SmemError
from . import cute as cute_parse

MAX_TILE_POINTS = 1 << 22


@dataclass
class UserLayout:
    """(mn, k) -> bit address (allocation base included) over a rows x cols tile."""

    name: str
    rows: int                 # mn extent
    cols: int                 # k extent
    bits: int
    major: str                # K | MN: which coordinate is contiguous
    swizzle: tuple            # (B, M, S)
    byte_swizzle: bool        # the swizzle acts on byte addresses (else on element offsets)
    offset: Formula           # element offset (before any swizzle) over mn, k
    base: int = 0
    note: str = ""

    @property
    def mode(self) -> S.Mode | None:
        B, M, Sh = self.swizzle
        for m in S.modes():
            if (m.B, m.M, m.S) == (B, M, Sh) or (B == 0 and m.B == 0):
                return m
        return None

    def formula(self, base: int | None = None) -> Formula:
        """The bit address as one formula over mn, k."""
        B, M, Sh = self.swizzle
        b = self.base if base is None else base
        let = {"el": str(self.offset.src) if not self.offset.let else f"({self.offset.src})",
               "B": str(B), "M": str(M), "S": str(Sh), "BITS": str(self.bits)}
        let = dict(self.offset.let) | let
        if self.byte_swizzle:
            let |= {"bitoff": f"{b} * 8 + el * BITS", "x": "bitoff >> 3", "src": "x",
                    "swz": S.raw()["swizzle"]["formula"]}
            return Formula("swz * 8 + (bitoff & 7)", let=let)
        let |= {"x": "el", "src": "x", "swz": S.raw()["swizzle"]["formula"]}
        return Formula(f"{b} * 8 + swz * BITS", let=let)

    def eval(self, mn, k, base: int | None = None):
        return self.formula(base).eval({"mn": mn, "k": k})

    def describe(self) -> str:
        sw = f"Swizzle<{self.swizzle[0]},{self.swizzle[1]},{self.swizzle[2]}>"
        return (f"{self.name}: {self.rows} x {self.cols} (mn x k), {self.bits}-bit, {self.major}-major, {sw} on "
                f"{'byte addresses' if self.byte_swizzle else 'element offsets'}")


# ------------------------------------------------------------------------------------- CuTe

_SW = re.compile(r"^\s*(?:cute::)?(?:Sw|Swizzle)\s*<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*>\s*(?:o|∘)\s*", re.S)
_PTR = re.compile(r"^\s*smem_ptr\s*\[\s*(\d+)\s*b\s*\]\s*(?:\(\s*\w*\s*\))?\s*(?:o|∘)\s*", re.S)
_ZERO = re.compile(r"^\s*_?0\s*(?:o|∘)\s*", re.S)
_ATOM = re.compile(r"^\s*(?:cute::)?(?:SM90::)?(?:GMMA::)?(Layout_(?:MN|K)_(?:INTER|SW32|SW64|SW128)_Atom)"
                   r"\s*<\s*(?:cute::|cutlass::)?(\w+)\s*>\s*$")


def _flat(x) -> list[int]:
    return [y for z in x for y in _flat(z)] if isinstance(x, tuple) else [x]


def _mode_formula(var: str, shape, stride) -> str:
    terms, div = [], 1
    for s, d in zip(_flat(shape), _flat(stride)):
        if s > 1 and d != 0:
            q = var if div == 1 else f"({var} // {div})"
            terms.append(f"({q} % {s}) * {d}")
        div *= s
    return " + ".join(terms) or "0"


def _type_bits(name: str) -> int:
    t = S.raw()["peers"]["cute"]["types"]
    if name not in t:
        raise SmemError(f"CuTe element type {name!r}: one of {', '.join(t)}")
    return int(t[name])


def cute_atom_text(atom: str, bits: int) -> str:
    """The atom as CuTe prints it, e.g. 'Sw<3,4,3> o smem_ptr[16b](unset) o (_8,_64):(_64,_1)'."""
    a = S.raw()["peers"]["cute"]["atom"].get(atom)
    if a is None:
        raise SmemError(f"CuTe GMMA atom {atom!r}: one of {', '.join(S.raw()['peers']['cute']['atom'])}")
    m = S.mode(a["swizzle"])
    shape, stride = cute_parse.parse(a["bits_layout"])
    # upcast<bits>: the contiguous mode (stride 1) shrinks by bits, the others' strides too
    sh = tuple(s // bits if d == 1 else s for s, d in zip(shape, stride))
    st = tuple(d if d == 1 else d // bits for d in stride)
    lay = "(" + ",".join(f"_{s}" for s in sh) + "):(" + ",".join(f"_{d}" for d in st) + ")"
    return f"Sw<{m.B},{m.M},{m.S}> o smem_ptr[{bits}b](unset) o {lay}"


def parse_cute(text: str, bits: int | None = None, name: str = "") -> UserLayout:
    """A CuTe smem layout: a GMMA atom's C++ name, or a (composed) layout as CuTe prints it."""
    t = " ".join(str(text).split())
    m = _ATOM.match(t)
    if m:
        b = _type_bits(m.group(2))
        if bits is not None and bits != b:
            raise SmemError(f"{t}: {m.group(2)} is {b}-bit, not {bits}")
        return parse_cute(cute_atom_text(m.group(1), b), b, name=name or t)
    sw, rest = (0, 4, 3), t
    ms = _SW.match(rest)
    if ms:
        sw = tuple(int(x) for x in ms.groups())
        rest = rest[ms.end():]
    byte_sw = False
    mp = _PTR.match(rest)
    if mp:
        pb = int(mp.group(1))
        if bits is not None and bits != pb:
            raise SmemError(f"{t}: smem_ptr[{pb}b] says {pb}-bit elements, not {bits}")
        bits, byte_sw = pb, True
        rest = rest[mp.end():]
    else:
        mz = _ZERO.match(rest)
        if mz:
            rest = rest[mz.end():]
    if bits is None:
        raise SmemError(f"CuTe layout {t[:80]!r}: give the element width (smem_ptr[16b] in the layout, or --type)")
    if bits not in (1, 8, 16, 32):
        raise SmemError(f"element width {bits} bits: wgmma operands are 1, 8, 16 or 32 bits")
    try:
        shape, stride = cute_parse.parse(rest)
    except alg.AlgebraError as e:
        raise SmemError(str(e)) from None
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise SmemError(f"CuTe smem layout {rest[:80]!r}: expected two modes (MN, K)")
    rows, cols = cute_parse.size(shape[0]), cute_parse.size(shape[1])
    if rows * cols > MAX_TILE_POINTS:
        raise SmemError(f"CuTe layout of {rows} x {cols} elements is too large (at most {MAX_TILE_POINTS})")
    if any(d < 0 for d in _flat(stride)):
        raise SmemError("CuTe smem layout with a negative stride")
    f = Formula(f"({_mode_formula('mn', shape[0], stride[0])}) + ({_mode_formula('k', shape[1], stride[1])})")
    return UserLayout(name or t, rows, cols, bits, _contiguous(shape, stride), sw, byte_sw, f)


def _first_unit(shape, stride) -> int | None:
    """Which mode (0: mn, 1: k) holds the stride-1 sub-mode (the contiguous one)."""
    for i in (0, 1):
        if any(d == 1 and s > 1 for s, d in zip(_flat(shape[i]), _flat(stride[i]))):
            return i
    return None


def _contiguous(shape, stride) -> str:
    i = _first_unit(shape, stride)
    return "K" if i == 1 else "MN"


def cute_tile(atom: UserLayout, rows: int, cols: int) -> UserLayout:
    """tile_to_shape(atom, (rows, cols)): atom copies along mn first, then k (CuTe's default order)."""
    if rows % atom.rows or cols % atom.cols:
        raise SmemError(f"tile {rows} x {cols} is not a multiple of the atom {atom.rows} x {atom.cols}")
    size = atom.rows * atom.cols
    nm = rows // atom.rows
    let = dict(atom.offset.let) | {"mn_a": f"mn % {atom.rows}", "k_a": f"k % {atom.cols}"}
    # the atom's formula at (mn_a, k_a): substitute by renaming through lets
    src = atom.offset.src
    f = Formula(f"atom_el + (mn // {atom.rows}) * {size} + (k // {atom.cols}) * {size * nm}",
                let=let | {"atom_el": _rename(src, {"mn": "mn_a", "k": "k_a"})})
    return UserLayout(f"tile_to_shape({atom.name}, ({rows},{cols}))", rows, cols, atom.bits, atom.major, atom.swizzle,
                      atom.byte_swizzle, f, atom.base)


def _rename(src: str, names: dict[str, str]) -> str:
    return re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", lambda m: names[m.group(1)], src)


# ------------------------------------------------------------------------------------- Triton

_NVMMA = re.compile(r"nvmma_shared\s*<\s*\{(.*?)\}\s*>", re.S)
_MEMDESC = re.compile(r"memdesc\s*<\s*(\d+)\s*x\s*(\d+)\s*x\s*(\w+)")
_TRITON_BITS = {"f16": 16, "bf16": 16, "f32": 32, "tf32": 32, "i8": 8, "ui8": 8, "f8E4M3FN": 8, "f8E5M2": 8,
                "f8E4M3FNUZ": 8, "f8E5M2FNUZ": 8}


@dataclass(frozen=True)
class Nvmma:
    swizzle_bytes: int
    transposed: bool
    bits: int


def parse_nvmma(text: str) -> tuple[Nvmma, tuple[int, int] | None, int | None]:
    """(encoding, tensor shape or None, element bits of the memdesc type or None)."""
    t = str(text)
    m = _NVMMA.search(t)
    if not m:
        raise SmemError("not a #ttg.nvmma_shared<{...}> encoding")
    kv = dict(re.findall(r"(\w+)\s*=\s*([^,}\]]+|\[[^\]]*\])", m.group(1)))
    kv = {k: v.strip() for k, v in kv.items()}
    try:
        sw = int(kv.get("swizzlingByteWidth", "0"))
        bits = int(kv["elementBitWidth"]) if "elementBitWidth" in kv else None
    except ValueError:
        raise SmemError(f"#ttg.nvmma_shared: bad integer in {m.group(1)[:120]!r}") from None
    tr = kv.get("transposed", "false").lower()
    if tr not in ("true", "false"):
        raise SmemError(f"#ttg.nvmma_shared: transposed = {tr!r} (true or false)")
    if kv.get("fp4Padded", "false").lower() == "true":
        raise SmemError("#ttg.nvmma_shared with fp4Padded = true: fp4 operands are not wgmma operands")
    if sw not in (0, 32, 64, 128):
        raise SmemError(f"#ttg.nvmma_shared: swizzlingByteWidth = {sw} (0, 32, 64 or 128)")
    shape = etype_bits = None
    md = _MEMDESC.search(t)
    if md:
        shape = (int(md.group(1)), int(md.group(2)))
        if md.group(3) not in _TRITON_BITS:
            raise SmemError(f"memdesc element type {md.group(3)!r}: one of {', '.join(_TRITON_BITS)}")
        etype_bits = _TRITON_BITS[md.group(3)]
    if bits is None:
        bits = etype_bits
    if bits is None:
        raise SmemError("#ttg.nvmma_shared without elementBitWidth: give the element type (--type)")
    if etype_bits is not None and etype_bits != bits:
        raise SmemError(f"elementBitWidth = {bits} but the memdesc's element type is {etype_bits}-bit")
    if bits not in (8, 16, 32):
        raise SmemError(f"elementBitWidth = {bits}: wgmma shared-memory operands here are 8, 16 or 32 bits")
    return Nvmma(sw, tr == "true", bits), shape, etype_bits


def triton_offsets(enc: Nvmma, shape: tuple[int, int]) -> np.ndarray:
    """Element offset of every (dim0, dim1) of the tensor, [shape] (the map Triton's linear
    layout inverts).  Written from the encoding's semantics; tests compare it with Triton."""
    d0, d1 = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return Formula(_triton_el(enc, shape)).eval({"d0": d0, "d1": d1}).astype(np.int64)


def _triton_el(enc: Nvmma, shape: tuple[int, int]) -> str:
    """Element offset formula over d0, d1 (before the byte swizzle, which the caller applies)."""
    c, r = ("d0", "d1") if enc.transposed else ("d1", "d0")
    C, R = (shape[0], shape[1]) if enc.transposed else (shape[1], shape[0])
    if enc.swizzle_bytes == 0:
        return f"{r} * {C} + {c}"
    tc = enc.swizzle_bytes * 8 // enc.bits                   # elements of one swizzled row
    if C % tc:
        raise SmemError(f"the contiguous dimension has {C} elements, not a multiple of the {enc.swizzle_bytes}-byte "
                        f"swizzle row ({tc} elements): Triton does not build this layout")
    return f"({c} // {tc}) * {R * tc} + {r} * {tc} + {c} % {tc}"


def parse_triton(text: str, operand: str = "b", shape: tuple[int, int] | None = None,
                 bits: int | None = None) -> UserLayout:
    """A Triton NVMMA shared layout of operand a (tensor M x K) or b (tensor K x N) as (mn, k)."""
    enc, sh, _ = parse_nvmma(text)
    if bits is not None and bits != enc.bits:
        raise SmemError(f"elementBitWidth = {enc.bits}, not {bits}")
    shape = shape or sh
    if shape is None:
        raise SmemError("the tensor shape: paste the !ttg.memdesc<RxCxT, ...> type or give --shape RxC")
    if shape[0] < 1 or shape[1] < 1 or shape[0] * shape[1] > MAX_TILE_POINTS:
        raise SmemError(f"tensor shape {shape[0]}x{shape[1]}: empty or too large (at most {MAX_TILE_POINTS} elements)")
    op = operand.split(".")[0]
    if op not in ("a", "b"):
        raise SmemError(f"operand {operand!r}: a (tensor M x K) or b (tensor K x N)")
    el = _triton_el(enc, shape)
    # (mn, k) -> (d0, d1): A is M x K, B is K x N
    d = {"d0": "mn", "d1": "k"} if op == "a" else {"d0": "k", "d1": "mn"}
    rows, cols = (shape[0], shape[1]) if op == "a" else (shape[1], shape[0])
    contig_dim = 0 if enc.transposed else 1
    contig_is_k = (op == "a") == (contig_dim == 1)
    m = S.mode(enc.swizzle_bytes if enc.swizzle_bytes else "none")
    text1 = (f"#ttg.nvmma_shared<{{swizzlingByteWidth = {enc.swizzle_bytes}, transposed = "
             f"{str(enc.transposed).lower()}, elementBitWidth = {enc.bits}}}> on {shape[0]}x{shape[1]} (operand {op})")
    return UserLayout(text1, rows, cols, enc.bits, "K" if contig_is_k else "MN", (m.B, m.M, m.S), True,
                      Formula(_rename(el, d)))


# ------------------------------------------------------------------------------------- audit

@dataclass
class AuditReport:
    status: str                                   # proved | refuted | unknown
    user: str
    operand: str
    instr: tuple                                  # (mn, k) of one wgmma operand tile
    tiles: tuple                                  # (along mn, along k)
    descriptor: dict | None = None                # tile (0, 0)'s descriptor (derived or given)
    reason: str = ""
    witness: dict | None = None
    proof: Any = None
    notes: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "proved"

    def to_dict(self) -> dict:
        d = {"status": self.status, "user": self.user, "operand": self.operand, "instruction_tile": list(self.instr),
             "tiles": list(self.tiles), "descriptor": self.descriptor, "reason": self.reason, "notes": self.notes}
        if self.witness:
            d["witness"] = self.witness
        if self.proof is not None:
            d["z3"] = self.proof.z3
            d["enumeration"] = self.proof.enumeration
        return d


def instruction_tile(operand: str, bits: int, n: int | None, rows: int) -> tuple[int, int]:
    specs = {o.name: o for o in S.operand_specs()}
    if operand not in specs:
        raise SmemError(f"operand {operand!r}: one of {', '.join(specs)}")
    o = specs[operand]
    k = o.k_bytes * 8 // bits
    if o.mn == "N":
        mn = n if n is not None else min(rows, 256)
        if not (8 <= mn <= 256 and mn % 8 == 0):
            raise SmemError(f"N = {mn}: wgmma N is 8..256 in steps of 8 (give --n)")
    else:
        mn = int(o.mn)
    return mn, k


def _strides_from(user: UserLayout, major: str, mode: S.Mode, model: A.Model) -> tuple[dict, list]:
    """LBO/SBO in bytes read off the user's layout at tile (0, 0): for each symbol of the
    canonical layout, the user's offset of the element one sub-mode step away (as CuTe's
    make_gmma_desc and Triton's getDescriptor read them).  A symbol the layout does not use,
    or whose step falls outside the tile, gets 16 bytes (CuTe's 'assumed to be 1')."""
    shape, stride = A.layout_modes(major, mode.name, model)
    consts = {"T": 128 // user.bits, "W": mode.W, "k": 1, "m": 1}
    out, notes = {"LBO": 16, "SBO": 16}, []
    f = user.formula(0)
    u0 = int(f.eval({"mn": 0, "k": 0}))
    for i, (sh, st) in enumerate(zip(shape, stride)):
        step = 1
        for s, d in zip(sh, st):
            if d in out:
                coord = {"mn": 0, "k": 0}
                coord["mn" if i == 0 else "k"] = step
                if coord["mn"] < user.rows and coord["k"] < user.cols:
                    out[d] = (int(f.eval(coord)) - u0) // 8
                else:
                    notes.append(f"{d} unused: one step ({step} along {'mn' if i == 0 else 'k'}) leaves the tile")
            step *= int(Formula(s).eval(consts))
    return out, notes


def audit(user: UserLayout, operand: str = "b", n: int | None = None, desc: int | None = None,
          model: A.Model = A.SILICON, timeout_ms: int = 20000) -> AuditReport:
    """Prove the wgmma descriptors read the user's layout, every operand tile of it."""
    mn_i, k_i = instruction_tile(operand, user.bits, n, user.rows)
    rep = AuditReport("refuted", user.describe(), operand, (mn_i, k_i), (0, 0))
    if user.rows % mn_i or user.cols % k_i:
        raise SmemError(f"the layout's tile {user.rows} x {user.cols} (mn x k) is not a whole number of wgmma operand "
                        f"tiles {mn_i} x {k_i}")
    tiles = (user.rows // mn_i, user.cols // k_i)
    rep.tiles = tiles
    mode = user.mode
    if mode is None or not user.byte_swizzle and mode.B:
        rep.reason = (f"Swizzle<{user.swizzle[0]},{user.swizzle[1]},{user.swizzle[2]}> on "
                      f"{'byte addresses' if user.byte_swizzle else 'element offsets'}: wgmma swizzles are "
                      f"Swizzle<B,4,3> on byte addresses (B = 0..3)")
        return rep
    bits_ok = {v for v in S.type_bits().values()}
    if user.bits not in bits_ok:
        raise SmemError(f"{user.bits}-bit elements are not a wgmma operand type")
    if user.major == "MN" and user.bits != 16:
        rep.reason = f"an MN-major {user.bits}-bit operand: wgmma transposes only f16/bf16 (PTX ISA 9.1 §9.7.15.5.2)"
        return rep
    if desc is not None:
        d0 = codec.decode(desc)
        if d0.mode.name != mode.name:
            rep.descriptor = d0.to_dict()
            rep.reason = f"the descriptor's swizzle is {d0.mode.name}, the layout's {mode.name}"
            return rep
        base = d0.start_bytes - int(user.formula(0).eval({"mn": 0, "k": 0})) // 8
        strides = {"LBO": d0.lbo_bytes, "SBO": d0.sbo_bytes}
        bo = d0.base_offset
    else:
        base, bo = 0, 0
        strides, notes = _strides_from(user, user.major, mode, model)
        rep.notes += notes
        for nm_, v in strides.items():
            if v < 0 or v % 16 or v >= 1 << 18:
                rep.reason = (f"no descriptor expresses this layout: {nm_} would be {v} bytes (a multiple of 16 in "
                              f"0..{(1 << 18) - 16})")
                return rep
    U = user.formula(base)
    F = A.address_formula(user.major, mode.name, user.bits, model)
    lbo_f, sbo_f = strides["LBO"] // 16, strides["SBO"] // 16
    u00 = int(U.eval({"mn": 0, "k": 0}))
    if u00 % 128:
        rep.reason = f"the first element is at bit {u00}, not a 16-byte boundary"
        return rep
    d00 = codec.Descriptor(u00 // 128, lbo_f, sbo_f, bo, mode.code)
    rep.descriptor = d00.to_dict() | {"lbo_bytes": strides["LBO"], "sbo_bytes": strides["SBO"]}

    # the operand tile at (t, u) starts at the user's element (t * mn_i, u * k_i)
    def enum():
        t = np.arange(tiles[0])[:, None, None, None]
        u = np.arange(tiles[1])[None, :, None, None]
        mn = np.arange(mn_i)[None, None, :, None]
        k = np.arange(k_i)[None, None, None, :]
        s = np.asarray(U.eval({"mn": t * mn_i, "k": u * k_i}))
        want = np.asarray(U.eval({"mn": t * mn_i + mn, "k": u * k_i + k}))
        got = np.asarray(F.eval({"mn": mn, "k": k, "sa": s // 128, "lbo": lbo_f, "sbo": sbo_f, "bo": bo}))
        bad = np.broadcast_to((want != got) | (s % 128 != 0), (tiles[0], tiles[1], mn_i, k_i))
        if not bad.any():
            return None
        i = np.argwhere(bad)[0]
        return {"tile_mn": int(i[0]), "tile_k": int(i[1]), "mn": int(i[2]), "k": int(i[3])}

    def neg():
        import z3
        t, u, mn, k = (z3.BitVec(x, 32) for x in ("t", "u", "mn", "k"))
        s = U.z3({"mn": t * mn_i, "k": u * k_i})
        want = U.z3({"mn": t * mn_i + mn, "k": u * k_i + k})
        got = F.z3({"mn": mn, "k": k, "sa": z3.UDiv(s, 128), "lbo": lbo_f, "sbo": sbo_f, "bo": bo})
        dom = [z3.ULT(t, tiles[0]), z3.ULT(u, tiles[1]), z3.ULT(mn, mn_i), z3.ULT(k, k_i)]
        return dom + [z3.Or(want != got, z3.URem(s, 128) != 0)], [("tile_mn", t), ("tile_k", u), ("mn", mn), ("k", k)]

    n_pts = tiles[0] * tiles[1] * mn_i * k_i
    proof = alg.decide(f"wgmma descriptors read {user.name}", neg, enum if n_pts <= MAX_TILE_POINTS else None,
                       timeout_ms)
    rep.proof = proof
    rep.status = proof.status
    if proof.status == "refuted":
        w = dict(proof.witness)
        t, u, mn, k = w["tile_mn"], w["tile_k"], w["mn"], w["k"]
        s = int(U.eval({"mn": t * mn_i, "k": u * k_i}))
        want = int(U.eval({"mn": t * mn_i + mn, "k": u * k_i + k}))
        got = int(F.eval({"mn": mn, "k": k, "sa": s // 128, "lbo": lbo_f, "sbo": sbo_f, "bo": bo}))
        dt = codec.Descriptor((s // 128) % (1 << 14), lbo_f, sbo_f, bo, mode.code)
        rep.witness = {"tile": [t * mn_i, u * k_i], "element": [mn, k], "user_element": [t * mn_i + mn, u * k_i + k],
                       "user_byte": want // 8, "read_byte": got // 8, "descriptor": f"{dt.value:#018x}"}
        if user.bits == 1:
            rep.witness |= {"user_bit": want % 8, "read_bit": got % 8}
        if s % 128:
            rep.reason = f"operand tile ({t * mn_i}, {u * k_i}) starts at byte {s / 8:g}, not on a 16-byte boundary"
        else:
            rep.reason = (f"operand tile ({t * mn_i}, {u * k_i}), element (mn={mn}, k={k}): the layout puts it at byte "
                          f"{want // 8:#x}, the descriptor {dt.value:#018x} reads byte {got // 8:#x}")
    elif proof.status == "unknown":
        rep.reason = proof.detail
    return rep

# ===================================================================================== obligations
# The ISA's worked examples (read with the CuTe notation parser) and the peers' layouts, as
# obligations of ``prove --all`` beside formal.smem's own (registered as "smem.peers").

import time  # noqa: E402

from .. import prove as P  # noqa: E402
from ..smem.proofs import _bv, _first_bad, _key, _ob, obligations_for as _smem_scope, report_section  # noqa: E402

# ------------------------------------------------------------------------------------- ISA examples

def _example_obligations() -> list[P.Obligation]:
    import z3
    from . import cute as C
    out = []
    sec = S.raw()["canonical"]["section"]
    for ex in S.raw()["canonical"]["example"]:
        bits = int(ex["bits"])
        T = 128 // bits
        text = ex["exact"].split(" o ", 1)[1]
        shape, stride = C.parse(text)
        rows, cols = C.size(shape[0]), C.size(shape[1])
        exact = Formula(f"({_mode_formula('mn', shape[0], stride[0])}) + "
                        f"({_mode_formula('k', shape[1], stride[1])})")
        canon = A.address_formula(ex["major"], ex["swizzle"], bits)
        el = Formula(canon.let["el"], let={k: v for k, v in canon.let.items() if k in ("T", "W", "LBO", "SBO")})
        env = {"lbo": int(ex["lbo_field"]), "sbo": int(ex["sbo_field"])}
        name = ex["name"]

        def eq_build(exact=exact, el=el, env=env, rows=rows, cols=cols):
            mn, k = _bv("mn"), _bv("k")
            return [z3.ULT(mn, rows), z3.ULT(k, cols), exact.z3({"mn": mn, "k": k}) != el.z3({"mn": mn, "k": k, **env})], \
                [("mn", mn), ("k", k)]

        def eq_enum(exact=exact, el=el, env=env, rows=rows, cols=cols):
            mn, k = np.arange(rows)[:, None], np.arange(cols)[None, :]
            bad = np.broadcast_to(np.asarray(exact.eval({"mn": mn, "k": k})) != np.asarray(el.eval({"mn": mn, "k": k, **env})),
                                  (rows, cols))
            return _first_bad(bad, [("mn", mn), ("k", k)])

        out.append(_ob("smem.isa_example.canonical", f"Figure {ex['figure']}: {name}",
                       "the exact layout the text gives equals its canonical layout with the listed T, m, k, LBO, SBO",
                       sec, eq_build, eq_enum, key=(name,)))

        def inj_build(exact=exact, rows=rows, cols=cols):
            m1, k1, m2, k2 = (_bv(x) for x in ("mn1", "k1", "mn2", "k2"))
            return [z3.ULT(m1, rows), z3.ULT(k1, cols), z3.ULT(m2, rows), z3.ULT(k2, cols),
                    P._lt_lex([m2, k2], [m1, k1]), exact.z3({"mn": m1, "k": k1}) == exact.z3({"mn": m2, "k": k2})], \
                [("mn1", m1), ("k1", k1), ("mn2", m2), ("k2", k2)]

        def inj_enum(exact=exact, rows=rows, cols=cols):
            mn, k = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
            v = np.asarray(exact.eval({"mn": mn, "k": k})).reshape(-1)
            seen: dict[int, tuple] = {}
            for i, x in enumerate(v.tolist()):
                p = (i // cols, i % cols)
                if x in seen:
                    return {"mn1": p[0], "k1": p[1], "mn2": seen[x][0], "k2": seen[x][1]}
                seen[x] = p
            return None

        if ex.get("injective", True):
            out.append(_ob("smem.isa_example.injective", f"Figure {ex['figure']}: {name}",
                           "no two elements of the example share an offset", sec, inj_build, inj_enum, key=(name,)))
        else:
            out.append(_ob("smem.isa_example.collides", f"Figure {ex['figure']}: {name} (E-WGMMA-SMEM-K32B-TF32-EXAMPLE)",
                           "the text's example maps two elements to one offset (the minimal pair is the example)", sec,
                           inj_build, inj_enum, existential=True, key=(name,)))
    return out


# ------------------------------------------------------------------------------------- peers

def _cute_atom_ob(atom: str, bits: int) -> P.Obligation:
    from ..algebra import from_formulas
    a = S.raw()["peers"]["cute"]["atom"][atom]
    text = cute_atom_text(atom, bits)

    def run(opts):
        u = parse_cute(text)
        major, sw = a["major"], a["swizzle"]
        p = A.packed(major, sw, bits, u.rows, u.cols)
        F = A.address_formula(major, sw, bits)
        spec_map = from_formulas([("mn", u.rows), ("k", u.cols)], [("addr", 1 << 24)],
                                 {"addr": str(F.src)}, let={"sa": "0", "lbo": str(p.lbo // 16),
                                                            "sbo": str(p.sbo // 16), "bo": "0", **F.let}, name="spec")
        user_map = from_formulas([("mn", u.rows), ("k", u.cols)], [("addr", 1 << 24)],
                                 {"addr": str(u.formula(0).src)}, let=dict(u.formula(0).let), name="cute")
        return spec_map.equals(user_map, opts.timeout_ms, names=("spec", "cute"))

    return _algebra_ob("smem.peer.cute_atom", f"{atom}<{bits}-bit> = {text}",
                       "CuTe's GMMA atom, as CuTe prints it, equals the canonical layout on the atom",
                       S.raw()["peers"]["cute"]["source"], run, key=(atom, bits))


def _algebra_ob(family, subject, claim, section, fn, key=()) -> P.Obligation:
    """An obligation decided by formal.algebra (its Proof: Z3 and enumeration already agreed)."""
    ob = P.Obligation(family, subject, claim, key=_key(family, subject, key), cover=[], section=section)

    def run(opts, ob=ob):
        t0 = time.perf_counter()
        pr = fn(opts)
        dt = time.perf_counter() - t0
        if pr.status == "proved":
            return P.Proved(ob, f"z3+enum ({pr.enumeration})", dt, pr.smt2 if opts.certificates else None)
        if pr.status == "refuted":
            return P.Refuted(ob, pr.witness or {}, "z3+enum", dt, note=pr.detail)
        return P.Unknown(ob, pr.detail or "unknown", "z3+enum", dt)
    ob.run = run
    return ob


def _audit_ob(family: str, subject: str, claim: str, section: str, make_user, operand: str, n: int,
              key=()) -> P.Obligation:
    def fn(opts):
        rep = audit(make_user(), operand, n=n, timeout_ms=opts.timeout_ms)
        if rep.proof is None:
            from ..algebra import Proof
            return Proof("refuted", claim, witness={"reason": rep.reason}, detail=rep.reason)
        rep.proof.detail = rep.reason or rep.proof.detail
        return rep.proof
    return _algebra_ob(family, subject, claim, section, fn, key)


def _peer_tile_obligations() -> list[P.Obligation]:
    out = []
    cute_src = S.raw()["peers"]["cute"]["source"]
    tri_src = S.raw()["peers"]["triton"]["source"]
    for atom, a in S.raw()["peers"]["cute"]["atom"].items():
        for bits in (16, 32, 8):
            if a["major"] == "MN" and bits != 16:
                continue
            am, ak = S.atom_shape(a["major"], a["swizzle"], bits)
            K = 256 // bits
            if a["major"] == "K":
                rows, cols, n = 128, 2 * max(ak, K), 64
            else:
                rows, cols, n = max(128, 2 * am), 2 * K, 64
            text = cute_atom_text(atom, bits)
            out.append(_audit_ob("smem.peer.cute_tile", f"tile_to_shape({atom}<{bits}-bit>, ({rows},{cols})), B N={n}",
                                 "make_gmma_desc's descriptor (start = the tile's first element, LBO/SBO off the "
                                 "layout, base offset 0) reads every wgmma operand tile of the CuTe tile",
                                 cute_src, lambda t=text, r=rows, c=cols: cute_tile(parse_cute(t), r, c),
                                 "b", n, key=(atom, bits, rows, cols, n)))
    for sw in (0, 32, 64, 128):
        for bits in (16, 32, 8):
            for tr in (False, True):
                # operand b: tensor K x N; transposed = true makes K contiguous (K-major)
                major = "K" if tr else "MN"
                if major == "MN" and bits != 16:
                    continue
                K = 256 // bits
                tc = sw * 8 // bits if sw else 0
                if major == "K":
                    if sw == 0:
                        continue                   # a K-major row is 32 bytes: Triton's swizzle-0 rows are not 16
                    shape = (max(2 * K, 2 * tc), 128)
                else:
                    shape = (2 * K, max(128, 2 * tc)) if sw else (2 * K, 8)
                n = 64 if shape[1] >= 64 else shape[1]
                enc = (f"#ttg.nvmma_shared<{{swizzlingByteWidth = {sw}, transposed = {str(tr).lower()}, "
                       f"elementBitWidth = {bits}}}>")
                out.append(_audit_ob("smem.peer.triton", f"{enc} on {shape[0]}x{shape[1]} (B, {major}-major, N={n})",
                                     "the descriptors Triton builds (start = the tile's first element, LBO/SBO off the "
                                     "layout) read every wgmma operand tile of the NVMMA shared layout",
                                     tri_src, lambda e=enc, s=shape: parse_triton(e, "b", s), "b", n,
                                     key=(sw, bits, tr, shape, n)))
    return out


def all_obligations() -> list[P.Obligation]:
    out = _example_obligations()
    for atom in S.raw()["peers"]["cute"]["atom"]:
        for bits in (16, 32, 8):
            out.append(_cute_atom_ob(atom, bits))
    return out + _peer_tile_obligations()


def obligations_for(forms) -> list[P.Obligation]:
    return all_obligations() if _smem_scope(forms) else []


def _report(results) -> list[str]:
    lines = report_section(results)
    lines[0] = ("## wgmma shared-memory layouts of the ISA's examples and of CuTe / Triton "
                "(`smem.isa_example.*`, `smem.peer.*`)")
    return lines


def register() -> None:
    P.register_obligations("smem.peers", obligations_for)
    P.register_report_section("smem.peers", _report)
