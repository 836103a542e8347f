"""Triton matmul kernels of this project (compiled to PTX by tools/make_kernel_corpus.py).

One tiled GEMM, C[M, N] = A[M, K] @ B[K, N] (operands optionally stored transposed),
specialised through constexprs: tile shape, element types, accumulator type, dot precision.
"""

import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K,
       SAM: tl.constexpr, SAK: tl.constexpr, SBK: tl.constexpr, SBN: tl.constexpr,
       SCM: tl.constexpr, SCN: tl.constexpr,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
       ACC: tl.constexpr, PREC: tl.constexpr, MASKED: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * SAM + rk[None, :] * SAK
    b_ptrs = b_ptr + rk[:, None] * SBK + rn[None, :] * SBN
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        if MASKED:
            kk = k * BK + rk
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        else:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=ACC)
        a_ptrs += BK * SAK
        b_ptrs += BK * SBK
    c_ptrs = c_ptr + rm[:, None] * SCM + rn[None, :] * SCN
    c = acc.to(c_ptr.dtype.element_ty)
    if MASKED:
        tl.store(c_ptrs, c, mask=(rm[:, None] < M) & (rn[None, :] < N))
    else:
        tl.store(c_ptrs, c)
