"""Issue 19, false alarm: a difference no output can observe is not a refutation.

tri_s8_masked_sm80_w4 (Triton, masked int8, M=50, N=40, K=72 on 32x32x32 tiles) fills the
masked-off elements of A and B with ``mov.u16 %rsN, 0x0``.  Changing a fill to 1 changes only
rows / columns never stored, and the padded k of stored ones, where the other operand's fill is
0 (an integer zero product).  Such mutants used to be refuted ("a constant (not loaded from any
buffer)"); they are proved now, and `kernel run` agrees that no output changes.  A constant
factor that does reach a stored output is still refuted, and a float zero times an element is
not neutral (0 x Inf is NaN).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.kernel.buffers import corpus_inputs

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "kernels"
SMALL = ROOT / "tests" / "data" / "kernels_small"
MASKED = CORPUS / "tri_s8_masked_sm80_w4.ptx"
SPEC = kernel.load_spec(CORPUS / "tri_s8_masked_sm80_w4.toml")
FILLS = re.findall(r"mov\.u16 (%rs\d+), 0x0;", MASKED.read_text())


def run_c(text, spec, seed=0):
    return np.asarray(kernel.run(kernel.parse_module(text), spec, corpus_inputs(spec, seed))["C"])


def test_the_kernel_has_masked_fills():
    assert len(FILLS) == 16                               # 8 for A, 8 for B
    assert kernel.check(kernel.parse_module(MASKED.read_text()), SPEC, lanes=False).verdict == "proved"


@pytest.mark.parametrize("reg", [FILLS[0], FILLS[9]])
@pytest.mark.parametrize("value", ["0x1", "0x80"])
def test_dead_fill_value_stays_proved(reg, value):
    text = MASKED.read_text()
    mut = text.replace(f"mov.u16 {reg}, 0x0;", f"mov.u16 {reg}, {value};")
    assert mut != text
    res = kernel.check(kernel.parse_module(mut), SPEC, lanes=False)
    assert res.verdict == "proved", [str(w) for w in res.witnesses[:1]]
    assert np.array_equal(run_c(text, SPEC), run_c(mut, SPEC))


def test_both_fills_nonzero_reach_the_padded_k_and_are_refuted():
    """Every A and B fill 1: the padded k of stored outputs adds 1 x 1 products."""
    text = MASKED.read_text()
    mut = re.sub(r"mov\.u16 (%rs\d+), 0x0;", r"mov.u16 \1, 0x1;", text)
    res = kernel.check(kernel.parse_module(mut), SPEC, lanes=False)
    assert res.verdict == "refuted"
    w = res.witnesses[0]
    assert "the constant 0x01" in w.arrived and "reach C[" in w.arrived
    assert not np.array_equal(run_c(text, SPEC), run_c(mut, SPEC))


def test_float_zero_times_an_element_is_a_witness():
    """A's first register replaced by zeros: 0 x B[k][n] is no product of the contract (and NaN
    for an infinite B), so the stored outputs are refuted, naming the constant."""
    text = (SMALL / "tiny_mma.ptx").read_text()
    mut = text.replace("\tmov.f32 \t%f1, 0f00000000;", "\tmov.f32 \t%f1, 0f00000000;\n\tmov.b32 \t%r25, 0;")
    spec = kernel.load_spec(SMALL / "tiny_mma.toml")
    res = kernel.check(kernel.parse_module(mut), spec, lanes=False)
    assert res.verdict == "refuted"
    w = next(w for w in res.witnesses if "operand A" in w.arrived)
    assert "the constant 0x0000" in w.arrived


def test_constant_in_dead_rows_only_is_not_reported():
    """The issue's case on the old engine: refuted (wrong-element at the mma); now proved."""
    text = MASKED.read_text().replace(f"mov.u16 {FILLS[0]}, 0x0;", f"mov.u16 {FILLS[0]}, 0x1;")
    res = kernel.check(kernel.parse_module(text), SPEC, lanes=False)
    assert res.verdict == "proved" and not res.witnesses
