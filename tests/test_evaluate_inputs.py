"""Strict evaluator inputs (issue 11): ``formal.evaluate`` / ``evaluate_matrices`` / ``ptx-formal eval``.

An encoding outside its width is an error (the rule ``formal.compress`` applies too),
signed arrays are bit patterns, batch sizes match at every level, ``e``/``sel`` are checked
and belong to ``mma.sp`` only, an illegal selector carries a structured witness.
"""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formal
from formal.catalog import BadArgument
from formal.cli import main
from formal.evaluate import EvalError, evaluate, evaluate_matrices
from formal.metadata import SelectorWitness, UndefinedBehavior, UndefinedSelector, compress

F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
F16D = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"
S8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
F64 = "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"
E2M1 = "mma.sync.aligned.kind::f8f6f4.m16n8k32.row.col.f32.e2m1.e2m1.f32"
SP = "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"
SP_K16 = "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
BS = ("mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3.f32.ue8m0")
WMMA = "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32"

ONE_F16 = 0x3C00


def f16_mats(T=2, seed=0):
    rng = np.random.default_rng(seed)
    A, B = (rng.integers(-4, 5, size=(T,) + shp).astype(np.float16).view(np.uint16) for shp in ((16, 16), (16, 8)))
    return A, B, np.zeros((T, 16, 8), np.uint32)


def regs(form, T=2, seed=0):
    rng = np.random.default_rng(seed)
    ops = formal.parse(form).operands
    return [rng.integers(0, 2**32, size=(T, 32, ops[k].count), dtype=np.uint64).astype(np.uint32)
            for k in ("a", "b", "c")]


def sparse_inputs(T=2, seed=0):
    rng = np.random.default_rng(seed)
    A = np.zeros((T, 16, 32), np.uint16)
    for t in range(T):
        for r in range(16):
            for ch in range(8):
                cols = rng.choice(4, 2, replace=False)
                A[t, r, 4 * ch + cols] = rng.integers(1, 5, 2).astype(np.float16).view(np.uint16)
    a, e = compress(SP, A, sel=0)
    _, b, c = regs(SP, T, seed)
    return a, b, c, e


# ---- encodings outside the element's width ------------------------------------------------------

def test_f16_wider_than_16_bits_is_an_error():
    A, B, C = f16_mats(1)
    A = A.astype(np.uint32)
    A[0, 0, 0] = 0x13C00                         # not 0x3C00: an error, never truncated
    with pytest.raises(EvalError, match=r"^A \(\.f16 encodings\) holds 80896, outside the 16-bit"):
        evaluate_matrices(F16, A, B, C)


def test_s8_of_300_is_an_error():
    A = np.zeros((16, 32), np.int16)
    A[3, 4] = 300
    with pytest.raises(EvalError, match=r"A \(\.s8 encodings\) holds 300"):
        evaluate_matrices(S8, A, np.zeros((32, 8), np.uint8), np.zeros((16, 8), np.uint32))


def test_c_and_b_are_checked_too():
    A, B, C = f16_mats(1)
    with pytest.raises(EvalError, match=r"^B \(\.f16"):
        evaluate_matrices(F16, A, B.astype(np.int32) + 70000, C)
    with pytest.raises(EvalError, match=r"^C \(\.f32 encodings\) holds 4294967296"):
        evaluate_matrices(F16, A, B, C.astype(np.uint64) + 2**32)


def test_four_bit_codes_in_bytes():
    """e2m1 is a 4-bit code even in a byte container: 0x1F is out of width."""
    A = np.zeros((1, 16, 32), np.uint8)
    B = np.zeros((1, 32, 8), np.uint8)
    C = np.zeros((1, 16, 8), np.uint32)
    evaluate_matrices(E2M1, A, B, C, arch="sm_120")
    A[0, 0, 0] = 0x1F
    with pytest.raises(EvalError, match=r"A \(\.e2m1 encodings\) holds 31, outside the 4-bit"):
        evaluate_matrices(E2M1, A, B, C, arch="sm_120")


def test_register_values_above_32_bits_are_an_error():
    a, b, c = regs(F16, 1)
    wide = a.astype(np.uint64)
    wide[0, 5, 1] |= np.uint64(1 << 32)
    with pytest.raises(EvalError, match=r"^operand a \(32-bit registers\) holds"):
        evaluate(F16, wide, b, c)
    c = c.astype(np.int64)
    c[0, 0, 0] = -(2**31) - 1
    with pytest.raises(EvalError, match=r"^operand c \(32-bit registers\) holds -2147483649"):
        evaluate(F16, a, b, c)


def test_f64_registers_are_64_bit():
    a, b, c = (np.full((1, 32, n), 0x3FF0000000000000, np.uint64) for n in (1, 1, 2))
    d = evaluate(F64, a, b, c)
    assert d.dtype == np.uint64 and int(d[0, 0, 0]) == 0x4014000000000000       # 4 * 1*1 + 1 = 5
    assert (evaluate(F64, a.view(np.int64), b.view(np.int64), c.view(np.int64)) == d).all()


@pytest.mark.parametrize("bad", [np.zeros((1, 16, 16), np.float32), np.zeros((1, 16, 16), bool),
                                 np.zeros((1, 16, 16), object)], ids=["float", "bool", "object"])
def test_non_integer_arrays_are_an_error(bad):
    _, B, C = f16_mats(1)
    with pytest.raises(EvalError, match=r"^A \(\.f16 encodings\) must hold raw encodings as integers"):
        evaluate_matrices(F16, bad, B, C)


def test_compress_applies_the_same_rule():
    A = np.zeros((16, 32), np.int32)
    A[0, 0] = 0x13C00
    with pytest.raises(BadArgument, match=r"holds 80896, outside the 16-bit"):
        compress(SP, A)
    A[0, 0] = -1                                   # int32 -1 as an f16 pattern: 0xFFFF (a NaN)
    a1, e1 = compress(SP, A)
    B = np.zeros((16, 32), np.uint16)
    B[0, 0] = 0xFFFF
    a2, e2 = compress(SP, B)
    assert (a1 == a2).all() and (e1 == e2).all()


# ---- signed arrays are bit patterns --------------------------------------------------------------

def test_int16_f16_and_int8_s8_work():
    A, B, C = f16_mats(2)
    A[0, 0, 0] = np.float16(-2.5).view(np.uint16)           # a negative value: sign bit set
    want = evaluate_matrices(F16, A, B, C)
    assert (evaluate_matrices(F16, A.view(np.int16), B.view(np.int16), C.view(np.int32)) == want).all()
    s8 = np.arange(-128, 128, dtype=np.int8)[:16 * 32].reshape(1, 16, 16)
    A8 = np.concatenate([s8, s8], axis=2)
    B8 = np.full((1, 32, 8), -1, np.int8)
    d = evaluate_matrices(S8, A8, B8, np.zeros((1, 16, 8), np.int32))
    # row 0: sum over k of A[0,k] * -1, A[0] = -128..-113 twice
    assert int(d[0, 0, 0]) == (-2 * sum(range(-128, -112))) & 0xFFFFFFFF


def wide_views(codes: np.ndarray, bits: int) -> list[np.ndarray]:
    """The same encodings in every integer dtype that can hold them (signed ones as two's complement)."""
    u = codes.astype(np.uint64)
    signed = np.where(u >= 1 << (bits - 1), u.astype(np.int64) - (1 << bits), u.astype(np.int64))
    out = []
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64):
        w = np.dtype(dt).itemsize * 8
        if np.dtype(dt).kind == "u" and w >= bits:
            out.append(u.astype(dt))
        elif np.dtype(dt).kind == "i" and w >= bits:
            out.append(signed.astype(dt))                       # -1 is all ones of the element width
            if w > bits:
                out.append(u.astype(dt))                        # the unsigned reading, in a wider signed array
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), form=st.sampled_from([F16, F16D, S8, E2M1]))
def test_every_dtype_gives_the_uint_result_at_matrix_level(seed, form):
    f = formal.parse(form)
    M, N, K = f.mnk
    bits = {"f16": 16, "s8": 8, "e2m1": 4, "f32": 32, "s32": 32}
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 1 << bits[f.atype], (2, M, K), dtype=np.uint64)
    B = rng.integers(0, 1 << bits[f.btype], (2, K, N), dtype=np.uint64)
    C = rng.integers(0, 1 << bits[f.ctype], (2, M, N), dtype=np.uint64)
    arch = "sm_120" if form == E2M1 else "sm_90"
    want = evaluate_matrices(form, A, B, C, arch=arch)
    for Av, Bv, Cv in zip(wide_views(A, bits[f.atype]), wide_views(B, bits[f.btype]) * 3,
                          wide_views(C, bits[f.ctype]) * 3):
        assert (evaluate_matrices(form, Av, Bv, Cv, arch=arch) == want).all(), (Av.dtype, Bv.dtype, Cv.dtype)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), form=st.sampled_from([F16, S8]))
def test_every_dtype_gives_the_uint_result_at_register_level(seed, form):
    a, b, c = regs(form, 2, seed)
    want = evaluate(form, a, b, c)
    for views in zip(*(wide_views(x, 32) for x in (a, b, c))):
        assert (evaluate(form, *views) == want).all(), [v.dtype for v in views]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_every_dtype_gives_the_uint_result_sparse(seed):
    a, b, c, e = sparse_inputs(2, seed)
    want = evaluate(SP, a, b, c, e=e, sel=0)
    for ev in wide_views(e, 32):
        for sel in (0, np.int8(0), np.uint64(0), np.array(0)):
            assert (evaluate(SP, a.view(np.int32), b, c, e=ev, sel=sel) == want).all()


# ---- batch sizes ---------------------------------------------------------------------------------

def test_matrix_level_batches_must_match():
    A, B, C = f16_mats(3)
    with pytest.raises(EvalError, match=r"operand B of .* has 1 instances, A has 3 .*nothing is broadcast"):
        evaluate_matrices(F16, A, B[:1], C)
    with pytest.raises(EvalError, match=r"operand C .* has 1 instances, A has 3"):
        evaluate_matrices(F16, A, B, C[0])               # a 2-D matrix is one instance, not a broadcast
    d1 = evaluate_matrices(F16, A[0], B[0], C[0])        # all 2-D: one instance
    assert d1.shape == (1, 16, 8) and (d1[0] == evaluate_matrices(F16, A, B, C)[0]).all()


def test_register_level_batches_must_match():
    a, b, c = regs(F16, 3)
    with pytest.raises(EvalError, match=r"operand c .* has 2 instances, a has 3"):
        evaluate(F16, a, b, c[:2])
    a, b, c, e = sparse_inputs(2)
    with pytest.raises(EvalError, match=r"^e has 1 instances, operand a has 2"):
        evaluate(SP, a, b, c, e=e[:1], sel=0)


def test_shapes_name_the_argument():
    a, b, c = regs(F16, 1)
    with pytest.raises(EvalError, match=r"^b must have shape \[T, 32, 2\]"):
        evaluate(F16, a, b[:, :, :1], c)
    A, B, C = f16_mats(1)
    with pytest.raises(EvalError, match=r"^A must have shape \[T, 16, 16\]"):
        evaluate_matrices(F16, A[:, :, :8], B, C)


def test_empty_batch_is_empty():
    A, B, C = f16_mats(1)
    assert evaluate_matrices(F16, A[:0], B[:0], C[:0]).shape == (0, 16, 8)


# ---- e / sel -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad_e, msg", [
    (lambda e: e.astype(np.float64) * np.nan, r"^e \(32-bit registers\) must hold raw encodings as integers"),
    (lambda e: e.astype(np.uint64) | np.uint64(1 << 35), r"^e \(32-bit registers\) holds \d+, outside the 32-bit"),
    (lambda e: e[:, :31], r"^e must have shape \[T, 32\]"),
    (lambda e: e.reshape(2, 4, 8), r"^e must have shape \[T, 32\]"),
    (lambda e: e.reshape(-1), r"^e must have shape \[T, 32\]"),
], ids=["nan-float", "36-bit", "31-lanes", "3d", "flat"])
def test_bad_e_is_an_error(bad_e, msg):
    a, b, c, e = sparse_inputs(2)
    with pytest.raises(EvalError, match=msg):
        evaluate(SP, a, b, c, e=bad_e(e), sel=0)


@pytest.mark.parametrize("sel", [0.0, 1.5, True, "0", None], ids=["0.0", "1.5", "True", "str", "None"])
def test_sel_must_be_an_integer(sel):
    a, b, c, e = sparse_inputs(1)
    with pytest.raises(EvalError, match=r"^(sel must be an integer|.*needs the metadata registers)"):
        evaluate(SP, a, b, c, e=e, sel=sel)


@pytest.mark.parametrize("sel", [2, -1, 1 << 40])
def test_illegal_selector_has_a_structured_witness(sel):
    a, b, c, e = sparse_inputs(1)
    with pytest.raises(UndefinedSelector) as ei:
        evaluate(SP, a, b, c, e=e, sel=sel)
    w = ei.value.witness
    assert isinstance(w, SelectorWitness) and isinstance(ei.value, UndefinedBehavior)
    assert (w.opcode, w.sel, w.legal) == (SP, sel, [0, 1])
    assert w.section.startswith("9.7.14.6.1") and "either 0 (threads T0, T1) or 1" in w.text
    assert w.to_dict()["legal"] == [0, 1] and str(ei.value).startswith(f"selector {sel} is not legal")
    assert "\n" not in str(ei.value)


def test_selector_witness_for_four_valued_forms():
    with pytest.raises(UndefinedSelector) as ei:
        compress(SP_K16, np.zeros((16, 16), np.uint16), sel=4)
    assert ei.value.witness.legal == [0, 1, 2, 3]


def test_e_and_sel_are_rejected_on_dense_forms():
    a, b, c = regs(F16, 1)
    e = np.zeros((1, 32), np.uint32)
    with pytest.raises(EvalError, match=r"is dense: it takes no metadata e or selector sel"):
        evaluate(F16, a, b, c, e=e)
    with pytest.raises(EvalError, match=r"is dense"):
        evaluate(F16, a, b, c, sel=0)


def test_scales_only_for_block_scaled_forms():
    A, B, C = f16_mats(1)
    with pytest.raises(EvalError, match=r"is not block-scaled"):
        evaluate_matrices(F16, A, B, C, scale_a=np.zeros((1, 16, 1), np.uint8))


def test_block_scale_inputs_are_checked():
    f = formal.parse(BS)
    M, N, K = f.mnk
    A, B = np.zeros((2, M, K), np.uint8), np.zeros((2, K, N), np.uint8)
    C = np.zeros((2, M, N), np.uint32)
    sa, sb = np.full((2, M, 1), 127, np.uint8), np.full((2, 1, N), 127, np.uint8)
    assert evaluate_matrices(BS, A, B, C, scale_a=sa, scale_b=sb, arch="sm_120").shape == (2, M, N)
    with pytest.raises(EvalError, match=r"^scale_a must have shape \[T, 16, 1\]"):
        evaluate_matrices(BS, A, B, C, scale_a=sa.reshape(2, 1, M), scale_b=sb, arch="sm_120")
    with pytest.raises(EvalError, match=r"operand scale_b .* has 1 instances, A has 2"):
        evaluate_matrices(BS, A, B, C, scale_a=sa, scale_b=sb[:1], arch="sm_120")
    with pytest.raises(EvalError, match=r"^scale_a \(\.ue8m0 encodings\) holds 256"):
        evaluate_matrices(BS, A, B, C, scale_a=sa.astype(np.uint16) + 129, scale_b=sb, arch="sm_120")


def test_errors_are_value_errors_with_one_line():
    assert issubclass(EvalError, ValueError)
    A, B, C = f16_mats(1)
    with pytest.raises(EvalError) as ei:
        evaluate_matrices(WMMA, A.astype(np.uint32) << 16, B, C)
    assert "\n" not in str(ei.value) and len(str(ei.value)) < 200


# ---- the CLI takes the same checks ---------------------------------------------------------------

def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_cli_eval_rejects_wide_encodings(tmp_path):
    A, B, C = f16_mats(1)
    p = tmp_path / "in.npz"
    np.savez(p, A=A.astype(np.uint32) | 0x10000, B=B, C=C)
    rc, out, err = run("eval", F16, "-i", str(p))
    assert rc == 2 and out == "" and err.count("\n") == 1 and "A (.f16 encodings) holds" in err


def test_cli_eval_signed_arrays(tmp_path):
    A, B, C = f16_mats(1)
    p, q = tmp_path / "u.npz", tmp_path / "s.npz"
    np.savez(p, A=A, B=B, C=C)
    np.savez(q, A=A.view(np.int16), B=B.view(np.int16), C=C.view(np.int32))
    r1, r2 = run("eval", F16, "-i", str(p)), run("eval", F16, "-i", str(q))
    assert r1[0] == r2[0] == 0 and r1[1] == r2[1]


def test_cli_eval_illegal_selector_is_undefined_behaviour(tmp_path):
    a, b, c, e = sparse_inputs(1)
    p = tmp_path / "sp.npz"
    np.savez(p, a=a, b=b, c=c, e=e)
    rc, out, err = run("eval", SP, "-i", str(p), "--sel", "3")
    assert rc == 1 and "selector 3 is not legal" in err and err.count("\n") == 1
    rc, out, err = run("eval", SP, "-i", str(p), "--sel", "0")
    assert rc == 0 and err == ""


# ----------------------------------------------------------------------------------
# arch= takes an ArchModel too: a named one or a user-built variant (ArchModel.replace_path)
# evaluates like its name; a model naming no known target is refused with an EvalError.

def _ones_f16(T=1):
    A = np.full((T, 16, 16), ONE_F16, np.uint16)
    B = np.full((T, 16, 8), ONE_F16, np.uint16)
    C = np.zeros((T, 16, 8), np.uint32)
    C[..., 0, 0] = 0x3F800000      # 1.0f
    return A, B, C


def test_arch_model_objects_evaluate_like_their_names():
    from formal.numerics.archs import EXACT, SM80, SM90

    A, B, C = _ones_f16()
    for name, model in (("sm_90", SM90), ("sm_80", SM80), ("exact", EXACT)):
        want = evaluate_matrices(F16, A, B, C, arch=name)
        got = evaluate_matrices(F16, A, B, C, arch=model)
        assert np.array_equal(got, want), name
    # 16 + 1 = 17.0f at (0, 0), 16.0f elsewhere: the sum is exact on every model
    assert want[0, 0, 0] == 0x41880000 and want[0, 1, 1] == 0x41800000


def test_replace_path_variant_evaluates_and_differs_where_it_should():
    from formal.numerics.archs import SM90

    v = SM90.replace_path("f16.f32", rounding="rn")
    A, B, C = f16_mats(T=3)
    assert np.array_equal(evaluate_matrices(F16, A, B, C, arch=v), evaluate_matrices(F16, A, B, C, arch="sm_90"))
    regs = [np.zeros((1, 32, n), np.uint32) for n in (4, 2, 4)]
    assert np.array_equal(evaluate(F16, *regs, arch=v), evaluate(F16, *regs, arch="sm_90"))
    # a variant whose rounding changes: 1 + 3 * 2^-24 = 1 + 1.5 ulp(1.0f) lies between f32
    # neighbours; rz truncates to 1 + 2^-23, rn breaks the tie to even, 1 + 2^-22: the
    # variant's record is really the one used
    vz = SM90.replace_path("f16.f32", rounding="rz")
    vn = SM90.replace_path("f16.f32", rounding="rn")
    A = np.zeros((1, 16, 16), np.uint16)
    B = np.zeros((1, 16, 8), np.uint16)
    C = np.zeros((1, 16, 8), np.uint32)
    C[0, 0, 0] = 0x3F800000                        # 1.0f
    A[0, 0, :3] = 0x0C00                           # 2^-12 (f16)
    B[0, :3, 0] = 0x0C00                           # products 2^-24 each, 3 * 2^-24 in all
    dz = evaluate_matrices(F16, A, B, C, arch=vz)[0, 0, 0]
    dn = evaluate_matrices(F16, A, B, C, arch=vn)[0, 0, 0]
    assert (int(dz), int(dn)) == (0x3F800001, 0x3F800002)


def test_arch_models_are_hashable_and_variants_keep_their_target():
    from formal.numerics.archs import SM90

    v = SM90.replace_path("f16.f32", rounding="rn")
    w = SM90.replace_path("f16.f32", new_name="my-hypothesis", rounding="rn")
    assert len({SM90, v, w, SM90}) == 3
    assert v.target == w.target == "sm_90" and SM90.target == "sm_90"
    assert SM90.with_path("f16.f32", SM90.paths["bf16.f32"]).target == "sm_90"


def test_arch_model_variant_is_refused_where_its_target_lacks_the_form():
    from formal.numerics.archs import SM80

    v = SM80.replace_path("f16.f32", rounding="rn")
    with pytest.raises(EvalError, match="not available on sm_80"):
        evaluate_matrices(E2M1, np.zeros((1, 16, 32), np.uint8), np.zeros((1, 32, 8), np.uint8),
                          np.zeros((1, 16, 8), np.uint32), arch=v)


def test_bad_arch_models_are_typed_errors():
    from dataclasses import replace

    from formal.numerics.archs import SM90
    from formal.numerics.params import UnsupportedPath

    A, B, C = _ones_f16()
    with pytest.raises(EvalError, match="names no known target"):
        evaluate_matrices(F16, A, B, C, arch=replace(SM90, name="my_gpu"))
    with pytest.raises(UnsupportedPath, match="no path 'f17.f32'"):
        SM90.replace_path("f17.f32", rounding="rn")
    with pytest.raises(UnsupportedPath, match="no parameter 'roundin'"):
        SM90.replace_path("f16.f32", roundin="rn")
    with pytest.raises(EvalError, match="arch must be"):
        evaluate_matrices(F16, A, B, C, arch=90)


def test_variant_supports_what_its_target_executes():
    """formal.vectors.distinguish.supports: a variant of sm_90 supports a form exactly when
    "sm_90" does (the kind::f8f6f4 e4m3 form has an sm_90 arithmetic path, but sm_90 cannot
    execute it)."""
    from formal.numerics.archs import SM90
    from formal.vectors.distinguish import supports

    v = SM90.replace_path("f8.f32", c_add="rz")
    for op, want in ((F16, True), ("mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32", False)):
        f = formal.parse(op)
        assert supports(f, "sm_90") is want and supports(f, v) is want and supports(f, SM90) is want, op
