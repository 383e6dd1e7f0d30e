// FlashAttention-2 as our own CUDA kernels: softmax(scale * q k^T + mask) v with
// scale = 1/sqrt(d), a Mask (mask.hpp: none, causal with top-left alignment, i.e. query i sees
// keys j <= i, or a causal sliding window), and the row log-sum-exp L that backward recomputes P from.
//
// Two input conventions:
//  * [batch, seq, heads, d] views (forward_bshd, backward_bshd, attention): any strides with
//    d contiguous, e.g. q, k, v sliced out of one fused QKV projection; out is written as
//    [batch, seq, heads * d]. No transpose or contiguous copy on the wgmma path.
//  * [..., seq, d] tensors (forward, backward): the leading dims are batch * heads.
// Head dims: multiples of 8 up to 128 (the kernels are built for 16, 32, 64 and 128 and
// pad the others, e.g. 80 and 96, with zero columns in shared memory). fp32, bf16, fp16:
// fp16/bf16 on tensor cores (a KernelFamily picks which kernels), fp32 on CUDA cores
// (flash_fp32.cu) to keep fp32 accuracy. Bad inputs throw one c10::Error naming the
// problem; nothing is launched.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "mask.hpp"

namespace kernels::flash {

// Multiples of 8 from 8 to 128.
bool supports_head_dim(std::int64_t d);

// Which tensor-core kernels run bf16/fp16 inputs (fp32 always runs on CUDA cores):
//  * mma_sync: warp-level m16n8k16 MMAs (flash_forward.cu, flash_backward.cu); any
//    CUDA GPU the build targets; inputs are copied to [bh, seq, d] first.
//  * wgmma: Hopper warpgroup MMAs from swizzled shared memory (flash_*_sm90.cu); sm_90
//    GPUs; reads strided inputs in place; asking for it elsewhere is an error.
//  * automatic: wgmma where it runs (sm_90, bf16/fp16, d > 32), else mma_sync.
// Both run every mask (none, causal, sliding window).
enum class KernelFamily { automatic, mma_sync, wgmma };
// Parses "auto", "mma_sync" or "wgmma"; throws c10::Error naming the choices otherwise.
KernelFamily parse_kernel_family(const std::string& name);
const char* to_string(KernelFamily family);
// Empty when the wgmma kernels can run these inputs, else why not (one line).
std::string wgmma_unsupported_reason(const at::Tensor& q);
// The family that runs q: automatic resolved (mma_sync or wgmma), others unchanged.
KernelFamily resolve_kernel_family(KernelFamily family, const at::Tensor& q);

// The wgmma forward's schedule:
//  * serial: per key tile S = Q K^T, softmax, O += P V, one after another;
//  * pipelined: softmax of key tile j under the P V product of tile j - 1;
//  * warp_specialized: a producer warpgroup loads K/V tiles into a shared-memory ring
//    (mbarriers; TMA where the layout allows) while two consumer warpgroups run the
//    pipelined loop at a higher register budget (setmaxnreg);
//  * automatic: the one measured fastest, warp_specialized (kernels README, version log).
enum class ForwardSchedule { automatic, serial, pipelined, warp_specialized };
// Parses "auto", "serial", "pipelined" or "warp_specialized"; throws c10::Error otherwise.
ForwardSchedule parse_forward_schedule(const std::string& name);
const char* to_string(ForwardSchedule schedule);

// The wgmma backward's schedule (other families always repeat bit for bit):
//  * fused: dQ inside the dK/dV kernel, summed with fp32 atomics (dQ's last bits vary between runs);
//  * deterministic: a second kernel recomputes S and dP for dQ (1.4x the FLOPs, every gradient
//    repeats bit for bit);
//  * warp_specialized: the fused kernel's work by a TMA producer warpgroup filling a Q/dO ring
//    and two consumer warpgroups at 240 registers (1.00-1.04x the fused one on every shape
//    measured, git show 46d21d9:reports/flash_backward_schedules/data/);
//  * warp_specialized_bulk_dq (the default): the same, each step's dQ tile added into the fp32
//    buffer from shared memory by the copy engine's bulk reduce (cp.reduce.async.bulk), so the
//    consumers issue no atomics; it measured faster than the atomics on every shape of
//    git show 46d21d9:reports/flash_backward_bulk_dq/. Same numbers up to the order of the fp32 additions.
// Layouts a tensor map cannot describe run the fused kernel instead of a warp-specialized one.
enum class BackwardSchedule { fused, deterministic, warp_specialized, warp_specialized_bulk_dq };
// Parses "auto" (warp_specialized_bulk_dq), "fused", "deterministic", "warp_specialized" or
// "warp_specialized_bulk_dq"; throws c10::Error naming the choices otherwise.
BackwardSchedule parse_backward_schedule(const std::string& name);
const char* to_string(BackwardSchedule schedule);

// How the kernels run: the attention/flash plugin's options.
struct Options {
  KernelFamily family = KernelFamily::automatic;
  ForwardSchedule forward_schedule = ForwardSchedule::automatic;
  // warp_specialized only: the producer loads with the tensor memory accelerator (a
  // CUtensorMap per operand); false = cp.async by two producer warps (for tests and as
  // the path for layouts a tensor map cannot describe, e.g. a broadcast head stride).
  bool tma_loads = true;
  // warp_specialized only: the two consumer warpgroups take turns issuing their MMAs (named
  // barriers), so one runs its softmax while the other's MMAs run.
  bool pingpong = true;
  // warp_specialized forward only: a persistent grid (SMs x resident blocks), each block looping
  // over tiles of the block order, so one tile's output write and the next tile's first loads
  // overlap (the producer runs ahead into the next tile); the blocks draw their next tile from a
  // counter (longest first, greedy). automatic: persistent where the
  // tiles fill more than one wave of resident blocks; off: one block per tile.
  enum class Persistent { automatic, on, off };
  Persistent persistent_forward = Persistent::automatic;
  // warp_specialized forward at kernel head dim 64: query rows per block, 64 (one consumer
  // warpgroup, two blocks per SM), 128 (two consumer warpgroups, Q in registers) or 192 (three,
  // more throughput on large grids); 0 = by the grid's makespan (fewer, longer 192-row tiles
  // balance worse over the SMs on small grids).
  int forward_query_tile = 0;
  // wgmma backward (plugin option backward).
  BackwardSchedule backward_schedule = BackwardSchedule::warp_specialized_bulk_dq;
  // warp-specialized backward only: the two consumer warpgroups take turns issuing their MMAs
  // (named barriers), so one computes P^T and dS^T while the other's MMAs run; at d = 64, where
  // neither reads the other's dS^T, they also stop meeting once per step (plugin option
  // backward_pingpong).
  bool backward_pingpong = true;
  // warp-specialized backward only: a persistent grid, as persistent_forward (its tiles: 128 keys
  // of a head; the next tile's K and V load while the consumers store the last one's dK and dV).
  Persistent persistent_backward = Persistent::automatic;
  // Heads per group of the block order (tile_scheduler.hpp); 0 sizes groups to the L2 (the
  // warp-specialized kernels without a causal mask: at most the heads their resident blocks cover).
  int head_group = 0;
};

// Throws c10::Error with one line saying what is wrong with [..., seq, d] inputs.
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
// Throws c10::Error unless `mask` is one the kernels run (a sliding window of >= 1 keys). The
// mask's lengths are ignored: every entry point takes them from q and k.
void check_mask(const Mask& mask);
// Parses "none", "causal" or "sliding_window" (throws c10::Error naming the choices otherwise).
MaskKind parse_mask_kind(const std::string& name);
const char* to_string(MaskKind kind);

struct ForwardResult {
  at::Tensor out;  // [..., lq, d] like q; [batch, lq, heads * d] from forward_bshd
  at::Tensor lse;  // [..., lq] fp32, natural log; [batch, heads, lq] from forward_bshd
};
struct Gradients {
  at::Tensor dq, dk, dv;  // shaped like q, k, v
};

// q [..., lq, d], k = v [..., lk, d].
ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                      const Options& options = {});
ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                      KernelFamily family);
// dout may have any strides; out and lse come from forward.
Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, const Options& options = {});
Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, KernelFamily family);

// q [batch, lq, heads, d], k = v [batch, lk, heads, d], any strides with d contiguous.
ForwardResult forward_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                           const Options& options = {});
// out and dout [batch, lq, heads * d] or [batch, lq, heads, d]; lse from forward_bshd. The
// gradients are [batch, seq, heads, d]; with `into`, they are written into its three
// tensors instead (such views, e.g. slices of one fused dQKV buffer) and returned.
Gradients backward_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                        const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, const Options& options = {},
                        const Gradients* into = nullptr);

// The op a model calls: q [batch, lq, heads, d], k = v [batch, lk, heads, d] (any strides,
// d contiguous) -> [batch, lq, heads * d] (merge_heads) or the same memory as
// [batch, lq, heads, d], differentiable. CUDA tensors run the kernels, others
// attention_reference.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask,
                     const Options& options = {}, bool merge_heads = true);
// The same in tensor ops (autograd by ATen; math in fp32, or fp64 for fp64 inputs): the
// reference and the CPU path.
at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask);

// FLOPs the kernels are credited with (the usual convention: two matmuls forward over the
// scores a query sees, 2.5x that backward; causal counts half of lq x lk, a sliding window the
// visible pairs).
double forward_flops(std::int64_t batch_heads, std::int64_t lq, std::int64_t lk, std::int64_t d, const Mask& mask);
inline double backward_flops(std::int64_t bh, std::int64_t lq, std::int64_t lk, std::int64_t d, const Mask& mask) {
  return 2.5 * forward_flops(bh, lq, lk, d, mask);
}

}  // namespace kernels::flash
