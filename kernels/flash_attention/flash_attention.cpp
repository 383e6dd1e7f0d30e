#include "flash_attention.hpp"

#include <cmath>
#include <cstdint>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#ifdef RUNNER_FLASH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "flash_kernels.hpp"
#endif

namespace kernels::flash {

bool supports_head_dim(std::int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK(q.defined() && k.defined() && v.defined(), "flash attention: q, k and v must be defined tensors");
  TORCH_CHECK(q.dim() >= 2 && q.dim() == k.dim() && k.dim() == v.dim(),
              "flash attention: q, k, v need the same rank >= 2, got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(q.sizes().slice(0, q.dim() - 2) == k.sizes().slice(0, k.dim() - 2) &&
                  k.sizes() == v.sizes() && q.size(-1) == k.size(-1),
              "flash attention: shapes must be q [..., lq, d], k = v [..., lk, d] with the same leading dims; got q ",
              q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(supports_head_dim(q.size(-1)), "flash attention: head dim ", q.size(-1),
              " is not supported; the kernels are built for d in {16, 32, 64, 128}");
  TORCH_CHECK(q.size(-2) > 0 && k.size(-2) > 0, "flash attention: empty sequence (lq ", q.size(-2), ", lk ",
              k.size(-2), ")");
  const auto dtype = q.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "flash attention: dtype ", dtype, " is not supported; use float32, bfloat16 or float16");
  TORCH_CHECK(k.scalar_type() == dtype && v.scalar_type() == dtype, "flash attention: q, k, v dtypes differ (",
              dtype, ", ", k.scalar_type(), ", ", v.scalar_type(), ")");
  TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "flash attention: q, k, v must be CUDA tensors, got ",
              q.device(), ", ", k.device(), ", ", v.device());
  TORCH_CHECK(q.device() == k.device() && k.device() == v.device(), "flash attention: q, k, v are on different devices");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(),
              "flash attention: q, k, v must be contiguous (call .contiguous() first)");
  for (const at::Tensor* t : {&q, &k, &v})
    TORCH_CHECK(reinterpret_cast<std::uintptr_t>(t->data_ptr()) % 16 == 0,
                "flash attention: q, k, v must start on a 16-byte boundary (a view at an odd offset; call .clone())");
  const std::int64_t bh = q.numel() / (q.size(-2) * q.size(-1));
  TORCH_CHECK(bh <= 65535 && q.size(-2) < (1LL << 31) && k.size(-2) < (1LL << 31),
              "flash attention: batch*heads must be <= 65535, got ", bh);
}

KernelFamily parse_kernel_family(const std::string& name) {
  if (name == "auto") return KernelFamily::automatic;
  if (name == "mma_sync") return KernelFamily::mma_sync;
  if (name == "wgmma") return KernelFamily::wgmma;
  TORCH_CHECK(false, "flash attention: kernel family '", name, "' is not one of auto, mma_sync, wgmma");
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
  if (q.size(-1) != 64 && q.size(-1) != 128)
    return "the wgmma kernels are built for head dims 64 and 128, not " + std::to_string(q.size(-1));
#ifdef RUNNER_FLASH_WITH_CUDA
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
  return wgmma_unsupported_reason(q).empty() ? KernelFamily::wgmma : KernelFamily::mma_sync;
}

double forward_flops(std::int64_t bh, std::int64_t lq, std::int64_t lk, std::int64_t d, bool causal) {
  const double full = 4.0 * static_cast<double>(bh) * static_cast<double>(lq) * static_cast<double>(lk) *
                      static_cast<double>(d);
  return causal ? full / 2.0 : full;
}

#ifdef RUNNER_FLASH_WITH_CUDA
namespace {

detail::Dtype kernel_dtype(at::ScalarType t) {
  if (t == at::kHalf) return detail::Dtype::fp16;
  if (t == at::kBFloat16) return detail::Dtype::bf16;
  return detail::Dtype::fp32;
}

bool use_wgmma(KernelFamily family, const at::Tensor& q) {
  if (family == KernelFamily::automatic) return resolve_kernel_family(family, q) == KernelFamily::wgmma;
  if (family != KernelFamily::wgmma) return false;
  const std::string why = wgmma_unsupported_reason(q);
  TORCH_CHECK(why.empty(), "flash attention: kernel family wgmma: ", why, "; use mma_sync or auto");
  return true;
}

// The kernels read 16-byte vectors; a contiguous view can still start off that boundary.
at::Tensor aligned_copy(const at::Tensor& t) {
  return reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0 ? t : t.clone();
}

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "flash attention: ", what, " kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace

ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                      KernelFamily family) {
  check_inputs(q, k, v);
  const c10::cuda::CUDAGuard guard(q.device());
  const std::int64_t lq = q.size(-2), lk = k.size(-2), d = q.size(-1);
  const std::int64_t bh = q.numel() / (lq * d);
  ForwardResult r;
  r.out = at::empty_like(q);
  std::vector<std::int64_t> lse_shape(q.sizes().begin(), q.sizes().end() - 1);
  r.lse = at::empty(lse_shape, q.options().dtype(at::kFloat));
  detail::ForwardArgs a{q.data_ptr(), k.data_ptr(), v.data_ptr(), r.out.data_ptr(), r.lse.data_ptr<float>(),
                        static_cast<int>(bh), static_cast<int>(lq), static_cast<int>(lk), static_cast<int>(d),
                        causal, kernel_dtype(q.scalar_type()),
                        static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))), use_wgmma(family, q)};
  detail::launch_forward(a, c10::cuda::getCurrentCUDAStream());
  check_launch("forward");
  return r;
}

Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout_in, const at::Tensor& lse, bool causal, KernelFamily family) {
  check_inputs(q, k, v);
  TORCH_CHECK(out.sizes() == q.sizes() && dout_in.sizes() == q.sizes(),
              "flash attention backward: out and dout must have q's shape ", q.sizes(), ", got ", out.sizes(), " and ",
              dout_in.sizes());
  TORCH_CHECK(lse.scalar_type() == at::kFloat && lse.numel() * q.size(-1) == q.numel() && lse.is_contiguous(),
              "flash attention backward: lse must be the forward's fp32 [..., lq] tensor");
  const c10::cuda::CUDAGuard guard(q.device());
  const at::Tensor dout = aligned_copy(dout_in.to(q.scalar_type()).contiguous());
  const at::Tensor o = aligned_copy(out.to(q.scalar_type()).contiguous());
  const std::int64_t lq = q.size(-2), lk = k.size(-2), d = q.size(-1);
  const std::int64_t bh = q.numel() / (lq * d);
  const bool wgmma = use_wgmma(family, q);
  const bool fuse_dq = wgmma && detail::wgmma_backward_fuses_dq();
  // delta_i = sum_d O_id dO_id in fp32 (the "D" of the FlashAttention-2 paper), and the
  // fused backward's fp32 dQ buffer zeroed, in one pass over O and dO.
  const at::Tensor delta = at::empty({bh, lq}, q.options().dtype(at::kFloat));
  at::Tensor dq_accum;
  if (fuse_dq) dq_accum = at::empty({bh, lq, d}, q.options().dtype(at::kFloat));
  const auto stream = c10::cuda::getCurrentCUDAStream();
  detail::launch_backward_delta({o.data_ptr(), dout.data_ptr(), delta.data_ptr<float>(),
                                 fuse_dq ? dq_accum.data_ptr<float>() : nullptr, static_cast<long>(bh * lq),
                                 static_cast<int>(d), kernel_dtype(q.scalar_type())},
                                stream);
  check_launch("backward delta");
  Gradients g{at::empty_like(q), at::empty_like(k), at::empty_like(v)};
  detail::BackwardArgs a{q.data_ptr(), k.data_ptr(), v.data_ptr(), dout.data_ptr(), lse.data_ptr<float>(),
                         delta.data_ptr<float>(), g.dq.data_ptr(), g.dk.data_ptr(), g.dv.data_ptr(),
                         static_cast<int>(bh), static_cast<int>(lq), static_cast<int>(lk), static_cast<int>(d),
                         causal, kernel_dtype(q.scalar_type()),
                         static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))), wgmma};
  if (fuse_dq) a.dq_accum = dq_accum.data_ptr<float>();
  detail::launch_backward(a, stream);
  check_launch("backward");
  return g;
}

#else

ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool, KernelFamily) {
  check_inputs(q, k, v);
  TORCH_CHECK(false, "flash attention: this build has no CUDA (configure with a CUDA toolkit)");
}

Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor&,
                   const at::Tensor&, const at::Tensor&, bool, KernelFamily) {
  check_inputs(q, k, v);
  TORCH_CHECK(false, "flash attention: this build has no CUDA (configure with a CUDA toolkit)");
}

#endif

}  // namespace kernels::flash
