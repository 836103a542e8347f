// Host-only probe for cute_sm90.cu (never launches anything, needs no GPU): builds each kernel's
// TMA atoms exactly as a host launcher would and prints, as JSON, the arguments CuTe passes to
// cuTensorMapEncodeTiled (intercepted by the definition below), the size/alignment of each TMA
// parameter and where the CUtensorMap sits in it, and each kernel's dynamic shared memory bytes.
//
//   nvcc -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL \
//        -I <cutlass>/include -o probe cute_sm90_probe.cu && ./probe
#ifndef CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL
#define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL 1
#endif
#include "cute_sm90.cu"
#include <cstdio>
#include <cstring>

static bool g_first_map = true;

extern "C" CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank,
                                           void* addr, const cuuint64_t* dim, const cuuint64_t* strides,
                                           const cuuint32_t* box, const cuuint32_t* estrides,
                                           CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                           CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  std::memset(map, 0, sizeof(*map));
  printf("%s{\"tensorDataType\": %d, \"tensorRank\": %u, \"globalAddress\": %llu, \"globalDim\": [",
         g_first_map ? "" : ", ", int(dtype), rank, (unsigned long long)addr);
  g_first_map = false;
  for (cuuint32_t i = 0; i < rank; ++i) printf("%s%llu", i ? ", " : "", (unsigned long long)dim[i]);
  printf("], \"globalStrides_bytes\": [");
  for (cuuint32_t i = 0; i + 1 < rank; ++i) printf("%s%llu", i ? ", " : "", (unsigned long long)strides[i]);
  printf("], \"boxDim\": [");
  for (cuuint32_t i = 0; i < rank; ++i) printf("%s%u", i ? ", " : "", box[i]);
  printf("], \"elementStrides\": [");
  for (cuuint32_t i = 0; i < rank; ++i) printf("%s%u", i ? ", " : "", estrides[i]);
  printf("], \"interleave\": %d, \"swizzle\": %d, \"l2Promotion\": %d, \"oobFill\": %d}", int(il), int(sw), int(l2),
         int(oob));
  return CUDA_SUCCESS;
}

template <class Atom>
void param_info(const char* name, Atom const& atom) {
  printf("\"%s\": {\"sizeof\": %zu, \"alignof\": %zu, \"tensormap_offset\": %td}", name, sizeof(Atom), alignof(Atom),
         (char const*)atom.get_tma_descriptor() - (char const*)&atom);
}

template <class T, class SmemA, class SmemB, class BM, class BN, class BK, class TmaA, class TmaB, class Smem,
          int McastB = 1>
void probe(const char* kernel, int M, int N, int K, bool last) {
  T const* A = reinterpret_cast<T const*>(0x10000000ull);   // stand-in addresses (never dereferenced)
  T const* B = reinterpret_cast<T const*>(0x20000000ull);
  auto mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, _1{}));
  auto mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, _1{}));
  printf("\"%s\": {\"M\": %d, \"N\": %d, \"K\": %d, \"tensormaps\": [", kernel, M, N, K);
  g_first_map = true;
  auto ta = make_tma_atom(SM90_TMA_LOAD{}, mA, SmemA{}(_, _, 0), Shape<BM, BK>{});
  auto tb = [&] {
    if constexpr (McastB > 1)
      return make_tma_atom(SM90_TMA_LOAD_MULTICAST{}, mB, SmemB{}(_, _, 0), Shape<BN, BK>{}, Int<McastB>{});
    else
      return make_tma_atom(SM90_TMA_LOAD{}, mB, SmemB{}(_, _, 0), Shape<BN, BK>{});
  }();
  static_assert(std::is_same_v<decltype(ta), TmaA>, "TmaA type differs from the kernel's");
  static_assert(std::is_same_v<decltype(tb), TmaB>, "TmaB type differs from the kernel's");
  printf("], ");
  param_info("param_0", ta);
  printf(", ");
  param_info("param_1", tb);
  printf(", \"dynamic_smem_bytes\": %zu, \"tma_bytes_per_stage\": %d}%s\n", sizeof(Smem),
         int(size(BM{}) * size(BK{}) * sizeof(T) + size(BN{}) * size(BK{}) * sizeof(T)), last ? "" : ",");
}

int main() {
  printf("{\n");
  probe<half_t, k3::SmemA, k3::SmemB, k3::BM, k3::BN, k3::BK, k3::TmaA, k3::TmaB, k3::Smem>("cute_tma_pipe_f16", 256, 256, 512, false);
  probe<bf16_t, k4::SmemA, k4::SmemB, k4::BM, k4::BN, k4::BK, k4::TmaA, k4::TmaB, k4::Smem>("cute_tma_ws_bf16", 256, 256, 512, false);
  probe<e4m3_t, k5::SmemA, k5::SmemB, k5::BM, k5::BN, k5::BK, k5::TmaA, k5::TmaB, k5::Smem>("cute_tma_fp8", 128, 256, 1024, false);
  probe<half_t, k7::SmemA, k7::SmemB, k7::BM, k7::BN, k7::BK, k7::TmaA, k7::TmaB, k7::Smem, 2>("cute_tma_mcast_f16", 512, 256, 512, false);
  printf("\"static_smem\": {\"cute_gmma_ss_f16\": %zu, \"cute_gmma_rs_f16\": %zu, \"cute_gmma_ss_f16_mn\": %zu}\n",
         sizeof(k1::Smem), sizeof(k2::Smem), sizeof(k6::Smem));
  printf("}\n");
  return 0;
}
