#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "rmsnorm/rmsnorm.hpp"

namespace {

using kernels::rmsnorm::rms_norm;
using kernels::rmsnorm::rms_norm_reference;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() / b.to(torch::kDouble).norm().item<double>();
}

// The spec's RMSNorm and its hand-derived gradient, in fp64:
//   y = x r w, r = (mean(x^2) + eps)^-1/2
//   dx = r w dy - x r^3 / d * sum(dy w x),  dw = sum over rows of dy x r
struct Spec {
  torch::Tensor y, dx, dw;
  Spec(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& dy, double eps) {
    const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble), gd = dy.to(torch::kDouble);
    const auto r = (xd.pow(2).mean(-1, true) + eps).rsqrt();
    y = xd * r * wd;
    dx = r * wd * gd - xd * r.pow(3) / x.size(-1) * (gd * wd * xd).sum(-1, true);
    dw = (gd * xd * r).reshape({-1, x.size(-1)}).sum(0);
  }
};

struct Result {
  torch::Tensor y, dx, dw;
};

template <class Op>
Result run(Op op, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& dy, double eps) {
  auto xv = x.detach().clone().requires_grad_(true), wv = w.detach().clone().requires_grad_(true);
  auto y = op(xv, wv, eps);
  y.backward(dy);
  return {y.detach(), xv.grad(), wv.grad()};
}

TEST(RMSNormReference, MatchesTheSpecAndItsGradient) {
  torch::manual_seed(0);
  const auto x = torch::randn({3, 5, 48}), w = torch::rand({48}) + 0.5, dy = torch::randn({3, 5, 48});
  const Result r = run(rms_norm_reference, x, w, dy, 1e-5);
  const Spec spec(x, w, dy, 1e-5);
  EXPECT_LT(relative_error(r.y, spec.y), 1e-6);
  EXPECT_LT(relative_error(r.dx, spec.dx), 1e-5);
  EXPECT_LT(relative_error(r.dw, spec.dw), 1e-5);
}

TEST(RMSNormReference, CpuTensorsTakeTheReference) {
  const auto x = torch::randn({4, 16}), w = torch::ones({16});
  EXPECT_TRUE(torch::equal(rms_norm(x, w, 1e-5), rms_norm_reference(x, w, 1e-5)));
}

TEST(RMSNormKernel, MatchesTheReferenceInFp32Bf16AndFp16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(1);
  // 768: the small model; 2560: 2.7B; 33: not a multiple of 4 (scalar kernels); 9000 rows:
  // more 4-row tiles than blocks; 1600 x 7 rows: xl, a last tile of 3 rows.
  for (const auto& shape :
       std::vector<std::vector<std::int64_t>>{{4, 256, 768}, {2, 8, 2560}, {7, 33}, {9000, 64}, {7, 1600}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      const auto opts = torch::TensorOptions().device(torch::kCUDA);
      const auto x = torch::randn(shape, opts).to(dtype), dy = torch::randn(shape, opts).to(dtype);
      const auto w = torch::rand({shape.back()}, opts) + 0.5;
      const Result k = run(rms_norm, x, w, dy, 1e-5);
      const Spec spec(x, w, dy, 1e-5);
      const double tol = dtype == torch::kFloat ? 1e-5 : 2e-2;
      SCOPED_TRACE(std::to_string(shape.back()) + " " + std::string(c10::toString(dtype)));
      EXPECT_EQ(k.y.scalar_type(), dtype);
      EXPECT_LT(relative_error(k.y, spec.y), tol);
      EXPECT_LT(relative_error(k.dx, spec.dx), tol);
      EXPECT_LT(relative_error(k.dw, spec.dw), dtype == torch::kFloat ? 1e-5 : 1e-2);
      const Result ref = run(rms_norm_reference, x, w, dy, 1e-5);
      EXPECT_LT(relative_error(k.y, ref.y), tol);
      EXPECT_LT(relative_error(k.dx, ref.dx), tol);
    }
  }
}

// The fused residual add + RMSNorm against the spec in fp64: h = x + a, y = norm(h) w, and
// with upstream gradients gh (of h) and gy (of y): dx = da = gh + norm's dx(gy), dw as above.
struct AddResult {
  torch::Tensor h, y, dx, da, dw;
};

template <class Op>
AddResult run_add(Op op, const torch::Tensor& x, const torch::Tensor& a, const torch::Tensor& w,
                  const torch::Tensor& gh, const torch::Tensor& gy, at::ScalarType out_dtype) {
  auto xv = x.detach().clone().requires_grad_(true), av = a.detach().clone().requires_grad_(true);
  auto wv = w.detach().clone().requires_grad_(true);
  auto [h, y] = op(xv, av, wv, 1e-5, out_dtype);
  std::vector<torch::Tensor> outputs{y}, grads{gy.to(y.scalar_type())};
  if (gh.defined()) {
    outputs.push_back(h);
    grads.push_back(gh);
  }
  torch::autograd::backward(outputs, grads);
  return {h.detach(), y.detach(), xv.grad(), av.grad(), wv.grad()};
}

void expect_add_matches_spec(const AddResult& r, const torch::Tensor& x, const torch::Tensor& a,
                             const torch::Tensor& w, const torch::Tensor& gh, const torch::Tensor& gy, double tol) {
  const auto hd = x.to(torch::kDouble) + a.to(torch::kDouble);
  const Spec spec(hd, w, gy.to(torch::kDouble), 1e-5);
  const auto dh = gh.defined() ? spec.dx + gh.to(torch::kDouble) : spec.dx;
  EXPECT_LT(relative_error(r.h, hd), 1e-6);
  EXPECT_LT(relative_error(r.y, spec.y), tol);
  EXPECT_LT(relative_error(r.dx, dh), tol);
  EXPECT_LT(relative_error(r.da, dh), tol);
  EXPECT_LT(relative_error(r.dw, spec.dw), tol);
  EXPECT_EQ(r.da.scalar_type(), a.scalar_type());
  EXPECT_EQ(r.dx.scalar_type(), x.scalar_type());
}

TEST(AddRMSNormReference, MatchesTheSpecWithBothUpstreamGradients) {
  torch::manual_seed(2);
  const auto x = torch::randn({3, 5, 48}), a = torch::randn({3, 5, 48}), w = torch::rand({48}) + 0.5;
  const auto gh = torch::randn({3, 5, 48}), gy = torch::randn({3, 5, 48});
  const AddResult r = run_add(kernels::rmsnorm::add_rms_norm_reference, x, a, w, gh, gy, torch::kFloat);
  expect_add_matches_spec(r, x, a, w, gh, gy, 1e-5);
  // On a CPU the op is its reference.
  const auto [h, y] = kernels::rmsnorm::add_rms_norm(x, a, w, 1e-5, torch::kBFloat16);
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(y, rms_norm_reference(x + a, w, 1e-5).to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(h, x + a));
}

TEST(AddRMSNormKernel, MatchesTheSpecAndTheReferenceInFp32Bf16AndFp16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(3);
  const auto opts = torch::TensorOptions().device(torch::kCUDA);
  for (const auto& shape :
       std::vector<std::vector<std::int64_t>>{{4, 256, 768}, {2, 8, 2560}, {7, 33}, {9000, 64}, {7, 1600}}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      for (const bool with_gh : {true, false}) {
        SCOPED_TRACE(std::to_string(shape.back()) + " " + std::string(c10::toString(dtype)) +
                     (with_gh ? " with dh_out" : " without dh_out"));
        const auto x = torch::randn(shape, opts), a = torch::randn(shape, opts).to(dtype);
        const auto w = torch::rand({shape.back()}, opts) + 0.5, gy = torch::randn(shape, opts).to(dtype);
        const auto gh = with_gh ? torch::randn(shape, opts) : torch::Tensor();
        const AddResult k = run_add(kernels::rmsnorm::add_rms_norm, x, a, w, gh, gy, dtype);
        EXPECT_EQ(k.y.scalar_type(), dtype);
        const double tol = dtype == torch::kFloat ? 1e-5 : 2e-2;
        expect_add_matches_spec(k, x, a, w, gh, gy, tol);
        const AddResult ref = run_add(kernels::rmsnorm::add_rms_norm_reference, x, a, w, gh, gy, dtype);
        EXPECT_TRUE(torch::equal(k.h, ref.h));
        EXPECT_LT(relative_error(k.y, ref.y), tol);
        EXPECT_LT(relative_error(k.dx, ref.dx), tol);
        EXPECT_LT(relative_error(k.da, ref.da), tol);
      }
    }
  }
}

}  // namespace
