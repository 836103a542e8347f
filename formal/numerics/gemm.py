"""A whole GEMM emulated bit-exactly: D = A·B + C tiled into one instruction's tiles.

``gemm(A, B, C, shape=(M, N, K), ...)`` splits ``A [Mg, Kg]``, ``B [Kg, Ng]``, ``C [Mg, Ng]``
(element encodings) into M x K, K x N and M x N tiles and runs, for every output tile,
the chain an mma loop runs: ``D = C; for kt = 0 .. Kg/K - 1: D = mma(A[:, kt], B[kt, :], D)``
(ascending k, each instruction's D the next one's C).  All output tiles of one k step form
one batch of :func:`formal.numerics.mma_matrices`, so the work per call is large and the
Python loop has Kg/K iterations.  ``device="cuda"`` runs the same code on CuPy.
"""
from __future__ import annotations

from .engine import mma_matrices
from .xp import backend, module_for, np, to_host


def gemm(A, B, C, *, shape, ctype, dtype, device=None, **kw):
    """D [Mg, Ng] (encodings of ``dtype``); ``ctype`` must equal ``dtype`` (D feeds the next C)."""
    if ctype != dtype:
        raise ValueError(f"a GEMM chains D into C: ctype {ctype} must equal dtype {dtype}")
    M, N, K = (int(x) for x in shape)
    xp = module_for(device)
    back = not any(hasattr(x, "__cuda_array_interface__") for x in (A, B, C))
    with backend(xp):
        A, B, C = np.asarray(A), np.asarray(B), np.asarray(C)
        if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
            raise ValueError("gemm takes 2-D matrices A [Mg, Kg], B [Kg, Ng], C [Mg, Ng]")
        Mg, Kg = A.shape
        Ng = B.shape[1]
        if B.shape[0] != Kg or C.shape != (Mg, Ng):
            raise ValueError(f"shapes do not chain: A {A.shape}, B {B.shape}, C {C.shape}")
        if Mg % M or Ng % N or Kg % K:
            raise ValueError(f"GEMM {Mg}x{Ng}x{Kg} is not a multiple of the instruction tile {M}x{N}x{K}")
        Mt, Nt, Kt = Mg // M, Ng // N, Kg // K
        At = A.reshape(Mt, M, Kt, K).transpose(2, 0, 1, 3)[:, :, None]     # [Kt, Mt, 1, M, K]
        Bt = B.reshape(Kt, K, Nt, N).transpose(0, 2, 1, 3)[:, None]        # [Kt, 1, Nt, K, N]
        D = np.ascontiguousarray(C.reshape(Mt, M, Nt, N).transpose(0, 2, 1, 3))   # [Mt, Nt, M, N]
        for kt in range(Kt):
            D = mma_matrices(At[kt], Bt[kt], D, shape=(M, N, K), ctype=ctype, dtype=dtype, **kw)
        out = np.ascontiguousarray(D.transpose(0, 2, 1, 3).reshape(Mg, Ng))
    return to_host(out) if back else out


__all__ = ["gemm"]
