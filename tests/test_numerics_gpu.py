"""The optional GPU backend and the whole-GEMM API.

CI has no GPU: there the CPU path of ``evaluate_gemm`` is checked against an explicit
loop over tiles, and ``device="cuda"`` must raise the typed DeviceUnavailable (CLI exit 3).
With CuPy and a GPU (the device run, ``benchmarks/bench_gpu.py``), GPU == CPU bit for bit.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import formal
from formal.cli import main
from formal.evaluate import EvalError, evaluate
from formal.vectors.regimes import random_inputs
from formal.numerics import DeviceUnavailable, from_float64, mma_matrices
from formal.catalog import parse

HAVE_CUPY = importlib.util.find_spec("cupy") is not None
F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"


def _tile_loop(A, B, C, f, arch="sm_90"):
    M, N, K = f.mnk
    kw = dict(atype=f.atype, btype=f.btype, ctype=f.ctype, dtype=f.dtype, arch=arch, shape=f.mnk,
              rounding=f.rounding, satfinite=f.satfinite, bitop=f.bitop)
    R = C.copy()
    for i in range(0, A.shape[0], M):
        for j in range(0, B.shape[1], N):
            d = C[i:i + M, j:j + N]
            for k in range(0, A.shape[1], K):
                d = mma_matrices(A[None, i:i + M, k:k + K], B[None, k:k + K, j:j + N], d[None], **kw)[0]
            R[i:i + M, j:j + N] = d
    return R


@pytest.mark.parametrize("op,at,ct", [(F16, "f16", "f32"),
                                      ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "e4m3", "f32"),
                                      ("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64.rn", "f64", "f64"),
                                      ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "f16", "f16")])
def test_gemm_is_the_chain_of_tiles(op, at, ct):
    f = parse(op)
    M, N, K = f.mnk
    rng = np.random.default_rng(1)
    A = from_float64(rng.standard_normal((2 * M, 3 * K)), at)
    B = from_float64(rng.standard_normal((3 * K, 2 * N)), at)
    C = from_float64(rng.standard_normal((2 * M, 2 * N)), ct)
    D = formal.evaluate_gemm(A, B, C, op)
    assert D.shape == C.shape and D.dtype == C.dtype
    assert np.array_equal(D, _tile_loop(A, B, C, f))
    # the k order matters: reversing the k tiles changes some result (the chain is not exact)
    if at != "f64":
        Kt = A.shape[1] // K
        rev = np.concatenate([np.arange(k * K, (k + 1) * K) for k in reversed(range(Kt))])
        assert not np.array_equal(formal.evaluate_gemm(A[:, rev], B[rev], C, op), D)


def test_gemm_rejects_what_does_not_chain():
    A = np.zeros((16, 16), np.uint16)
    with pytest.raises(EvalError, match="multiple"):
        formal.evaluate_gemm(A[:, :8], np.zeros((8, 8), np.uint16), np.zeros((16, 8), np.uint32), F16)
    with pytest.raises(EvalError, match="C and D|must equal"):
        formal.evaluate_gemm(A, np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.uint32),
                             "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32")
    with pytest.raises(EvalError, match="dense"):
        formal.evaluate_gemm(A, A, A, "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32")


@pytest.mark.skipif(HAVE_CUPY, reason="CuPy installed: the GPU tests below run instead")
def test_cuda_without_cupy_is_a_typed_error(tmp_path, capsys):
    f = parse(F16)
    inp = random_inputs(f, 2, "normal", 0)
    with pytest.raises(DeviceUnavailable):
        evaluate(f, inp["a"], inp["b"], inp["c"], device="cuda")
    with pytest.raises(DeviceUnavailable):
        formal.evaluate_gemm(np.zeros((16, 16), np.uint16), np.zeros((16, 8), np.uint16),
                             np.zeros((16, 8), np.uint32), F16, device="cuda")
    p = tmp_path / "in.npz"
    np.savez(p, a=inp["a"], b=inp["b"], c=inp["c"])
    assert main(["eval", F16, "-i", str(p), "--device", "cuda"]) == 3
    assert "CuPy" in capsys.readouterr().err
    assert main(["eval", F16, "-i", str(p), "--device", "cpu"]) == 0


@pytest.mark.skipif(not HAVE_CUPY, reason="needs CuPy and a GPU (run on the device: benchmarks/bench_gpu.py)")
def test_gpu_equals_cpu_on_every_family():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import bench_gpu

    rows = bench_gpu.check_families(warps=64)
    assert rows and all(r["equal"] for r in rows if r["status"] == "ran"), [r for r in rows if not r.get("equal")]
