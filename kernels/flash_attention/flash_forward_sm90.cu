// FlashAttention-2 forward on Hopper warpgroup MMAs (wgmma; fp16 / bf16, fp32 accumulation).
//
// Computes what flash_forward.cu computes, O = softmax(scale * Q K^T + mask) V and the row
// log-sum-exp L, for head dims 64 and 128 on sm_90a GPUs.
// FLOPs: 4 * bh * lq * lk * d, halved when causal. Bytes from HBM: Q, O once, K and V once
// per 128-query tile (mostly from L2).
// Grid: one block of two warpgroups (256 threads) per (128-query tile, batch*head), last
// tiles first. Each warpgroup owns 64 query rows; per 128-key tile it issues
// S = Q K^T as D/16 asynchronous m64n128k16 wgmmas with both operands in shared memory,
// runs the online softmax on the fp32 accumulators in registers, and issues O += P V with
// P from registers (rounded to the input type) and V from shared memory. One MMA covers 64
// rows, so each K or V byte read from shared memory feeds 4x the work of a 16-row
// mma.sync, and the warpgroups overlap one's softmax with the other's MMAs.
// K and V tiles come in with cp.async into a two-stage ring (the next tile loads while
// this one is used), stored in the 128-byte swizzled layout the descriptors name.
// Shared memory at d = 128: Q 32 KiB + 2 x (K 32 + V 32) = 160 KiB, one block per SM.
// Causal: key tiles past the query tile's last row are skipped; tiles straddling the
// diagonal or the sequence end are masked per warpgroup.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "flash_kernels.hpp"
#include "wgmma.cuh"

namespace kernels::flash::detail {
namespace {

using sm90::Wgmma;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kTileQ = 128;    // 64 rows per warpgroup
constexpr int kTileK = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int shared_bytes() {
  return (kTileQ + 4 * kTileK) * D * 2 + 1024;  // + alignment slack for the 1024-byte tile base
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_forward_sm90_kernel(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                              const std::uint16_t* __restrict__ v, std::uint16_t* __restrict__ out,
                              float* __restrict__ lse, int lq, int lk, float scale, bool causal) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kQBytes = kTileQ * D * 2, kKBytes = kTileK * D * 2;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sQ = sm90::align_1024(smem_raw);
  auto sK = [&](int stage) { return sQ + kQBytes + stage * 2 * kKBytes; };
  auto sV = [&](int stage) { return sQ + kQBytes + stage * 2 * kKBytes + kKBytes; };

  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileQ;
  const long bh = blockIdx.y;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* kg = k + bh * lk * D;
  const std::uint16_t* vg = v + bh * lk * D;
  const float scale_log2 = scale * kLog2e;
  const int wg_row0 = q0 + 64 * wg;  // first query row of this warpgroup

  const int key_end = causal ? min(lk, q0 + kTileQ) : lk;
  const int key_tiles = (key_end + kTileK - 1) / kTileK;

  sm90::load_tile_sw128<kTileQ, D, kThreads>(sQ, q + (bh * lq + q0) * D, lq - q0, tid);
  if (key_tiles > 0) {
    sm90::load_tile_sw128<kTileK, D, kThreads>(sK(0), kg, lk, tid);
    sm90::load_tile_sw128<kTileK, D, kThreads>(sV(0), vg, lk, tid);
  }
  cp_async_commit();
  if (key_tiles > 1) {
    sm90::load_tile_sw128<kTileK, D, kThreads>(sK(1), kg + kTileK * D, lk - kTileK, tid);
    sm90::load_tile_sw128<kTileK, D, kThreads>(sV(1), vg + kTileK * D, lk - kTileK, tid);
    cp_async_commit();
  }

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // running max of scale*log2(e)*s per row
  float l[2] = {0.f, 0.f};              // this lane's share of the running sum
  const std::uint32_t q_addr = smem_addr(sQ);

  for (int kt = 0; kt < key_tiles; ++kt) {
    const int stage = kt & 1, k0 = kt * kTileK;
    if (kt + 1 < key_tiles) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    sm90::fence_proxy_async();
    __syncthreads();  // this stage's K and V are in shared memory for every thread
    const std::uint32_t k_addr = smem_addr(sK(stage)), v_addr = smem_addr(sV(stage));

    float s[kTileK / 2];
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kTileK>::ss(s, sm90::k_major<kTileQ>(q_addr, 64 * wg, kk), sm90::k_major<kTileK>(k_addr, 0, kk),
                           kk > 0);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(s);

    if (k0 + kTileK > lk || (causal && k0 + kTileK - 1 > wg_row0)) {
#pragma unroll
      for (int i = 0; i < kTileK / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = k0 + 8 * i + 2 * t + (e & 1);
          const int row = wg_row0 + 16 * warp + g + 8 * (e >> 1);
          if (col >= lk || (causal && col > row)) s[4 * i + e] = -INFINITY;
        }
    }

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int i = 0; i < kTileK / 8; ++i) tile_max = fmaxf(tile_max, fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
      const float m_new = fmaxf(m[r], quad_max(tile_max) * scale_log2);
      // A row with every key masked so far keeps m = -inf; subtract 0 then, not -inf.
      const float base = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m[r] - base);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kTileK / 8; ++i) {
        s[4 * i + 2 * r] = exp2f(s[4 * i + 2 * r] * scale_log2 - base);
        s[4 * i + 2 * r + 1] = exp2f(s[4 * i + 2 * r + 1] * scale_log2 - base);
        sum += s[4 * i + 2 * r] + s[4 * i + 2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        o[4 * i + 2 * r] *= alpha;
        o[4 * i + 2 * r + 1] *= alpha;
      }
    }

    std::uint32_t p[kTileK / 16][4];
    sm90::to_a_fragments<T, kTileK>(p, s);
    sm90::pin(o);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) Wgmma<T, D>::rs_mn(o, p[kk], sm90::mn_major<kTileK>(v_addr, kk), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(o);
    sm90::pin(p);

    __syncthreads();  // every warpgroup is done with this stage
    if (kt + 2 < key_tiles) {
      const int next = k0 + 2 * kTileK;
      sm90::load_tile_sw128<kTileK, D, kThreads>(sK(stage), kg + static_cast<long>(next) * D, lk - next, tid);
      sm90::load_tile_sw128<kTileK, D, kThreads>(sV(stage), vg + static_cast<long>(next) * D, lk - next, tid);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float total = quad_sum(l[r]);
    const float inv = total > 0.f ? 1.f / total : 0.f;
    const int row = wg_row0 + 16 * warp + g + 8 * r;
    if (row < lq) {
      std::uint16_t* orow = out + (bh * lq + row) * D;
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<std::uint32_t*>(orow + 8 * i + 2 * t) =
            pack2<T>(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
      if (t == 0) lse[bh * lq + row] = total > 0.f ? m[r] / kLog2e + logf(total) : INFINITY;
    }
  }
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

template <typename T, int D>
void launch(const ForwardArgs& a, cudaStream_t stream) {
  constexpr int smem = shared_bytes<D>();
  auto kernel = flash_forward_sm90_kernel<T, D>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const dim3 grid((a.lq + kTileQ - 1) / kTileQ, a.bh);
  kernel<<<grid, kThreads, smem, stream>>>(static_cast<const std::uint16_t*>(a.q),
                                           static_cast<const std::uint16_t*>(a.k),
                                           static_cast<const std::uint16_t*>(a.v),
                                           static_cast<std::uint16_t*>(a.out), a.lse, a.lq, a.lk, a.scale, a.causal);
}

template <typename T>
void launch_head_dim(const ForwardArgs& a, cudaStream_t stream) {
  switch (a.d) {
    case 64: return launch<T, 64>(a, stream);
    case 128: return launch<T, 128>(a, stream);
    default: throw std::invalid_argument("flash forward (wgmma): head dim " + std::to_string(a.d) + " not compiled");
  }
}

}  // namespace

void launch_forward_sm90(const ForwardArgs& a, cudaStream_t stream) {
  if (a.dtype == Dtype::fp16) return launch_head_dim<__half>(a, stream);
  if (a.dtype == Dtype::bf16) return launch_head_dim<__nv_bfloat16>(a, stream);
  throw std::invalid_argument("flash forward (wgmma): fp32 inputs take the CUDA-core kernels");
}

}  // namespace kernels::flash::detail
