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
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .layout import Layout, LayoutError, fragment

Nested = Any   # int or tuple of Nested


def _tokens(text: str) -> list[str]:
    bad = re.search(r"[^()\d,:\s-]", text)
    if bad:
        raise LayoutError(f"CuTe layout: unexpected {bad.group()!r} in {text.strip()!r}")
    return re.findall(r"\(|\)|,|:|-?\d+", text)


MAX_INT, MAX_DEPTH = 1 << 32, 32    # bounds: a CuTe layout of a warp fragment is small and shallow


def _parse_tuple(toks: list[str], pos: int, depth: int = 0) -> tuple[Nested, int]:
    t = toks[pos]
    if t == "(":
        if depth >= MAX_DEPTH:
            raise LayoutError(f"CuTe layout: nested more than {MAX_DEPTH} levels deep")
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
            raise LayoutError(f"CuTe layout: unexpected {toks[pos]!r}")
    if re.fullmatch(r"-?\d+", t):
        if len(t.lstrip("-")) > 10 or abs(int(t)) > MAX_INT:
            raise LayoutError(f"CuTe layout: integer {t[:24]}{'...' if len(t) > 24 else ''} is too large (at most 2^32)")
        return int(t), pos + 1
    raise LayoutError(f"CuTe layout: unexpected {t!r}")


def _normalise(text: str) -> str:
    s = text.strip()
    if s.startswith("Layout<"):
        s = re.sub(r"\b(?:cute::)?(?:Shape|Stride)<", "(", s[len("Layout<"):])
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
        raise LayoutError(f"CuTe layout {text!r}: expected SHAPE:STRIDE")
    a, b = s.split(":", 1)
    try:
        ta, tb = _tokens(a), _tokens(b)
        shape, pa = _parse_tuple(ta, 0)
        stride, pb = _parse_tuple(tb, 0)
    except IndexError:
        raise LayoutError(f"CuTe layout {text!r}: unbalanced parentheses") from None
    if pa != len(ta) or pb != len(tb):
        raise LayoutError(f"CuTe layout {text!r}: trailing characters")
    if not _congruent(shape, stride):
        raise LayoutError(f"CuTe layout {text!r}: shape and stride do not have the same nesting")
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
    if op not in ("a", "b", "c", "d"):
        raise LayoutError("CuTe audits cover the a, b, c, d operands")
    shape, stride = parse(tv)
    if isinstance(shape, int) or len(shape) != 2:
        raise LayoutError(f"CuTe TV layout {tv!r}: expected two top-level modes (thread, value)")
    (ts, vs), (td, vd) = shape, stride
    nthr, nval = size(ts), size(vs)
    lanes_per_product = ref.lanes // ref.products
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
        if product_lane_stride is None:
            raise LayoutError(f"{ref.name} runs {ref.products} products per warp: give product_lane_stride "
                              "(lanes between the products' threads, e.g. 4 for the sm_70 quad pairs)")
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
            raise LayoutError(f"CuTe layout maps lane {k[0]} value {k[1] * ref.epr + k[2]} twice "
                              "(thr_to_lane is not injective)")
        seen[k] = rec[3:]
    bad = [r for r in recs if not (0 <= r[0] < ref.lanes)]
    if bad:
        raise LayoutError(f"CuTe thread-to-lane map sends a thread to lane {bad[0][0]}")
    return Layout.from_table(recs, like=ref, name=name, params=dict(ref.params))
