// In-place and layout-changing wmma API kernels of this project (issue 19): the accumulator C
// is read row-major and the result D written column-major through the same pointer, alone or at
// the end of a chain of two or three products through that pointer.  One warp, one 16x16 tile.
// Compiled by tools/make_wmma_inplace.py (nvcc -ptx, sm_80 and sm_90) into tests/data/kernels_inplace/.
#include <mma.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

using namespace nvcuda;

// D = A @ B + C, C read row-major, D written column-major over C.  A (16,K) and B (K,16) row-major.
#define INPLACE(NAME, T, K, ACC)                                                                   \
  extern "C" __global__ void NAME(const T* A, const T* B, ACC* C) {                                \
    wmma::fragment<wmma::matrix_a, 16, 16, K, T, wmma::row_major> a;                               \
    wmma::fragment<wmma::matrix_b, 16, 16, K, T, wmma::row_major> b;                               \
    wmma::fragment<wmma::accumulator, 16, 16, K, ACC> c;                                           \
    wmma::load_matrix_sync(a, A, K);                                                               \
    wmma::load_matrix_sync(b, B, 16);                                                              \
    wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);                                         \
    wmma::mma_sync(c, a, b, c);                                                                    \
    wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);                                        \
  }

INPLACE(inplace_f16, half, 16, float)
INPLACE(inplace_bf16, __nv_bfloat16, 16, float)
INPLACE(inplace_s8, signed char, 16, int)

// tf32: f32 inputs rounded into the fragments with __float_to_tf32 (the API requires it).
extern "C" __global__ void inplace_tf32(const float* A, const float* B, float* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::load_matrix_sync(a, A, 8);
  wmma::load_matrix_sync(b, B, 16);
  for (int i = 0; i < a.num_elements; i++) a.x[i] = wmma::__float_to_tf32(a.x[i]);
  for (int i = 0; i < b.num_elements; i++) b.x[i] = wmma::__float_to_tf32(b.x[i]);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);
}

// Two products through C: C1 = A0 @ B0 + C stored row-major into C, read back, D = A1 @ B1 + C1
// stored column-major into C.
#define CHAIN2(NAME, T, K, ACC)                                                                    \
  extern "C" __global__ void NAME(const T* A0, const T* B0, const T* A1, const T* B1, ACC* C) {    \
    wmma::fragment<wmma::matrix_a, 16, 16, K, T, wmma::row_major> a;                               \
    wmma::fragment<wmma::matrix_b, 16, 16, K, T, wmma::row_major> b;                               \
    wmma::fragment<wmma::accumulator, 16, 16, K, ACC> c;                                           \
    wmma::load_matrix_sync(a, A0, K);                                                              \
    wmma::load_matrix_sync(b, B0, 16);                                                             \
    wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);                                         \
    wmma::mma_sync(c, a, b, c);                                                                    \
    wmma::store_matrix_sync(C, c, 16, wmma::mem_row_major);                                        \
    __syncwarp();                                                                                  \
    wmma::load_matrix_sync(a, A1, K);                                                              \
    wmma::load_matrix_sync(b, B1, 16);                                                             \
    wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);                                         \
    wmma::mma_sync(c, a, b, c);                                                                    \
    wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);                                        \
  }

CHAIN2(chain2_f16, half, 16, float)
CHAIN2(chain2_bf16, __nv_bfloat16, 16, float)
CHAIN2(chain2_s8, signed char, 16, int)

// Three products with the same A and B: two chained in registers, the third after a round trip
// through C; the result stored column-major over C.
extern "C" __global__ void chain3_f16(const half* A, const half* B, float* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, 16, wmma::mem_row_major);
  __syncwarp();
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(C, c, 16, wmma::mem_col_major);
}

// Two products with both steps' operands stacked in one buffer each: A = [A0; A1] (2 x 16 x 16),
// B = [B0; B1]; C1 = A0 @ B0 + C stored row-major into C, D = A1 @ B1 + C1 column-major over it.
extern "C" __global__ void stacked_f16(const half* A, const half* B, float* C) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
  for (int step = 0; step < 2; ++step) {
    wmma::load_matrix_sync(a, A + step * 256, 16);
    wmma::load_matrix_sync(b, B + step * 256, 16);
    wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(C, c, 16, step == 0 ? wmma::mem_row_major : wmma::mem_col_major);
    __syncwarp();
  }
}

// The result of one product is the next one's A operand through the same pointer: T1 = A @ B
// (f16 accumulator) stored row-major into T, read back as matrix_a, D = T1 @ B2 stored
// column-major over T.
extern "C" __global__ void operand_chain_f16(const half* A, const half* B, const half* B2, half* T) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, half> c;
  wmma::fill_fragment(c, __float2half(0.0f));
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(T, c, 16, wmma::mem_row_major);
  __syncwarp();
  wmma::fill_fragment(c, __float2half(0.0f));
  wmma::load_matrix_sync(a, T, 16);
  wmma::load_matrix_sync(b, B2, 16);
  wmma::mma_sync(c, a, b, c);
  __syncwarp();
  wmma::store_matrix_sync(T, c, 16, wmma::mem_col_major);
}
