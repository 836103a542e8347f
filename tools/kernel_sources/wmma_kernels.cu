// wmma API GEMMs of this project: each warp computes one wmma tile of C = A @ B.
// Warps of a CTA form a 2 x 2 grid of tiles; CTAs tile the rest of C.
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

using namespace nvcuda;

// f16 in, f32 accumulate, m16n16k16. A (M,K) row-major; B (K,N) stored column-major
// (element (k,n) at n*K + k). A and B tiles are staged through shared memory.
extern "C" __global__ void __launch_bounds__(128)
wmma_f16_smem(const half* A, const half* B, float* C, int M, int N, int K) {
  __shared__ alignas(32) half sA[2][16 * 16];   // one 16x16 A tile per warp row
  __shared__ alignas(32) half sB[2][16 * 16];   // one 16x16 B tile per warp column
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int wm = warp / 2, wn = warp % 2;
  int m0 = (blockIdx.x * 2 + wm) * 16, n0 = (blockIdx.y * 2 + wn) * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 16) {
    // warps 0 and 1 stage the A tiles of rows wm = 0/1 ... warps 2 and 3 the B tiles
    if (warp < 2) {
      int r0 = (blockIdx.x * 2 + warp) * 16;
      for (int i = lane; i < 16 * 16; i += 32) sA[warp][i] = A[(r0 + i / 16) * K + k0 + i % 16];
    } else {
      int c0 = (blockIdx.y * 2 + warp - 2) * 16;
      for (int i = lane; i < 16 * 16; i += 32) sB[warp - 2][i] = B[(c0 + i / 16) * K + k0 + i % 16];
    }
    __syncthreads();
    wmma::load_matrix_sync(a, sA[wm], 16);
    wmma::load_matrix_sync(b, sB[wn], 16);
    wmma::mma_sync(c, a, b, c);
    __syncthreads();
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}

// f16 in, f16 accumulate, m32n8k16, fragments straight from global; C stored column-major.
extern "C" __global__ void __launch_bounds__(128)
wmma_f16acc_m32n8k16(const half* A, const half* B, half* C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = (blockIdx.x * 2 + warp / 2) * 32, n0 = (blockIdx.y * 2 + warp % 2) * 8;
  wmma::fragment<wmma::matrix_a, 32, 8, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 32, 8, 16, half> c;
  wmma::fill_fragment(c, __float2half(0.0f));
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + n0 * M + m0, c, M, wmma::mem_col_major);
}

// bf16 in, f32 accumulate, m8n32k16, A stored column-major (element (m,k) at k*M + m).
extern "C" __global__ void __launch_bounds__(128)
wmma_bf16_m8n32k16(const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = (blockIdx.x * 2 + warp / 2) * 8, n0 = (blockIdx.y * 2 + warp % 2) * 32;
  wmma::fragment<wmma::matrix_a, 8, 32, 16, __nv_bfloat16, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 8, 32, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 8, 32, 16, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + k0 * M + m0, M);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}

// f32 in, rounded to tf32 in the fragments, f32 accumulate, m16n16k8.
extern "C" __global__ void __launch_bounds__(128)
wmma_tf32_m16n16k8(const float* A, const float* B, float* C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = (blockIdx.x * 2 + warp / 2) * 16, n0 = (blockIdx.y * 2 + warp % 2) * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k0 = 0; k0 < K; k0 += 8) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + k0 * N + n0, N);
    for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
    for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}

// s8 in, s32 accumulate, m16n16k16; C = A @ B + C (the accumulator starts from C).
extern "C" __global__ void __launch_bounds__(128)
wmma_s8_acc(const signed char* A, const signed char* B, int* C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = (blockIdx.x * 2 + warp / 2) * 16, n0 = (blockIdx.y * 2 + warp % 2) * 16;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
  wmma::load_matrix_sync(c, C + m0 * N + n0, N, wmma::mem_row_major);
  for (int k0 = 0; k0 < K; k0 += 16) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}
