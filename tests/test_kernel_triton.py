"""Triton kernels without a spec (formal.kernel.triton_front, `kernel check|run --triton`).

The launch is compiled with the installed Triton (no GPU) and its spec derived from the launch;
the cross-checks are the corpus, built by tools/make_kernel_corpus.py from the same sources with a
hand-written spec: the derived spec equals the corpus spec, the PTX equals the corpus PTX (up to
the source path in its debug info), the verdict is the same, and `run` gives the same buffers
bit for bit.  Compiled launches are cached per process (triton_front._COMPILED), so the CLI and
API tests of one kernel compile it once.
"""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from formal import kernel
from formal.cli import main
from formal.kernel import triton_front as tf

ROOT = Path(__file__).resolve().parent.parent
MATMUL = "tests/data/triton/matmul.py:matmul_kernel"
TRITON_MM = "tools/kernel_sources/triton_mm.py:mm"
CALL = ("matmul_kernel[(2, 2)](A, B, C, 64, 64, 32, A.stride(0), A.stride(1), B.stride(0), B.stride(1), "
        "C.stride(0), C.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4)")
TENSORS = ["--tensor", "A=f16[64,32]", "--tensor", "B=f16[64,32].T", "--tensor", "C=f32[64,64]"]


def cli(*argv, cwd=ROOT):
    import os
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            rc = main(list(argv))
    finally:
        os.chdir(old)
    return rc, out.getvalue(), err.getvalue()


def code(ptx: str) -> str:
    """The PTX without its debug info (which names the source file's absolute path)."""
    return ptx.split("\t.file\t", 1)[0]


# ------------------------------------------------------------ reading launches (no Triton) -------

def test_tensor_declarations_read_as_torch_shapes_and_strides():
    a = tf.parse_tensor("A=f16[64,32]")
    assert (a.shape, a.strides, a.type) == ((64, 32), (32, 1), "f16")
    b = tf.parse_tensor("B=fp16[64,32].T")                   # Triton's name for the type
    assert (b.shape, b.strides, b.type) == ((32, 64), (1, 32), "f16")
    x = tf.parse_tensor("X=f32[2,4,8].mT")
    assert (x.shape, x.strides) == ((2, 8, 4), (32, 1, 8))
    c = tf.parse_tensor("C=f32[64,64] strides=(1,64)")
    assert c.strides == (1, 64) and c.stride(1) == 64 and c.stride() == (1, 64)
    for bad in ["A=f16", "A=f16[64,x]", "A=f17[4]", "A=tf32[4]", "1A=f16[4]", "A=f16[0,4]", "A=f16[4].T",
                "A=f16[4,4].T strides=(4,1)", "A=f16[4,4] strides=(1,)"]:
        with pytest.raises(tf.TritonInputError):
            tf.parse_tensor(bad)


def test_a_launch_is_read_not_evaluated():
    ts = {"A": tf.Tensor("A", "f16", (64, 32)), "B": tf.Tensor("B", "f16", (64, 32)).T}
    c = tf.parse_call("k[(triton.cdiv(100, 32), 2 * 3 - 5)](A, B, A.shape[0] * 2, B.stride(0), B.size(-1), "
                      "A.numel() // 8, -1, 2.5, 'ieee', None, True, BM=1 << 5)", ts)
    assert c.kernel == "k" and c.grid == (4, 1)
    assert c.args == [ts["A"], ts["B"], 128, 1, 64, 256, -1, 2.5, "ieee", None, True] and c.kwargs == {"BM": 32}
    assert tf.parse_call("k[4](A)", ts).grid == (4,)
    for bad, why in [("k[(2, 2)](__import__('os'))", "calls allowed"), ("k[2](A.__class__)", "not a value"),
                     ("k[2](open('x'))", "calls allowed"), ("k[2](lambda: 0)", "not a value"),
                     ("k[2](X)", "no tensor of that name"), ("k[2](A.T)", "declare the view"),
                     ("k[2](2 ** 70)", "not a value"), ("k[2](1 << 64)", "shift by 0 to 63"),
                     ("k[2](1 // 0)", "division by zero"), ("k[2](*A)", "*args"), ("k[(0, 1)](A)", "positive"),
                     ("k(A)", "as Triton launches"), ("k[2](A", "never closed"), ("k[2](A.stride(5))", "dimension 5"),
                     ("k[2](A.shape[0] + B)", "must be an integer"), ("k[2](x=[1, 2])", "not a value")]:
        with pytest.raises(tf.TritonInputError, match=why.replace("(", r"\(").replace("*", r"\*")):
            tf.parse_call(bad, ts)


# ------------------------------------------------------------ with Triton ------------------------

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tools" / "kernel_sources"))
sys.path.insert(0, str(ROOT / "tests" / "data" / "triton"))
import make_kernel_corpus as corpus  # noqa: E402
import matmul  # noqa: E402
import triton_mm  # noqa: E402


def corpus_launch(name: str) -> tf.TritonLaunch:
    """The corpus kernel ``name`` launched as a Triton user would: tensors, their strides, the
    constexprs and options tools/make_kernel_corpus.py compiled it with."""
    cc, ta, tb, tc, acc, prec, bm, bn, bk, nw, ns, m, n, k, at, bt, masked = corpus.TRITON[name]
    a = tf.Tensor("A", ta, (k, m)).T if at else tf.Tensor("A", ta, (m, k))
    b = tf.Tensor("B", tb, (n, k)) if bt else tf.Tensor("B", tb, (k, n))
    c = tf.Tensor("C", tc, (m, n))
    sbk, sbn = (b.stride(1), b.stride(0)) if bt else b.stride()       # B stored [N, K]: the kernel reads B.T
    cx = dict(SAM=a.stride(0), SAK=a.stride(1), SBK=sbk, SBN=sbn, SCM=c.stride(0), SCN=c.stride(1), BM=bm, BN=bn,
              BK=bk, ACC={"f32": tl.float32, "f16": tl.float16, "s32": tl.int32}[acc], PREC=prec, MASKED=bool(masked))
    return kernel.triton_launch(triton_mm.mm, (triton.cdiv(m, bm), triton.cdiv(n, bn)), (a, b, c, m, n, k), cx,
                                target=f"sm_{cc}", contract=f"C = A @ B{'.T' if bt else ''}", num_warps=nw,
                                num_stages=ns, ptx_version=90, enable_fp_fusion=False)


def launch_facts(sp: kernel.KernelSpec) -> tuple:
    """What a spec says about the launch (not its notes or where it was read from)."""
    return (sp.entry, sp.grid, sp.block, sp.shared_bytes, dict(sp.params),
            [(b.name, b.param, b.offset, b.type, b.shape, b.strides) for b in sp.buffers + sp.views], sp.contracts)


def same_as_corpus(name: str, la: tf.TritonLaunch) -> None:
    ptx = (ROOT / "tests" / "data" / "kernels" / f"{name}.ptx").read_text()
    ref = kernel.load_spec(ROOT / "tests" / "data" / "kernels" / f"{name}.toml")
    # A stored transposed: the corpus declares its storage [K, M] with the contract A.T @ B; the
    # launch passes the view A = storage.T: the same memory, and its own contract A @ B
    if corpus.TRITON[name][14]:
        assert la.spec.buffer("A").strides == (1, ref.buffer("A").shape[1])
    else:
        assert launch_facts(la.spec) == launch_facts(ref)
    # Triton's launcher marks integer arguments divisible by 16 (tt.divisibility); the corpus tool
    # passed that attribute for the pointers only, so its PTX may differ where M, N or K is such a
    # multiple and the kernel uses it (the masked tf32 kernel's N = 48): same verdict and bits still
    m, n, k = corpus.TRITON[name][11:14]
    if all(x % 16 for x in (m, n, k)) or not corpus.TRITON[name][16]:
        assert code(la.ptx) == code(ptx)
    res, want = kernel.check(la.module, la.spec), kernel.check(kernel.parse_module(ptx), ref)
    assert (res.verdict, res.stats["products"], res.stats["outputs_complete"]) == \
        (want.verdict, want.stats["products"], want.stats["outputs_complete"]) and res.verdict == "proved"
    inp = kernel.make_inputs(ref, seed=3, names=["A", "B"])
    mine = {n: (v.T if corpus.TRITON[name][14] and n == "A" else v) for n, v in inp.items()}
    out, ref_out = kernel.run(la.module, la.spec, mine), kernel.run(kernel.parse_module(ptx), ref, inp)
    assert not out.witnesses and np.array_equal(out["C"], ref_out["C"])


@pytest.mark.parametrize("name", ["tri_f16_masked_sm80_w4", "tri_f16_bt_sm90_w2", "tri_e4m3_sm89_w4"])
def test_corpus_kernels_launched_from_triton_match_the_corpus(name):
    """A masked (sm_80), a transposed-B (sm_90, mma.sync) and an fp8 (sm_89) matmul: the derived
    spec is the corpus spec, the PTX the corpus PTX, same verdict, same output bits."""
    same_as_corpus(name, corpus_launch(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in corpus.TRITON if n not in corpus.BENCH_ONLY
                                  and n != "tri_f16_wgmma_sm90_w4"])
def test_every_corpus_triton_matmul_matches_the_corpus(name):
    same_as_corpus(name, corpus_launch(name))


def bmm_launch(name: str) -> tf.TritonLaunch:
    """tools/kernel_sources/triton_bmm.py: D[b] = A[b] @ B[b] (+ C[b]), batch = program_id(2)."""
    import triton_bmm
    cc, ti, to, nb, m, n, k, bm, bn, bk, nw, add = corpus.TRITON_BMM[name]
    shp = (lambda r, c: (nb, r, c)) if nb > 1 else (lambda r, c: (r, c))
    a, b, c, d = (tf.Tensor(x, t, shp(r, cc_)) for x, t, r, cc_ in
                  (("A", ti, m, k), ("B", ti, k, n), ("C", "f32", m, n), ("D", to, m, n)))
    st = lambda t: ((0,) if nb == 1 else ()) + t.stride()           # noqa: E731 - (batch, row, col) strides
    (sab, sam, sak), (sbb, sbk, sbn), (scb, scm, scn) = st(a), st(b), st(d)
    cx = dict(SAB=sab or m * k, SAM=sam, SAK=sak, SBB=sbb or k * n, SBK=sbk, SBN=sbn, SCB=scb or m * n, SCM=scm,
              SCN=scn, BM=bm, BN=bn, BK=bk, ADD=bool(add))
    return kernel.triton_launch(triton_bmm.bmm, (m // bm, n // bn, nb), (a, b, c if add else None, d, m, n, k), cx,
                                target=f"sm_{cc}", contract="D = A @ B + C" if add else "D = A @ B", num_warps=nw,
                                num_stages=2, ptx_version=90, enable_fp_fusion=False)


@pytest.mark.parametrize("name", [pytest.param("tri_addmm_bf16_sm90_w2"),
                                  pytest.param("tri_bmm_f16_sm80_w4", marks=pytest.mark.slow)])
def test_batched_and_addmm_launches_match_the_corpus(name):
    """triton_bmm.py: D = A @ B + C (bf16, sm_90) and a batch of 3 (rank-3 tensors, grid z = batch);
    C is None when not added (Triton compiles a None in, and the corpus passes a null pointer)."""
    la = bmm_launch(name)
    ptx = (ROOT / "tests" / "data" / "kernels" / f"{name}.ptx").read_text()
    ref = kernel.load_spec(ROOT / "tests" / "data" / "kernels" / f"{name}.toml")
    mod = kernel.parse_module(ptx)
    if corpus.TRITON_BMM[name][-1]:
        assert launch_facts(la.spec) == launch_facts(ref)
    else:       # c_ptr = None is compiled in: one PTX parameter fewer than the corpus's null pointer
        drop = lambda f: f[:4] + ([(b[0],) + b[3:] for b in f[5]], f[6])     # noqa: E731 - no parameter names
        assert drop(launch_facts(la.spec)) == drop(launch_facts(ref))
        assert list(la.spec.params.values()) == list(ref.params.values())
        assert len(la.module.functions[la.spec.entry].params) == len(mod.functions[ref.entry].params) - 1
    res, want = kernel.check(la.module, la.spec), kernel.check(mod, ref)
    assert res.verdict == want.verdict == "proved" and res.stats["products"] == want.stats["products"]
    inp = kernel.make_inputs(ref, seed=5)
    out, ref_out = kernel.run(la.module, la.spec, inp), kernel.run(mod, ref, inp)
    assert not out.witnesses and np.array_equal(out["D"], ref_out["D"]) and out["D"].any()


@pytest.mark.parametrize("big,flag", [(4000000007, True), (2000000007, True), (4000000007, False), (4000000008, True)])
def test_scalar_parameters_of_every_kind(big, flag):
    """f32, i32, i64 (a value over 2^31) and bool arguments become .f32 / .u32 / .u64 / .u8
    parameters with their values (an integer under 2^31 is i32): out = alpha * x + y (+ 2 * (big >> 31) +
    (big & 7) when flag), exact here."""
    import scalars
    x, y, o = (tf.Tensor(n, "f32", (100,)) for n in "XYO")
    rng = np.random.default_rng(1)
    xv, yv = (rng.integers(-64, 64, 100).astype(np.float32) / 2 for _ in range(2))
    la = kernel.triton_launch(scalars.axpy, (2,), (x, y, o, 2.5, 100, big, flag, 64), target="sm_80")
    sizes = {p.name: p.size for p in la.module.functions[la.spec.entry].params}
    assert [sizes[k] for k in la.spec.params] == [4, 4, 8 if big >= 1 << 31 else 4, 1]
    assert list(la.spec.params.values())[1:] == [100, big, flag]
    out = kernel.run(la.module, la.spec, {"X": xv.view(np.uint32), "Y": yv.view(np.uint32)})
    assert not out.witnesses and np.array_equal(out["O"].view(np.float32), 2.5 * xv + yv + np.float32(
        (big >> 31) * 2 + (big & 7) if flag else 0))


def test_the_launcher_specialises_as_triton_does():
    """Integers equal to 1 are compiled in (not PTX parameters), pointers and multiples of 16 are
    marked divisible by 16: the B.T launch has stride_bk = 1 compiled in, stride_bn = 32 a parameter."""
    a, b, c = tf.Tensor("A", "f16", (64, 32)), tf.Tensor("B", "f16", (64, 32)).T, tf.Tensor("C", "f32", (64, 64))
    la = kernel.triton_launch(matmul.matmul_kernel, (2, 2),
                              (a, b, c, 64, 64, 32, *a.stride(), *b.stride(), *c.stride()),
                              dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32), target="sm_80", contract="C = A @ B",
                              num_warps=4)
    assert la.info["specialised"] == {"stride_ak": "1", "stride_bk": "1", "stride_cn": "1"}
    e = la.spec.entry
    assert la.spec.params == {f"{e}_param_3": 64, f"{e}_param_4": 64, f"{e}_param_5": 32, f"{e}_param_6": 32,
                              f"{e}_param_7": 32, f"{e}_param_8": 64}
    fn = la.module.functions[e]
    assert [p.size for p in fn.params] == [8, 8, 8, 4, 4, 4, 4, 4, 4, 8, 8]     # + global / profile scratch
    assert [b.param for b in la.spec.buffers] == [f"{e}_param_{i}" for i in range(3)]
    assert la.spec.buffer("B").strides == (1, 32) and la.spec.block == (128, 1, 1)


def test_python_api_in_a_test_suite():
    """What a compiler's pytest does: proved for the right launch; refuted, with a witness, for a
    launch that passes B's strides swapped (the kernel then reads B.T)."""
    a, b, c = tf.Tensor("A", "f16", (64, 64)), tf.Tensor("B", "f16", (64, 64)), tf.Tensor("C", "f32", (64, 64))
    blocks = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    res = kernel.triton_check(matmul.matmul_kernel, (2, 2),
                              (a, b, c, 64, 64, 64, *a.stride(), *b.stride(), *c.stride()),
                              blocks, contract="C = A @ B", target="sm_80", num_warps=4)
    assert isinstance(res, kernel.CheckResult) and res.verdict == "proved", res.summary
    assert res.stats["outputs_complete"] == 64 * 64
    bad = kernel.triton_check(matmul.matmul_kernel, (2, 2),
                              (a, b, c, 64, 64, 64, *a.stride(), b.stride(1), b.stride(0), *c.stride()),
                              blocks, contract="C = A @ B", target="sm_80", num_warps=4)
    assert bad.verdict == "refuted" and bad.witnesses
    assert any(w.kind in ("wrong-element", "missing-product") for w in bad.witnesses)


def test_run_agrees_across_layouts_and_with_the_reference():
    """B given row-major and B given as the transpose of its [N, K] storage are the same matrix: the
    same inputs give the same C bit for bit; and C equals the exact product rounded once (f16 inputs,
    K = 32: every partial sum is exact in f32 for these inputs)."""
    a, c = tf.Tensor("A", "f16", (64, 32)), tf.Tensor("C", "f32", (64, 64))
    outs = []
    rng = np.random.default_rng(7)
    # small integers: products and sums exact, so any summation order gives the same bits
    av = rng.integers(-8, 9, (64, 32)).astype(np.float16)
    bv = rng.integers(-8, 9, (32, 64)).astype(np.float16)
    for b in (tf.Tensor("B", "f16", (32, 64)), tf.Tensor("B", "f16", (64, 32)).T):
        outs.append(kernel.triton_run(matmul.matmul_kernel, (2, 2), (a, b, c, 64, 64, 32, *a.stride(), *b.stride(),
                                      *c.stride()), dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32), target="sm_80",
                                      num_warps=4, inputs={"A": av.view(np.uint16), "B": bv.view(np.uint16)}))
        assert not outs[-1].witnesses
    assert np.array_equal(outs[0]["C"], outs[1]["C"])
    want = av.astype(np.float64) @ bv.astype(np.float64)
    assert np.array_equal(outs[0]["C"].view(np.float32), want.astype(np.float32))


def test_wgmma_kernel_is_proved():
    """sm_90 with BM = 64 and 4 warps: Triton emits wgmma; `run` executes it and `check` proves it (the
    descriptors and registers of each warpgroup deliver A[m][k] x B[k][n], each k once), from the API
    and from the CLI."""
    la = corpus_launch("tri_f16_wgmma_sm90_w4")
    assert any(t.strip().startswith("wgmma.mma_async") for t in la.ptx.splitlines())
    res = kernel.check(la.module, la.spec)
    assert res.verdict == "proved" and res.stats["products"] == 64 * 64 * 64, res.summary
    call = ("mm[(1, 1)](A, B, C, 64, 64, 64, SAM=A.stride(0), SAK=A.stride(1), SBK=B.stride(0), SBN=B.stride(1), "
            "SCM=C.stride(0), SCN=C.stride(1), BM=64, BN=64, BK=32, ACC=tl.float32, PREC='ieee', MASKED=False, "
            "num_stages=2, enable_fp_fusion=False)")
    rc, out, err = cli("kernel", "check", "--triton", TRITON_MM, "--target", "sm_90", "--tensor", "A=f16[64,64]",
                       "--tensor", "B=f16[64,64]", "--tensor", "C=f32[64,64]", "--call", call,
                       "--contract", "C = A @ B",
                       "--num-warps", "4", "--ptx-version", "9.0")
    assert rc == 0 and err == "" and "proved: 4096 output elements of C" in out, (rc, out, err)


# ------------------------------------------------------------ the CLI -----------------------------

MM_CALL = ("mm[(2, 2)](A, B, C, 50, 40, 72, SAM=A.stride(0), SAK=A.stride(1), SBK=B.stride(0), SBN=B.stride(1), "
           "SCM=C.stride(0), SCN=C.stride(1), BM=32, BN=32, BK=32, ACC=tl.float32, PREC='ieee', MASKED=True, "
           "num_warps=4, num_stages=2, enable_fp_fusion=False)")
MM_TENSORS = ["--tensor", "A=f16[50,72]", "--tensor", "B=f16[72,40]", "--tensor", "C=f32[50,40]"]


def test_cli_check_and_run_match_the_corpus_kernel(tmp_path):
    """The masked corpus kernel through the CLI: --emit writes the PTX and the spec, which
    `kernel check FILE --spec` proves with the same line; `kernel run --triton` writes the same C
    as `kernel run` of the corpus PTX and spec on the same inputs."""
    base = ROOT / "tests" / "data" / "kernels" / "tri_f16_masked_sm80_w4"
    emit = str(tmp_path / "mm")
    rc, out, err = cli("kernel", "check", "--triton", TRITON_MM, "--target", "sm_80", *MM_TENSORS, "--call", MM_CALL,
                       "--contract", "C = A @ B", "--ptx-version", "9.0", "--emit", emit)
    assert rc == 0 and err == "", err
    head, verdict = out.splitlines()
    assert head.startswith("triton ") and "mm for sm_80 (4 warps, 2 stages, fp fusion off): grid [2, 2, 1] x 128 " \
        "threads, 4096 shared bytes; a_ptr = A, b_ptr = B, c_ptr = C, M = 50, N = 40, K = 72" in head
    assert code(Path(emit + ".ptx").read_text()) == code(base.with_suffix(".ptx").read_text())
    assert launch_facts(kernel.load_spec(emit + ".toml")) == launch_facts(kernel.load_spec(base.with_suffix(".toml")))
    rc2, out2, _ = cli("kernel", "check", emit + ".ptx", "--spec", emit + ".toml")
    rc3, out3, _ = cli("kernel", "check", str(base.with_suffix(".ptx")), "--spec", str(base.with_suffix(".toml")))
    assert rc2 == rc3 == 0 and out2.strip() == out3.strip() == verdict and verdict.startswith("proved: 2000 ")

    spec = kernel.load_spec(base.with_suffix(".toml"))
    np.savez(tmp_path / "in.npz", **kernel.make_inputs(spec, seed=11, names=["A", "B"]))
    rc, out, err = cli("kernel", "run", "--triton", TRITON_MM, "--target", "sm_80", *MM_TENSORS, "--call", MM_CALL,
                       "--ptx-version", "9.0", "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "a.npz"))
    assert rc == 0 and err == "" and out.splitlines()[1].startswith("ran (2, 2, 1) x (128, 1, 1): ")
    rc, _, _ = cli("kernel", "run", str(base.with_suffix(".ptx")), "--spec", str(base.with_suffix(".toml")),
                   "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "b.npz"))
    assert rc == 0
    with np.load(tmp_path / "a.npz") as x, np.load(tmp_path / "b.npz") as y:
        assert sorted(x.files) == sorted(y.files) == ["A", "B", "C"]
        assert all(np.array_equal(x[k], y[k]) for k in x.files) and x["C"].any()


def test_cli_witnesses_name_the_triton_source_line():
    """B's strides passed swapped: refuted at the mma of tl.dot (matmul.py:23), with the line that
    builds B's addresses from them (matmul.py:18) on the path; the same in --json."""
    call = CALL.replace("B.stride(0), B.stride(1)", "B.stride(1), B.stride(0)")
    rc, out, err = cli("kernel", "check", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--call", call,
                       "--contract", "C = A @ B")
    assert rc == 1 and err == ""
    lines = out.splitlines()
    first = lines.index(next(t for t in lines if t.startswith("wrong-element: line ")))
    src = [t for t in lines[first:] if t.startswith("  Triton ")][:2]
    assert src[0] == "  Triton source: matmul.py:23: acc += tl.dot(a, b)"
    assert src[1].startswith("  Triton path: ") and "matmul.py:18," in src[1]
    rc, out, _ = cli("kernel", "check", "--json", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--call", call,
                     "--contract", "C = A @ B")
    w = json.loads(out)["witnesses"]
    assert rc == 1 and any(x["triton_source"][:1] == [src[0]] for x in w)


def test_cli_json_names_how_it_was_compiled():
    rc, out, err = cli("kernel", "check", "--json", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--call", CALL,
                       "--contract", "C = A @ B")
    assert rc == 0, err
    d = json.loads(out)
    assert d["verdict"] == "proved" and d["triton"]["triton"] == triton.__version__
    assert d["triton"]["target"] == "sm_80" and d["triton"]["constexprs"]["BLOCK_M"] == 32
    assert d["triton"]["arguments"]["b_ptr"] == "B" and d["triton"]["specialised"]["stride_bk"] == "1"


@pytest.mark.parametrize("args,msg", [
    (["--call", CALL.replace("A.stride(0)", "__import__('os')")], "--call: \"__import__('os')\": calls allowed"),
    (["--call", CALL.replace("(2, 2)", "(2, 0)")], "--call: the grid [2, 0] must be 1 to 3 positive integers"),
    (["--call", CALL.replace("matmul_kernel[", "other[")], "--call launches other, but --triton names matmul_kernel"),
    (["--call", CALL.replace("num_warps=4", "num_warp=4")], "Keyword argument num_warp was specified but unrecognised"),
    (["--call", CALL.replace("num_warps=4", "num_warps=3")], "the launch of matmul_kernel: num_warps must be a power "
                                                               "of 2"),
    (["--call", CALL, "--num-warps", "8"], "--num-warps 8 and num_warps=4 in --call disagree"),
    (["--call", CALL.replace(", BLOCK_K=32", "")], "matmul_kernel() missing 1 required positional argument: 'BLOCK_K'"),
    (["--call", CALL, "--tensor", "D=f32[4]"], "--tensor D: declared but not passed in --call"),
    (["--call", CALL, "--tensor", "A=f16[64]"], "--tensor A is declared twice"),
    (["--call", CALL.replace("BLOCK_K=32", "BLOCK_K=24")], "triton could not compile matmul_kernel for sm_80: "
                                                            "matmul.py:16: arange's range must be a power of 2"),
    (["--call", CALL.replace("BLOCK_K=32", "BLOCK_K=8")], "matmul.py:23: Input shapes should have M >= 1, N >= 1 and "
                                                           "K >= 16"),
    (["--call", CALL, "--target", "sm_70"], "target 'sm_70': one of sm_80"),
    (["--call", CALL, "--ptx-version", "9.9"], "PTX ISA 9.9 needs a newer ptxas than Triton's"),
    (["--call", CALL, "--ptx-version", "nine"], "PTX version 'nine': write it as 8.7, 9.0, ..."),
])
def test_cli_bad_launches_are_one_line_exit_2(args, msg):
    argv = ["kernel", "check", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--contract", "C = A @ B"]
    if "--target" in args:
        argv[argv.index("--target"):argv.index("--target") + 2] = []
    rc, out, err = cli(*argv, *args)
    assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("ptx-formal kernel: error: "), err
    assert msg in err, err


@pytest.mark.parametrize("argv,msg", [
    (["--contract", "C = A @ X"], "the launch of matmul_kernel: contract C = 'A @ X' names 'X', which is no buffer"),
    (["--contract", "C = A times B"], "is not of the form 'X[.T] @ Y[.T] [+ Z]'"),
    (["--contract", "A @ B"], "--contract 'A @ B': write OUT = X @ Y"),
    (["--contract", "C = A @ B.T"], "contract C = A @ B.T: shapes [64, 32] @ [64, 32]"),
    ([], "kernel check --triton needs what the kernel computes: --contract \"C = A @ B\""),
    (["--contract", "C = A @ B", "--spec", "x.toml"], "give no PTX file and no --spec"),
])
def test_cli_bad_contracts_are_exit_2(argv, msg):
    rc, out, err = cli("kernel", "check", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--call", CALL, *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err, err


@pytest.mark.parametrize("ref,msg", [("tests/data/triton/nope.py:k", "no such file 'tests/data/triton/nope.py'"),
                                     ("tests/data/triton/matmul.py:nope", "has no @triton.jit function 'nope'; it has "
                                                                          "matmul_kernel"),
                                     ("README.md:k", "importing README.md failed: SyntaxError")])
def test_cli_bad_kernel_files_are_exit_2(ref, msg):
    rc, out, err = cli("kernel", "run", "--triton", ref, "--target", "sm_80", *TENSORS, "--call", CALL)
    assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err, err


def test_cli_ptx_options_need_a_ptx_file_or_triton():
    rc, _, err = cli("kernel", "check", "tests/data/kernels_small/tiny_mma.ptx", "--spec",
                     "tests/data/kernels_small/tiny_mma.toml", "--target", "sm_80")
    assert rc == 2 and "--target is for --triton kernels" in err
    rc, _, err = cli("kernel", "run", "tests/data/kernels_small/tiny_mma.ptx")
    assert rc == 2 and "give a PTX module and --spec SPEC.toml, or --triton FILE.py:KERNEL" in err
    rc, _, err = cli("kernel", "check", "--triton", MATMUL, *TENSORS, "--contract", "C = A @ B")
    assert rc == 2 and "--triton needs --call" in err


def test_without_triton_exit_3_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)          # `import triton` raises ImportError
    rc, out, err = cli("kernel", "check", "--triton", MATMUL, "--target", "sm_80", *TENSORS, "--call", CALL,
                       "--contract", "C = A @ B")
    assert rc == 3 and out == "" and err.count("\n") == 1
    assert err.startswith("ptx-formal kernel: unsupported: Triton is not installed") and "pip install triton" in err
    with pytest.raises(kernel.TritonUnavailable, match="Triton is not installed"):
        kernel.triton_check(matmul.matmul_kernel, (1,), (), contract="C = A @ B", target="sm_80")


def test_tensor_descriptors_and_tuples_are_unsupported():
    with pytest.raises(kernel.TritonUnavailable, match="tuple arguments are not modelled"):
        kernel.triton_launch(matmul.matmul_kernel, (1,), ((1, 2),), target="sm_80")


def test_the_docs_python_example_runs():
    """docs/kernel.md's pytest example, as written."""
    import re
    text = (ROOT / "docs" / "kernel.md").read_text().split("## Triton kernels without a spec", 1)[1]
    src = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(src, "docs/kernel.md", "exec"), ns)
    ns["test_matmul_kernel_multiplies"]()


def _hopper_jobs():
    import make_hopper_corpus as hop
    man = json.loads((ROOT / "tests" / "data" / "kernels_hopper" / "manifest.json").read_text())
    return {n: j for n, j in hop.triton_jobs().items()
            if n in man and not j.get("gluon") and all(a.kind != "desc" for a in j["args"])}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_hopper_jobs()))
def test_hopper_corpus_launches_derive_the_manifest_launch(name):
    """The sm_90a Triton kernels of tools/make_hopper_corpus.py (pointer loads; persistent,
    warp-specialised, device TMA, attention; wgmma): the launch the
    front end derives -- entry, grid, block (.reqntid for warp-specialised kernels), shared bytes,
    the buffer and value of each parameter, Triton's global scratch -- is the manifest's, which
    the H100 ran (tools/run_hopper_kernels.py)."""
    job = _hopper_jobs()[name]
    rec = json.loads((ROOT / "tests" / "data" / "kernels_hopper" / "manifest.json").read_text())[name]["launch"]
    import make_hopper_corpus as hop
    mod = __import__("triton_hopper")
    args = [tf.Tensor(a.kw["buf"], a.kw["dtype"], tuple(a.kw["shape"]), tuple(a.kw["strides"])) if a.kind == "ptr"
            else a.kw["value"] for a in job["args"]]
    opts = dict(job.get("options", {}))
    la = kernel.triton_launch(getattr(mod, job["kernel"]), tuple(job["grid"]), args, job.get("constexprs", {}),
                              target="sm_90", ptx_version=hop.PTX_VERSION, num_warps=job["warps"],
                              num_stages=job.get("stages", 3), **opts)
    sp = la.spec
    assert (sp.entry, list(sp.grid), list(sp.block)) == (rec["entry"], rec["grid"], rec["block"])
    # Triton's launcher marks integers divisible by 16, the corpus tool only the scalars it flags
    # div16: mm_upcast then pipelines otherwise (the tool with M, N, K flagged gives 32768 bytes too)
    assert (sp.shared_bytes, rec["shared_bytes"]) == \
        {"tri_up_e4m3_f16_w4": (32768, 16384)}.get(name, (rec["shared_bytes"],) * 2)
    for p in rec["params"]:
        if p["role"] == "pointer":
            b = sp.buffer(p["buffer"])
            assert (b.param, b.type, list(b.shape), list(b.strides)) == \
                (p["name"], p["dtype"], p["shape"], p["strides"])
        elif p["role"] == "scalar":
            assert sp.params[p["name"]] == p["value"]
        elif p["bytes_per_program"]:
            b = sp.buffer("global_scratch")
            assert b.param == p["name"] and b.shape == (p["bytes_per_program"] * int(np.prod(rec["grid"])),)
        else:
            assert p["name"] not in sp.params and all(b.param != p["name"] for b in sp.buffers)
