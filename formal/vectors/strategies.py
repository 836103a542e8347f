"""Hypothesis strategies for users' own tests of mma implementations.

::

    from hypothesis import given
    from formal.vectors import strategies as fs

    OP = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"

    @given(fs.fragments(OP, a=fs.elements("f16", finite=True)))
    def test_my_mma(regs):
        assert (my_mma(OP, **regs) == formal.evaluate(OP, **regs)).all()

* :func:`elements` -- raw encodings of one element format (``int``), optionally finite
  only, without subnormals, inside a value range or a field-exponent range.
* :func:`fragments` -- one warp's inputs for a form: ``{'a','b','c'}`` register arrays
  ``[T, 32, nregs]`` (plus ``'e'`` ``[T, 32]`` and ``'sel'`` for ``mma.sp``), built from
  element encodings placed by the spec's layouts (each operand draws a pool of up to 64
  element values and places them anywhere); for ``wmma.mma`` and block-scaled forms
  the matrices ``{'A','B','C'}`` (+ ``scale_a``, ``scale_b``).  The dict can be passed to
  ``formal.evaluate(opcode, **regs)`` (or ``evaluate_matrices``) directly.
* :func:`metadata` -- legal metadata registers ``[32]`` for a sparse form and selector.

Every fact (formats, layouts, legal index pairs, which lanes hold which chunk) comes from
``specs/`` through ``formal.numerics.formats``, ``formal.layout`` and ``formal.metadata``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..catalog import Form, parse
from ..numerics.formats import decode, get_format, to_float64


def _form(opcode) -> Form:
    return opcode if isinstance(opcode, Form) else parse(opcode)


@st.composite
def _float_codes(draw, f, finite: bool, subnormals: bool, exponents, zero: bool, ignored: str):
    signed = f.signed
    ones = (1 << f.exponent) - 1
    lo_f, hi_f = 0, ones                                   # exponent *field* range
    if exponents is not None:                              # unbiased exponent range of normals
        lo_f = max(1, exponents[0] + f.bias)
        hi_f = min(ones, exponents[1] + f.bias)
        if lo_f > hi_f:
            raise ValueError(f"exponent range {exponents} is empty for {f.name}")
    kinds = ["normal"]
    if zero and exponents is None:
        kinds.append("zero")
    if subnormals and f.subnormal and f.mantissa and exponents is None:
        kinds.append("subnormal")
    if not finite and exponents is None:
        if f.inf:
            kinds.append("inf")
        if f.nan == "ieee" or f.nan_codes():
            kinds.append("nan")
    kind = draw(st.sampled_from(kinds))
    neg = draw(st.booleans()) if signed else False
    m = f.mantissa
    if kind == "zero":
        mag = 0
    elif kind == "subnormal":
        mag = draw(st.integers(1, (1 << m) - 1))
    elif kind == "inf":
        mag = ones << m
    elif kind == "nan":
        if f.nan == "ieee":
            mag = (ones << m) | draw(st.integers(1, (1 << m) - 1))
        else:
            code = draw(st.sampled_from(sorted(f.nan_codes())))
            return code << f.ignored_low_bits
    else:
        top = f.maxfin_code >> m if m else f.maxfin_code
        e = draw(st.integers(max(lo_f, 1 if f.subnormal else 0), min(hi_f, top)))
        fr = draw(st.integers(0, (1 << m) - 1)) if m else 0
        mag = (e << m) | fr
        if mag > f.maxfin_code:                            # e4m3-style NaN codes in the top binade
            mag = f.maxfin_code
    code = mag | ((1 << (f.field_bits - 1)) if neg else 0)
    code <<= f.ignored_low_bits
    if f.ignored_low_bits and ignored == "any":
        code |= draw(st.integers(0, (1 << f.ignored_low_bits) - 1))
    return code


def elements(fmt: str, *, finite: bool = False, subnormals: bool = True, zero: bool = True,
             min_value: float | None = None, max_value: float | None = None,
             exponents: tuple[int, int] | None = None, ignored_bits: str = "zero") -> st.SearchStrategy[int]:
    """Raw encodings (right-aligned ints) of element format ``fmt``.

    finite       no NaN, no Inf
    subnormals   allow subnormal numbers (False: none)
    zero         allow +0 / -0
    min_value, max_value   only values in [min_value, max_value] (implies finite)
    exponents    (lo, hi): normal numbers whose unbiased exponent is in [lo, hi] only
    ignored_bits for tf32 (an f32 register whose low 13 bits the format ignores):
                 "zero" or "any"
    Integer formats (s8, u8, s4, u4, s32, b1): ``min_value``/``max_value`` bound the value.
    """
    f = get_format(fmt)
    if f.cls != "float":
        lo, hi = f.int_min, f.int_max
        if min_value is not None:
            lo = max(lo, int(np.ceil(min_value)))
        if max_value is not None:
            hi = min(hi, int(np.floor(max_value)))
        if lo > hi:
            raise ValueError(f"empty range [{min_value}, {max_value}] for {fmt}")
        return st.integers(lo, hi).map(lambda v: v & ((1 << f.bits) - 1))
    if ignored_bits not in ("zero", "any"):
        raise ValueError("ignored_bits must be 'zero' or 'any'")
    strat = _float_codes(f, finite or min_value is not None or max_value is not None, subnormals, exponents,
                         zero, ignored_bits)
    if min_value is not None or max_value is not None:
        lo = -np.inf if min_value is None else float(min_value)
        hi = np.inf if max_value is None else float(max_value)

        def inside(code: int) -> bool:
            v = float(to_float64(np.array([code], np.uint64), f)[0])
            return lo <= v <= hi
        strat = strat.filter(inside)
    return strat


@st.composite
def metadata(draw, opcode, sel: int | None = None, idle: str = "zero") -> np.ndarray:
    """Legal metadata registers ``[32]`` (uint32) for a sparse form under selector ``sel``:
    a legal index pair (nibble) in every (row, chunk) the selected lanes hold.  ``idle``:
    what lanes that contribute no metadata hold -- "zero" or "junk" (legal nibbles)."""
    from ..metadata import meta

    form = _form(opcode)
    fm = meta(form)
    s = fm.selectors[0] if sel is None else sel
    if s not in fm.selectors:
        raise ValueError(f"selector {s} is not legal for {form.opcode} (legal: {list(fm.selectors)})")
    legal = sorted(fm.legal_nibbles)
    tab = fm.e_table(s)
    e = np.zeros(32, np.uint64)
    if idle == "junk":
        for lane in range(32):
            e[lane] = sum(draw(st.sampled_from(legal)) << (4 * k) for k in range(8))
        e[np.unique(tab[:, 0])] = 0
    from hypothesis.extra.numpy import arrays

    nib = draw(arrays(np.uint64, (fm.rows, fm.chunks_per_row), elements=st.sampled_from(legal)))
    for lane, _n, row, ch, lo in tab:
        e[lane] |= nib[row, ch] << np.uint64(lo)
    return e.astype(np.uint32)


def _codes(draw, strat, n: int, pool: int = 64) -> np.ndarray:
    """n encodings: a pool of up to ``pool`` values from ``strat``, placed by an index array
    (Hypothesis fills integer arrays cheaply, so examples stay small and shrink well)."""
    from hypothesis.extra.numpy import arrays

    values = draw(st.lists(strat, min_size=1, max_size=min(pool, n)))
    idx = draw(arrays(np.int64, (n,), elements=st.integers(0, len(values) - 1)))
    return np.array(values, dtype=np.uint64)[idx]


@st.composite
def fragments(draw, opcode, T: int = 1, sel: int | None = None, a=None, b=None, c=None,
              scale=None) -> dict[str, Any]:
    """One or ``T`` warps of inputs for ``opcode`` (see the module docstring).

    ``a``, ``b``, ``c``: element strategies (default :func:`elements` of the operand's type,
    every encoding).  ``sel``: the sparsity selector (default: drawn from the legal ones).
    ``scale``: strategy for block-scale factors (default any encoding of ``.stype``).
    """
    from .draft import _pack, _sparse_regs, dims, is_matrix_level

    form = _form(opcode)
    P, M, N, K, Ka = dims(form)
    sa = a if a is not None else elements(form.atype)
    sb = b if b is not None else elements(form.btype)
    sc = c if c is not None else elements(form.c_type)
    A = _codes(draw, sa, T * P * M * Ka).reshape(T, P, M, Ka)
    B = _codes(draw, sb, T * P * K * N).reshape(T, P, K, N)
    C = _codes(draw, sc, T * P * M * N).reshape(T, P, M, N)
    if is_matrix_level(form):
        out: dict[str, Any] = {"A": A[:, 0], "B": B[:, 0], "C": C[:, 0]}
        if form.block_scale:
            nsf = {"1X": 1, "2X": 2, "4X": 4}[form.scale_vec_effective]
            ss = scale if scale is not None else elements(form.stype)
            out["scale_a"] = _codes(draw, ss, T * M * nsf).reshape(T, M, nsf).astype(np.uint8)
            out["scale_b"] = _codes(draw, ss, T * nsf * N).reshape(T, nsf, N).astype(np.uint8)
        return out
    out = {"b": _pack(form, "b", B), "c": _pack(form, "c", C)}
    if form.is_sparse:
        from ..metadata import meta

        fm = meta(form)
        s = draw(st.sampled_from(list(fm.selectors))) if sel is None else sel
        es = [draw(metadata(form, s)) for _ in range(T)]
        # the nibbles back from e: the stored A elements sit where gather_terms reads them
        tab = fm.e_table(s)
        nib = np.zeros((T, fm.rows, fm.chunks_per_row), np.int64)
        for t in range(T):
            for lane, _n, row, ch, lo in tab:
                nib[t, row, ch] = (int(es[t][lane]) >> int(lo)) & 15
        regs, e = [], []
        for t in range(T):
            r, ee = _sparse_regs(form, A[t:t + 1, 0], nib[t:t + 1], s, None)
            regs.append(r[0])
            e.append(ee[0])
        out.update(a=np.stack(regs), e=np.stack(e), sel=s)
        return out
    out["a"] = _pack(form, "a", A)
    return out


__all__ = ["elements", "fragments", "metadata", "decode"]
