// CuTe GEMMs of this project: C[M,N] (f32) = A[M,K] @ B (f16/bf16), one CTA per BM x BN tile.
// MMA atom SM80_16x8x16 (mma.sync m16n8k16) on a 2x2 warp layout; global -> shared with
// cp.async (128-bit) into swizzled shared tiles; shared -> registers with ldmatrix copy atoms
// (SM75_U32x4_LDSM_N for K-major operands, SM75_U16x8_LDSM_T for an N-major B).
#include <cute/tensor.hpp>

using namespace cute;

// A: (M,K) K-major.  B: (N,K) with strides dB (K-major: C = A @ B^T, N-major: C = A @ B).
template <class T, bool B_KMAJOR>
__device__ void gemm_tile(const T* A, const T* B, float* C, int M, int N, int K) {
  constexpr int BM = 64, BN = 64, BK = 32;
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, Int<1>{}));
  auto dB = [&] {
    if constexpr (B_KMAJOR) return make_stride(K, Int<1>{});
    else return make_stride(Int<1>{}, N);
  }();
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), dB);
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, Int<1>{}));

  auto tiler = make_shape(Int<BM>{}, Int<BN>{}, Int<BK>{});
  auto coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, tiler, coord, Step<_1, X, _1>{});   // (BM,BK,k)
  Tensor gB = local_tile(mB, tiler, coord, Step<X, _1, _1>{});   // (BN,BK,k)
  Tensor gC = local_tile(mC, tiler, coord, Step<_1, _1, X>{});   // (BM,BN)

  // Shared tiles: 64-byte rows (32 halves), XOR-swizzled on 16-byte chunks.
  auto sA_layout = composition(Swizzle<2, 3, 3>{},
                               make_layout(make_shape(Int<BM>{}, Int<BK>{}), make_stride(Int<BK>{}, Int<1>{})));
  auto sB_layout = [&] {
    if constexpr (B_KMAJOR)
      return composition(Swizzle<2, 3, 3>{},
                         make_layout(make_shape(Int<BN>{}, Int<BK>{}), make_stride(Int<BK>{}, Int<1>{})));
    else  // N-major: 128-byte rows of 64 halves along N
      return composition(Swizzle<3, 3, 3>{},
                         make_layout(make_shape(Int<BN>{}, Int<BK>{}), make_stride(Int<1>{}, Int<BN>{})));
  }();
  __shared__ alignas(128) T smemA[BM * BK];
  __shared__ alignas(128) T smemB[BN * BK];
  Tensor sA = make_tensor(make_smem_ptr(smemA), sA_layout);
  Tensor sB = make_tensor(make_smem_ptr(smemB), sB_layout);

  // global -> shared: 128 threads, 8 elements (16 bytes) each per copy
  using G2S = Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS<uint128_t>, T>;
  auto g2sA = make_tiled_copy(G2S{}, Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{});
  auto g2sB = [&] {
    if constexpr (B_KMAJOR)
      return make_tiled_copy(G2S{}, Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{});
    else
      return make_tiled_copy(G2S{}, Layout<Shape<_8, _16>, Stride<_1, _8>>{}, Layout<Shape<_8, _1>>{});
  }();
  auto thrA = g2sA.get_slice(threadIdx.x);
  auto thrB = g2sB.get_slice(threadIdx.x);
  Tensor tAgA = thrA.partition_S(gA);
  Tensor tAsA = thrA.partition_D(sA);
  Tensor tBgB = thrB.partition_S(gB);
  Tensor tBsB = thrB.partition_D(sB);

  using Atom = std::conditional_t<std::is_same_v<T, half_t>, SM80_16x8x16_F32F16F16F32_TN,
                                  SM80_16x8x16_F32BF16BF16F32_TN>;
  TiledMMA mma = make_tiled_mma(Atom{}, Layout<Shape<_2, _2, _1>>{}, Tile<_32, _32, _16>{});
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr_mma.partition_fragment_A(sA);   // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB);
  Tensor tCgC = thr_mma.partition_C(gC);
  Tensor tCrC = thr_mma.make_fragment_C(tCgC);
  clear(tCrC);

  auto s2rA = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, T>{}, mma);
  using LdsmB = std::conditional_t<B_KMAJOR, SM75_U32x4_LDSM_N, SM75_U16x8_LDSM_T>;
  auto s2rB = make_tiled_copy_B(Copy_Atom<LdsmB, T>{}, mma);
  auto s2r_thrA = s2rA.get_slice(threadIdx.x);
  auto s2r_thrB = s2rB.get_slice(threadIdx.x);
  Tensor tXsA = s2r_thrA.partition_S(sA);
  Tensor tXrA = s2r_thrA.retile_D(tCrA);
  Tensor tXsB = s2r_thrB.partition_S(sB);
  Tensor tXrB = s2r_thrB.retile_D(tCrB);

  int k_tiles = size<3>(tAgA);
  for (int kt = 0; kt < k_tiles; ++kt) {
    copy(g2sA, tAgA(_, _, _, kt), tAsA);
    copy(g2sB, tBgB(_, _, _, kt), tBsB);
    cp_async_fence();
    cp_async_wait<0>();
    __syncthreads();
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      copy(s2rA, tXsA(_, _, kb), tXrA(_, _, kb));
      copy(s2rB, tXsB(_, _, kb), tXrB(_, _, kb));
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), tCrC);
    }
    __syncthreads();
  }
  copy(tCrC, tCgC);
}

// C = A @ B^T, A (M,K), B (N,K), both K-major, f16
extern "C" __global__ void __launch_bounds__(128)
cute_gemm_f16_tn(const half_t* A, const half_t* B, float* C, int M, int N, int K) {
  gemm_tile<half_t, true>(A, B, C, M, N, K);
}

// C = A @ B, A (M,K) K-major, B (K,N) N-major (ldmatrix .trans), f16
extern "C" __global__ void __launch_bounds__(128)
cute_gemm_f16_nn(const half_t* A, const half_t* B, float* C, int M, int N, int K) {
  gemm_tile<half_t, false>(A, B, C, M, N, K);
}

// C = A @ B^T, bf16
extern "C" __global__ void __launch_bounds__(128)
cute_gemm_bf16_tn(const bfloat16_t* A, const bfloat16_t* B, float* C, int M, int N, int K) {
  gemm_tile<bfloat16_t, true>(A, B, C, M, N, K);
}
