// Test-only: one warpgroup runs each wgmma form the flash kernels use, on one tile, so a
// wrong descriptor or swizzle shows up as a wrong matrix product rather than as a wrong
// attention output somewhere in a long kernel (flash_attention_test.cpp, WgmmaLayouts).
//   S = A B^T     A [64 x D], B [N x D] row-major: ss, both K-major      (as S = Q K^T)
//   O = bf16(S) V V [N x D] row-major: rs_mn, A from registers, B MN-major (as O = P V)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "wgmma.cuh"
#include "wgmma_probe.hpp"

namespace kernels::flash::detail {
namespace {

template <int N, int D>
__global__ void __launch_bounds__(128) wgmma_probe_kernel(const std::uint16_t* a, const std::uint16_t* b,
                                                          const std::uint16_t* v, float* s_out, float* o_out,
                                                          std::uint32_t mn_lbo, std::uint32_t mn_sbo) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sA = sm90::align_1024(smem_raw);
  std::uint8_t* sB = sA + 64 * D * 2;
  std::uint8_t* sV = sB + N * D * 2;
  const int tid = threadIdx.x, warp = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  sm90::load_tile_sw128<64, D, 128>(sA, a, D, 64, D, tid);
  sm90::load_tile_sw128<N, D, 128>(sB, b, D, N, D, tid);
  sm90::load_tile_sw128<N, D, 128>(sV, v, D, N, D, tid);
  cp_async_commit();
  cp_async_wait_all();
  sm90::fence_proxy_async();
  __syncthreads();

  float s[N / 2];
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    sm90::Wgmma<__nv_bfloat16, N>::ss(s, sm90::k_major<64>(smem_addr(sA), 0, kk),
                                      sm90::k_major<N>(smem_addr(sB), 0, kk), kk > 0);
  sm90::wgmma_commit();
  sm90::wgmma_wait_all();
  sm90::pin(s);
  for (int i = 0; i < N / 8; ++i)
    for (int e = 0; e < 4; ++e) s_out[(16 * warp + g + 8 * (e >> 1)) * N + 8 * i + 2 * t + (e & 1)] = s[4 * i + e];

  std::uint32_t p[N / 16][4];
  sm90::to_a_fragments<__nv_bfloat16, N>(p, s);
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk)
    sm90::Wgmma<__nv_bfloat16, D>::rs_mn(
        o, p[kk], sm90::descriptor(smem_addr(sV) + sw128::mn_major_start(kk), mn_lbo, mn_sbo), 1);
  sm90::wgmma_commit();
  sm90::wgmma_wait_all();
  sm90::pin(o);
  for (int i = 0; i < D / 8; ++i)
    for (int e = 0; e < 4; ++e) o_out[(16 * warp + g + 8 * (e >> 1)) * D + 8 * i + 2 * t + (e & 1)] = o[4 * i + e];
#else
  __trap();
#endif
}

template <int N, int D>
void launch(const void* a, const void* b, const void* v, float* s, float* o, int mn_lbo, int mn_sbo) {
  constexpr int smem = (64 + 2 * N) * D * 2 + 1024;
  auto kernel = wgmma_probe_kernel<N, D>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  kernel<<<1, 128, smem>>>(static_cast<const std::uint16_t*>(a), static_cast<const std::uint16_t*>(b),
                           static_cast<const std::uint16_t*>(v), s, o,
                           mn_lbo < 0 ? sw128::mn_major_lbo<N>() : mn_lbo, mn_sbo < 0 ? sw128::kSbo : mn_sbo);
}

}  // namespace

void wgmma_probe(int n, int d, const void* a, const void* b, const void* v, float* s, float* o, int mn_lbo,
                 int mn_sbo) {
  if (n == 64 && d == 128) return launch<64, 128>(a, b, v, s, o, mn_lbo, mn_sbo);
  if (n == 128 && d == 64) return launch<128, 64>(a, b, v, s, o, mn_lbo, mn_sbo);
  throw std::invalid_argument("wgmma_probe: (n, d) = (" + std::to_string(n) + ", " + std::to_string(d) +
                              ") not compiled; use (64, 128) or (128, 64)");
}

}  // namespace kernels::flash::detail
