#include "rmsnorm/rmsnorm.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "common/dtype.hpp"
#include "rmsnorm/rmsnorm_launch.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::rmsnorm {
namespace {

#ifdef RUNNER_WITH_CUDA
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

class RMSNormFunction : public torch::autograd::Function<RMSNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            double eps) {
    const at::Tensor xc = x.contiguous();
    auto [y, inv_rms] = forward_kernel(xc, weight, eps);
    ctx->save_for_backward({xc, weight, inv_rms});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [dx, dw] = backward_kernel(grads[0], saved[0], saved[1], saved[2]);
    return {dx, dw, at::Tensor()};
  }
};
#endif

bool kernel_applies(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cuda() && weight.scalar_type() == at::kFloat && x.size(-1) <= kMaxDim && x.numel() > 0 &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf);
}

}  // namespace

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::ScalarType in_dtype = x.scalar_type();
  const at::Tensor xf = x.to(at::promote_types(in_dtype, at::kFloat));
  const at::Tensor inv_rms = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (xf * inv_rms * weight).to(in_dtype);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#ifdef RUNNER_WITH_CUDA
  if (kernel_applies(x, weight)) return RMSNormFunction::apply(x, weight, eps);
#endif
  return rms_norm_reference(x, weight, eps);
}

std::tuple<at::Tensor, at::Tensor> forward_kernel(const at::Tensor& x, const at::Tensor& weight, double eps) {
#ifdef RUNNER_WITH_CUDA
  if (!kernel_applies(x, weight) || !x.is_contiguous() || weight.numel() != x.size(-1))
    throw std::invalid_argument("rmsnorm: forward kernel needs contiguous CUDA x, fp32 weight of size x.size(-1)");
  const std::int64_t dim = x.size(-1), rows = x.numel() / dim;
  const at::Tensor w = weight.contiguous();
  at::Tensor y = at::empty_like(x);
  at::Tensor inv_rms = at::empty({rows}, x.options().dtype(at::kFloat));
  launch_forward(x.data_ptr(), w.data_ptr<float>(), y.data_ptr(), inv_rms.data_ptr<float>(), rows, dim,
                 static_cast<float>(eps), dtype_of(x, "rmsnorm"), stream_of(x));
  return {y, inv_rms};
#else
  (void)x, (void)weight, (void)eps;
  throw std::runtime_error("rmsnorm: this build has no CUDA kernels");
#endif
}

std::tuple<at::Tensor, at::Tensor> backward_kernel(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
                                                   const at::Tensor& inv_rms) {
#ifdef RUNNER_WITH_CUDA
  const std::int64_t dim = x.size(-1), rows = x.numel() / dim;
  const at::Tensor dyc = dy.to(x.scalar_type()).contiguous();
  const at::Tensor w = weight.contiguous();
  const int parts = backward_parts(rows, dim, at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
  at::Tensor dx = at::empty_like(x);
  at::Tensor dw = at::empty({dim}, x.options().dtype(at::kFloat));
  at::Tensor workspace = at::empty({parts, dim}, x.options().dtype(at::kFloat));
  launch_backward(dyc.data_ptr(), x.data_ptr(), w.data_ptr<float>(), inv_rms.data_ptr<float>(), dx.data_ptr(),
                  dw.data_ptr<float>(), workspace.data_ptr<float>(), rows, dim, parts, dtype_of(x, "rmsnorm"),
                  stream_of(x));
  return {dx, dw};
#else
  (void)dy, (void)x, (void)weight, (void)inv_rms;
  throw std::runtime_error("rmsnorm: this build has no CUDA kernels");
#endif
}

}  // namespace kernels::rmsnorm
