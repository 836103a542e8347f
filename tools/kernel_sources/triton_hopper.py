"""Triton kernels for the Hopper (sm_90a) corpus, compiled by tools/make_hopper_corpus.py.

Each kernel is a GEMM (or a chain of two) of the forms Triton lowers to wgmma on sm_90a:

- ``mm_ptr``: pointer loads (cp.async into NVMMA-swizzled shared tiles), one wgmma chain per
  K step; types and strides are constexprs (f16, bf16, fp8 e4m3/e5m2, tf32, int8).
- ``mm_upcast``: A is fp8 (or int8) upcast in registers to f16/bf16 before the dot, so the wgmma
  takes A from registers (the register-A form of wgmma).
- ``mm_tma``: host-built tensor descriptors (``TensorDescriptor``: a CUtensorMap per operand,
  passed by value), loads with ``desc.load`` (``cp.async.bulk.tensor`` + mbarrier), TMA store of C.
- ``mm_tma_device``: device-built descriptors (``tl.make_tensor_descriptor``: ``tensormap.*``
  instructions writing a CUtensorMap into global scratch).
- ``mm_persistent``: persistent kernel, grid = number of SMs, tiles in a grouped order, host
  descriptors; with ``WS`` the K loop is ``tl.range(..., warp_specialize=True)``.
- ``attn_fwd``: two chained products per CTA, S = Q @ K^T, P = S (optionally softmax(S), online),
  O = P @ V; the second wgmma takes P from registers.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def mm_ptr(a_ptr, b_ptr, c_ptr, M, N, K,
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


@triton.jit
def mm_upcast(a_ptr, b_ptr, c_ptr, M, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, UP: tl.constexpr):
    """C = A.to(UP) @ B: A [M, K] fp8/int8 row-major, B [K, N] in UP (f16/bf16) row-major, C f32."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs).to(UP)
        b = tl.load(b_ptrs)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def mm_tma(a_desc, b_desc, c_desc, M, N, K,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr, B_KMAJOR: tl.constexpr):
    """C = A @ B through host tensor descriptors: A [M, K]; B [K, N], or [N, K] if B_KMAJOR; C [M, N]."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    off_m = pid_m * BM
    off_n = pid_n * BN
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([off_m, k * BK])
        if B_KMAJOR:
            b = b_desc.load([off_n, k * BK]).T
        else:
            b = b_desc.load([k * BK, off_n])
        acc = tl.dot(a, b, acc, out_dtype=ACC)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def mm_tma_device(a_ptr, b_ptr, c_ptr, M, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B with descriptors built on the device (tl.make_tensor_descriptor)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([pid_m * BM, k * BK]), b_desc.load([k * BK, pid_n * BN]), acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


@triton.jit
def _tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    group = GROUP_M * num_pid_n
    gid = tile_id // group
    first_m = gid * GROUP_M
    gsize = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % gsize)
    pid_n = (tile_id % group) // gsize
    return pid_m, pid_n


@triton.jit
def mm_persistent(a_desc, b_desc, c_desc, M, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                  NUM_SMS: tl.constexpr, WS: tl.constexpr, FLATTEN: tl.constexpr):
    """Persistent C = A @ B (host descriptors, B [N, K] K-major); grid = NUM_SMS."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WS):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BK])
            b = b_desc.load([off_n, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def mm_ws(a_desc, b_desc, c_desc, M, N, K,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    """Non-persistent C = A @ B with a warp-specialised K loop (host descriptors, B [N, K])."""
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in tl.range(tl.cdiv(K, BK), num_stages=STAGES, warp_specialize=True):
        a = a_desc.load([off_m, ki * BK])
        b = b_desc.load([off_n, ki * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def attn_fwd(q_ptr, k_ptr, v_ptr, o_ptr, L,
             D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, SOFTMAX: tl.constexpr):
    """O[BM rows of this CTA] = P @ V with P = S (or softmax(S * scale) online) and S = Q @ K^T.

    Q, K, V: [L, D] f16 row-major; O: [L, D] f32.  The loop runs over KV blocks of BN rows.
    Without SOFTMAX the contract is O = (Q @ K.T rounded to f16) @ V.
    """
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    for start in range(0, L, BN):
        rn = start + tl.arange(0, BN)
        k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
        s = tl.dot(q, k.T)
        if SOFTMAX:
            s = s * 0.125
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.exp2((m_i - m_new) * 1.4426950408889634)
            p = tl.exp2((s - m_new[:, None]) * 1.4426950408889634)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            m_i = m_new
        else:
            p = s
        v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
    if SOFTMAX:
        acc = acc / l_i[:, None]
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc)


@triton.jit
def mm_tma_pdl(a_desc, b_desc, c_desc, M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """mm_tma (B stored [N, K]) under programmatic dependent launch: griddepcontrol.wait before the
    first load of A/B (written by the previous kernel), launch_dependents after the K loop."""
    off_m = tl.program_id(0) * BM
    off_n = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    gdc_wait()
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([off_m, k * BK])
        b = b_desc.load([off_n, k * BK])
        acc = tl.dot(a, b.T, acc)
    gdc_launch_dependents()
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))
