#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "common/dtype.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rmsnorm/rmsnorm_launch.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::rmsnorm {
namespace {

bool add_kernel_applies(const at::Tensor& x, const at::Tensor& a, const at::Tensor& weight, at::ScalarType out) {
  return x.is_cuda() && x.scalar_type() == at::kFloat && a.scalar_type() == out && a.sizes() == x.sizes() &&
         a.device() == x.device() && weight.scalar_type() == at::kFloat && weight.numel() == x.size(-1) &&
         x.size(-1) <= kMaxDim && x.numel() > 0 && (out == at::kFloat || out == at::kBFloat16 || out == at::kHalf);
}

#ifdef RUNNER_WITH_CUDA
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

class AddRMSNormFunction : public torch::autograd::Function<AddRMSNormFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& a, const at::Tensor& weight, double eps) {
    const at::Tensor xc = x.contiguous(), ac = a.contiguous(), w = weight.contiguous();
    const std::int64_t dim = x.size(-1), rows = x.numel() / dim;
    at::Tensor h = at::empty_like(xc);
    at::Tensor y = at::empty_like(ac);
    at::Tensor inv_rms = at::empty({rows}, x.options());
    launch_add_forward(xc.data_ptr<float>(), ac.data_ptr(), w.data_ptr<float>(), h.data_ptr<float>(), y.data_ptr(),
                       inv_rms.data_ptr<float>(), rows, dim, static_cast<float>(eps), dtype_of(ac, "add_rmsnorm"),
                       stream_of(x));
    ctx->save_for_backward({h, w, inv_rms});
    ctx->saved_data["a_is_fp32"] = a.scalar_type() == at::kFloat;
    return {h, y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &h = saved[0], &w = saved[1], &inv_rms = saved[2];
    const std::int64_t dim = h.size(-1), rows = h.numel() / dim;
    const at::Tensor dh_out = grads[0].defined() ? grads[0].to(at::kFloat).contiguous() : at::Tensor();
    // y's gradient may be undefined when only h is used downstream; the norm then adds nothing.
    if (!grads[1].defined()) return {dh_out, dh_out, at::Tensor(), at::Tensor()};
    const at::Tensor dy = grads[1].contiguous();
    const bool a_is_fp32 = ctx->saved_data["a_is_fp32"].toBool();
    const int parts = backward_parts(rows, dim, at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
    at::Tensor dh = at::empty_like(h);
    at::Tensor da = a_is_fp32 ? dh : at::empty_like(dy);
    at::Tensor dw = at::empty({dim}, h.options());
    at::Tensor workspace = at::empty({parts, dim}, h.options());
    launch_add_backward(dy.data_ptr(), dh_out.defined() ? dh_out.data_ptr<float>() : nullptr, h.data_ptr<float>(),
                        w.data_ptr<float>(), inv_rms.data_ptr<float>(), dh.data_ptr<float>(),
                        a_is_fp32 ? nullptr : da.data_ptr(), dw.data_ptr<float>(), workspace.data_ptr<float>(), rows,
                        dim, parts, dtype_of(dy, "add_rmsnorm"), stream_of(h));
    return {dh, da, dw, at::Tensor()};
  }
};
#endif

}  // namespace

std::tuple<at::Tensor, at::Tensor> add_rms_norm_reference(const at::Tensor& x, const at::Tensor& a,
                                                          const at::Tensor& weight, double eps,
                                                          at::ScalarType out_dtype) {
  const at::Tensor h = x + a;
  return {h, rms_norm_reference(h, weight, eps).to(out_dtype)};
}

std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& a, const at::Tensor& weight,
                                                double eps, at::ScalarType out_dtype) {
#ifdef RUNNER_WITH_CUDA
  if (add_kernel_applies(x, a, weight, out_dtype)) {
    const auto outputs = AddRMSNormFunction::apply(x, a, weight, eps);
    return {outputs[0], outputs[1]};
  }
#else
  (void)add_kernel_applies;
#endif
  return add_rms_norm_reference(x, a, weight, eps, out_dtype);
}

}  // namespace kernels::rmsnorm
