"""The sign of an exact-zero result under ``zero_sign="ieee"`` (IEEE 754-2019 §6.3).

IEEE 754-2019 §6.3 (The sign bit): "When the sum of two operands with opposite signs (or
the difference of two operands with like signs) is exactly zero, the sign of that sum (or
difference) shall be +0 under all rounding-direction attributes except
roundTowardNegative; under that attribute, the sign of an exact zero sum (or difference)
shall be -0.  However, under all rounding-direction attributes, when x is zero,
x + x = x - (-x) = x."  The sign of a product is the exclusive OR of the operands' signs,
and a fused multiply-add whose exact result is zero takes its sign by the rule for sums.

Folded over the addends of a dot product (every product exact) this gives the table
below: -0 when every addend is -0; otherwise +0, except -0 in rm when some addend is -0
or nonzero addends cancel.  Every combination of zero signs (and of +-1 addends that
cancel) is checked in every rounding mode, for the vectorised block FMA (window, c added
after the window, exact rounding, chained blocks), the scalar reference, the Z3 encoding
and the exact model (the f64 form's .rnd), against two oracles that share no code with
the project: the hand-derived table, and IEEE binary64 additions performed step by step
by the machine (numpy float64 in round-to-nearest; Python floats under ``fesetround``
for the other modes, where the C library offers it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import platform

import numpy as np
import pytest
import z3

from formal.numerics import dot_terms
from formal.numerics.archs import EXACT, SM90
from formal.numerics.reference import dot_scalar
from formal.vectors import z3num as Z

MODES = ("rn", "rz", "rm", "rp")
VALUES = (0.0, -0.0, 1.0, -1.0)
NEG = np.signbit


def table_sign(terms, mode: str) -> bool:
    """The hand-derived rule (module docstring): is the exact-zero sum -0?"""
    if all(t == 0 for t in terms):
        return all(NEG(t) for t in terms) or (mode == "rm" and any(NEG(t) for t in terms))
    return mode == "rm"


def zero_cases(K: int):
    """(a, b, c) with a*b + c exactly zero.  K <= 2: every combination of +-0 and +-1 (every
    sign pattern of zeros, and +-1 that cancel); K = 3: every sign pattern of zeros, and
    +-1 / +-0 products (b = 1) that cancel."""
    if K <= 2:
        combos = itertools.product(VALUES, repeat=2 * K + 1)
    else:
        combos = itertools.chain(itertools.product((0.0, -0.0), repeat=2 * K + 1),
                                 (a + (1.0,) * K + (c,) for a in itertools.product(VALUES, repeat=K)
                                  for c in VALUES))
    for combo in combos:
        a, b, c = combo[:K], combo[K:2 * K], combo[-1]
        if sum(x * y for x, y in zip(a, b)) + c == 0:
            yield a, b, c


# ---- the oracles ----------------------------------------------------------------------

def test_table_matches_numpy_round_to_nearest():
    """Oracle 2 (rn): numpy float64 additions, one at a time, in every order of the addends."""
    n = 0
    for K in (1, 2, 3):
        for a, b, c in zero_cases(K):
            terms = [np.float64(x) * np.float64(y) for x, y in zip(a, b)] + [np.float64(c)]
            for order in itertools.permutations(terms):
                s = order[0]
                for t in order[1:]:
                    s = s + t
                assert s == 0 and bool(NEG(s)) == table_sign(terms, "rn"), (a, b, c, order)
                n += 1
    assert n > 1000


_FE = {"x86_64": {"rn": 0x000, "rm": 0x400, "rp": 0x800, "rz": 0xC00},
       "AMD64": {"rn": 0x000, "rm": 0x400, "rp": 0x800, "rz": 0xC00},
       "aarch64": {"rn": 0x000000, "rp": 0x400000, "rm": 0x800000, "rz": 0xC00000}}


@functools.lru_cache(maxsize=1)
def _libm():
    name = ctypes.util.find_library("m")
    consts = _FE.get(platform.machine())
    if not name or consts is None:
        return None, None
    try:
        lib = ctypes.CDLL(name)
        lib.fesetround, lib.fegetround
    except (OSError, AttributeError):
        return None, None
    return lib, consts


def _fold_under(mode: str, terms) -> float:
    lib, fe = _libm()
    old = lib.fegetround()
    assert lib.fesetround(fe[mode]) == 0
    try:
        one, tiny = float(1.0), float(2.0 ** -60)
        probe = (one + tiny, -one - tiny)            # the mode really is in force (rounding is observed)
        s = float(terms[0])
        for t in terms[1:]:
            s = s + float(t)
    finally:
        lib.fesetround(old)
    want_probe = {"rn": (1.0, -1.0), "rz": (1.0, -1.0), "rp": (1.0 + 2.0 ** -52, -1.0),
                  "rm": (1.0, -1.0 - 2.0 ** -52)}[mode]
    if probe != want_probe:
        pytest.skip(f"fesetround({mode}) is not observed by Python float arithmetic here")
    return s


@pytest.mark.skipif(_libm()[0] is None, reason="no fesetround for this platform")
@pytest.mark.parametrize("mode", MODES)
def test_table_matches_the_machine_in_every_rounding_mode(mode):
    """Oracle 2 (all modes): binary64 additions by the CPU under fesetround."""
    for K in (1, 2, 3):
        for a, b, c in zero_cases(K):
            terms = [x * y for x, y in zip(a, b)] + [c]
            s = _fold_under(mode, terms)
            assert s == 0 and bool(NEG(s)) == table_sign(terms, mode), (mode, a, b, c)


# ---- the project's engines against the table -----------------------------------------------

def _enc(x: float, t: str) -> int:
    dt, ut = {"f16": (np.float16, np.uint16), "f32": (np.float32, np.uint32), "f64": (np.float64, np.uint64)}[t]
    return int(np.array(x, dt).view(ut))


def _check(arch, ab, ct, dt, mode, form_rounding=None, z3_too=False) -> int:
    """Every zero case through the vectorised engine (one batch per K), the scalar
    reference and (z3_too) the Z3 encoding; returns the number of cases."""
    bits = {"f16": 16, "f32": 32, "f64": 64}[dt]
    kw = dict(atype=ab, btype=ab, ctype=ct, dtype=dt, arch=arch, rounding=form_rounding)
    n = 0
    for K in (1, 2, 3):
        cases = list(zero_cases(K))
        ea = np.array([[_enc(x, ab) for x in a] for a, _, _ in cases], np.uint64)
        eb = np.array([[_enc(x, ab) for x in b] for _, b, _ in cases], np.uint64)
        ec = np.array([_enc(c, ct) for _, _, c in cases], np.uint64)
        vec = np.asarray(dot_terms(ea, eb, ec, **kw)).astype(np.uint64)
        if z3_too:
            A, B, C = Z.elems(ab, "a", K), Z.elems(ab, "b", K), Z.Elem(ct, "c")
            _, p = arch.path(ab, ab, ct, dt)
            term = Z.block_fma(A, B, C, p, dt)
        for i, (a, b, c) in enumerate(cases):
            terms = [x * y for x, y in zip(a, b)] + [c]
            want = (1 << (bits - 1)) if table_sign(terms, mode) else 0
            got = {"vectorised": int(vec[i]), "scalar reference": int(dot_scalar(ea[i], eb[i], ec[i], **kw))}
            if z3_too:
                sub = [(x.bv, z3.BitVecVal(int(v), x.bits)) for x, v in zip(A + B + [C], [*ea[i], *eb[i], ec[i]])]
                got["z3"] = z3.simplify(z3.substitute(term, *sub)).as_long()
            for engine, d in got.items():
                assert d == want, (arch.name, engine, mode, a, b, c, hex(d), hex(want))
            n += 1
    return n


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path,ab,ct,dt", [("f16.f32", "f16", "f32", "f32"), ("f16.f16", "f16", "f16", "f16")])
@pytest.mark.parametrize("over", [{}, dict(n=2), dict(c_as_f32=False)], ids=["window", "chained", "c-own-format"])
def test_block_fma_ieee_zero_sign(path, ab, ct, dt, mode, over):
    arch = SM90.replace_path(path, zero_sign="ieee", rounding=mode, **over)
    assert _check(arch, ab, ct, dt, mode, z3_too=True) > 300


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("over", [dict(c_entry="after"), dict(truncation="none")], ids=["c-after", "exact-round"])
def test_block_fma_ieee_zero_sign_other_block_kinds(mode, over):
    arch = SM90.replace_path("f16.f32", zero_sign="ieee", rounding=mode, **over)
    assert _check(arch, "f16", "f32", "f32", mode) > 300


@pytest.mark.parametrize("mode", MODES)
def test_exact_model_and_f64_chain(mode):
    """The exact model (one rounding, the f64 form's .rnd) and sm_90's f64 FMA chain."""
    assert _check(EXACT, "f64", "f64", "f64", mode, form_rounding=mode) > 300
    assert _check(SM90, "f64", "f64", "f64", mode, form_rounding=mode) > 300


def test_exact_model_default_rounding():
    assert _check(EXACT, "f16", "f32", "f32", "rn") > 300
    assert _check(EXACT, "f16", "f16", "f16", "rn") > 300


def test_the_reported_case_by_hand():
    """(-0 x +0) + (-0) = -0 (every addend -0) in every mode; (+0 x +0) + (-0) = +0 except rm."""
    for mode in MODES:
        arch = SM90.replace_path("f16.f32", zero_sign="ieee", rounding=mode)
        kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32", arch=arch)
        assert int(dot_terms(np.array([0x8000]), np.array([0x0000]), np.uint32(0x80000000), **kw)) == 0x80000000
        mixed = int(dot_terms(np.array([0x0000]), np.array([0x0000]), np.uint32(0x80000000), **kw))
        assert mixed == (0x80000000 if mode == "rm" else 0)
    # the sm_90 model itself keeps +0 for an exact-zero sum (zero_sign="positive", silicon)
    kw = dict(atype="f16", btype="f16", ctype="f32", dtype="f32", arch=SM90)
    assert int(dot_terms(np.array([0x8000]), np.array([0x0000]), np.uint32(0x80000000), **kw)) == 0
