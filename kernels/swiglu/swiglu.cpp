#include "swiglu/swiglu.hpp"

#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "common/dtype.hpp"
#include "swiglu/swiglu_launch.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::swiglu {
namespace {

#ifdef RUNNER_WITH_CUDA
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

class SiluMulFunction : public torch::autograd::Function<SiluMulFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor ac = a.contiguous(), bc = b.contiguous();
    at::Tensor out = at::empty_like(ac);
    const std::int64_t cols = ac.size(-1), rows = ac.numel() / cols;
    launch_forward(ac.data_ptr(), bc.data_ptr(), out.data_ptr(), rows, cols, cols, cols, dtype_of(ac, "swiglu"),
                   stream_of(ac));
    ctx->save_for_backward({ac, bc});
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& a = saved[0];
    const at::Tensor g = grads[0].to(a.scalar_type()).contiguous();
    at::Tensor da = at::empty_like(a), db = at::empty_like(a);
    const std::int64_t cols = a.size(-1), rows = a.numel() / cols;
    launch_backward(g.data_ptr(), a.data_ptr(), saved[1].data_ptr(), da.data_ptr(), db.data_ptr(), rows, cols, cols,
                    cols, cols, dtype_of(a, "swiglu"), stream_of(a));
    return {da, db};
  }
};
#endif

}  // namespace

at::Tensor silu_mul_reference(const at::Tensor& a, const at::Tensor& b) { return at::silu(a) * b; }

at::Tensor silu_mul(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type())
    throw std::invalid_argument("swiglu: a and b must have one shape and dtype");
#ifdef RUNNER_WITH_CUDA
  if (a.is_cuda() && a.numel() > 0) {
    dtype_of(a, "swiglu");
    return SiluMulFunction::apply(a, b);
  }
#endif
  return silu_mul_reference(a, b);
}

namespace {

void check_packed(const at::Tensor& ab) {
  if (ab.dim() < 1 || !ab.is_contiguous() || ab.size(-1) % 2 != 0)
    throw std::invalid_argument("swiglu: the packed input must be contiguous [..., 2 * cols] (a | b per row)");
}

}  // namespace

at::Tensor silu_mul_packed(const at::Tensor& ab) {
  check_packed(ab);
  const std::int64_t cols = ab.size(-1) / 2;
#ifdef RUNNER_WITH_CUDA
  if (ab.is_cuda() && ab.numel() > 0) {
    std::vector<std::int64_t> shape = ab.sizes().vec();
    shape.back() = cols;
    at::Tensor out = at::empty(shape, ab.options());
    const auto* a = static_cast<const char*>(ab.data_ptr());
    launch_forward(a, a + cols * ab.element_size(), out.data_ptr(), ab.numel() / (2 * cols), cols, 2 * cols, cols,
                   dtype_of(ab, "swiglu"), stream_of(ab));
    return out;
  }
#endif
  return silu_mul_reference(ab.narrow(-1, 0, cols), ab.narrow(-1, cols, cols));
}

at::Tensor silu_mul_packed_backward(const at::Tensor& grad, const at::Tensor& ab) {
  check_packed(ab);
  const std::int64_t cols = ab.size(-1) / 2;
  if (grad.numel() * 2 != ab.numel() || grad.size(-1) != cols)
    throw std::invalid_argument("swiglu: the gradient must be [..., cols] for a packed input [..., 2 * cols]");
#ifdef RUNNER_WITH_CUDA
  if (ab.is_cuda() && ab.numel() > 0) {
    const at::Tensor g = grad.to(ab.scalar_type()).contiguous();
    at::Tensor dab = at::empty_like(ab);
    const auto* a = static_cast<const char*>(ab.data_ptr());
    auto* da = static_cast<char*>(dab.data_ptr());
    const std::int64_t half = cols * ab.element_size();
    launch_backward(g.data_ptr(), a, a + half, da, da + half, ab.numel() / (2 * cols), cols, cols, 2 * cols, 2 * cols,
                    dtype_of(ab, "swiglu"), stream_of(ab));
    return dab;
  }
#endif
  // The derivative in fp32 tensor ops, stored in ab's dtype.
  const at::Tensor a = ab.narrow(-1, 0, cols).to(at::kFloat), b = ab.narrow(-1, cols, cols).to(at::kFloat);
  const at::Tensor g = grad.to(at::kFloat), s = at::sigmoid(a);
  return at::cat({g * b * s * (1 + a * (1 - s)), g * a * s}, -1).to(ab.scalar_type());
}

}  // namespace kernels::swiglu
