#include "swiglu/swiglu.hpp"

#include <stdexcept>

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
    launch_forward(ac.data_ptr(), bc.data_ptr(), out.data_ptr(), ac.numel(), dtype_of(ac, "swiglu"), stream_of(ac));
    ctx->save_for_backward({ac, bc});
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& a = saved[0];
    const at::Tensor g = grads[0].to(a.scalar_type()).contiguous();
    at::Tensor da = at::empty_like(a), db = at::empty_like(a);
    launch_backward(g.data_ptr(), a.data_ptr(), saved[1].data_ptr(), da.data_ptr(), db.data_ptr(), a.numel(),
                    dtype_of(a, "swiglu"), stream_of(a));
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

}  // namespace kernels::swiglu
