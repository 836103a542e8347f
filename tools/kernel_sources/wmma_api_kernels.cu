// CUDA wmma API kernels as users write them (issue 19 evidence: in-place, layout-changing and
// chained contracts).  Each warp owns one tile; the CTA is 4 warps on a 2 x 2 grid of tiles.
//
// "inplace" kernels: C is read as the accumulator (row-major, leading dimension N) and the result
// D = A @ B + C is written back through the SAME pointer in column-major order (leading dimension
// M):  C_out[n * M + m] = sum_k A[m][k] B[k][n] + C_in[m * N + n].  With M == N the buffer is square
// and the contract is  C = (A @ B + C).T  read as a row-major M x N array.
//
// "chain" kernels: two or three products flow through one pointer T:
//   chain2_f16:  T = A @ B (f16 accumulator, stored row-major into T); T' = T @ B2 read back from T
//                as matrix_a (row-major) and stored to T again (column-major).
//   chain3_*:    C = A1 @ B1 + C; C = A2 @ B2 + C; C = A3 @ B3 + C, each step reloading C (row-major)
//                from memory and storing it back (row-major, then col-major on the last step).
//
// Launch: one CTA of 128 threads, grid (1, 1, 1), M = 2 * TM and N = 2 * TN (32 x 32 for the
// 16x16 tiles, 16 x 16 for f64 m8n8k4, 64 x 16 for m32n8k16); K any multiple of the tile K.  With
// one CTA the __syncthreads() before a transposed store orders every read of C before any write.
//
//   nvcc -ptx -arch=sm_80 -std=c++17 -O3 wmma_api_kernels.cu      (and -arch=sm_90)
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

using namespace nvcuda;

#define TILE_ORIGIN(TM, TN)                                   \
  int warp = threadIdx.x / 32;                                \
  int m0 = (blockIdx.x * 2 + warp / 2) * (TM);                \
  int n0 = (blockIdx.y * 2 + warp % 2) * (TN);

// ------------------------------------------------------------------------------ f16, m16n16k16
// C: f32, row-major in, column-major out, same pointer.
extern "C" __global__ void __launch_bounds__(128)
wmma_f16_inplace_rowin_colout(const half* A, const half* B, float* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();   // every warp has read its C tile before any tile is overwritten transposed
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// f16 accumulator, f16 C in place (row-major in, column-major out).
extern "C" __global__ void __launch_bounds__(128)
wmma_f16acc_inplace(const half* A, const half* B, half* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::col_major> a;   // A stored (K, M)
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;   // B stored (N, K)
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + k0 * M + m0, M);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// Two products through one pointer T (f16 accumulators, so D can come back as matrix_a):
// T = A @ B (row-major); then T = (T @ B2) stored column-major.  K of the second product is N.
extern "C" __global__ void __launch_bounds__(128)
wmma_f16_chain2(const half* A, const half* B, const half* B2, half* T, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
  wmma::fill_fragment(c, __float2half(0.0f));
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(T + m0 * N + n0, c, N, wmma::mem_row_major);
  __syncthreads();                               // the whole T (this CTA's rows) is written
  wmma::fill_fragment(c, __float2half(0.0f));
  // second product: row block m0 of T (M x N) times B2 (N x N), this warp's column block n0
  for (int k0 = 0; k0 < N; k0 += 16) {
    wmma::load_matrix_sync(a, T + m0 * N + k0, N);
    wmma::load_matrix_sync(b, B2 + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();                               // every warp has read T before it is overwritten
  wmma::store_matrix_sync(T + n0 * M + m0, c, M, wmma::mem_col_major);
}

// ------------------------------------------------------------------------------ bf16, m16n16k16
extern "C" __global__ void __launch_bounds__(128)
wmma_bf16_inplace(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// Three products through the accumulator pointer C: C += A1 @ B1; C += A2 @ B2; C += A3 @ B3.
// A_i = A + i * M * K, B_i = B + i * K * N.  Steps 1 and 2 store row-major, step 3 column-major.
extern "C" __global__ void __launch_bounds__(128)
wmma_bf16_chain3(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  for (int step = 0; step < 3; ++step) {
    const __nv_bfloat16* Ai = A + step * M * K;
    const __nv_bfloat16* Bi = B + step * K * N;
    wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
    for (int k0 = 0; k0 < K; k0 += 16) {
      wmma::load_matrix_sync(a, Ai + m0 * K + k0, K);
      wmma::load_matrix_sync(b, Bi + k0 * N + n0, N);
      wmma::mma_sync(c, a, b, c);
    }
    if (step < 2) {
      wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
      __syncwarp();
    } else {
      __syncthreads();
      wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
    }
  }
}

// ------------------------------------------------------------------------------ tf32, m16n16k8
extern "C" __global__ void __launch_bounds__(128)
wmma_tf32_inplace(const float* A, const float* B, float* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 8) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
    for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// Two tf32 products through one pointer: C = A @ B + C (stored row-major), then
// C = A2 @ B2 + C reloaded and stored column-major.  A2 = A + M*K, B2 = B + K*N.
extern "C" __global__ void __launch_bounds__(128)
wmma_tf32_chain2(const float* A, const float* B, float* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> b;   // B stored (N, K)
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  for (int step = 0; step < 2; ++step) {
    wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
    for (int k0 = 0; k0 < K; k0 += 8) {
      wmma::load_matrix_sync(a, A + step * M * K + m0 * K + k0, K);
      wmma::load_matrix_sync(b, B + step * K * N + n0 * K + k0, K);
      for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
      for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
      wmma::mma_sync(c, a, b, c);
    }
    if (step == 0) {
      wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
      __syncwarp();
    } else {
      __syncthreads();
      wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
    }
  }
}

// ------------------------------------------------------------------------------ s8, m16n16k16
extern "C" __global__ void __launch_bounds__(128)
wmma_s8_inplace(const signed char* A, const signed char* B, int* C, int M, int N, int K) {
  TILE_ORIGIN(16, 16)
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// u8 x u8 -> s32, m32n8k16, C in place, chained twice (A2 = A + M*K, B2 = B + K*N).
extern "C" __global__ void __launch_bounds__(128)
wmma_u8_m32n8k16_chain2(const unsigned char* A, const unsigned char* B, int* C, int M, int N, int K) {
  TILE_ORIGIN(32, 8)
  wmma::fragment<wmma::matrix_a, 32, 8, 16, unsigned char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, unsigned char, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 32, 8, 16, int> c;
  for (int step = 0; step < 2; ++step) {
    wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
    for (int k0 = 0; k0 < K; k0 += 16) {
      wmma::load_matrix_sync(a, A + step * M * K + m0 * K + k0, K);
      wmma::load_matrix_sync(b, B + step * K * N + k0 * N + n0, N);
      wmma::mma_sync(c, a, b, c);
    }
    if (step == 0) {
      wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
      __syncwarp();
    } else {
      __syncthreads();
      wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
    }
  }
}

// ------------------------------------------------------------------------------ f64, m8n8k4
extern "C" __global__ void __launch_bounds__(128)
wmma_f64_inplace(const double* A, const double* B, double* C, int M, int N, int K) {
  TILE_ORIGIN(8, 8)
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 4) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  __syncthreads();
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// f64, A column-major, B column-major, plain C = A @ B (fill 0), stored row-major.
extern "C" __global__ void __launch_bounds__(128)
wmma_f64_colcol(const double* A, const double* B, double* C, int M, int N, int K) {
  TILE_ORIGIN(8, 8)
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::col_major> a;   // A stored (K, M)
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> b;   // B stored (N, K)
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> c;
  wmma::fill_fragment(c, 0.0);
  for (int k0 = 0; k0 < K; k0 += 4) {
    wmma::load_matrix_sync(a, A + k0 * M + m0, M);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}

// Three f64 products through one pointer C (A_i = A + i*M*K, B_i = B + i*K*N), last store column-major.
extern "C" __global__ void __launch_bounds__(128)
wmma_f64_chain3(const double* A, const double* B, double* C, int M, int N, int K) {
  TILE_ORIGIN(8, 8)
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> c;
#pragma unroll 1
  for (int step = 0; step < 3; ++step) {
    wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
    for (int k0 = 0; k0 < K; k0 += 4) {
      wmma::load_matrix_sync(a, A + step * M * K + m0 * K + k0, K);
      wmma::load_matrix_sync(b, B + step * K * N + k0 * N + n0, N);
      wmma::mma_sync(c, a, b, c);
    }
    if (step < 2) {
      wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
      __syncwarp();
    } else {
      __syncthreads();
      wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
    }
  }
}
