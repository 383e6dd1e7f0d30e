// FlashAttention-2 backward on Hopper warpgroup MMAs (wgmma; fp16 / bf16, fp32 accumulation).
//
// Computes what flash_backward.cu computes (dQ, dK, dV from Q, K, V, dO, L and
// delta = rowsum(O * dO)), for head dims 64 and 128 on sm_90a GPUs, with the same split
// into two deterministic kernels: no atomics, every output element is summed by one
// thread in a fixed order, so results repeat bit for bit.
// FLOPs counted: 2.5x forward = 10 * bh * lq * lk * d (halved when causal); done: 14 (the
// dq kernel recomputes S and dP).
//  * dkdv kernel: one block of two warpgroups per (128-key tile, batch*head); each
//    warpgroup owns 64 keys and loops over 64-query tiles:
//      S^T = K Q^T and dP^T = V dO^T    (m64n64k16, both operands K-major in shared memory)
//      P^T = exp(scale S^T - L), dS^T = P^T * (dP^T - delta)      (fp32 registers)
//      dV += P^T dO, dK += dS^T Q       (m64nDk16, A from registers, B MN-major)
//    dK and dV stay in fp32 registers for the whole loop (64 + 64 per thread at d = 128).
//  * dq kernel: one block of two warpgroups per (128-query tile, batch*head); each
//    warpgroup owns 64 queries and loops over 64-key tiles:
//      S = Q K^T, dP = dO V^T, dS = P * (dP - delta), dQ += dS K  (K MN-major)
// Q/dO (dkdv) and K/V (dq) tiles stream through a two-stage cp.async ring in the 128-byte
// swizzled layout; L and delta ride along with their query tile.
// Causal: query tiles entirely above a key tile (and key tiles right of a query tile) are
// skipped; only tiles crossing the diagonal or a sequence end are masked.
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
constexpr float kLog2e = 1.4426950408889634f;

// ---- dK, dV: key-major ----
constexpr int kDkvKeys = 128;  // 64 per warpgroup
constexpr int kDkvQ = 64;      // query rows per step

template <int D>
constexpr int dkdv_shared_bytes() {
  return (2 * kDkvKeys + 4 * kDkvQ) * D * 2 + 4 * kDkvQ * 4 + 1024;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_dkdv_sm90_kernel(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                           const std::uint16_t* __restrict__ v, const std::uint16_t* __restrict__ dout,
                           const float* __restrict__ lse, const float* __restrict__ delta,
                           std::uint16_t* __restrict__ dk, std::uint16_t* __restrict__ dv, int lq, int lk,
                           float scale, bool causal) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kKBytes = kDkvKeys * D * 2, kQBytes = kDkvQ * D * 2;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sK = sm90::align_1024(smem_raw);
  std::uint8_t* sV = sK + kKBytes;
  auto sQ = [&](int stage) { return sK + 2 * kKBytes + stage * 2 * kQBytes; };
  auto sDO = [&](int stage) { return sK + 2 * kKBytes + stage * 2 * kQBytes + kQBytes; };
  float* sL = reinterpret_cast<float*>(sK + 2 * kKBytes + 4 * kQBytes);  // [stage][64] L, then [stage][64] delta
  float* sDelta = sL + 2 * kDkvQ;

  const int k0 = blockIdx.x * kDkvKeys;  // first tiles have the most query tiles under a causal mask
  const long bh = blockIdx.y;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* qg = q + bh * lq * D;
  const std::uint16_t* dog = dout + bh * lq * D;
  const float* lg = lse + bh * lq;
  const float* deltag = delta + bh * lq;
  const float scale_log2 = scale * kLog2e;
  const int wg_key0 = k0 + 64 * wg;

  const int q_tiles = (lq + kDkvQ - 1) / kDkvQ;
  const int first = causal ? min(k0 / kDkvQ, q_tiles) : 0;  // queries before k0 see none of these keys
  const int steps = q_tiles - first;

  auto load_q_tile = [&](int stage, int qt) {
    const int r0 = qt * kDkvQ;
    sm90::load_tile_sw128<kDkvQ, D, kThreads>(sQ(stage), qg + static_cast<long>(r0) * D, lq - r0, tid);
    sm90::load_tile_sw128<kDkvQ, D, kThreads>(sDO(stage), dog + static_cast<long>(r0) * D, lq - r0, tid);
    sm90::load_floats_async(sL + stage * kDkvQ, lg + r0, kDkvQ, lq - r0, tid, kThreads);
    sm90::load_floats_async(sDelta + stage * kDkvQ, deltag + r0, kDkvQ, lq - r0, tid, kThreads);
  };

  sm90::load_tile_sw128<kDkvKeys, D, kThreads>(sK, k + (bh * lk + k0) * D, lk - k0, tid);
  sm90::load_tile_sw128<kDkvKeys, D, kThreads>(sV, v + (bh * lk + k0) * D, lk - k0, tid);
  if (steps > 0) load_q_tile(0, first);
  cp_async_commit();
  if (steps > 1) {
    load_q_tile(1, first + 1);
    cp_async_commit();
  }

  float acc_dk[D / 2], acc_dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc_dk[i] = acc_dv[i] = 0.f;
  const std::uint32_t k_addr = smem_addr(sK), v_addr = smem_addr(sV);

  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1, r0 = (first + step) * kDkvQ;
    if (step + 1 < steps) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    sm90::fence_proxy_async();
    __syncthreads();
    const std::uint32_t q_addr = smem_addr(sQ(stage)), do_addr = smem_addr(sDO(stage));

    float st[kDkvQ / 2], dpt[kDkvQ / 2];  // S^T and dP^T: rows = this warpgroup's keys, columns = queries
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDkvQ>::ss(st, sm90::k_major<kDkvKeys>(k_addr, 64 * wg, kk), sm90::k_major<kDkvQ>(q_addr, 0, kk),
                          kk > 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDkvQ>::ss(dpt, sm90::k_major<kDkvKeys>(v_addr, 64 * wg, kk), sm90::k_major<kDkvQ>(do_addr, 0, kk),
                          kk > 0);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(st);
    sm90::pin(dpt);

    const float* l_tile = sL + stage * kDkvQ;
    const float* d_tile = sDelta + stage * kDkvQ;
    const bool edge = r0 + kDkvQ > lq || (causal && r0 < wg_key0 + 63);
#pragma unroll
    for (int i = 0; i < kDkvQ / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * i + 2 * t + (e & 1);  // query within the tile
        const int key = wg_key0 + 16 * warp + g + 8 * (e >> 1);
        const bool masked = edge && (r0 + c >= lq || (causal && r0 + c < key));
        const float p = masked ? 0.f : exp2f(st[4 * i + e] * scale_log2 - l_tile[c] * kLog2e);
        st[4 * i + e] = p;
        dpt[4 * i + e] = p * (dpt[4 * i + e] - d_tile[c]);
      }

    std::uint32_t a_p[kDkvQ / 16][4], a_ds[kDkvQ / 16][4];
    sm90::to_a_fragments<T, kDkvQ>(a_p, st);
    sm90::to_a_fragments<T, kDkvQ>(a_ds, dpt);
    sm90::pin(acc_dv);
    sm90::pin(acc_dk);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDkvQ / 16; ++kk) Wgmma<T, D>::rs_mn(acc_dv, a_p[kk], sm90::mn_major<kDkvQ>(do_addr, kk), 1);
#pragma unroll
    for (int kk = 0; kk < kDkvQ / 16; ++kk) Wgmma<T, D>::rs_mn(acc_dk, a_ds[kk], sm90::mn_major<kDkvQ>(q_addr, kk), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(acc_dv);
    sm90::pin(acc_dk);
    sm90::pin(a_p);
    sm90::pin(a_ds);

    __syncthreads();  // both warpgroups are done with this stage
    if (step + 2 < steps) {
      load_q_tile(stage, first + step + 2);
      cp_async_commit();
    }
  }
  cp_async_wait_all();  // with no query tile to visit, the K/V loads are still in flight

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = wg_key0 + 16 * warp + g + 8 * r;
    if (key < lk) {
      std::uint16_t* dkrow = dk + (bh * lk + key) * D;
      std::uint16_t* dvrow = dv + (bh * lk + key) * D;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<std::uint32_t*>(dkrow + 8 * i + 2 * t) =
            pack2<T>(acc_dk[4 * i + 2 * r] * scale, acc_dk[4 * i + 2 * r + 1] * scale);
        *reinterpret_cast<std::uint32_t*>(dvrow + 8 * i + 2 * t) =
            pack2<T>(acc_dv[4 * i + 2 * r], acc_dv[4 * i + 2 * r + 1]);
      }
    }
  }
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

// ---- dQ: query-major ----
constexpr int kDqQ = 128;  // 64 per warpgroup
constexpr int kDqKeys = 64;

template <int D>
constexpr int dq_shared_bytes() {
  return (2 * kDqQ + 4 * kDqKeys) * D * 2 + 1024;
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads, 1)
    flash_dq_sm90_kernel(const std::uint16_t* __restrict__ q, const std::uint16_t* __restrict__ k,
                         const std::uint16_t* __restrict__ v, const std::uint16_t* __restrict__ dout,
                         const float* __restrict__ lse, const float* __restrict__ delta, std::uint16_t* __restrict__ dq,
                         int lq, int lk, float scale, bool causal) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kQBytes = kDqQ * D * 2, kKBytes = kDqKeys * D * 2;
  extern __shared__ __align__(16) std::uint8_t smem_raw[];
  std::uint8_t* sQ = sm90::align_1024(smem_raw);
  std::uint8_t* sDO = sQ + kQBytes;
  auto sK = [&](int stage) { return sQ + 2 * kQBytes + stage * 2 * kKBytes; };
  auto sV = [&](int stage) { return sQ + 2 * kQBytes + stage * 2 * kKBytes + kKBytes; };

  const int q0 = (gridDim.x - 1 - blockIdx.x) * kDqQ;
  const long bh = blockIdx.y;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const std::uint16_t* kg = k + bh * lk * D;
  const std::uint16_t* vg = v + bh * lk * D;
  const float scale_log2 = scale * kLog2e;
  const int wg_row0 = q0 + 64 * wg;

  float l2[2], dlt[2];  // this lane's two rows: L in log2 units, delta
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wg_row0 + 16 * warp + g + 8 * r;
    l2[r] = row < lq ? lse[bh * lq + row] * kLog2e : 0.f;
    dlt[r] = row < lq ? delta[bh * lq + row] : 0.f;
  }

  const int key_end = causal ? min(lk, q0 + kDqQ) : lk;
  const int key_tiles = (key_end + kDqKeys - 1) / kDqKeys;

  sm90::load_tile_sw128<kDqQ, D, kThreads>(sQ, q + (bh * lq + q0) * D, lq - q0, tid);
  sm90::load_tile_sw128<kDqQ, D, kThreads>(sDO, dout + (bh * lq + q0) * D, lq - q0, tid);
  if (key_tiles > 0) {
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(0), kg, lk, tid);
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(0), vg, lk, tid);
  }
  cp_async_commit();
  if (key_tiles > 1) {
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(1), kg + kDqKeys * D, lk - kDqKeys, tid);
    sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(1), vg + kDqKeys * D, lk - kDqKeys, tid);
    cp_async_commit();
  }

  float acc[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc[i] = 0.f;
  const std::uint32_t q_addr = smem_addr(sQ), do_addr = smem_addr(sDO);

  for (int kt = 0; kt < key_tiles; ++kt) {
    const int stage = kt & 1, k0 = kt * kDqKeys;
    if (kt + 1 < key_tiles) sm90::cp_async_wait<1>();
    else sm90::cp_async_wait<0>();
    sm90::fence_proxy_async();
    __syncthreads();
    const std::uint32_t k_addr = smem_addr(sK(stage)), v_addr = smem_addr(sV(stage));

    float s[kDqKeys / 2], dp[kDqKeys / 2];
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDqKeys>::ss(s, sm90::k_major<kDqQ>(q_addr, 64 * wg, kk), sm90::k_major<kDqKeys>(k_addr, 0, kk), kk > 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      Wgmma<T, kDqKeys>::ss(dp, sm90::k_major<kDqQ>(do_addr, 64 * wg, kk), sm90::k_major<kDqKeys>(v_addr, 0, kk),
                            kk > 0);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(s);
    sm90::pin(dp);

    const bool edge = k0 + kDqKeys > lk || (causal && k0 + kDqKeys - 1 > wg_row0);
#pragma unroll
    for (int i = 0; i < kDqKeys / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int col = k0 + 8 * i + 2 * t + (e & 1);
        const int row = wg_row0 + 16 * warp + g + 8 * r;
        const bool masked = edge && (col >= lk || (causal && col > row));
        const float p = masked ? 0.f : exp2f(s[4 * i + e] * scale_log2 - l2[r]);
        s[4 * i + e] = p * (dp[4 * i + e] - dlt[r]);
      }

    std::uint32_t a_ds[kDqKeys / 16][4];
    sm90::to_a_fragments<T, kDqKeys>(a_ds, s);
    sm90::pin(acc);
    sm90::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kDqKeys / 16; ++kk) Wgmma<T, D>::rs_mn(acc, a_ds[kk], sm90::mn_major<kDqKeys>(k_addr, kk), 1);
    sm90::wgmma_commit();
    sm90::wgmma_wait_all();
    sm90::pin(acc);
    sm90::pin(a_ds);

    __syncthreads();
    if (kt + 2 < key_tiles) {
      const int next = k0 + 2 * kDqKeys;
      sm90::load_tile_sw128<kDqKeys, D, kThreads>(sK(stage), kg + static_cast<long>(next) * D, lk - next, tid);
      sm90::load_tile_sw128<kDqKeys, D, kThreads>(sV(stage), vg + static_cast<long>(next) * D, lk - next, tid);
      cp_async_commit();
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = wg_row0 + 16 * warp + g + 8 * r;
    if (row < lq) {
      std::uint16_t* dqrow = dq + (bh * lq + row) * D;
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        *reinterpret_cast<std::uint32_t*>(dqrow + 8 * i + 2 * t) =
            pack2<T>(acc[4 * i + 2 * r] * scale, acc[4 * i + 2 * r + 1] * scale);
    }
  }
#else
  __trap();  // built without sm_90a code: fail loudly rather than leave outputs unwritten
#endif
}

template <typename T, int D>
void launch(const BackwardArgs& a, cudaStream_t stream) {
  const auto* q = static_cast<const std::uint16_t*>(a.q);
  const auto* k = static_cast<const std::uint16_t*>(a.k);
  const auto* v = static_cast<const std::uint16_t*>(a.v);
  const auto* dout = static_cast<const std::uint16_t*>(a.dout);
  {
    constexpr int smem = dkdv_shared_bytes<D>();
    auto kernel = flash_dkdv_sm90_kernel<T, D>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((a.lk + kDkvKeys - 1) / kDkvKeys, a.bh);
    kernel<<<grid, kThreads, smem, stream>>>(q, k, v, dout, a.lse, a.delta, static_cast<std::uint16_t*>(a.dk),
                                             static_cast<std::uint16_t*>(a.dv), a.lq, a.lk, a.scale, a.causal);
  }
  {
    constexpr int smem = dq_shared_bytes<D>();
    auto kernel = flash_dq_sm90_kernel<T, D>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const dim3 grid((a.lq + kDqQ - 1) / kDqQ, a.bh);
    kernel<<<grid, kThreads, smem, stream>>>(q, k, v, dout, a.lse, a.delta, static_cast<std::uint16_t*>(a.dq), a.lq,
                                             a.lk, a.scale, a.causal);
  }
}

template <typename T>
void launch_head_dim(const BackwardArgs& a, cudaStream_t stream) {
  switch (a.d) {
    case 64: return launch<T, 64>(a, stream);
    case 128: return launch<T, 128>(a, stream);
    default: throw std::invalid_argument("flash backward (wgmma): head dim " + std::to_string(a.d) + " not compiled");
  }
}

}  // namespace

void launch_backward_sm90(const BackwardArgs& a, cudaStream_t stream) {
  if (a.dtype == Dtype::fp16) return launch_head_dim<__half>(a, stream);
  if (a.dtype == Dtype::bf16) return launch_head_dim<__nv_bfloat16>(a, stream);
  throw std::invalid_argument("flash backward (wgmma): fp32 inputs take the CUDA-core kernels");
}

}  // namespace kernels::flash::detail
