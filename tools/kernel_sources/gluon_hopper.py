"""Gluon (Triton's explicit-layout dialect) Hopper GEMMs, compiled by tools/make_hopper_corpus.py.

Gluon spells out what Triton's passes decide: shared layouts (NVMMA swizzle), TMA copies into a
ring of shared buffers, mbarrier phases, and wgmma issue/wait.  All take host tensor descriptors
(a CUtensorMap each): A [M, K], B [K, N] (or [N, K] with B_KMAJOR), C [M, N].

- ``gl_mm_pipelined``: STAGES-deep TMA ring, one `ready` mbarrier per slot, async wgmma with one
  group in flight (``warpgroup_mma_wait(1)``), TMA store of C.
- ``gl_mm_regA``: A read from shared into registers (dot-operand layout) and fed to a register-A wgmma.
- ``gl_mm_ws``: warp-specialised: a 1-warp TMA producer partition and the default (consumer)
  partition doing wgmma, `ready`/`empty` mbarrier pairs per slot.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma,
                                                              warpgroup_mma, warpgroup_mma_wait)


@gluon.constexpr_function
def _acc_layout(num_warps, bn, dtype):
    # wgmma K is 32 bytes of the operand type: 16 for f16/bf16, 32 for fp8/int8, 8 for tf32
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                     instr_shape=[16, min(bn, 256), 256 // dtype.primitive_bitwidth])


@gluon.jit
def gl_mm_pipelined(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr, B_KMAJOR: gl.constexpr):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN

    a_s = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    fence_async_shared()

    acc_layout: gl.constexpr = _acc_layout(gl.num_warps(), BN, dtype)
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    k_tiles = gl.cdiv(K, BK)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes

    # prologue: fill STAGES - 1 slots
    for i in gl.static_range(STAGES - 1):
        mbarrier.expect(ready.index(i), nbytes)
        tma.async_load(a_desc, [off_m, i * BK], ready.index(i), a_s.index(i))
        if B_KMAJOR:
            tma.async_load(b_desc, [off_n, i * BK], ready.index(i), b_s.index(i))
        else:
            tma.async_load(b_desc, [i * BK, off_n], ready.index(i), b_s.index(i))

    for ki in range(k_tiles):
        slot = ki % STAGES
        phase = (ki // STAGES) & 1
        mbarrier.wait(ready.index(slot), phase)
        if B_KMAJOR:
            b_op = b_s.index(slot).permute((1, 0))
        else:
            b_op = b_s.index(slot)
        acc = warpgroup_mma(a_s.index(slot), b_op, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a_s.index(slot), b_s.index(slot)))[0]
        nk = ki + STAGES - 1
        if nk < k_tiles:
            ns = nk % STAGES
            mbarrier.expect(ready.index(ns), nbytes)
            tma.async_load(a_desc, [off_m, nk * BK], ready.index(ns), a_s.index(ns))
            if B_KMAJOR:
                tma.async_load(b_desc, [off_n, nk * BK], ready.index(ns), b_s.index(ns))
            else:
                tma.async_load(b_desc, [nk * BK, off_n], ready.index(ns), b_s.index(ns))
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(i))

    c_s = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_s.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_s)
    tma.store_wait(0)


@gluon.jit
def gl_mm_regA(a_desc, b_desc, c_desc, K):
    """Single-buffered; A goes shared -> registers -> wgmma (register-A form)."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_s = gl.allocate_shared_memory(dtype, a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(dtype, b_desc.block_type.shape, b_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    fence_async_shared()
    acc_layout: gl.constexpr = _acc_layout(gl.num_warps(), BN, dtype)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    phase = 0
    for ki in range(gl.cdiv(K, BK)):
        mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, ki * BK], bar, a_s)
        tma.async_load(b_desc, [ki * BK, off_n], bar, b_s)
        mbarrier.wait(bar, phase)
        phase ^= 1
        a = a_s.load(a_layout)
        acc = warpgroup_mma(a, b_s, acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, b_s))[0]
    mbarrier.invalidate(bar)
    c_s = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_s.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_s)
    tma.store_wait(0)


@gluon.jit
def _ws_producer(a_desc, b_desc, a_s, b_s, ready, empty, off_m, off_n, k_tiles,
                 STAGES: gl.constexpr, BK: gl.constexpr):
    for ki in range(k_tiles):
        slot = ki % STAGES
        # wait until the consumer released this slot (first pass: phase 1 passes at once)
        mbarrier.wait(empty.index(slot), ((ki // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(slot), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_load(a_desc, [off_m, ki * BK], ready.index(slot), a_s.index(slot))
        tma.async_load(b_desc, [off_n, ki * BK], ready.index(slot), b_s.index(slot))


@gluon.jit
def _ws_consumer(a_s, b_s, ready, empty, k_tiles, BM: gl.constexpr, BN: gl.constexpr, STAGES: gl.constexpr):
    dtype: gl.constexpr = a_s.dtype
    acc_layout: gl.constexpr = _acc_layout(gl.num_warps(), BN, dtype)
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=acc_layout)
    for ki in range(k_tiles):
        slot = ki % STAGES
        mbarrier.wait(ready.index(slot), (ki // STAGES) & 1)
        acc = warpgroup_mma(a_s.index(slot), b_s.index(slot).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, a_s.index(slot), b_s.index(slot)))[0]
        mbarrier.arrive(empty.index(slot), count=1)
    return acc


@gluon.jit
def gl_mm_ws(a_desc, b_desc, c_desc, K, STAGES: gl.constexpr):
    """Warp-specialised C = A @ B^T-stored (B [N, K] K-major): producer warp + consumer warpgroup."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    dtype: gl.constexpr = a_desc.dtype
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    a_s = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_s = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    k_tiles = gl.cdiv(K, BK)
    acc = gl.warp_specialize([
        (_ws_consumer, (a_s, b_s, ready, empty, k_tiles, BM, BN, STAGES)),
        (_ws_producer, (a_desc, b_desc, a_s, b_s, ready, empty, off_m, off_n, k_tiles, STAGES, BK)),
    ], [1], [24])
    c_s = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_s.store(acc.to(c_desc.dtype))
    fence_async_shared()
    tma.async_store(c_desc, [off_m, off_n], c_s)
    tma.store_wait(0)
