"""Hypothesis strategies: every option holds on every example, and the inputs are usable."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import formal
from formal.vectors import strategies as fs
from formal.evaluate import evaluate, evaluate_matrices
from formal.numerics.formats import decode, get_format, to_float64

FAST = settings(max_examples=40, deadline=None)
F16 = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
SP_TF32 = "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
WMMA = "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"


def cls(code: int, t: str) -> dict:
    d = decode(np.array([code], np.uint64), t)
    f = get_format(t)
    sub = bool(~d.zero[0] & ~d.nan[0] & ~d.inf[0] & (d.sig[0] < (1 << f.mantissa))) if f.cls == "float" else False
    return {"nan": bool(d.nan[0]), "inf": bool(d.inf[0]), "zero": bool(d.zero[0]), "sub": sub,
            "exp": int(d.exp[0])}


@pytest.mark.parametrize("t", ["f16", "bf16", "tf32", "e4m3", "e5m2", "e2m1", "e3m2", "f64", "f32"])
@FAST
@given(data=st.data())
def test_elements_finite_and_no_subnormals(t, data):
    code = data.draw(fs.elements(t, finite=True, subnormals=False))
    c = cls(code, t)
    assert not c["nan"] and not c["inf"] and not c["sub"]
    assert code < (1 << get_format(t).bits)
    if t == "tf32":
        assert code & 0x1FFF == 0


@FAST
@given(st.data())
def test_elements_every_kind_appears_eventually(data):
    # with no options, specials are allowed: the strategy can produce them
    codes = [data.draw(fs.elements("e5m2")) for _ in range(60)]
    assert all(0 <= c < 256 for c in codes)


def test_elements_reach_specials():
    from hypothesis import find

    assert cls(find(fs.elements("f16"), lambda c: cls(c, "f16")["nan"]), "f16")["nan"]
    assert cls(find(fs.elements("bf16"), lambda c: cls(c, "bf16")["inf"]), "bf16")["inf"]
    assert cls(find(fs.elements("f16"), lambda c: cls(c, "f16")["sub"]), "f16")["sub"]
    assert find(fs.elements("e4m3"), lambda c: c in (0x7F, 0xFF)) in (0x7F, 0xFF)
    assert find(fs.elements("tf32", ignored_bits="any"), lambda c: c & 0x1FFF != 0) & 0x1FFF


@FAST
@given(st.data())
def test_elements_ranges(data):
    code = data.draw(fs.elements("f16", min_value=-2.0, max_value=0.5))
    v = float(to_float64(np.array([code], np.uint64), "f16")[0])
    assert -2.0 <= v <= 0.5
    code = data.draw(fs.elements("bf16", exponents=(-3, 3)))
    c = cls(code, "bf16")
    assert not c["zero"] and not c["sub"] and -3 <= c["exp"] <= 3
    iv = data.draw(fs.elements("s8", min_value=-5, max_value=7))
    iv = iv - 256 if iv >= 128 else iv
    assert -5 <= iv <= 7


def test_elements_bad_options():
    with pytest.raises(ValueError):
        fs.elements("s4", min_value=9, max_value=10)
    with pytest.raises(ValueError):
        fs.elements("tf32", ignored_bits="some")


@FAST
@given(fs.fragments(F16, T=2, a=fs.elements("f16", finite=True)))
def test_fragments_dense_evaluate(regs):
    f = formal.parse(F16)
    assert regs["a"].shape == (2, 32, f.operands["a"].count) and regs["a"].dtype == np.uint32
    d = evaluate(F16, **regs)
    assert d.shape == (2, 32, f.operands["d"].count)
    # the element strategy reached the registers through the layout: A holds no NaN/Inf
    from formal import layout

    A = layout.unpack(f, "a", regs["a"])
    dd = decode(A.astype(np.uint64), "f16")
    assert not dd.nan.any() and not dd.inf.any()


@FAST
@given(st.data())
def test_fragments_sparse_and_metadata(data):
    from formal.metadata import check_word, meta

    for op in (SP, SP_TF32):
        regs = data.draw(fs.fragments(op))
        f = formal.parse(op)
        assert regs["sel"] in f.selectors and regs["e"].shape == (1, 32)
        d = evaluate(op, regs["a"], regs["b"], regs["c"], e=regs["e"], sel=regs["sel"])   # never undefined
        assert d.shape == (1, 32, f.operands["d"].count)
        fm = meta(f)
        for lane in np.unique(fm.e_table(regs["sel"])[:, 0]):
            assert check_word(f, regs["sel"], int(regs["e"][0, lane]), lane=int(lane)).valid


@FAST
@given(st.data())
def test_metadata_strategy_idle_lanes(data):
    from formal.metadata import meta

    f = formal.parse(SP)
    e = data.draw(fs.metadata(SP, sel=1, idle="junk"))
    active = set(np.unique(meta(f).e_table(1)[:, 0]).tolist())
    legal = set(meta(f).legal_nibbles)
    for lane in range(32):
        nibs = {(int(e[lane]) >> (4 * k)) & 15 for k in range(8)}
        if lane not in active:
            assert nibs <= legal                      # junk, but legal junk
    with pytest.raises(ValueError):
        data.draw(fs.metadata(SP, sel=7))


@FAST
@given(fs.fragments(WMMA, c=fs.elements("f32", finite=True)))
def test_fragments_matrix_level(mats):
    assert mats["A"].shape == (1, 16, 16)
    D = evaluate_matrices(WMMA, mats["A"], mats["B"], mats["C"])
    assert D.shape == (1, 16, 16)
