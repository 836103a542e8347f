"""A Triton matmul end to end: run bit-exact, check proved, mutants refuted naming their line."""

from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.numerics.formats import from_float64, to_float64

DATA = Path(__file__).parent / "data" / "kernels_small"
PTX = (DATA / "triton_mm_f16_sm80.ptx").read_text()
SPEC = kernel.load_spec(DATA / "triton_mm_f16.toml")


def small_int_inputs(seed=0):
    """f16 inputs with small integer values: every partial sum is exact in f32, so numpy's
    matmul is an independent exact reference."""
    rng = np.random.default_rng(seed)
    A = rng.integers(-3, 4, size=(64, 64)).astype(np.float64)
    B = rng.integers(-3, 4, size=(64, 64)).astype(np.float64)
    return A, B, {"A": from_float64(A, "f16").astype(np.uint16), "B": from_float64(B, "f16").astype(np.uint16)}


def test_run_matches_numpy_exactly():
    A, B, inp = small_int_inputs()
    out = kernel.run(kernel.parse_module(PTX), SPEC, inp)
    got = to_float64(out["C"].astype(np.uint64), "f32")
    assert np.array_equal(got, A @ B)
    assert out["A"].tobytes() == inp["A"].tobytes()           # inputs come back unchanged


def test_run_matches_the_mma_chain_bit_for_bit():
    """General inputs: the kernel's accumulation order is 16-wide k chunks in order; the
    same chain of single mma evaluations (formal.evaluate_matrices) must agree bit for bit."""
    from formal.evaluate import evaluate_matrices
    inp = kernel.make_inputs(SPEC, seed=3, names=["A", "B"])
    out = kernel.run(kernel.parse_module(PTX), SPEC, inp)
    op = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    A, B = inp["A"].astype(np.uint32), inp["B"].astype(np.uint32)
    C = np.zeros((64, 64), np.uint32)
    for k0 in range(0, 64, 16):
        for i in range(0, 64, 16):
            for j in range(0, 64, 8):
                C[i:i + 16, j:j + 8] = evaluate_matrices(op, A[None, i:i + 16, k0:k0 + 16], B[None, k0:k0 + 16, j:j + 8],
                                                         C[None, i:i + 16, j:j + 8])[0]
    assert np.array_equal(out["C"], C)


def test_check_proves():
    r = kernel.check(kernel.parse_module(PTX), SPEC)
    assert r.verdict == "proved", r.summary
    assert r.stats["products"] == 64 * 64 * 64 and r.stats["outputs_complete"] == 64 * 64
    assert r.witnesses == [] and r.to_json()["verdict"] == "proved"


def _mutate(old, new, occurrence=0):
    lines = PTX.split("\n")
    hits = [i for i, l in enumerate(lines) if old in l]
    i = hits[occurrence]
    lines[i] = lines[i].replace(old, new) if new is not None else ""
    return "\n".join(lines), i + 1


def _all_lines(r):
    return {w.line for w in r.witnesses} | {ln for w in r.witnesses for ln, _ in w.path}


@pytest.mark.parametrize("old,new,kind", [
    (".x4.trans.shared.b16 {%r84", ".x4.shared.b16 {%r84", "wrong-element"),       # .trans dropped
    ("{ %r80, %r81, %r82, %r83 }", "{ %r81, %r80, %r82, %r83 }", "wrong-element"),  # mma operand registers swapped
    ("xor.b32 \t%r56, %r55, 32", "xor.b32 \t%r56, %r55, 16", "wrong-element"),    # swizzle constant
    ("add.s32 \t%r146, %r146, %r23", "add.s32 \t%r146, %r146, 1", "wrong-element"),  # k offset of a tile
])
def test_mutants_refuted_naming_the_line(old, new, kind):
    text, line = _mutate(old, new)
    r = kernel.check(kernel.parse_module(text), SPEC)
    assert r.verdict == "refuted"
    assert any(w.kind == kind for w in r.witnesses)
    assert line in _all_lines(r), (line, [str(w) for w in r.witnesses[:2]])


@pytest.mark.parametrize("occurrence", [0, 1])
def test_barrier_removed_is_a_race(occurrence):
    text, line = _mutate("bar.sync \t0;", None, occurrence)
    r = kernel.check(kernel.parse_module(text), SPEC)
    assert r.verdict == "refuted" and r.witnesses[0].kind == "race"
    w = r.witnesses[0]
    assert w.line > line and w.cta == (0, 0, 0) and "barrier" in w.arrived


def test_cta_sample():
    r = kernel.check(kernel.parse_module(PTX), SPEC, ctas=[(1, 0, 0)])
    assert r.verdict == "proved" and r.stats["ctas"] == 1 and r.stats["outputs_checked"] == 32 * 32


def test_nvcc_wmma_with_lineinfo_and_epilogue():
    """nvcc -lineinfo output (.loc with inlined_at, debug sections); the epilogue adds an
    accumulator to itself (x + x), which is arithmetic on one element, not two partial sums."""
    mod = kernel.parse_module((DATA / "wmma_epilogue_sm80.ptx").read_text())
    spec = kernel.load_spec(DATA / "wmma_epilogue.toml")
    r = kernel.check(mod, spec, lanes=False)
    assert r.verdict == "proved", [str(w) for w in r.witnesses[:2]]
    assert r.stats["outputs_through_arithmetic"] == 256 and r.stats["wmma_maps"]
    inp = kernel.make_inputs(spec, seed=5, names=["A", "B"])
    out = kernel.run(mod, spec, inp)
    A = to_float64(inp["A"].astype(np.uint64), "f16")
    B = to_float64(inp["B"].astype(np.uint64), "f16")
    got = to_float64(out["C"].astype(np.uint64), "f32")
    assert np.abs(got - A @ B.T).max() < 1e-3 * (np.abs(A) @ np.abs(B.T)).max()
