// wmma API with doubles (m8n8k4, sm_80+): one warp per 8x8 tile of C = A @ B.
// A (M,K) row-major, B (K,N) stored column-major (element (k,n) at n*K + k), C (M,N) row-major.
#include <mma.h>

using namespace nvcuda;

extern "C" __global__ void __launch_bounds__(64)
wmma_f64(const double* A, const double* B, double* C, int M, int N, int K) {
  int warp = threadIdx.x / 32;
  int m0 = blockIdx.x * 8, n0 = (blockIdx.y * 2 + warp) * 8;
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> c;
  wmma::fill_fragment(c, 0.0);
  for (int k0 = 0; k0 < K; k0 += 4) {
    wmma::load_matrix_sync(a, A + m0 * K + k0, K);
    wmma::load_matrix_sync(b, B + n0 * K + k0, K);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + m0 * N + n0, c, N, wmma::mem_row_major);
}
