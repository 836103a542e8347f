"""CuTe thread-value layouts as :class:`formal.layout.Layout` (for audits).

CuTe (CUTLASS 3) writes an MMA operand as a TV layout ``(thread, value) -> index`` with
shape:stride notation, e.g. the m16n8k16 .f16 A operand of ``SM80_16x8x16_F16F16F16F16_TN``::

    ((4,8),(2,2,2)):((32,1),(16,8,128))

A coordinate maps to ``sum(coord_j * stride_j)``; a linear index is split into
coordinates colexicographically (the leftmost mode varies fastest).  The index addresses
the operand matrix *column-major in CuTe's coordinates*:

* A:   ``(M, K)``  index = m + M * k
* B:   ``(N, K)``  index = n + N * k   - CuTe's B is N x K, the transpose of PTX's K x N B;
  the importer transposes, so the result is compared with PTX's ``row = k, col = n``
* C/D: ``(M, N)``  index = m + M * n
* sparse A: the COMPRESSED ``(M, K/2)`` matrix, index = m + M * k' (CuTe's own sparse A
  atoms describe the logical M x K matrix instead; convert before auditing)

The thread index is the lane (``thr_to_lane`` may give CuTe's ``ThrID`` layout instead,
e.g. ``(4,2):(1,16)`` for the sm_70 quad-pair atoms) and the value index is the PTX element
index ``i = reg * epr + elem`` (CuTe's value order is the PTX "low to high" order).  For
m8n8k4 .f16, which runs 4 products per warp, a CuTe atom describes product 0; product q
uses lanes ``thr_to_lane(t) + q * product_lane_stride`` (CuTe's TiledMMA of the quad pairs).

Both ``((4,8),(2,2)):((32,1),(16,8))`` and the C++ spelling
``Layout<Shape<Shape<_4,_8>,Shape<_2,_2>>, Stride<Stride<_32,_1>,Stride<_16,_8>>>`` parse.

For layout transformations: :func:`cute_map` (the algebra map ``(lane, i) -> (row, col)``),
:func:`cute_endpoint` (a transform register endpoint) and :func:`export` (a register layout
as the shortest CuTe TV layout, proved equal to it; layouts that are not a sum of per-bit
strides, e.g. XOR swizzles, are refused with the first point that differs).
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from .. import algebra as alg
from ..algebra import AlgebraError, Map
from ..layout import Layout, LayoutError, fragment

Nested = Any   # int or tuple of Nested


class CuteError(AlgebraError, LayoutError):
    """Bad CuTe input (exit code 2 in the CLI)."""


class CuteFlagError(LayoutError):
    """A CuTe atom that needs the thread map flags (--cute-thr, --cute-product-stride)."""


def _tokens(text: str) -> list[str]:
    bad = re.search(r"[^()\d,:\s-]", text)
    if bad:
        raise CuteError(f"CuTe layout: unexpected {bad.group()!r} in {text.strip()!r}")
    return re.findall(r"\(|\)|,|:|-?\d+", text)


MAX_INT, MAX_DEPTH = 1 << 32, 32    # bounds: a CuTe layout of a warp fragment is small and shallow


def _parse_tuple(toks: list[str], pos: int, depth: int = 0) -> tuple[Nested, int]:
    t = toks[pos]
    if t == "(":
        if depth >= MAX_DEPTH:
            raise CuteError(f"CuTe layout: nested more than {MAX_DEPTH} levels deep")
        items = []
        pos += 1
        while True:
            item, pos = _parse_tuple(toks, pos, depth + 1)
            items.append(item)
            if toks[pos] == ",":
                pos += 1
                continue
            if toks[pos] == ")":
                return tuple(items), pos + 1
            raise CuteError(f"CuTe layout: unexpected {toks[pos]!r}")
    if re.fullmatch(r"-?\d+", t):
        if len(t.lstrip("-")) > 10 or abs(int(t)) > MAX_INT:
            raise CuteError(f"CuTe layout: integer {t[:24]}{'...' if len(t) > 24 else ''} is too large (at most 2^32)")
        return int(t), pos + 1
    raise CuteError(f"CuTe layout: unexpected {t!r}")


def _normalise(text: str) -> str:
    s = text.strip()
    s = re.sub(r"\b((?:cute::)?(?:Layout|Shape|Stride))\s+<", r"\1<", s)   # 'Shape <' as CuTe's headers space it
    if s.startswith(("Layout<", "cute::Layout<")):
        s = s[s.index("<") + 1:]
        s = re.sub(r"\b(?:cute::)?(?:Shape|Stride)<", "(", s)
        s = s.replace(">", ")")
        s = s[:-1] if s.endswith(")") else s              # the Layout<...> closing bracket
        depth = 0
        for k, ch in enumerate(s):                         # top-level comma: shape , stride
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 0:
                s = s[:k] + ":" + s[k + 1:]
                break
    s = re.sub(r"\b_(\d+)", r"\1", s)                      # CuTe static ints _4 -> 4
    s = re.sub(r"Int<(\d+)>", r"\1", s)
    return s


def parse(text: str) -> tuple[Nested, Nested]:
    """``'(4,8):(1,4)'`` -> (shape, stride) as nested tuples of ints."""
    s = _normalise(text)
    if ":" not in s:
        raise CuteError(f"CuTe layout {text!r}: expected SHAPE:STRIDE")
    a, b = s.split(":", 1)
    try:
        ta, tb = _tokens(a), _tokens(b)
        shape, pa = _parse_tuple(ta, 0)
        stride, pb = _parse_tuple(tb, 0)
    except IndexError:
        raise CuteError(f"CuTe layout {text!r}: unbalanced parentheses") from None
    if pa != len(ta) or pb != len(tb):
        raise CuteError(f"CuTe layout {text!r}: trailing characters")
    if not _congruent(shape, stride):
        raise CuteError(f"CuTe layout {text!r}: shape and stride do not have the same nesting")
    if any(s < 1 for s, _ in _leaves(shape, stride)):
        raise CuteError(f"CuTe layout {text[:200]!r}: a mode of size {min(s for s, _ in _leaves(shape, stride))} "
                        f"(CuTe shapes are positive)")
    return shape, stride


def _congruent(a: Nested, b: Nested) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int)
    return len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b))


def _leaves(shape: Nested, stride: Nested) -> list[tuple[int, int]]:
    if isinstance(shape, int):
        return [(shape, stride)]
    out = []
    for s, d in zip(shape, stride):
        out += _leaves(s, d)
    return out


def size(shape: Nested) -> int:
    return shape if isinstance(shape, int) else int(np.prod([size(s) for s in shape])) if shape else 1


def evaluate(shape: Nested, stride: Nested, x: np.ndarray) -> np.ndarray:
    """The layout as a function of a linear coordinate (vectorised)."""
    x = np.asarray(x, dtype=np.int64)
    out = np.zeros_like(x)
    div = 1
    for s, d in _leaves(shape, stride):
        out += ((x // div) % s) * d
        div *= s
    return out


def from_cute(tv: str, form_or_opcode, operand: str, *, thr_to_lane: str | None = None,
              product_lane_stride: int | None = None, name: str = "cute", **params: int) -> Layout:
    """A CuTe TV layout ``(T, V):(Ts, Vs)`` of (form, operand) as a table :class:`Layout`.

    The domain and packing are those of the spec's layout of (form, operand); the CuTe
    layout must have as many values as the fragment has elements, and as many threads as
    a product has lanes.
    """
    ref = fragment(form_or_opcode, operand, **params)
    op = ref.operand
    if op in ("scale_a", "scale_b"):
        return from_cute_scale(tv, form_or_opcode, op, name=name, **params)
    if op == "e" and ref.warps > 1:
        return from_cute_wgmma_metadata(tv, form_or_opcode, name=name, **params)
    if op not in ("a", "b", "c", "d"):
        raise LayoutError("CuTe audits cover the a, b, c, d, scale_a, scale_b operands (and metadata: audit_metadata)")
    ts, vs, td, vd, nthr, nval = _modes(tv)
    lanes_per_product = ref.lanes // ref.products
    if op == "a" and _is_sparse(ref) and nval == 2 * ref.elements:
        return from_cute_sparse_a(tv, form_or_opcode, name=name)
    if nval != ref.elements:
        raise LayoutError(f"CuTe TV layout has {nval} values per thread; {ref.name} has {ref.elements} elements")
    if nthr != lanes_per_product:
        raise LayoutError(f"CuTe TV layout has {nthr} threads; {ref.name} has {lanes_per_product} lanes per product")
    t = np.repeat(np.arange(nthr), nval)
    v = np.tile(np.arange(nval), nthr)
    idx = evaluate(ts, td, t) + evaluate(vs, vd, v)
    if thr_to_lane:
        lshape, lstride = parse(thr_to_lane)
        lane0 = evaluate(lshape, lstride, t)
    else:
        lane0 = t
    R, C = ref.rows, ref.cols
    if op == "b":                       # CuTe (N, K) -> PTX (K, N)
        row, col = idx // C, idx % C
    else:                               # (M, K) or (M, N): column-major
        row, col = idx % R, idx // R
    if ref.products > 1:
        if product_lane_stride is None or not thr_to_lane:
            raise CuteFlagError(
                f"{ref.name} runs {ref.products} products per warp: give CuTe's ThrID with --cute-thr "
                "(e.g. '(4,2):(1,16)' for the sm_70 quad pairs) and the lanes between the products' threads with "
                "--cute-product-stride (4 for the sm_70 quad pairs)")
        recs = []
        for q in range(ref.products):
            for a, b_, r_, c_ in zip(lane0 + q * product_lane_stride, v, row, col):
                reg, elem = divmod(int(b_), ref.epr)
                recs.append((int(a), reg, elem, int(r_), int(c_), q))
    else:
        recs = [(int(a), *divmod(int(b_), ref.epr), int(r_), int(c_)) for a, b_, r_, c_ in zip(lane0, v, row, col)]
    seen = {}
    for rec in recs:
        k = rec[:3]
        if k in seen and seen[k] != rec[3:]:
            raise CuteFlagError(f"CuTe layout maps lane {k[0]} value {k[1] * ref.epr + k[2]} twice "
                                "(the --cute-thr map is not injective)")
        seen[k] = rec[3:]
    bad = [r for r in recs if not (0 <= r[0] < ref.lanes)]
    if bad:
        raise CuteFlagError(f"CuTe thread-to-lane map (--cute-thr, --cute-product-stride) sends a thread to lane {bad[0][0]}")
    return Layout.from_table(recs, like=ref, name=name, params=dict(ref.params))


# ------------------------------------------------------------------------------------------
# Sparse A, scale factors and metadata as CuTe writes them
#
# CuTe's sparse atoms (mma_traits_sm120_sparse.hpp) describe A as the LOGICAL M x K matrix:
# ``ALayout`` maps (thread, v) to the logical (m, k) of the full K, and each stored element
# (ValTypeA = sparse_elem<2, T>: one stored value per 2 logical positions) covers two
# consecutive values v = 2i, 2i + 1.  The spec's A is the COMPRESSED M x K/2 matrix: stored
# element i sits at column k // 2 of the pair's first logical column k (2:4 keeps 2 of each 4
# columns; the metadata says which).  from_cute_sparse_a converts: i = v // 2, (m, k) -> (m, k // 2),
# after checking that both values of a stored element name the same compressed cell.
#
# CuTe's scale-factor layouts (SFALayout / SFBLayout, mma_traits_sm120.hpp) map (thread, v) to
# the logical (m, k) (or (n, k)) whose scale factor the thread supplies; the factor of (m, k) is
# SF[m][k // VS] with VS = K / (scale factors per row), and modes of stride 0 mark lanes the
# hardware does not read (they duplicate a reading lane).  The spec's scale_a is M x SF (lanes of
# the pair thread_id, bytes byte_id ..), scale_b SF x N.  from_cute_scale converts each lane the
# spec reads: its distinct (m, k // VS) in order are elements byte_id, byte_id + 1, ...
#
# CuTe's ELayout maps (thread, v) to the logical (m, k) whose metadata the thread supplies; the
# 32-bit register holds 8 nibbles, each for K / 8 ... consecutive v, i.e. one chunk of the
# granularity (4 columns for 2:4, 8 for 4:8).  audit_metadata compares (row, chunk) -> (lane,
# nibble) with the spec's metadata layout (formal.metadata), by enumeration and by Z3.


def _is_sparse(ref) -> bool:
    e = ref.entry
    return e is not None and (e.file == "fragments_mma_sp" or (e.file == "fragments_wgmma" and e.id.startswith("wgmma.sp.")))


def _modes(tv: str):
    """A TV layout's (thread shape, value shape, thread stride, value stride, threads, values)."""
    shape, stride = parse(tv)
    if isinstance(shape, int) or len(shape) != 2:
        raise LayoutError(f"CuTe TV layout {tv!r}: expected two top-level modes (thread, value)")
    (ts, vs), (td, vd) = shape, stride
    return ts, vs, td, vd, size(ts), size(vs)


def _tv(tv: str, threads: int = 32):
    ts, vs, td, vd, nthr, nval = _modes(tv)
    if nthr != threads:
        raise LayoutError(f"CuTe TV layout has {nthr} threads; these atoms have {threads}")
    t = np.repeat(np.arange(nthr), nval)
    v = np.tile(np.arange(nval), nthr)
    return t, v, evaluate(ts, td, t) + evaluate(vs, vd, v), nval


def from_cute_sparse_a(tv: str, form_or_opcode, *, name: str = "cute") -> Layout:
    """CuTe's sparse ALayout (logical M x K) as the spec's compressed M x K/2 A layout."""
    ref = fragment(form_or_opcode, "a")
    if not _is_sparse(ref):
        raise LayoutError(f"{ref.name} is not a sparse A operand")
    t, v, idx, nval = _tv(tv, ref.lanes)
    M = ref.rows
    if nval != 2 * ref.elements:
        raise LayoutError(f"CuTe sparse ALayout has {nval} logical values per thread; {ref.name} stores "
                          f"{ref.elements} elements (2 logical values each)")
    m, k = idx % M, idx // M
    recs = {}
    for lane, vv, mm, kk in zip(t.tolist(), v.tolist(), m.tolist(), k.tolist()):
        i = vv // 2
        cell = (mm, kk // 2)
        key = (lane, i)
        if key in recs and recs[key] != cell:
            raise LayoutError(f"CuTe sparse ALayout: lane {lane} values {2 * i} and {2 * i + 1} (stored element {i}) "
                              f"name different compressed cells {recs[key]} and {cell}")
        recs[key] = cell
    rows = [(ln, *divmod(i, ref.epr), r, c) for (ln, i), (r, c) in recs.items()]
    return Layout.from_table(rows, like=ref, name=name, params=dict(ref.params))


def from_cute_wgmma_metadata(tv: str, form_or_opcode, *, name: str = "cute", **params: int) -> Layout:
    """CuTe's GMMA ELayout (mma_traits_sm90_gmma_sparse.hpp: (T128, V) -> logical (m, k) of the
    M x K tile) as the spec's wgmma metadata layout (nibble n of a thread -> (row, chunk)).

    The 32-bit register holds 8 nibbles, each for V / 8 consecutive values, i.e. one chunk; the
    chunk of a value is k // width (width = K / chunks per row).  Only the threads the spec reads
    for the selector are compared: CuTe's stride-0 mode gives the other thread pair the same
    metadata, which the hardware does not read."""
    ref = fragment(form_or_opcode, "e", **params)
    t, v, idx, nval = _tv(tv, ref.lanes)
    if nval % 8:
        raise LayoutError(f"CuTe ELayout has {nval} values per thread; the 32-bit metadata register holds 8 nibbles")
    M = ref.rows
    per = nval // 8
    from .. import catalog as cat
    form = form_or_opcode if isinstance(form_or_opcode, cat.Form) else cat.parse(form_or_opcode)
    width = form.k // ref.cols
    m, k = idx % M, idx // M
    held = ref._full["held"].reshape(ref.lanes, ref.nregs, ref.epr)
    cells: dict[tuple[int, int], tuple[int, int]] = {}
    for th, vv, mm, kk in zip(t.tolist(), v.tolist(), m.tolist(), k.tolist()):
        n = vv // per
        if not held[th, 0, n]:
            continue
        cell = (mm, kk // width)
        if cells.setdefault((th, n), cell) != cell:
            raise LayoutError(f"CuTe ELayout: thread {th} nibble {n} covers two chunks {cells[(th, n)]} and {cell}")
    rows = [(th, 0, n, r, c) for (th, n), (r, c) in cells.items()]
    return Layout.from_table(rows, like=ref, name=name, params=dict(ref.params))


def from_cute_scale(tv: str, form_or_opcode, operand: str, *, name: str = "cute", **params: int) -> Layout:
    """CuTe's SFALayout / SFBLayout as the spec's scale_a / scale_b layout (selected lanes only)."""
    ref = fragment(form_or_opcode, operand, **params)
    op = ref.operand
    t, v, idx, nval = _tv(tv)
    if op == "scale_a":
        outer, nsf = ref.rows, ref.cols          # M x SF
    else:
        outer, nsf = ref.cols, ref.rows          # SF x N
    if nval % nsf:
        raise LayoutError(f"CuTe scale-factor layout has {nval} values (K); not a multiple of {nsf} factors per row")
    vs = nval // nsf                             # SFVecSize: K / factors per row
    o, k = idx % outer, idx // outer
    if (k >= nval).any():
        raise LayoutError(f"CuTe scale-factor layout reaches k = {int(k.max())} beyond K = {nval}")
    byte_id = ref.params.get("byte_id", 0)
    held = ref._full["held"].reshape(ref.lanes, ref.nregs, ref.epr)
    rows = []
    for lane in range(32):
        if not held[lane].any():
            continue                             # a lane the hardware does not read
        sel = t == lane
        cells = sorted({(int(a), int(b) // vs) for a, b in zip(o[sel], k[sel])}, key=lambda c: (c[1], c[0]))
        outs = {c[0] for c in cells}
        if len(outs) != 1:
            raise LayoutError(f"CuTe scale-factor layout: lane {lane} supplies factors of {len(outs)} "
                              f"{'rows' if op == 'scale_a' else 'columns'} {sorted(outs)[:4]}; the hardware reads one")
        for j, (oo, sf) in enumerate(cells):
            i = byte_id + j
            reg, elem = divmod(i, ref.epr)
            if reg >= ref.nregs:
                raise LayoutError(f"CuTe scale-factor layout: lane {lane} supplies {len(cells)} factors from byte "
                                  f"{byte_id}; the register has {ref.nregs * ref.epr}")
            rows.append((lane, reg, elem, oo, sf) if op == "scale_a" else (lane, reg, elem, sf, oo))
    return Layout.from_table(rows, like=ref, name=name, params=dict(ref.params))


def audit_metadata(tv: str, form_or_opcode, sel: int = 0, timeout_ms: int = 20000) -> dict:
    """Compare CuTe's ELayout with the spec's metadata layout for selector ``sel``:
    (row, chunk) -> (lane, nibble).  Enumeration over every (row, chunk), and Z3 on the two
    maps as tables; returns {"status", "witness", "solver", ...}."""
    import z3

    from ..metadata.spec import meta

    fm = meta(form_or_opcode)
    t, v, idx, nval = _tv(tv)
    M, K = fm.rows, fm.k
    w = fm.gran.width
    if nval % 8:
        raise LayoutError(f"CuTe ELayout has {nval} values; the 32-bit metadata register holds 8 nibbles")
    per_nib = nval // 8
    m, k = idx % M, idx // M
    cute_owner: dict = {}
    for lane, vv, mm, kk in zip(t.tolist(), v.tolist(), m.tolist(), k.tolist()):
        nib = vv // per_nib
        cell = (mm, kk // w)
        cute_owner.setdefault(cell, set()).add((lane, nib))
    spec_owner = {c: v for c, v in fm.owner(sel).items()}
    cells = sorted(set(spec_owner) | set(cute_owner))
    # enumeration: every (row, chunk) the spec reads must be supplied by CuTe at the same lane/nibble
    enum_w = None
    for c in cells:
        sv = spec_owner.get(c)
        cv = cute_owner.get(c, set())
        if sv is None or sv not in cv:
            enum_w = {"row": c[0], "chunk": c[1], "columns": [c[1] * w, c[1] * w + w - 1],
                      "spec": None if sv is None else {"lane": sv[0], "nibble": sv[1]},
                      "cute": [{"lane": a, "nibble": b} for a, b in sorted(cv)]}
            break
    # Z3: the spec's owner as a function; CuTe's as a relation; is there a cell where they differ?
    r, ch = z3.BitVecs("row chunk", 16)

    def tab(d, pick):
        e = z3.BitVecVal(0xFFFF, 16)
        for (rr, cc), val in d.items():
            e = z3.If(z3.And(r == rr, ch == cc), z3.BitVecVal(pick(val), 16), e)
        return e

    spec_t = tab(spec_owner, lambda x: x[0] * 8 + x[1])
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    held = [z3.And(r == rr, ch == cc, z3.Or(*[spec_t == a * 8 + b for a, b in cute_owner.get((rr, cc), set())] or
                                                [z3.BoolVal(False)]))
            for (rr, cc) in spec_owner]
    s.add(z3.ULT(r, M), z3.ULT(ch, K // w), spec_t != 0xFFFF, z3.Not(z3.Or(*held)))
    zr = s.check()
    zstat = "proved" if zr == z3.unsat else "refuted" if zr == z3.sat else "unknown"
    estat = "proved" if enum_w is None else "refuted"
    status = zstat if zstat == estat else "unknown"
    return {"form": getattr(form_or_opcode, "opcode", str(form_or_opcode)), "selector": sel,
            "status": status, "solver": "z3+enum", "witness": enum_w,
            "detail": "" if status != "unknown" else f"engines disagree: z3 {zstat}, enumeration {estat}",
            "cells": len(spec_owner)}


# ------------------------------------------------------------------------------------------
# A TiledMMA's (or tiled copy's) TV layout over a whole warp-group / CTA tile
#
# CuTe prints a TiledMMA operand as ((ThrV, ThrM, ThrN/K...), (FrgV, RestM, RestK...)) over the
# tiled operand (A: M x K, B: N x K, C: M x N, column-major): thread t is lane t % 32 of warp
# t // 32, and the first "FrgV" values of a thread are one instruction's elements (PTX element
# order), the rest repeat the atom over the tile.  audit_tiled cuts the tile into instruction
# tiles (warp, value group), audits each against the spec (one proof per distinct local layout)
# and checks that the tiles cover the tile.


def _thread_value(wit, w: int, g: int, E: int, epr: int):
    """A tile witness at (lane, reg, elem) points also named as CuTe's (thread, value) of warp w,
    group g: each point ("point", or the pair "p", "q") gets them, the witness the first one's."""
    if not isinstance(wit, dict):
        return wit
    out = dict(wit)
    for key in ("point", "p", "q"):
        p = wit.get(key)
        if isinstance(p, dict) and all(isinstance(p.get(x), int) for x in ("lane", "reg", "elem")):
            tv = {"thread": 32 * w + p["lane"], "value": g * E + p["reg"] * epr + p["elem"]}
            out[key] = dict(p, **tv)
            if "thread" not in out:
                out.update(tv)
    return out


#: bounds of a tiled audit (a CTA tile is far smaller): tile cells, and (thread, value) pairs
MAX_TILE_CELLS, MAX_TILE_POINTS = 1 << 24, 1 << 21


def audit_tiled(tv: str, form_or_opcode, operand: str, tile, *, compare_bits: bool = True,
                timeout_ms: int = 20000, **params):
    from .. import catalog as cat
    from ..layout import normalize_operand
    from ..prove import audit_layout as audit
    from .triton import TileReport, WholeReport, tile_verdict

    form = cat.parse(form_or_opcode) if isinstance(form_or_opcode, str) else form_or_opcode
    op = normalize_operand(operand)
    ref = fragment(form, op, **params)
    if op not in ("a", "b", "c", "d") or ref.products > 1:
        raise LayoutError("tiled CuTe audits cover the a, b, c, d operands of one-product forms")
    ts, vs, td, vd, nthr, nval = _modes(tv)
    R, C = (int(x) for x in tile)
    E = ref.elements
    if nthr % 32 or nval % E:
        raise LayoutError(f"CuTe tiled layout has {nthr} threads x {nval} values; expected whole warps x a "
                          f"multiple of the {E} elements of {ref.name}")
    if R <= 0 or C <= 0 or R * C > MAX_TILE_CELLS:
        raise LayoutError(f"--cute-tile {R}x{C}: the tile needs positive sizes and at most {MAX_TILE_CELLS:,} cells")
    if nthr * nval > MAX_TILE_POINTS:
        raise LayoutError(f"CuTe tiled layout has {nthr} threads x {nval} values: at most {MAX_TILE_POINTS:,} "
                          f"(thread, value) pairs are audited (a TiledMMA over a CTA tile has far fewer)")
    t = np.repeat(np.arange(nthr), nval)
    v = np.tile(np.arange(nval), nthr)
    idx = evaluate(ts, td, t) + evaluate(vs, vd, v)
    # a (thread, value) past the tile is the layout's mistake, refuted below with that pair; it
    # keeps its coordinates (a column or row past the tile) for the witness
    inside = (idx >= 0) & (idx < R * C)
    if op == "b":                          # CuTe's N x K tile -> PTX K x N
        rows, cols, shape2 = idx // R, idx % R, (C, R)
    else:
        rows, cols, shape2 = idx % R, idx // R, (R, C)
    held = np.zeros(shape2, dtype=np.int64)
    np.add.at(held, (rows[inside], cols[inside]), 1)
    reports, seen = [], {}
    first_outside = None
    k = 0
    for w in range(nthr // 32):
        for g in range(nval // E):
            sel = (t // 32 == w) & (v // E == g)
            lanes, ii, rr, cc = t[sel] % 32, v[sel] % E, rows[sel], cols[sel]
            ins = inside[sel]
            # the box of this group's first value inside the tile (the first value's own, for a right layout)
            j0 = int(np.argmax(ins)) if ins.any() else 0
            r0 = max(int(rr[j0]), 0) // ref.rows * ref.rows
            c0 = max(int(cc[j0]), 0) // ref.cols * ref.cols
            if not ins.all():
                j = int(np.argmin(ins))
                th, va = int(t[sel][j]), int(v[sel][j])
                if first_outside is None:
                    first_outside = [int(rr[j]), int(cc[j])]
                reg, el = divmod(int(ii[j]), ref.epr)
                sr, sc = ref.at(int(lanes[j]), reg, el)[:2]
                wit = {"point": {"lane": int(lanes[j]), "reg": reg, "elem": el}, "thread": th, "value": va,
                       "warp": w, "candidate": {"index": int(idx[sel][j]), "row": int(rr[j]), "col": int(cc[j])},
                       "spec": {"row": r0 + int(sr), "col": c0 + int(sc)}}
                reports.append(TileReport(k, {"warp": w, "value_group": g}, (r0, c0), "refuted", wit,
                                          f"audit.range: thread {th} value {va} reaches index {int(idx[sel][j])}, "
                                          f"outside the {R} x {C} tile", None))
                k += 1
                continue
            recs = [(int(a), *divmod(int(b), ref.epr), int(x) - r0, int(y) - c0) for a, b, x, y in zip(lanes, ii, rr, cc)]
            lay = Layout.from_table(recs, like=ref, name=f"tile {k}", params=dict(ref.params))
            key = lay.map_key
            if key in seen:
                first = reports[seen[key]]
                reports.append(TileReport(k, {"warp": w, "value_group": g}, (r0, c0), first.status,
                                          _thread_value(first.witness, w, g, E, ref.epr), first.detail, first.index))
            else:
                rep = audit(lay, form, op, compare_bits=compare_bits, timeout_ms=timeout_ms, **params)
                seen[key] = len(reports)
                st, wit, detail = tile_verdict(lay, form, op, rep, compare_bits, timeout_ms)
                reports.append(TileReport(k, {"warp": w, "value_group": g}, (r0, c0), st,
                                          _thread_value(wit, w, g, E, ref.epr), detail, None))
            k += 1
    miss = np.argwhere(held == 0)
    cov = {"cells": int(held.size), "held": int((held > 0).sum()), "complete": miss.size == 0 and first_outside is None,
           "first_missing": [int(x) for x in miss[0]] if miss.size else None, "first_outside": first_outside,
           "copies": sorted({int(x) for x in np.unique(held[held > 0])})}
    how = f"CuTe TiledMMA: warp = thread // 32, the {E} values of each value group form one instruction"
    return WholeReport(form.opcode, op, ref.name, shape2, list(range(E.bit_length() - 1)), how, reports, cov)


# ---------------------------------------------------------------- algebra maps, endpoints, export

def _flat(t) -> list[int]:
    return [x for y in t for x in _flat(y)] if isinstance(t, tuple) else [t]


def _mode_formula(var: str, shape, stride) -> str:
    terms, div = [], 1
    for s, d in zip(_flat(shape), _flat(stride)):
        if s > 1 and d != 0:
            terms.append(f"((({var}) // {div}) % {s}) * {d}")
        div *= s
    return " + ".join(terms) or "0"


def cute_map(layout: str, rows: int, cols: int, name: str = "", transpose: bool = False) -> Map:
    """(lane, i) -> (row, col) of a TV layout into a column-major rows x cols tile
    (``transpose``: the layout indexes the cols x rows transpose, as CuTe's N x K B)."""
    shape, stride = parse(layout)
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise CuteError(f"a TV layout has two modes (thread, value): {layout}")
    nt, nv = size(shape[0]), size(shape[1])
    if nt != 32:
        raise CuteError(f"thread mode has {nt} threads, a warp has 32")
    idx = f"({_mode_formula('lane', shape[0], stride[0])}) + ({_mode_formula('i', shape[1], stride[1])})"
    if transpose:
        f = {"row": f"({idx}) // {cols}", "col": f"({idx}) % {cols}"}
    else:
        f = {"row": f"({idx}) % {rows}", "col": f"({idx}) // {rows}"}
    return alg.from_formulas([("lane", 32), ("i", nv)], [("row", rows), ("col", cols)], f,
                             name=name or f"cute {layout}")


def cute_endpoint(layout: str, rows: int, cols: int, regs: Sequence[str], bits: int, reg_bits: int = 32,
                  label: str = "", transpose: bool = False):
    from .spaces import RegLayout, TransformError

    m = cute_map(layout, rows, cols, transpose=transpose)
    epr = max(1, reg_bits // bits)
    nv = m.ins[1].size
    if nv % epr or nv // epr != len(regs):
        raise TransformError(f"CuTe layout has {nv} values = {nv / epr:g} registers of {epr} x {bits}-bit; "
                             f"{len(regs)} register names given")
    m = m.split("i", [("reg", nv // epr), ("elem", epr)])
    return RegLayout(list(regs), m, bits, reg_bits, label=label or f"CuTe {layout}")


def _coalesce(strides: list[int]) -> list[tuple[int, int]]:
    """Per-bit strides -> coalesced (size, stride) modes (merge while stride doubles)."""
    out: list[list[int]] = []
    for s in strides:
        if out and out[-1][1] * out[-1][0] == s and out[-1][1] != 0:
            out[-1][0] *= 2
        elif out and out[-1][1] == 0 and s == 0:
            out[-1][0] *= 2
        else:
            out.append([2, s])
    return [(a, b) for a, b in out]


def _fmt_mode(modes: list[tuple[int, int]]) -> tuple[str, str]:
    if not modes:
        return "1", "0"
    if len(modes) == 1:
        return str(modes[0][0]), str(modes[0][1])
    return "(" + ",".join(str(a) for a, _ in modes) + ")", "(" + ",".join(str(b) for _, b in modes) + ")"


def export(layout, timeout_ms: int = alg.DEFAULT_TIMEOUT_MS, transpose: bool | None = None) -> str:
    """The CuTe TV layout string of a register layout, proved equal to it.

    By default in CuTe's own orientation, the one ``layout audit --cute`` imports: A is
    M x K, C/D M x N, and B (a spec ``Layout`` of operand b) N x K, as CuTe's BLayout.
    ``transpose=False`` forces the PTX orientation (B: K x N), ``transpose=True`` exports
    (col, row) of any layout."""
    from .triton import _as_map

    if transpose is None:
        transpose = isinstance(layout, Layout) and layout.operand == "b"
    m = _as_map(layout)
    if transpose:
        m = m.rename(row="col", col="row")
        m = alg.Composed(m, alg.identity([d for d in m.outs if d.name == "row"] + [d for d in m.outs if d.name == "col"]))
    names = [d.name for d in m.ins]
    if set(names) == {"lane", "reg", "elem"}:
        m = m.fuse(["reg", "elem"], "i")
    sizes = {d.name: d.size for d in m.ins}
    outs = {d.name: d.size for d in m.outs}
    rows, cols = outs["row"], outs["col"]
    m = alg.Composed(alg.identity([("lane", sizes["lane"]), ("i", sizes["i"])]), m)
    b = m.box()
    mask = m.domain_mask(b)
    if not mask.all():
        i = int((~mask).nonzero()[0][0])
        raise CuteError(f"layout holds nothing at lane {b['lane'][i]}, value {b['i'][i]}: a TV layout is total")
    for d, n in sizes.items():
        if n & (n - 1):
            raise CuteError(f"{d} has {n} points; export handles power-of-two modes")

    def idx(lane, i):
        o = m.eval({"lane": lane, "i": i})
        return o["row"] + rows * o["col"]

    if idx(0, 0) != 0:
        raise CuteError("(thread 0, value 0) is not at index 0: not a CuTe layout")
    ts = [idx(1 << b, 0) for b in range(sizes["lane"].bit_length() - 1)]
    vs = [idx(0, 1 << b) for b in range(sizes["i"].bit_length() - 1)]
    (tsh, tst), (vsh, vst) = _fmt_mode(_coalesce(ts)), _fmt_mode(_coalesce(vs))
    text = f"({tsh},{vsh}):({tst},{vst})"
    cm = cute_map(text, rows, cols)
    p = m.equals(cm, timeout_ms, names=("layout", "cute"))
    if p.status != "proved":
        raise CuteError(f"not a CuTe (sum of strides) layout: {p.detail or p.witness}")
    return text
