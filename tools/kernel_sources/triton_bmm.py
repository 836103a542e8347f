"""Triton batched / addend matmuls of this project: D[b] = A[b] @ B[b] (+ C[b]).

Batch b = program_id(2); strides are constexprs (element strides of rank-3 buffers).
"""

import triton
import triton.language as tl


@triton.jit
def bmm(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K,
        SAB: tl.constexpr, SAM: tl.constexpr, SAK: tl.constexpr,
        SBB: tl.constexpr, SBK: tl.constexpr, SBN: tl.constexpr,
        SCB: tl.constexpr, SCM: tl.constexpr, SCN: tl.constexpr,
        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ADD: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_b = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + pid_b * SAB + rm[:, None] * SAM + rk[None, :] * SAK
    b_ptrs = b_ptr + pid_b * SBB + rk[:, None] * SBK + rn[None, :] * SBN
    c_off = pid_b * SCB + rm[:, None] * SCM + rn[None, :] * SCN
    if ADD:
        acc = tl.load(c_ptr + c_off).to(tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BK * SAK
        b_ptrs += BK * SBK
    tl.store(d_ptr + c_off, acc.to(d_ptr.dtype.element_ty))
