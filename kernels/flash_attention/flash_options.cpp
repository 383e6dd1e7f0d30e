// flash_attention.hpp's checks, option parsing and FLOP count: what the entry points
// (flash_autograd.cpp, flash_host_launch.cpp) validate before anything is launched.
#include <algorithm>
#include <cstdint>
#include <string>

#include <c10/util/Exception.h>

#include "flash_attention.hpp"
#include "flash_checks.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::flash {

bool supports_head_dim(std::int64_t d) { return d >= 8 && d <= 128 && d % 8 == 0; }

namespace detail {

// What every entry point checks: dtypes, devices, head dim. q, k, v already have one rank.
void check_common(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(supports_head_dim(q.size(-1)), "flash attention: head dim ", q.size(-1),
              " is not supported; the kernels take multiples of 8 up to 128");
  const auto dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "flash attention: dtype ", dtype, " is not supported; use float32, bfloat16 or float16");
  TORCH_CHECK(k.scalar_type() == dtype && v.scalar_type() == dtype, "flash attention: q, k, v dtypes differ (",
              dtype, ", ", k.scalar_type(), ", ", v.scalar_type(), ")");
  TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "flash attention: q, k, v must be CUDA tensors, got ",
              q.device(), ", ", k.device(), ", ", v.device());
  TORCH_CHECK(q.device() == k.device() && k.device() == v.device(), "flash attention: q, k, v are on different devices");
}

void check_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.defined() && k.defined() && v.defined(), "flash attention: q, k and v must be defined tensors");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                  q.size(2) == k.size(2) && q.size(3) == k.size(3),
              "flash attention: shapes must be q [batch, lq, heads, d], k = v [batch, lk, heads, d]; got q ",
              q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(q.size(1) > 0 && k.size(1) > 0, "flash attention: empty sequence (lq ", q.size(1), ", lk ", k.size(1),
              ")");
  TORCH_CHECK(q.size(0) * q.size(2) <= (1LL << 30) && q.size(1) < (1LL << 31) && k.size(1) < (1LL << 31),
              "flash attention: batch*heads must be <= 2^30, got ", q.size(0) * q.size(2));
  check_common(q, k, v);
  TORCH_CHECK(q.scalar_type() != at::kFloat || q.size(0) * q.size(2) <= 65535,
              "flash attention: fp32 takes batch*heads <= 65535, got ", q.size(0) * q.size(2));
}

}  // namespace detail

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.defined() && k.defined() && v.defined(), "flash attention: q, k and v must be defined tensors");
  TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim(),
              "flash attention: q, k, v need the same rank >= 2, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2) &&
                  k.sizes() == v.sizes() && q.size(-1) == k.size(-1),
              "flash attention: shapes must be q [..., lq, d], k = v [..., lk, d] with the same leading dims; got q ",
              q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(q.size(-2) > 0 && k.size(-2) > 0, "flash attention: empty sequence (lq ", q.size(-2), ", lk ",
              k.size(-2), ")");
  detail::check_common(q, k, v);
  const std::int64_t bh = q.numel() / (q.size(-2) * q.size(-1));
  TORCH_CHECK(bh <= (1LL << 30), "flash attention: batch*heads must be <= 2^30, got ", bh);
}

KernelFamily parse_kernel_family(const std::string& name) {
  if (name == "auto") return KernelFamily::automatic;
  if (name == "mma_sync") return KernelFamily::mma_sync;
  if (name == "wgmma") return KernelFamily::wgmma;
  TORCH_CHECK(false, "flash attention: kernel family '", name, "' is not one of auto, mma_sync, wgmma");
}

ForwardSchedule parse_forward_schedule(const std::string& name) {
  if (name == "auto") return ForwardSchedule::automatic;
  if (name == "serial") return ForwardSchedule::serial;
  if (name == "pipelined") return ForwardSchedule::pipelined;
  if (name == "warp_specialized") return ForwardSchedule::warp_specialized;
  TORCH_CHECK(false, "flash attention: forward schedule '", name,
              "' is not one of auto, serial, pipelined, warp_specialized");
}

BackwardSchedule parse_backward_schedule(const std::string& name) {
  if (name == "auto" || name == "warp_specialized_bulk_dq") return BackwardSchedule::warp_specialized_bulk_dq;
  if (name == "fused") return BackwardSchedule::fused;
  if (name == "deterministic") return BackwardSchedule::deterministic;
  if (name == "warp_specialized") return BackwardSchedule::warp_specialized;
  TORCH_CHECK(false, "flash attention: backward schedule '", name,
              "' is not one of auto, fused, deterministic, warp_specialized, warp_specialized_bulk_dq");
}

const char* to_string(BackwardSchedule schedule) {
  switch (schedule) {
    case BackwardSchedule::fused: return "fused";
    case BackwardSchedule::deterministic: return "deterministic";
    case BackwardSchedule::warp_specialized: return "warp_specialized";
    default: return "warp_specialized_bulk_dq";
  }
}

const char* to_string(ForwardSchedule schedule) {
  switch (schedule) {
    case ForwardSchedule::serial: return "serial";
    case ForwardSchedule::pipelined: return "pipelined";
    case ForwardSchedule::warp_specialized: return "warp_specialized";
    default: return "auto";
  }
}

const char* to_string(KernelFamily family) {
  switch (family) {
    case KernelFamily::mma_sync: return "mma_sync";
    case KernelFamily::wgmma: return "wgmma";
    default: return "auto";
  }
}

std::string wgmma_unsupported_reason(const at::Tensor& q) {
  const auto dtype = q.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf)
    return std::string("the wgmma kernels take bf16 or fp16, not ") + c10::toString(dtype);
  if (!supports_head_dim(q.size(-1)))
    return "the wgmma kernels take head dims that are multiples of 8 up to 128, not " + std::to_string(q.size(-1));
#ifdef RUNNER_WITH_CUDA
  if (!q.is_cuda()) return "the wgmma kernels need CUDA tensors";
  const auto* props = at::cuda::getDeviceProperties(q.device().index());
  if (props->major != 9)
    return "the wgmma kernels need an sm_90 GPU (Hopper); this one is sm_" + std::to_string(props->major) +
           std::to_string(props->minor);
  return "";
#else
  return "this build has no CUDA";
#endif
}

KernelFamily resolve_kernel_family(KernelFamily family, const at::Tensor& q) {
  if (family != KernelFamily::automatic) return family;
  // At d <= 32 the wgmma kernels would pad to 64 columns: mma_sync has kernels of that size.
  return q.size(-1) > 32 && wgmma_unsupported_reason(q).empty() ? KernelFamily::wgmma : KernelFamily::mma_sync;
}

void check_mask(const Mask& mask) {
  TORCH_CHECK(mask.kind == MaskKind::none || mask.kind == MaskKind::causal || mask.kind == MaskKind::sliding_window,
              "flash attention: unknown mask kind ", static_cast<int>(mask.kind));
  TORCH_CHECK(!mask.windowed() || mask.window >= 1, "flash attention: a sliding window needs window >= 1 keys, got ",
              mask.window);
}

MaskKind parse_mask_kind(const std::string& name) {
  if (name == "none") return MaskKind::none;
  if (name == "causal") return MaskKind::causal;
  if (name == "sliding_window") return MaskKind::sliding_window;
  TORCH_CHECK(false, "flash attention: mask '", name, "' is not one of none, causal, sliding_window");
}

const char* to_string(MaskKind kind) {
  switch (kind) {
    case MaskKind::causal: return "causal";
    case MaskKind::sliding_window: return "sliding_window";
    default: return "none";
  }
}

double forward_flops(std::int64_t bh, std::int64_t lq, std::int64_t lk, std::int64_t d, const Mask& mask) {
  const double per_pair = 4.0 * static_cast<double>(bh) * static_cast<double>(d);
  if (mask.windowed()) {  // the (query, key) pairs the window shows: min(i + 1, window, lk) ... per row
    double pairs = 0;
    for (std::int64_t i = 0; i < lq; ++i) {
      const std::int64_t last = std::min(i, lk - 1), first = std::max<std::int64_t>(0, i - mask.window + 1);
      pairs += static_cast<double>(std::max<std::int64_t>(0, last - first + 1));
    }
    return per_pair * pairs;
  }
  const double full = per_pair * static_cast<double>(lq) * static_cast<double>(lk);
  return mask.causal() ? full / 2.0 : full;
}

}  // namespace kernels::flash
