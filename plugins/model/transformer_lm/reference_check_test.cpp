// Cross-check against tests/reference/transformer_lm_reference.py: the same weights
// and batch through an independent plain-PyTorch implementation must give the same
// logits, loss and parameter gradients (fp32, relative error < 1e-5), for the
// tensor-op model on the CPU and the fused-kernel model (fused_kernels: true) on the
// CPU (its references) and on CUDA (its kernels; TF32 off, LibTorch's default).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/model.hpp"
#include "tensor_files.hpp"
#include "config/validate.hpp"

namespace {

namespace fs = std::filesystem;
using plugins::transformer_lm::testing::read_tensors;
using plugins::transformer_lm::testing::write_tensors;

constexpr double kTolerance = 1e-5;
constexpr std::uint64_t kSeed = 20240611;

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() /
         b.to(torch::kDouble).norm().item<double>();
}

bool python_has_torch() {
  const std::string cmd = std::string("\"") + RUNNER_PYTHON + "\" -c 'import torch' >/dev/null 2>&1";
  return std::string(RUNNER_PYTHON).size() > 0 && std::system(cmd.c_str()) == 0;
}

void check_against_python(const std::string& extra_options, c10::Device device) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  const runner::Params params = runner::resolve_plugin_options(
      registry, runner::PluginKind::Model, "transformer_lm",
      "{size: custom, d_model: 64, d_ff: 128, num_layers: 2, num_heads: 4, vocab_size: 101, context_length: 16" +
          extra_options + "}");
  runner::Context ctx;
  ctx.plugins = &registry;
  ctx.seed = kSeed;
  ctx.device = device;
  auto model = ctx.create<runner::Model>(runner::PluginKind::Model, params);

  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(kSeed);
  const runner::Batch batch = model->random_batch(3, gen);
  const torch::Tensor logits = model->forward(batch.inputs);
  const torch::Tensor loss = model->loss(logits, batch.targets);
  loss.backward();

  const fs::path dir = fs::temp_directory_path() / ("runner_lm_reference_" + std::to_string(::getpid()));
  std::map<std::string, torch::Tensor> in{{"inputs", batch.inputs.cpu()}, {"targets", batch.targets.cpu()}};
  for (const auto& p : model->module().named_parameters()) in[p.key()] = p.value().detach().cpu();
  write_tensors(dir / "in", in);

  const std::string cmd = std::string("\"") + RUNNER_PYTHON + "\" \"" RUNNER_SOURCE_DIR +
                          "/tests/reference/transformer_lm_reference.py\" \"" + (dir / "in").string() + "\" \"" +
                          (dir / "out").string() + "\" --num-heads 4";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "reference failed: " << cmd;
  const std::map<std::string, torch::Tensor> ref = read_tensors(dir / "out");
  plugins::transformer_lm::testing::remove_tree(dir);

  SCOPED_TRACE("seed " + std::to_string(kSeed));
  double worst = 0;
  auto expect_close = [&](const torch::Tensor& ours, const std::string& name) {
    ASSERT_TRUE(ref.count(name)) << name << " missing from the reference output";
    const double err = relative_error(ours.cpu(), ref.at(name));
    worst = std::max(worst, err);
    EXPECT_LT(err, kTolerance) << name;
  };
  expect_close(logits, "logits");
  expect_close(loss, "loss");
  int compared = 0;
  for (const auto& p : model->module().named_parameters()) {
    expect_close(p.value().grad(), "grad." + p.key());
    ++compared;
  }
  EXPECT_EQ(compared, 3 + 2 * 9);
  std::printf("worst relative error over logits, loss and %d gradients: %.3g\n", compared, worst);
}

TEST(TransformerLmReference, MatchesPythonLogitsLossAndEveryGradient) {
  if (!python_has_torch()) GTEST_SKIP() << "RUNNER_PYTHON='" << RUNNER_PYTHON << "' cannot import torch";
  check_against_python("", c10::kCPU);
}

TEST(TransformerLmReference, FusedKernelPathOnCpuMatchesPython) {
  if (!python_has_torch()) GTEST_SKIP() << "RUNNER_PYTHON='" << RUNNER_PYTHON << "' cannot import torch";
  check_against_python(", fused_kernels: true", c10::kCPU);
}

TEST(TransformerLmReference, FusedKernelsOnCudaMatchPython) {
  if (!python_has_torch()) GTEST_SKIP() << "RUNNER_PYTHON='" << RUNNER_PYTHON << "' cannot import torch";
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  check_against_python(", fused_kernels: true", c10::kCUDA);
}

}  // namespace
