// CuTe SM90 GEMMs of this project (Hopper corpus, issue 21): wgmma through CuTe's GMMA atoms,
// shared-memory descriptors built from GMMA swizzled layouts, TMA loads with mbarriers, a
// warp-specialised producer/consumer pipeline, fp8.
//
//   nvcc -ptx -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -O3 -I <cutlass>/include cute_sm90.cu
//
// Every kernel computes C[M, N] (f32, row-major, ldC = N) = A[M, K] @ B[N, K]^T with A and B stored
// K-major (row-major A (M, K), row-major B (N, K)) unless its comment says otherwise.  The kernels
// are extern "C" so the PTX entries and parameters keep readable names; TMA parameters are CuTe
// TMA copy atoms passed by value (__grid_constant__): bytes 0..127 are the CUtensorMap the host
// builds with cuTensorMapEncodeTiled (cute_sm90_probe.cu prints dims, strides, box, swizzle).
// -DCUTE_SM90_ONLY=n keeps only kernel n (1..7) so each can be its own module.
#include <cute/tensor.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/copy_atom.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>
#include <cutlass/numeric_types.h>

using namespace cute;
using half_t = cutlass::half_t;
using bf16_t = cutlass::bfloat16_t;
using e4m3_t = cutlass::float_e4m3_t;

// ----------------------------------------------------------------------------------- helpers

// Generic-proxy copy of a (BM, BK) K-major tile into a swizzled shared layout, 16 bytes a thread.
template <class T, int NThreads, class GTensor, class STensor>
__device__ void copy_tile_generic(GTensor const& g, STensor& s) {
  constexpr int kVec = 16 / sizeof(T);
  using Vec = uint128_t;
  auto tiled = make_tiled_copy(Copy_Atom<UniversalCopy<Vec>, T>{},
                               Layout<Shape<Int<NThreads * kVec / size<1>(STensor{})>, Int<size<1>(STensor{}) / kVec>>,
                                      Stride<Int<size<1>(STensor{}) / kVec>, _1>>{},
                               Layout<Shape<_1, Int<kVec>>>{});
  auto thr = tiled.get_thread_slice(threadIdx.x % NThreads);
  copy(tiled, thr.partition_S(g), thr.partition_D(s));
}

// ======================================================================================
// 1. SS wgmma, operands staged by threads (generic proxy) + fence.proxy.async; one warpgroup.
//    SM90_64x64x16_F32F16F16_SS, K-major SW128 shared tiles, CTA tile 64 x 64 x 64.
// ======================================================================================
namespace k1 {
using BM = _64; using BN = _64; using BK = _64;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BM, BK>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BN, BK>{}));
using Mma = decltype(make_tiled_mma(SM90_64x64x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{}));
struct alignas(1024) Smem {
  alignas(1024) half_t A[cosize_v<SmemA>];
  alignas(1024) half_t B[cosize_v<SmemB>];
};
}  // namespace k1

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 1   // cute_gmma_ss_f16
extern "C" __global__ void __launch_bounds__(128)
cute_gmma_ss_f16(half_t const* A, half_t const* B, float* C, int M, int N, int K) {
  using namespace k1;
  __shared__ Smem smem;
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, _1{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, _1{}));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});   // (BM, BK, k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});   // (BN, BK, k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});   // (BM, BN)
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});

  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);     // smem descriptors
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);

  int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy_tile_generic<half_t, 128>(gA(_, _, kt), sA);
    copy_tile_generic<half_t, 128>(gB(_, _, kt), sB);
    cutlass::arch::fence_view_async_shared();   // generic-proxy writes -> async-proxy (wgmma) reads
    __syncthreads();
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA, tCrB, acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    __syncthreads();                            // every wgmma has read sA/sB before the next copy
  }
  copy(acc, tCgC);
}

#endif
// ======================================================================================
// 2. Same data path, A from registers: SM90_64x64x16_F32F16F16_RS (register-A wgmma).
//    A is read shared -> registers with plain loads after the tile is staged.
// ======================================================================================
namespace k2 {
using BM = _64; using BN = _64; using BK = _64;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BM, BK>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BN, BK>{}));
using Mma = decltype(make_tiled_mma(SM90_64x64x16_F32F16F16_RS<GMMA::Major::K, GMMA::Major::K>{}));
struct alignas(1024) Smem {
  alignas(1024) half_t A[cosize_v<SmemA>];
  alignas(1024) half_t B[cosize_v<SmemB>];
};
}  // namespace k2

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 2   // cute_gmma_rs_f16
extern "C" __global__ void __launch_bounds__(128)
cute_gmma_rs_f16(half_t const* A, half_t const* B, float* C, int M, int N, int K) {
  using namespace k2;
  __shared__ Smem smem;
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, _1{}));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, _1{}));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});

  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);     // registers
  Tensor tCrB = thr.make_fragment_B(tCsB);     // smem descriptors
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);

  int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy_tile_generic<half_t, 128>(gA(_, _, kt), sA);
    copy_tile_generic<half_t, 128>(gB(_, _, kt), sB);
    cutlass::arch::fence_view_async_shared();
    __syncthreads();
    copy(tCsA, tCrA);                           // shared -> registers (generic loads)
    warpgroup_fence_operand(tCrA);
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA, tCrB, acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    warpgroup_fence_operand(tCrA);
    __syncthreads();
  }
  copy(acc, tCgC);
}

#endif
// ======================================================================================
// 3. TMA + mbarrier pipeline (3 stages), two consumer warpgroups (2x1 tiled 64x128x16 atoms),
//    CTA tile 128 x 128 x 64; thread 0 of warp 0 issues TMA; a consumer mbarrier per stage.
//    Launched in clusters of 2 x 1 x 1 (cluster_sync after mbarrier init; no multicast).
// ======================================================================================
namespace k3 {
using BM = _128; using BN = _128; using BK = _64; using PIPE = _3;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BM, BK, PIPE>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BN, BK, PIPE>{}));
using Mma = decltype(make_tiled_mma(SM90_64x128x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                    Layout<Shape<_2, _1, _1>>{}));
using GA = decltype(make_tensor(make_gmem_ptr((half_t const*)nullptr), make_shape(int(), int()),
                                make_stride(int(), _1{})));
using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemA{}(_, _, 0), Shape<BM, BK>{}));
using TmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemB{}(_, _, 0), Shape<BN, BK>{}));
struct alignas(1024) Smem {
  alignas(1024) half_t A[cosize_v<SmemA>];
  alignas(1024) half_t B[cosize_v<SmemB>];
  uint64_t full[PIPE::value];
  uint64_t empty[PIPE::value];
};
}  // namespace k3

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 3   // cute_tma_pipe_f16
extern "C" __global__ void __launch_bounds__(256)
cute_tma_pipe_f16(CUTE_GRID_CONSTANT k3::TmaA const tma_a, CUTE_GRID_CONSTANT k3::TmaB const tma_b,
                  float* C, int M, int N, int K) {
  using namespace k3;
  extern __shared__ __align__(1024) char smem_raw[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_raw);
  Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));
  Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
  constexpr int kTx = sizeof(make_tensor_like(tensor<0>(tAsA))) + sizeof(make_tensor_like(tensor<0>(tBsB)));

  using Full = cutlass::arch::ClusterTransactionBarrier;
  using Empty = cutlass::arch::ClusterBarrier;
  int warp = cutlass::canonical_warp_idx_sync();
  bool leader = (warp == 0) && cute::elect_one_sync();
  if (leader) {
    for (int p = 0; p < PIPE::value; ++p) {
      Full::init(&smem.full[p], 1);
      Empty::init(&smem.empty[p], 256);
    }
  }
  cluster_sync();

  int k_tiles = size<1>(tAgA);
  int k_load = 0;
  for (int p = 0; p < PIPE::value && p < k_tiles; ++p, ++k_load) {
    if (leader) {
      Full::arrive_and_expect_tx(&smem.full[p], kTx);
      copy(tma_a.with(smem.full[p]), tAgA(_, k_load), tAsA(_, p));
      copy(tma_b.with(smem.full[p]), tBgB(_, k_load), tBsB(_, p));
    }
  }

  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);

  auto rd = cutlass::PipelineState<PIPE::value>();
  auto wr = cutlass::PipelineState<PIPE::value>();
  for (int kt = 0; kt < k_tiles; ++kt) {
    int s = rd.index();
    Full::wait(&smem.full[s], rd.phase());
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    Empty::arrive(&smem.empty[s]);
    ++rd;
    if (leader && k_load < k_tiles) {
      int w = wr.index();
      Empty::wait(&smem.empty[w], wr.phase());
      Full::arrive_and_expect_tx(&smem.full[w], kTx);
      copy(tma_a.with(smem.full[w]), tAgA(_, k_load), tAsA(_, w));
      copy(tma_b.with(smem.full[w]), tBgB(_, k_load), tBsB(_, w));
      ++wr;
      ++k_load;
    }
  }
  copy(acc, tCgC);
}

#endif
// ======================================================================================
// 4. Warp-specialised: warpgroup 0 = producer (setmaxnreg.dec, one elected thread issues TMA),
//    warpgroups 1 and 2 = consumers (setmaxnreg.inc), 4-stage full/empty mbarrier ring.
//    bf16, CTA tile 128 x 128 x 64, 384 threads.  The consumers keep one wgmma batch in flight
//    (warpgroup_wait<1>) and release the previous stage.
// ======================================================================================
namespace k4 {
using BM = _128; using BN = _128; using BK = _64; using PIPE = _4;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16_t>{}, Shape<BM, BK, PIPE>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<bf16_t>{}, Shape<BN, BK, PIPE>{}));
using Mma = decltype(make_tiled_mma(SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                    Layout<Shape<_2, _1, _1>>{}));
using GA = decltype(make_tensor(make_gmem_ptr((bf16_t const*)nullptr), make_shape(int(), int()),
                                make_stride(int(), _1{})));
using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemA{}(_, _, 0), Shape<BM, BK>{}));
using TmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemB{}(_, _, 0), Shape<BN, BK>{}));
struct alignas(1024) Smem {
  alignas(1024) bf16_t A[cosize_v<SmemA>];
  alignas(1024) bf16_t B[cosize_v<SmemB>];
  uint64_t full[PIPE::value];
  uint64_t empty[PIPE::value];
};
}  // namespace k4

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 4   // cute_tma_ws_bf16
extern "C" __global__ void __launch_bounds__(384, 1)
cute_tma_ws_bf16(CUTE_GRID_CONSTANT k4::TmaA const tma_a, CUTE_GRID_CONSTANT k4::TmaB const tma_b,
                 float* C, int M, int N, int K) {
  using namespace k4;
  extern __shared__ __align__(1024) char smem_raw[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_raw);
  Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));
  Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});

  using Full = cutlass::arch::ClusterTransactionBarrier;
  using Empty = cutlass::arch::ClusterBarrier;
  int warp = cutlass::canonical_warp_idx_sync();
  int wg = cutlass::canonical_warp_group_idx();
  if (warp == 0 && cute::elect_one_sync()) {
    for (int p = 0; p < PIPE::value; ++p) {
      Full::init(&smem.full[p], 1);
      Empty::init(&smem.empty[p], 2);          // one arrive per consumer warpgroup
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  int k_tiles = size<2>(gA);

  if (wg == 0) {                                // producer
    cutlass::arch::warpgroup_reg_dealloc<40>();
    auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
    auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
    constexpr int kTx = sizeof(make_tensor_like(tensor<0>(tAsA))) + sizeof(make_tensor_like(tensor<0>(tBsB)));
    if (warp == 0 && cute::elect_one_sync()) {
      auto wr = cutlass::PipelineState<PIPE::value>();
      for (int kt = 0; kt < k_tiles; ++kt) {
        int s = wr.index();
        Empty::wait(&smem.empty[s], wr.phase() ^ 1);   // first pass over the ring does not wait
        Full::arrive_and_expect_tx(&smem.full[s], kTx);
        copy(tma_a.with(smem.full[s]), tAgA(_, kt), tAsA(_, s));
        copy(tma_b.with(smem.full[s]), tBgB(_, kt), tBsB(_, s));
        ++wr;
      }
    }
  } else {                                      // consumers: threads 128..383
    cutlass::arch::warpgroup_reg_alloc<232>();
    Mma mma;
    auto thr = mma.get_thread_slice(threadIdx.x - 128);
    Tensor tCsA = thr.partition_A(sA);
    Tensor tCsB = thr.partition_B(sB);
    Tensor tCgC = thr.partition_C(gC);
    Tensor tCrA = thr.make_fragment_A(tCsA);
    Tensor tCrB = thr.make_fragment_B(tCsB);
    Tensor acc = thr.make_fragment_C(tCgC);
    clear(acc);
    auto rd = cutlass::PipelineState<PIPE::value>();
    int prev = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      int s = rd.index();
      Full::wait(&smem.full[s], rd.phase());
      warpgroup_fence_operand(acc);
      warpgroup_arrive();
      gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);
      warpgroup_commit_batch();
      warpgroup_wait<1>();                      // the previous batch is done: release its stage
      warpgroup_fence_operand(acc);
      if (prev >= 0 && cutlass::canonical_lane_idx() == 0 && (threadIdx.x % 128) == 0) Empty::arrive(&smem.empty[prev]);
      prev = s;
      ++rd;
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    copy(acc, tCgC);
  }
}

#endif
// ======================================================================================
// 5. fp8: e4m3 x e4m3 -> f32 with SM90_64x128x32_F32E4M3E4M3_SS_TN (K-major only), TMA,
//    3-stage pipeline as kernel 3 but one warpgroup; CTA tile 64 x 128 x 128.
// ======================================================================================
namespace k5 {
using BM = _64; using BN = _128; using BK = _128; using PIPE = _3;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<e4m3_t>{}, Shape<BM, BK, PIPE>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<e4m3_t>{}, Shape<BN, BK, PIPE>{}));
using Mma = decltype(make_tiled_mma(SM90_64x128x32_F32E4M3E4M3_SS_TN<>{}));
using GA = decltype(make_tensor(make_gmem_ptr((e4m3_t const*)nullptr), make_shape(int(), int()),
                                make_stride(int(), _1{})));
using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemA{}(_, _, 0), Shape<BM, BK>{}));
using TmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemB{}(_, _, 0), Shape<BN, BK>{}));
struct alignas(1024) Smem {
  alignas(1024) e4m3_t A[cosize_v<SmemA>];
  alignas(1024) e4m3_t B[cosize_v<SmemB>];
  uint64_t full[PIPE::value];
  uint64_t empty[PIPE::value];
};
}  // namespace k5

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 5   // cute_tma_fp8
extern "C" __global__ void __launch_bounds__(128)
cute_tma_fp8(CUTE_GRID_CONSTANT k5::TmaA const tma_a, CUTE_GRID_CONSTANT k5::TmaB const tma_b,
             float* C, int M, int N, int K) {
  using namespace k5;
  extern __shared__ __align__(1024) char smem_raw[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_raw);
  Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));
  Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
  constexpr int kTx = sizeof(make_tensor_like(tensor<0>(tAsA))) + sizeof(make_tensor_like(tensor<0>(tBsB)));

  using Full = cutlass::arch::ClusterTransactionBarrier;
  using Empty = cutlass::arch::ClusterBarrier;
  bool leader = (cutlass::canonical_warp_idx_sync() == 0) && cute::elect_one_sync();
  if (leader) {
    for (int p = 0; p < PIPE::value; ++p) {
      Full::init(&smem.full[p], 1);
      Empty::init(&smem.empty[p], 128);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();
  int k_tiles = size<1>(tAgA);
  int k_load = 0;
  for (int p = 0; p < PIPE::value && p < k_tiles; ++p, ++k_load) {
    if (leader) {
      Full::arrive_and_expect_tx(&smem.full[p], kTx);
      copy(tma_a.with(smem.full[p]), tAgA(_, k_load), tAsA(_, p));
      copy(tma_b.with(smem.full[p]), tBgB(_, k_load), tBsB(_, p));
    }
  }
  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);
  auto rd = cutlass::PipelineState<PIPE::value>();
  auto wr = cutlass::PipelineState<PIPE::value>();
  for (int kt = 0; kt < k_tiles; ++kt) {
    int s = rd.index();
    Full::wait(&smem.full[s], rd.phase());
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    Empty::arrive(&smem.empty[s]);
    ++rd;
    if (leader && k_load < k_tiles) {
      int w = wr.index();
      Empty::wait(&smem.empty[w], wr.phase());
      Full::arrive_and_expect_tx(&smem.full[w], kTx);
      copy(tma_a.with(smem.full[w]), tAgA(_, k_load), tAsA(_, w));
      copy(tma_b.with(smem.full[w]), tBgB(_, k_load), tBsB(_, w));
      ++wr;
      ++k_load;
    }
  }
  copy(acc, tCgC);
}

#endif
// ======================================================================================
// 6. MN-major operands: A stored (K, M) (M contiguous), B stored (K, N) (N contiguous), i.e.
//    C = A^T-stored @ B as a row-major GEMM C = A @ B with A given column-major.  SW64 MN-major
//    shared atoms, SM90_64x64x16_F32F16F16_SS<MN, MN>, generic-proxy staging, CTA tile 64x64x32.
// ======================================================================================
namespace k6 {
using BM = _64; using BN = _64; using BK = _32;
using SmemA = decltype(tile_to_shape(GMMA::Layout_MN_SW64_Atom<half_t>{}, Shape<BM, BK>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_MN_SW64_Atom<half_t>{}, Shape<BN, BK>{}));
using Mma = decltype(make_tiled_mma(SM90_64x64x16_F32F16F16_SS<GMMA::Major::MN, GMMA::Major::MN>{}));
struct alignas(1024) Smem {
  alignas(1024) half_t A[cosize_v<SmemA>];
  alignas(1024) half_t B[cosize_v<SmemB>];
};
}  // namespace k6

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 6   // cute_gmma_ss_f16_mn
extern "C" __global__ void __launch_bounds__(128)
cute_gmma_ss_f16_mn(half_t const* A, half_t const* B, float* C, int M, int N, int K) {
  using namespace k6;
  __shared__ Smem smem;
  // A: (M, K) with strides (1, M); B: (N, K) with strides (1, N)
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(_1{}, M));
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(_1{}, N));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});
  // 8 contiguous M (or N) elements per thread: 64 x 32 tile = 256 vectors, 2 per thread
  auto cp = make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, half_t>{},
                            Layout<Shape<_8, _16>, Stride<_1, _8>>{}, Layout<Shape<_8, _1>>{});
  auto thr_cp = cp.get_thread_slice(threadIdx.x);

  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);
  int k_tiles = size<2>(gA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy(cp, thr_cp.partition_S(gA(_, _, kt)), thr_cp.partition_D(sA));
    copy(cp, thr_cp.partition_S(gB(_, _, kt)), thr_cp.partition_D(sB));
    cutlass::arch::fence_view_async_shared();
    __syncthreads();
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA, tCrB, acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    __syncthreads();
  }
  copy(acc, tCgC);
}
#endif

// ======================================================================================
// 7. TMA multicast in a cluster of 2 x 1 x 1: the two CTAs of a cluster compute M tiles
//    2c and 2c+1 of the same N tile, so they share B: each CTA loads half of the B tile
//    (SM90_TMA_LOAD_MULTICAST, mask 0b11) into the shared memory of both CTAs.  A stage's B
//    buffer is written by both CTAs, so a stage is released to the producers only when the
//    consumers of both CTAs are done: every consumer thread arrives on its own CTA's and the
//    peer's empty barrier (mapa + mbarrier.arrive.shared::cluster).  f16, CTA tile 128x128x64,
//    3 stages, two consumer warpgroups.  cluster_sync after init and before exit.
// ======================================================================================
namespace k7 {
using BM = _128; using BN = _128; using BK = _64; using PIPE = _3;
using SmemA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BM, BK, PIPE>{}));
using SmemB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<BN, BK, PIPE>{}));
using Mma = decltype(make_tiled_mma(SM90_64x128x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                    Layout<Shape<_2, _1, _1>>{}));
using GA = decltype(make_tensor(make_gmem_ptr((half_t const*)nullptr), make_shape(int(), int()),
                                make_stride(int(), _1{})));
using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GA>(), SmemA{}(_, _, 0), Shape<BM, BK>{}));
using TmaB = decltype(make_tma_atom(SM90_TMA_LOAD_MULTICAST{}, std::declval<GA>(), SmemB{}(_, _, 0),
                                    Shape<BN, BK>{}, _2{}));
constexpr int kTx = (BM::value + BN::value) * BK::value * sizeof(half_t);   // A tile + whole B tile
struct alignas(1024) Smem {
  alignas(1024) half_t A[cosize_v<SmemA>];
  alignas(1024) half_t B[cosize_v<SmemB>];
  uint64_t full[PIPE::value];
  uint64_t empty[PIPE::value];
};
}  // namespace k7

#if !defined(CUTE_SM90_ONLY) || CUTE_SM90_ONLY == 7   // cute_tma_mcast_f16
extern "C" __global__ void __launch_bounds__(256) __cluster_dims__(2, 1, 1)
cute_tma_mcast_f16(CUTE_GRID_CONSTANT k7::TmaA const tma_a, CUTE_GRID_CONSTANT k7::TmaB const tma_b,
                   float* C, int M, int N, int K) {
  using namespace k7;
  extern __shared__ __align__(1024) char smem_raw[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_raw);
  Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));
  Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));
  auto tiler = Shape<BM, BN, BK>{};
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});
  Tensor sA = make_tensor(make_smem_ptr(smem.A), SmemA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.B), SmemB{});
  uint32_t rank = cute::block_rank_in_cluster();          // 0 or 1: which half of B this CTA loads
  auto [tAgA, tAsA] = tma_partition(tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA), group_modes<0, 2>(gA));
  auto [tBgB, tBsB] = tma_partition(tma_b, rank, Layout<_2>{}, group_modes<0, 2>(sB), group_modes<0, 2>(gB));
  uint16_t mcast = 0b11;

  using Full = cutlass::arch::ClusterTransactionBarrier;
  using Empty = cutlass::arch::ClusterBarrier;
  bool leader = (cutlass::canonical_warp_idx_sync() == 0) && cute::elect_one_sync();
  if (leader) {
    for (int p = 0; p < PIPE::value; ++p) {
      Full::init(&smem.full[p], 1);
      Empty::init(&smem.empty[p], 2 * 256);   // every consumer thread of both CTAs
    }
    cutlass::arch::fence_barrier_init();
  }
  cluster_sync();                              // both CTAs' barriers exist before any multicast

  int k_tiles = size<1>(tAgA);
  int k_load = 0;
  for (int p = 0; p < PIPE::value && p < k_tiles; ++p, ++k_load) {
    if (leader) {
      Full::arrive_and_expect_tx(&smem.full[p], kTx);
      copy(tma_a.with(smem.full[p]), tAgA(_, k_load), tAsA(_, p));
      copy(tma_b.with(smem.full[p], mcast), tBgB(_, k_load), tBsB(_, p));
    }
  }
  Mma mma;
  auto thr = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr.partition_A(sA);
  Tensor tCsB = thr.partition_B(sB);
  Tensor tCgC = thr.partition_C(gC);
  Tensor tCrA = thr.make_fragment_A(tCsA);
  Tensor tCrB = thr.make_fragment_B(tCsB);
  Tensor acc = thr.make_fragment_C(tCgC);
  clear(acc);
  auto rd = cutlass::PipelineState<PIPE::value>();
  auto wr = cutlass::PipelineState<PIPE::value>();
  for (int kt = 0; kt < k_tiles; ++kt) {
    int s = rd.index();
    Full::wait(&smem.full[s], rd.phase());
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrA(_, _, _, s), tCrB(_, _, _, s), acc);
    warpgroup_commit_batch();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    Empty::arrive(&smem.empty[s], 0u, 1u);     // release the stage in both CTAs of the cluster
    Empty::arrive(&smem.empty[s], 1u, 1u);
    ++rd;
    if (leader && k_load < k_tiles) {
      int w = wr.index();
      Empty::wait(&smem.empty[w], wr.phase());
      Full::arrive_and_expect_tx(&smem.full[w], kTx);
      copy(tma_a.with(smem.full[w]), tAgA(_, k_load), tAsA(_, w));
      copy(tma_b.with(smem.full[w], mcast), tBgB(_, k_load), tBsB(_, w));
      ++wr;
      ++k_load;
    }
  }
  copy(acc, tCgC);
  cluster_sync();                              // no CTA exits while its peer may still arrive on its barriers
}
#endif
