#include "adamw/fused_adamw.hpp"

#include <array>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "common/dtype.hpp"

#ifdef RUNNER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace kernels::adamw {
namespace {

void check_lists(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                 const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                 const std::vector<at::Tensor>& steps, const std::vector<at::Tensor>& copies) {
  const size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      (!copies.empty() && copies.size() != n))
    throw std::invalid_argument("fused_adamw: params, grads, exp_avgs, exp_avg_sqs, steps (and copies) differ in length");
  for (size_t i = 0; i < n; ++i) {
    const std::string at_i = " (tensor " + std::to_string(i) + ")";
    if (params[i].scalar_type() != at::kFloat || exp_avgs[i].scalar_type() != at::kFloat ||
        exp_avg_sqs[i].scalar_type() != at::kFloat || steps[i].scalar_type() != at::kFloat)
      throw std::invalid_argument("fused_adamw: params, moments and steps must be float32" + at_i);
    if (grads[i].sizes() != params[i].sizes() || exp_avgs[i].sizes() != params[i].sizes() ||
        exp_avg_sqs[i].sizes() != params[i].sizes())
      throw std::invalid_argument("fused_adamw: gradient or moment shape differs from the parameter's" + at_i);
    if (steps[i].numel() != 1) throw std::invalid_argument("fused_adamw: a step count must be a scalar" + at_i);
    if (!copies.empty() && copies[i].defined() &&
        ((copies[i].scalar_type() != at::kBFloat16 && copies[i].scalar_type() != at::kHalf) ||
         copies[i].sizes() != params[i].sizes() || copies[i].device() != params[i].device() ||
         !copies[i].is_contiguous()))
      throw std::invalid_argument("fused_adamw: a copy must be a contiguous bf16 or fp16 tensor of the parameter's "
                                  "shape and device" + at_i);
    const auto device = params[i].device();
    if (grads[i].device() != device || exp_avgs[i].device() != device || exp_avg_sqs[i].device() != device ||
        steps[i].device() != device)
      throw std::invalid_argument("fused_adamw: a parameter's gradient, moments and step are on different devices" +
                                  at_i);
  }
}

#ifdef RUNNER_WITH_CUDA
CopyDType copy_dtype_of(const std::vector<at::Tensor>& copies, size_t i) {
  if (copies.empty() || !copies[i].defined()) return CopyDType::None;
  return copies[i].scalar_type() == at::kBFloat16 ? CopyDType::BF16 : CopyDType::F16;
}

void run_cuda(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
              const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
              const std::vector<at::Tensor>& steps, const Hyperparameters& hyper,
              const std::vector<at::Tensor>& copies) {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].is_contiguous() || !grads[i].is_contiguous() || !exp_avgs[i].is_contiguous() ||
        !exp_avg_sqs[i].is_contiguous())
      throw std::invalid_argument("fused_adamw: CUDA tensors must be contiguous (tensor " + std::to_string(i) + ")");
  }
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(params.front().device().index()).stream();
  // One pass per gradient dtype and copy dtype (usually one: fp32 gradients, bf16 copies or
  // none), in launches of up to 32 tensors.
  for (int pass = 0; pass < 9; ++pass) {
    const DType dtype = std::array<DType, 3>{DType::F32, DType::BF16, DType::F16}[pass / 3];
    const CopyDType copy_dtype = std::array<CopyDType, 3>{CopyDType::None, CopyDType::BF16, CopyDType::F16}[pass % 3];
    TensorBatch batch;
    batch.chunk_begin[0] = 0;
    auto flush = [&] {
      if (batch.count > 0) launch_fused_adamw(batch, dtype, copy_dtype, hyper, stream);
      batch.count = 0;
    };
    for (size_t i = 0; i < params.size(); ++i) {
      if (dtype_of(grads[i], "fused_adamw") != dtype || copy_dtype_of(copies, i) != copy_dtype ||
          params[i].numel() == 0)
        continue;
      const int k = batch.count;
      batch.param[k] = params[i].data_ptr<float>();
      batch.grad[k] = grads[i].data_ptr();
      batch.exp_avg[k] = exp_avgs[i].data_ptr<float>();
      batch.exp_avg_sq[k] = exp_avg_sqs[i].data_ptr<float>();
      batch.step[k] = steps[i].data_ptr<float>();
      batch.copy[k] = copy_dtype == CopyDType::None ? nullptr : copies[i].data_ptr();
      batch.numel[k] = params[i].numel();
      const std::int64_t chunks = (params[i].numel() + kChunkElements - 1) / kChunkElements;
      batch.chunk_begin[k + 1] = batch.chunk_begin[k] + static_cast<int>(chunks);
      batch.count = k + 1;
      if (batch.count == kMaxTensorsPerLaunch) flush();
    }
    flush();
  }
}
#endif

}  // namespace

void adamw_reference_(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                      const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                      const std::vector<at::Tensor>& steps, const Hyperparameters& h,
                      const std::vector<at::Tensor>& copies) {
  check_lists(params, grads, exp_avgs, exp_avg_sqs, steps, copies);
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const double t = steps[i].item<double>();
    const at::Tensor g = grads[i].to(at::kFloat);
    params[i].mul_(1.0 - h.lr * h.weight_decay);
    exp_avgs[i].mul_(h.beta1).add_(g, 1.0 - h.beta1);
    exp_avg_sqs[i].mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
    const at::Tensor denom = (exp_avg_sqs[i].sqrt() / std::sqrt(1.0 - std::pow(h.beta2, t))).add_(h.eps);
    params[i].addcdiv_(exp_avgs[i], denom, -h.lr / (1.0 - std::pow(h.beta1, t)));
    if (!copies.empty() && copies[i].defined()) copies[i].copy_(params[i]);
  }
}

void fused_adamw_(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                  const std::vector<at::Tensor>& steps, const Hyperparameters& hyper,
                  const std::vector<at::Tensor>& copies) {
  if (params.empty()) return;
  check_lists(params, grads, exp_avgs, exp_avg_sqs, steps, copies);
  if (!params.front().is_cuda()) {
    adamw_reference_(params, grads, exp_avgs, exp_avg_sqs, steps, hyper, copies);
    return;
  }
#ifdef RUNNER_WITH_CUDA
  run_cuda(params, grads, exp_avgs, exp_avg_sqs, steps, hyper, copies);
#else
  throw std::runtime_error("fused_adamw: CUDA tensors, but this build has no CUDA kernels");
#endif
}

}  // namespace kernels::adamw
