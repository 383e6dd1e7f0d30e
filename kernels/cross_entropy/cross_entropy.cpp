#include "cross_entropy/cross_entropy.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "common/dtype.hpp"
#include "cross_entropy/cross_entropy_launch.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::cross_entropy {
namespace {

#ifdef RUNNER_WITH_CUDA
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

class CrossEntropyFunction : public torch::autograd::Function<CrossEntropyFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets) {
    const at::Tensor x = logits.contiguous(), t = targets.to(at::kLong).contiguous();
    const std::int64_t rows = x.size(0), classes = x.size(1);
    at::Tensor loss = at::empty({rows}, x.options().dtype(at::kFloat));
    at::Tensor lse = at::empty({rows}, x.options().dtype(at::kFloat));
    launch_forward(x.data_ptr(), t.data_ptr<std::int64_t>(), loss.data_ptr<float>(), lse.data_ptr<float>(), rows,
                   classes, dtype_of(x, "cross_entropy"), stream_of(x));
    ctx->save_for_backward({x, t, lse});
    return loss.mean();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor g = grads[0].to(at::kFloat).contiguous();
    at::Tensor dx = at::empty_like(x);
    launch_backward(x.data_ptr(), saved[1].data_ptr<std::int64_t>(), saved[2].data_ptr<float>(), g.data_ptr<float>(),
                    dx.data_ptr(), x.size(0), x.size(1), dtype_of(x, "cross_entropy"), stream_of(x));
    return {dx, at::Tensor()};
  }
};
#endif

}  // namespace

at::Tensor cross_entropy_reference(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits.to(at::promote_types(logits.scalar_type(), at::kFloat)), targets);
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  if (logits.dim() != 2 || targets.dim() != 1 || targets.size(0) != logits.size(0))
    throw std::invalid_argument("cross_entropy: logits must be [rows, classes] and targets [rows]");
#ifdef RUNNER_WITH_CUDA
  if (logits.is_cuda() && logits.numel() > 0 && logits.scalar_type() != at::kDouble) {
    dtype_of(logits, "cross_entropy");
    return CrossEntropyFunction::apply(logits, targets);
  }
#endif
  return cross_entropy_reference(logits, targets);
}

}  // namespace kernels::cross_entropy
