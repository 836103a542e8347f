"""The ``smem.*`` obligations (``ptx-formal prove --all``): wgmma shared-memory operands.

Every claim is decided by Z3 on bit-vector terms built from ``specs/wgmma_smem.toml`` (the
same formulas the evaluator runs) and by enumeration with numpy; a verdict stands only when
both agree (``formal.prove._combine``).  Families:

``smem.codec.partition``  the descriptor's fields and undescribed bits partition its 64 bits
``smem.codec.roundtrip``  encode(decode(v)) = v for every legal v (undescribed bits 0) and
                          decode(encode(f)) = f for every in-range field tuple (Z3 over the
                          whole 64-bit space; enumeration of every value of each field and a sample)
``smem.codec.isa_encode`` (matrix-descriptor-encode(x)) << 4 = x  <=>  x % 16 = 0 and x < 2^18
``smem.swizzle``          each Swizzle<B,4,3> is GF(2)-linear, an involution, and only moves
                          16-byte chunks inside their repeating pattern
``smem.atom``             Table 38: the canonical layout on one swizzle atom is a bijection onto
                          the atom's element slots (any pattern-aligned start)
``smem.tile``             per operand x major-ness x swizzle x element width: every element of the
                          wgmma operand tile (B: every N) lies inside the packed allocation, on its
                          own element-aligned slot (no two elements share a byte range), for every
                          pattern-aligned start address of a legal sm_90 allocation
``smem.kadvance``         K-major: the descriptor advanced by 32 bytes per K block inside a swizzle
                          atom (CuTe, Triton, TileLang) reads the next K block of the atom-wide tile
``smem.base_offset``      a tile whose swizzle pattern starts at any 128-byte boundary P is read by
                          start = P with base offset = (P >> 7) & 7 (the text's rule)
``smem.descarith``        adding (offset >> 4) to the low 32 bits never carries out of the start
                          field while the address stays below 2^18 (256 KiB > 227 KiB on sm_90),
                          never into LBO below 2^20; both bounds are exact (examples at the bound)
``smem.isa_example``      the ISA's five example layouts equal the canonical formula with the listed
                          parameters; four are injective, the fifth is erratum E-WGMMA-SMEM-K32B-TF32-EXAMPLE
``smem.peer.cute_atom``   CuTe's GMMA atoms (as CuTe prints them) equal the canonical layout
``smem.peer.cute_tile``   tile_to_shape(atom) over a B tile: make_gmma_desc's descriptors read it
``smem.peer.triton``      Triton's #ttg.nvmma_shared layouts: the descriptors Triton builds read them

Obligations whose expected outcome is an *example* (a collision in the text's layout, the
tightness of a bound, a model the silicon refuted breaking a kernel idiom) are existence
claims: Proved means the example exists, and the example is kept in the note.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from .. import prove as P
from ..expr import Formula
from . import address as A
from . import codec
from . import spec as S

SECTION = "9.7.15.5.1.2"
W32 = 32


def _key(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def _smem_max() -> int:
    return int(S.raw()["limits"]["smem_max_bytes_sm90"])


# ------------------------------------------------------------------------------------- deciding

def _z3_verdict(build: Callable[[], tuple[list, list]], opts: P.Options, ob: P.Obligation, existential: bool):
    import z3
    cons, wvars = build()
    s = z3.SolverFor("QF_BV")
    s.set("timeout", int(opts.timeout_ms))
    s.add(*cons)
    r = s.check()
    if r == z3.unknown:
        return ("unknown", "solver timed out or gave up")
    if r == z3.unsat:
        if existential:
            return ("refuted", {"no_example": "the solver proved that no such example exists"})
        return ("proved", P._certificate(s, ob.family, ob.subject, ob.claim) if opts.certificates else None)
    vals = P._lexmin(cons, [v for _, v in wvars], opts)
    if vals is None:
        return ("unknown", "no minimal witness within the time limit")
    w = {n: int(x) for (n, _), x in zip(wvars, vals)}
    return ("proved", w) if existential else ("refuted", w)


def _run(ob: P.Obligation, opts: P.Options, build, enum, existential: bool = False) -> P.Result:
    t0 = time.perf_counter()
    z = _z3_verdict(build, opts, ob, existential) if opts.z3 else None
    e = None
    if opts.enum and enum is not None:
        w = enum()
        if existential:
            e = ("proved", w) if w is not None else ("refuted", {"no_example": "enumeration found none"})
        else:
            e = ("proved", None) if w is None else ("refuted", w)
    if existential:
        dt = time.perf_counter() - t0
        vs = [v for v in (z, e) if v is not None]
        if any(v[0] == "unknown" for v in vs):
            return P.Unknown(ob, "; ".join(str(v[1]) for v in vs if v[0] == "unknown"), "z3+enum", dt)
        if len({v[0] for v in vs}) > 1:
            return P.Unknown(ob, f"the engines disagree: {vs}", "z3+enum", dt)
        if vs[0][0] == "proved":
            ws = [v[1] for v in vs]
            if len(ws) == 2 and ws[0] != ws[1]:
                return P.Unknown(ob, f"the engines found different minimal examples: z3 {ws[0]}, enumeration {ws[1]}",
                                 "z3+enum", dt)
            return P.Proved(ob, "z3+enum" if len(vs) == 2 else ("z3" if z else "enum"), dt, None,
                            note="example (the minimal one): " + json.dumps(ws[0], sort_keys=True))
        return P.Refuted(ob, vs[0][1], "z3+enum", dt)
    # witnesses are compared only when both engines name the same variables (the enumerations of
    # symbolic-N/start claims report the N and start they failed at instead)
    return P._combine(ob, z, e, t0, same=lambda a, b: set(a) != set(b) or a == b)


def _ob(family: str, subject: str, claim: str, section: str, build, enum, existential: bool = False,
        key: tuple = ()) -> P.Obligation:
    ob = P.Obligation(family, subject, claim, key=_key(family, subject, key), cover=[], section=section)
    ob.run = lambda opts, ob=ob: _run(ob, opts, build, enum, existential)
    return ob


def _bv(name: str, width: int = W32):
    import z3
    return z3.BitVec(name, width)


def _first_bad(bad: np.ndarray, axes: list[tuple[str, np.ndarray]]) -> dict | None:
    """The first True of ``bad`` (C order over ``axes``) as a witness dict."""
    if not bad.any():
        return None
    i = np.argwhere(bad)[0]
    return {n: int(v.reshape(-1)[j]) for (n, v), j in zip(axes, i)}


# ------------------------------------------------------------------------------------- codec

def _codec_obligations() -> list[P.Obligation]:
    import z3
    sec = S.raw()["descriptor"]["section"]
    out = []

    def part_build():
        masks = [f.mask for f in S.fields()] + [((1 << w) - 1) << lo for lo, w in S.reserved()]
        b = _bv("bit", 64)
        owners = [z3.If((z3.BitVecVal(m, 64) >> b) & 1 == 1, z3.BitVecVal(1, 8), z3.BitVecVal(0, 8)) for m in masks]
        total = sum(owners[1:], owners[0])
        return [z3.ULT(b, 64), total != 1], [("bit", b)]

    def part_enum():
        masks = [f.mask for f in S.fields()] + [((1 << w) - 1) << lo for lo, w in S.reserved()]
        for b in range(64):
            if sum((m >> b) & 1 for m in masks) != 1:
                return {"bit": b}
        return None

    out.append(_ob("smem.codec.partition", "descriptor bits 0-63",
                   "the fields and the undescribed bits cover each of the 64 bits exactly once", sec,
                   part_build, part_enum))

    def rt_build():
        v = _bv("v", 64)
        d = codec.z3_decode(v)
        back = codec.z3_encode(d)
        fv = {f.name: _bv("f_" + f.name, 64) for f in S.fields()}
        enc = codec.z3_encode(fv)
        dd = codec.z3_decode(enc)
        rng = z3.And(*[z3.ULT(fv[f.name], f.limit) for f in S.fields()])
        legal = d["reserved"] == 0
        bad = z3.Or(z3.And(legal, back != v), z3.And(rng, z3.Or(*[dd[f.name] != fv[f.name] for f in S.fields()]),
                                                     dd["reserved"] == 0))
        return [bad], [("v", v)] + [("f_" + k, x) for k, x in fv.items()]

    def rt_enum():
        # every value of every field (the others random), vectorised over the spec's field table,
        # and the evaluator's codec (codec.decode / codec.encode) on a sample of them
        rng = np.random.default_rng(20261128)
        parts = []
        for f in S.fields():
            x = rng.integers(0, 1 << 62, f.limit, dtype=np.int64).astype(np.uint64) << np.uint64(2)
            x |= rng.integers(0, 4, f.limit).astype(np.uint64)
            x = (x & ~np.uint64(f.mask)) | (np.arange(f.limit, dtype=np.uint64) << np.uint64(f.lo))
            parts.append(x & ~np.uint64(S.reserved_mask()))
        v = np.concatenate(parts + [np.array([0, ((1 << 64) - 1) & ~S.reserved_mask()], dtype=np.uint64)])
        fields = {f.name: (v >> np.uint64(f.lo)) & np.uint64(f.limit - 1) for f in S.fields()}
        back = np.zeros_like(v)
        for f in S.fields():
            back |= (fields[f.name] & np.uint64(f.limit - 1)) << np.uint64(f.lo)
        bad = np.nonzero(back != v)[0]
        if len(bad):
            return {"v": int(v[bad[0]])}
        for x in v[:: max(1, len(v) // 3000)].tolist():
            d = codec.decode(x)
            if codec.encode(d) != x or codec.decode(codec.encode(d)) != d:
                return {"v": x}
        return None

    out.append(_ob("smem.codec.roundtrip", "matrix descriptor (64 bits)",
                   "decode and encode are inverse: encode(decode(v)) = v for every legal v, decode(encode(f)) = f for "
                   "every in-range field tuple", sec, rt_build, rt_enum))

    enc_f = Formula(S.raw()["descriptor"]["encode"])

    def isa_build():
        x = _bv("x")
        back = enc_f.z3({"x": x}) << 4
        ok = z3.And(x & 15 == 0, z3.ULT(x, 1 << 18))
        return [(back == x) != ok], [("x", x)]

    def isa_enum():
        x = np.arange(1 << 19, dtype=np.int64)
        back = np.asarray(enc_f.eval({"x": x})) << 4
        bad = (back == x) != ((x % 16 == 0) & (x < (1 << 18)))
        return _first_bad(bad, [("x", x)])

    out.append(_ob("smem.codec.isa_encode", "matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4",
                   "the field gives x back exactly when x is 16-byte aligned and below 2^18", sec, isa_build, isa_enum))
    return out


# ------------------------------------------------------------------------------------- swizzle

def _swizzle_obligations() -> list[P.Obligation]:
    import z3
    out = []
    f_src = S.raw()["swizzle"]["formula"]
    for m in S.modes():
        f = Formula(f_src, let={"B": str(m.B), "M": str(m.M), "S": str(m.S)})
        chunk = ((1 << m.B) - 1) << m.M

        def sw(x, f=f):
            return f.z3({"x": x, "src": x})

        def build(sw=sw, chunk=chunk):
            x, y = _bv("x"), _bv("y")
            bad = z3.Or(sw(x ^ y) != sw(x) ^ sw(y), sw(sw(x)) != x, (sw(x) ^ x) & ~z3.BitVecVal(chunk, W32) != 0)
            return [bad], [("x", x), ("y", y)]

        def enum(f=f, chunk=chunk):
            x = np.arange(1 << 18, dtype=np.int64)
            s = np.asarray(f.eval({"x": x, "src": x}))
            basis = np.array([int(f.eval({"x": 1 << i, "src": 1 << i})) for i in range(18)], dtype=np.int64)
            lin = np.zeros_like(x)
            for i in range(18):
                lin ^= np.where((x >> i) & 1 == 1, basis[i], 0)
            ss = np.asarray(f.eval({"x": s, "src": s}))
            bad = (s != lin) | (ss != x) | (((s ^ x) & ~chunk) != 0)
            w = _first_bad(bad, [("x", x)])
            return None if w is None else {"x": w["x"], "y": 0}

        out.append(_ob("smem.swizzle", f"{m.cute} ({m.name})",
                       "GF(2)-linear, an involution, and moves only address bits [M, M+B): 16-byte chunks inside "
                       "their repeating pattern", S.raw()["swizzle"]["section"], build, enum, key=(m,)))
    return out


# ------------------------------------------------------------------------------------- layouts

def _packed_terms(major, sw, bits, N, K, model):
    """(LBO bytes, SBO bytes, footprint bytes) as Z3 terms of N (packed as CuTe's tile_to_shape)."""
    import z3
    am, ak = S.atom_shape(major, sw, bits)
    ab = am * ak * bits // 8
    nk = -(-K // ak)
    nm = z3.UDiv(N + (am - 1), am)
    shape, stride = A.layout_modes(major, sw, model)
    steps = {"LBO": z3.BitVecVal(16, W32), "SBO": z3.BitVecVal(16, W32)}
    for ms, st in ((stride[0], z3.BitVecVal(ab, W32)), (stride[1], nm * ab)):
        for x in ms:
            if x in steps:
                steps[x] = st
    return steps["LBO"], steps["SBO"], nm * (nk * ab)


@dataclass(frozen=True)
class TileGroup:
    """Operands with the same shared-memory tile: K bytes per row, rows 64 or N (8..256)."""
    names: tuple
    k_bytes: int
    symbolic_n: bool          # some operand has N rows (N = 8..256 covers the 64 rows of A)
    widths: tuple


def _groups() -> list[TileGroup]:
    bits_of = S.type_bits()
    by: dict[int, list] = {}
    for op in S.operand_specs():
        by.setdefault(op.k_bytes, []).append(op)
    out = []
    for kb, ops in sorted(by.items()):
        widths = sorted({bits_of[t] for o in ops for t in (o.types or tuple(bits_of))}, reverse=True)
        out.append(TileGroup(tuple(o.name for o in ops), kb, any(o.mn == "N" for o in ops), tuple(widths)))
    return out


def _tile_cases() -> list[tuple]:
    """(group, major, swizzle, bits, model) for every operand tile the instruction can read."""
    out = []
    bits_of = S.type_bits()
    for g in _groups():
        for major in ("K", "MN"):
            for bits in g.widths:
                if major == "MN" and not any(bits_of[t] == bits for t in S.mn_major_types()):
                    continue
                for m in S.modes():
                    model = A.SILICON
                    if major == "K" and m.B and g.k_bytes > m.width_bytes:
                        model = A.Model(lbo_k_swizzled="used")      # the text's layout collides here (erratum)
                    out.append((g, major, m.name, bits, model))
    return out


def _tile_ob(g: TileGroup, major: str, sw: str, bits: int, model: A.Model) -> P.Obligation:
    import z3
    K = g.k_bytes * 8 // bits
    m = S.mode(sw)
    smax = _smem_max()
    Ns = list(range(8, 257, 8)) if g.symbolic_n else [64]
    note = "" if model == A.SILICON else f" [{model.label()}: the text's layout is not injective here]"
    rows = "N x " if g.symbolic_n else "64 x "
    subject = f"{'/'.join(g.names)} {major}-major {sw} {bits}-bit ({rows}{K}){note}"

    def terms(mn, k, s, N):
        lbo, sbo, fp = _packed_terms(major, sw, bits, N, K, model)
        a = A.z3_address(major, sw, bits, {"mn": mn, "k": k, "sa": s, "lbo": z3.UDiv(lbo, 16),
                                           "sbo": z3.UDiv(sbo, 16), "bo": 0}, model)
        return a, fp

    def build():
        mn1, k1, mn2, k2, j, s = (_bv(x) for x in ("mn1", "k1", "mn2", "k2", "j", "s"))
        cons = []
        if g.symbolic_n:
            N = j * 8
            cons += [z3.UGE(j, 1), z3.ULE(j, 32)]
        else:
            N = z3.BitVecVal(64, W32)
            cons += [j == 8]
        a1, fp = terms(mn1, k1, s, N)
        a2, _ = terms(mn2, k2, s, N)
        cons += [z3.URem(s * 16, m.pattern_bytes) == 0, z3.ULT(s, 1 << 14), z3.ULE(s * 16 + fp, smax)]
        cons += [z3.ULT(mn1, N), z3.ULT(k1, K), z3.ULT(mn2, N), z3.ULT(k2, K)]
        lo, hi = s * 128, (s * 16 + fp) * 8
        bad = [z3.ULT(a1, lo), z3.UGT(a1 + bits, hi), z3.And(P._lt_lex([mn2, k2], [mn1, k1]), a1 == a2)]
        if bits > 1:
            bad.append(a1 & (bits - 1) != 0)
        return cons + [z3.Or(*bad)], [("j", j), ("s", s), ("mn1", mn1), ("k1", k1), ("mn2", mn2), ("k2", k2)]

    def enum():
        F = A.address_formula(major, sw, bits, model)
        k = np.arange(K)[None, :]
        for N in Ns:
            p = A.packed(major, sw, bits, N, K, model)
            last = (smax - p.footprint) // m.pattern_bytes * m.pattern_bytes
            mn = np.arange(N)[:, None]
            # every N at start 0; the extremes of N also at the last start that fits
            for start in ((0, last) if N in (Ns[0], Ns[-1]) else (0,)):
                a = np.asarray(F.eval({"mn": mn, "k": k, "sa": start // 16, "lbo": p.lbo // 16, "sbo": p.sbo // 16,
                                       "bo": 0})).reshape(-1)
                slot = a - start * 8
                ok = (slot >= 0) & (slot + bits <= p.footprint * 8) & (a % bits == 0)
                if not ok.all() or np.bincount(slot // bits).max() > 1:
                    return {"N": N, "start": start}
        return None

    return _ob("smem.tile", subject,
               "every element of the operand tile (B: every N) lies inside the packed allocation on its own "
               "element-aligned slot, for every pattern-aligned start of a legal sm_90 allocation",
               S.raw()["canonical"]["section"], build, enum, key=(g, major, sw, bits, model))


def _atom_ob(major: str, sw: str, bits: int) -> P.Obligation:
    import z3
    m = S.mode(sw)
    am, ak = S.atom_shape(major, sw, bits)
    p = A.packed(major, sw, bits, am, ak)
    assert p.atoms == (1, 1) and am * ak * bits == p.atom_bytes * 8       # count: a bijection iff injective

    def build():
        mn1, k1, mn2, k2, s = (_bv(x) for x in ("mn1", "k1", "mn2", "k2", "s"))
        env = {"sa": s, "lbo": p.lbo // 16, "sbo": p.sbo // 16, "bo": 0}
        a1 = A.z3_address(major, sw, bits, {"mn": mn1, "k": k1, **env})
        a2 = A.z3_address(major, sw, bits, {"mn": mn2, "k": k2, **env})
        cons = [z3.URem(s * 16, m.pattern_bytes) == 0, z3.ULT(s, 1 << 14),
                z3.ULT(mn1, am), z3.ULT(k1, ak), z3.ULT(mn2, am), z3.ULT(k2, ak)]
        bad = [z3.ULT(a1, s * 128), z3.UGT(a1 + bits, (s * 16 + p.atom_bytes) * 8),
               z3.And(P._lt_lex([mn2, k2], [mn1, k1]), a1 == a2)]
        if bits > 1:
            bad.append(a1 & (bits - 1) != 0)
        return cons + [z3.Or(*bad)], [("s", s), ("mn1", mn1), ("k1", k1), ("mn2", mn2), ("k2", k2)]

    def enum():
        F = A.address_formula(major, sw, bits)
        for start in (0, 3 * m.pattern_bytes):
            a = np.asarray(F.eval({"mn": np.arange(am)[:, None], "k": np.arange(ak)[None, :], "sa": start // 16,
                                   "lbo": p.lbo // 16, "sbo": p.sbo // 16, "bo": 0})).reshape(-1)
            slots = (a - start * 8) // bits
            ok = (a % bits == 0) & (slots >= 0) & (slots < am * ak)
            if not ok.all() or len(np.unique(slots)) != slots.size:
                return {"start": start}
        return None

    return _ob("smem.atom", f"{major}-major {sw} {bits}-bit ({am} x {ak} elements, {p.atom_bytes} bytes)",
               "the canonical layout on one Table 38 swizzle atom is a bijection onto the atom's element slots "
               "(any pattern-aligned start)", S.raw()["atoms"]["section"], build, enum, key=(major, sw, bits))


def _kadvance_ob(sw: str, bits: int, model: A.Model = A.SILICON, existential: bool = False) -> P.Obligation:
    import z3
    m = S.mode(sw)
    K = 256 // bits                                 # one instruction's K (32 bytes)
    blocks = m.width_bytes // 32
    am, ak = S.atom_shape("K", sw, bits)
    p = A.packed("K", sw, bits, 256, ak, model)
    F = A.address_formula("K", sw, bits, model)

    def build():
        mn, k, j, s = (_bv(x) for x in ("mn", "k", "j", "s"))
        env = {"lbo": p.lbo // 16, "sbo": p.sbo // 16, "bo": 0}
        moved = F.z3({"mn": mn, "k": k, "sa": s + 2 * j, **env})
        wide = F.z3({"mn": mn, "k": k + j * K, "sa": s, **env})
        cons = [z3.URem(s * 16, m.pattern_bytes) == 0, z3.ULT(s, 1 << 14), z3.ULT(j, blocks), z3.ULT(mn, 256),
                z3.ULT(k, K)]
        return cons + [moved != wide], [("s", s), ("j", j), ("mn", mn), ("k", k)]

    def enum():
        s = np.array([0, m.pattern_bytes // 16])[:, None, None, None]
        j = np.arange(blocks)[None, :, None, None]
        mn = np.arange(256)[None, None, :, None]
        k = np.arange(K)[None, None, None, :]
        env = {"lbo": p.lbo // 16, "sbo": p.sbo // 16, "bo": 0}
        moved = np.asarray(F.eval({"mn": mn, "k": k, "sa": s + 2 * j, **env}))
        wide = np.asarray(F.eval({"mn": mn, "k": k + j * K, "sa": s, **env}))
        bad = np.broadcast_to(moved != wide, (2, blocks, 256, K))
        return _first_bad(bad, [("s", s), ("j", j), ("mn", mn), ("k", k)])

    if existential:
        return _ob("smem.kadvance.relative_breaks_it", f"K-major {sw} {bits}-bit [{model.label()}]",
                   "under the refuted 'relative' swizzle the 32-byte K step inside an atom reads a wrong element",
                   S.raw()["canonical"]["section"], build, enum, existential=True, key=(sw, bits, model))
    return _ob("smem.kadvance", f"K-major {sw} {bits}-bit ({blocks} K blocks of 32 bytes per atom row)",
               "the descriptor advanced by 32 bytes per K block (base offset 0) reads K block j of the atom-wide tile",
               S.raw()["canonical"]["section"], build, enum, key=(sw, bits, model))


def _base_offset_ob(major: str, sw: str, model: A.Model = A.SILICON, existential: bool = False) -> P.Obligation:
    import z3
    bits = 16
    K = 16
    N = 256
    p = A.packed(major, sw, bits, N, K, model)
    F = A.address_formula(major, sw, bits, model)
    env = {"lbo": p.lbo // 16, "sbo": p.sbo // 16}

    def build():
        mn, k, q = (_bv(x) for x in ("mn", "k", "q"))     # pattern start P = 128 q
        moved = F.z3({"mn": mn, "k": k, "sa": q * 8, "bo": q & 7, **env})
        anchored = q * 1024 + F.z3({"mn": mn, "k": k, "sa": 0, "bo": 0, **env})
        cons = [z3.ULT(q, ((1 << 18) - p.footprint) // 128), z3.ULT(mn, N), z3.ULT(k, K)]
        return cons + [moved != anchored], [("q", q), ("mn", mn), ("k", k)]

    def enum():
        q = np.arange(16)[:, None, None]
        mn = np.arange(N)[None, :, None]
        k = np.arange(K)[None, None, :]
        moved = np.asarray(F.eval({"mn": mn, "k": k, "sa": q * 8, "bo": q & 7, **env}))
        anchored = q * 1024 + np.asarray(F.eval({"mn": mn, "k": k, "sa": 0, "bo": 0, **env}))
        return _first_bad(np.broadcast_to(moved != anchored, (16, N, K)), [("q", q), ("mn", mn), ("k", k)])

    sec = S.raw()["descriptor"]["section"]
    if existential:
        return _ob("smem.base_offset.added_breaks_it", f"{major}-major {sw} 16-bit [{model.label()}]",
                   "under the refuted 'added' base offset the text's rule reads a wrong element", sec, build, enum,
                   existential=True, key=(major, sw, model))
    return _ob("smem.base_offset", f"{major}-major {sw} 16-bit (B, N = 256)",
               "a tile whose swizzle pattern starts at 128-byte boundary P is read by start = P, base offset = "
               "(P >> 7) & 7", sec, build, enum, key=(major, sw, model))


# ------------------------------------------------------------------------------------- descriptor arithmetic

def _descarith_obligations() -> list[P.Obligation]:
    import z3
    sec = S.raw()["descriptor"]["section"]
    fs = {f.name: f for f in S.fields()}
    lo_mask = (1 << 32) - 1
    res_14 = ((1 << fs["lbo"].lo) - 1) & ~((1 << (fs["start"].hi + 1)) - 1)     # bits between start and LBO
    out = []

    def adv(d, u):
        return (d & z3.BitVecVal(~lo_mask & ((1 << 64) - 1), 64)) | ((d + u) & z3.BitVecVal(lo_mask, 64))

    def build_start(existential=False, bound=1 << 18):
        d, u = _bv("d", 64), _bv("u", 64)
        a, b = codec.z3_decode(d), codec.z3_decode(adv(d, u))
        final = (a["start"] + u) * 16
        cons = [z3.ULT(u, 1 << 28)]
        if existential:
            return cons + [final == bound, b["start"] != a["start"] + u], [("d", d), ("u", u)]
        same = z3.And(b["start"] == a["start"] + u, *[b[n] == a[n] for n in ("lbo", "sbo", "base_offset", "swizzle")],
                      b["reserved"] == a["reserved"])
        return cons + [z3.ULT(final, bound), z3.Not(same)], [("d", d), ("u", u)]

    def build_lbo(existential=False, bound=1 << 20):
        d, u = _bv("d", 64), _bv("u", 64)
        a, b = codec.z3_decode(d), codec.z3_decode(adv(d, u))
        final = (a["start"] + u) * 16
        cons = [z3.ULT(u, 1 << 28), d & z3.BitVecVal(res_14, 64) == 0]
        keep = z3.And(b["lbo"] == a["lbo"], z3.Extract(63, 30, adv(d, u)) == z3.Extract(63, 30, d))
        if existential:
            return cons + [final == bound, z3.Not(keep)], [("d", d), ("u", u)]
        return cons + [z3.ULT(final, bound), z3.Not(keep)], [("d", d), ("u", u)]

    rng = np.random.default_rng(7)

    def sample(lbo_bits_zero=False):
        d = rng.integers(0, 1 << 63, 20000, dtype=np.int64).astype(np.uint64) * np.uint64(2) + \
            rng.integers(0, 2, 20000).astype(np.uint64)
        if lbo_bits_zero:
            d &= np.uint64(~res_14 & ((1 << 64) - 1))
        return d

    def enum_start(existential=False, bound=1 << 18):
        if existential:             # the minimal example: d = 0, the smallest u reaching the bound
            u = bound // 16
            d = 0
            b = codec.decode(d + u)
            return {"d": d, "u": u} if b.start != u else None
        d = sample()
        s = (d & np.uint64(fs["start"].limit - 1)).astype(np.int64)
        room = (bound // 16) - s
        u = (rng.integers(0, 1 << 30, d.size) % room).astype(np.uint64)
        u[:200] = (room[:200] - 1).astype(np.uint64)                 # right below the bound
        new = (d & np.uint64(~lo_mask & ((1 << 64) - 1))) | ((d + u) & np.uint64(lo_mask))
        ok = ((new ^ d) & np.uint64(~((1 << 14) - 1) & ((1 << 64) - 1)) == 0) & \
             ((new & np.uint64(0x3FFF)).astype(np.int64) == s + u.astype(np.int64))
        i = np.nonzero(~ok)[0]
        return None if not len(i) else {"d": int(d[i[0]]), "u": int(u[i[0]])}

    def enum_lbo(existential=False, bound=1 << 20):
        if existential:
            u = bound // 16
            b, a = codec.decode(u & lo_mask), codec.decode(0)
            return {"d": 0, "u": u} if b.lbo != a.lbo else None
        d = sample(lbo_bits_zero=True)
        s = (d & np.uint64(0x3FFF)).astype(np.int64)
        room = (bound // 16) - s
        u = (rng.integers(0, 1 << 30, d.size) % room).astype(np.uint64)
        u[:200] = (room[:200] - 1).astype(np.uint64)
        new = (d & np.uint64(~lo_mask & ((1 << 64) - 1))) | ((d + u) & np.uint64(lo_mask))
        ok = (new >> np.uint64(16)) & np.uint64(0x3FFF) == (d >> np.uint64(16)) & np.uint64(0x3FFF)
        ok &= (new >> np.uint64(30)) == (d >> np.uint64(30))
        i = np.nonzero(~ok)[0]
        return None if not len(i) else {"d": int(d[i[0]]), "u": int(u[i[0]])}

    smax = _smem_max()
    assert smax < 1 << 18
    out.append(_ob("smem.descarith.no_carry", "low 32 bits += offset >> 4 (CuTe DescriptorIterator, Triton, TileLang)",
                   f"while the advanced address stays below 2^18 = 262144 bytes (every sm_90 address: at most {smax} "
                   "bytes of shared memory per CTA) the start field is exactly start + (offset >> 4) and no other "
                   "field changes", sec, build_start, enum_start))
    out.append(_ob("smem.descarith.no_carry_into_lbo", "low 32 bits += offset >> 4, bits 14-15 zero",
                   "below 2^20 bytes the carry never reaches LBO (bits 16-29) or the high word", sec, build_lbo, enum_lbo))
    out.append(_ob("smem.descarith.bound_is_exact", "advanced address = 2^18",
                   "at exactly 2^18 bytes the start field wraps (the carry lands in undescribed bit 14)", sec,
                   lambda: build_start(True), lambda: enum_start(True), existential=True))
    out.append(_ob("smem.descarith.lbo_bound_is_exact", "advanced address = 2^20",
                   "at exactly 2^20 bytes the carry changes LBO", sec, lambda: build_lbo(True),
                   lambda: enum_lbo(True), existential=True))
    return out


# ------------------------------------------------------------------------------------- registry

def all_obligations() -> list[P.Obligation]:
    out = _codec_obligations() + _swizzle_obligations()
    for major in ("K", "MN"):
        for bits in (16, 32, 8, 1):
            for m in S.modes():
                out.append(_atom_ob(major, m.name, bits))
    out += [_tile_ob(*c) for c in _tile_cases()]
    for sw in ("64B", "128B"):
        for bits in (16, 32, 8, 1):
            out.append(_kadvance_ob(sw, bits))
    out.append(_kadvance_ob("128B", 16, A.Model(swizzle_on="relative"), existential=True))
    for major in ("K", "MN"):
        for sw in ("32B", "64B", "128B"):
            out.append(_base_offset_ob(major, sw))
    out.append(_base_offset_ob("K", "128B", A.Model(base_offset="added"), existential=True))
    out += _descarith_obligations()
    return out


@lru_cache(maxsize=1)
def _catalog_size() -> int:
    from .. import catalog as cat
    return len(list(cat.documented_forms()))


def obligations_for(forms) -> list[P.Obligation]:
    """All smem obligations for ``prove --all`` (the whole catalog) or when a wgmma form is proved."""
    fs = list(forms)
    if not any("wgmma" in f.opcode for f in fs) and len(fs) != _catalog_size():
        return []
    return all_obligations()


def report_section(results) -> list[str]:
    """proofs/REPORT.md: every smem obligation, its subject and verdict (examples kept)."""
    out = ["## wgmma shared-memory operands (`smem.*`, specs/wgmma_smem.toml)", "",
           "PTX ISA 9.1 §9.7.15.5.1.2. The address map is the one formula per canonical layout that "
           "`formal.smem` evaluates; model choices where the text is silent are the silicon's (swizzle on absolute "
           "addresses, base offset as the pattern's phase, LBO unused for swizzled K-major: docs/wgmma.md) unless a "
           "subject names another. Existence claims (an example that must exist) list the minimal example.", "",
           "| family | subject | verdict | example / witness |", "|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.obligation.family, r.obligation.subject)):
        info = ""
        if r.status == "proved" and getattr(r, "note", "").startswith("example"):
            info = r.note.split(": ", 1)[1]
        elif r.status == "refuted":
            info = json.dumps(r.witness, sort_keys=True)
        elif r.status == "unknown":
            info = r.reason
        out.append(f"| `{r.obligation.family}` | {r.obligation.subject} | {r.status} | {'`' + info + '`' if info else ''} |")
    return out + [""]


def register() -> None:
    P.register_obligations("smem", obligations_for)
    P.register_report_section("smem", report_section)

