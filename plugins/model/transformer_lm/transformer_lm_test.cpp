#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "config/registry.hpp"
#include "runner/context.hpp"
#include "runner/range.hpp"
#include "runner/weight_copies.hpp"
#include "test_support.hpp"
#include "transformer_lm_dims.hpp"
#include "config/validate.hpp"

namespace {

using namespace plugins::transformer_lm;
using plugins::transformer_lm::testing::tiny_dims;
using plugins::transformer_lm::testing::tiny_model;

runner::Params size_params(const std::string& size, std::int64_t d_model = 0, std::int64_t d_ff = 0,
                           std::int64_t num_layers = 0, std::int64_t num_heads = 0) {
  runner::Params p("transformer_lm");
  p.set("size", size);
  p.set("d_model", d_model);
  p.set("d_ff", d_ff);
  p.set("num_layers", num_layers);
  p.set("num_heads", num_heads);
  p.set("vocab_size", 10000);
  p.set("context_length", 256);
  p.set("rope_theta", 10000.0);
  return p;
}

TEST(TransformerLmDims, SizesFollowTheSpecTable) {
  const TransformerDims xl = dims_from_params(size_params("xl"));
  EXPECT_EQ(xl.d_model, 1600);
  EXPECT_EQ(xl.d_ff, 6400);
  EXPECT_EQ(xl.num_layers, 48);
  EXPECT_EQ(xl.num_heads, 25);
  EXPECT_EQ(xl.d_head(), 64);
  EXPECT_EQ(dims_from_params(size_params("2.7B")).d_model, 2560);
}

TEST(TransformerLmDims, SmallModelParameterCountIsTheHandDerivedValue) {
  // 2 * 10000 * 768 (embedding + head) + 12 * (4 * 768^2 + 3 * 768 * 3072 + 2 * 768) + 768
  EXPECT_EQ(parameter_count(dims_from_params(size_params("small"))), 128'625'408);
}

TEST(TransformerLmDims, NonZeroOptionOverridesTheSizeRow) {
  const TransformerDims d = dims_from_params(size_params("medium", 0, 0, 2, 0));
  EXPECT_EQ(d.num_layers, 2);
  EXPECT_EQ(d.d_model, 1024);
}

TEST(TransformerLmDims, CustomSizeNeedsAllFourDimensions) {
  EXPECT_THROW(dims_from_params(size_params("custom", 64, 128, 2, 0)), std::invalid_argument);
  EXPECT_EQ(dims_from_params(size_params("custom", 64, 128, 2, 4)).d_head(), 16);
}

TEST(TransformerLmDims, RejectsHeadCountThatDoesNotDivideDModel) {
  EXPECT_THROW(dims_from_params(size_params("custom", 64, 128, 2, 5)), std::invalid_argument);
}

TEST(TransformerLm, ParameterNamesMatchThePythonStateDict) {
  auto model = tiny_model();
  std::set<std::string> names;
  for (const auto& item : model->module().named_parameters()) names.insert(item.key());
  std::set<std::string> expected{"token_embeddings.weight", "ln_final.weight", "lm_head.weight"};
  for (const std::string layer : {"layers.0.", "layers.1."}) {
    for (const char* suffix : {"ln1.weight", "ln2.weight", "attn.q_proj.weight", "attn.k_proj.weight",
                               "attn.v_proj.weight", "attn.output_proj.weight", "ffn.w1.weight",
                               "ffn.w2.weight", "ffn.w3.weight"}) {
      expected.insert(layer + suffix);
    }
  }
  EXPECT_EQ(names, expected);
}

TEST(TransformerLm, RopeTablesAreNotPartOfTheState) {
  EXPECT_EQ(tiny_model()->module().named_buffers().size(), 0u);
}

TEST(TransformerLm, ParameterCountMatchesTheFormula) {
  auto model = tiny_model();
  std::int64_t numel = 0;
  for (const auto& p : model->module().parameters()) {
    numel += p.numel();
    EXPECT_EQ(p.scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(numel, parameter_count(tiny_dims()));
}

TEST(TransformerLm, InitIsTruncatedNormalWithTheSpecStd) {
  TransformerDims dims = tiny_dims();
  dims.d_model = 256;
  dims.d_ff = 512;
  dims.num_layers = 1;
  auto model = tiny_model(3, dims);
  auto params = model->module().named_parameters();
  const torch::Tensor w1 = params["layers.0.ffn.w1.weight"];
  const double std = std::sqrt(2.0 / (256 + 512));
  EXPECT_LE(w1.abs().max().item<double>(), 3 * std * (1 + 1e-6));
  EXPECT_NEAR(w1.std().item<double>() / std, 0.9866, 0.01);  // std of N(0,1) cut at +-3
  const torch::Tensor emb = params["token_embeddings.weight"];
  EXPECT_LE(emb.abs().max().item<double>(), 3.0 * (1 + 1e-6));
  EXPECT_TRUE(torch::equal(params["layers.0.ln1.weight"], torch::ones({256})));
}

TEST(TransformerLm, SameSeedGivesSameWeightsAndOtherSeedDifferent) {
  auto a = tiny_model(7), b = tiny_model(7), c = tiny_model(8);
  auto pa = a->module().named_parameters(), pb = b->module().named_parameters(), pc = c->module().named_parameters();
  EXPECT_TRUE(torch::equal(pa["lm_head.weight"], pb["lm_head.weight"]));
  EXPECT_FALSE(torch::equal(pa["lm_head.weight"], pc["lm_head.weight"]));
}

TEST(TransformerLm, RandomBatchTargetsAreTheInputsShiftedByOne) {
  auto model = tiny_model();
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  runner::Batch batch = model->random_batch(3, gen);
  EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{3, 16}));
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(batch.inputs.narrow(1, 1, 15), batch.targets.narrow(1, 0, 15)));
  EXPECT_GE(batch.inputs.min().item<std::int64_t>(), 0);
  EXPECT_LT(batch.targets.max().item<std::int64_t>(), 101);
}

TEST(TransformerLm, LogitsAreBatchByContextByVocabAndLossIsAScalar) {
  auto model = tiny_model();
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(6);
  runner::Batch batch = model->random_batch(2, gen);
  torch::Tensor logits = model->forward(batch.inputs);
  EXPECT_EQ(logits.sizes(), (std::vector<std::int64_t>{2, 16, 101}));
  torch::Tensor loss = model->loss(logits, batch.targets);
  EXPECT_EQ(loss.dim(), 0);
  // Random init: loss near log(vocab) within a generous band.
  EXPECT_GT(loss.item<double>(), 0.5 * std::log(101.0));
}

TEST(TransformerLm, FutureTokensDoNotChangeEarlierLogits) {
  auto model = tiny_model();
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(9);
  torch::Tensor inputs = model->random_batch(1, gen).inputs;
  torch::Tensor changed = inputs.clone();
  changed.index_put_({0, 10}, (inputs.index({0, 10}) + 1) % 101);
  torch::NoGradGuard no_grad;
  torch::Tensor a = model->forward(inputs), b = model->forward(changed);
  EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 10), b.narrow(1, 0, 10)));
  EXPECT_FALSE(torch::allclose(a.narrow(1, 10, 1), b.narrow(1, 10, 1)));
}

TEST(TransformerLm, Bf16AutocastGivesBf16LogitsAndFp32Loss) {
  auto model = tiny_model();
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(10);
  runner::Batch batch = model->random_batch(2, gen);
  runner::AutocastScope autocast(torch::kCPU, runner::Precision::parse("bf16"));
  torch::Tensor logits = model->forward(batch.inputs);
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(model->loss(logits, batch.targets).scalar_type(), torch::kFloat);
}

class RecordingListener : public runner::RangeListener {
 public:
  void range_push(const std::string&) override { paths.push_back(runner::current_range_path()); }
  void range_pop(const std::string&) override {}
  std::vector<std::string> paths;
};

TEST(TransformerLm, NamesEachLayerAndItsSublayersAsRanges) {
  auto model = tiny_model();
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  runner::Batch batch = model->random_batch(1, gen);
  RecordingListener listener;
  runner::add_range_listener(&listener);
  model->forward(batch.inputs);
  runner::remove_range_listener(&listener);
  const std::vector<std::string> expected{"embedding",           "layer0",
                                          "layer0/attention",    "layer0/feed_forward",
                                          "layer1",              "layer1/attention",
                                          "layer1/feed_forward", "final_norm",
                                          "lm_head"};
  EXPECT_EQ(listener.paths, expected);
}

// With fused kernels each residual add runs in the norm after it, so the final norm is
// part of the last layer's feed-forward range.
TEST(TransformerLm, FusedModelNamesTheSameLayersAndSublayers) {
  auto model = std::make_unique<TransformerLM>(tiny_dims(), std::make_unique<plugins::transformer_lm::testing::SdpaAttention>(),
                                               c10::Device(c10::kCPU), 11, /*fused_kernels=*/true);
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(11);
  runner::Batch batch = model->random_batch(1, gen);
  RecordingListener listener;
  runner::add_range_listener(&listener);
  model->forward(batch.inputs);
  runner::remove_range_listener(&listener);
  const std::vector<std::string> expected{"embedding", "layer0", "layer0/attention", "layer0/feed_forward", "layer1",
                                          "layer1/attention", "layer1/feed_forward", "lm_head"};
  EXPECT_EQ(listener.paths, expected);
}

TEST(TransformerLm, OnCudaGivesTheCpuLogitsForTheSameWeights) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto cpu = tiny_model(13);
  auto cuda = std::make_unique<TransformerLM>(tiny_dims(), std::make_unique<plugins::transformer_lm::testing::SdpaAttention>(),
                                              c10::Device(c10::kCUDA), 13);
  auto cpu_params = cpu->module().named_parameters();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : cuda->module().named_parameters()) {
      EXPECT_TRUE(p.value().is_cuda()) << p.key();
      p.value().copy_(cpu_params[p.key()]);
    }
  }
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(14);
  runner::Batch batch = cuda->random_batch(2, gen);  // CPU generator, CUDA batch
  ASSERT_TRUE(batch.inputs.is_cuda());
  torch::Tensor logits = cuda->forward(batch.inputs);
  torch::Tensor expected = cpu->forward(batch.inputs.cpu());
  EXPECT_LT((logits.cpu() - expected).norm().item<double>() / expected.norm().item<double>(), 1e-5);
  cuda->loss(logits, batch.targets).backward();
  for (const auto& p : cuda->module().parameters()) EXPECT_TRUE(p.grad().defined() && p.grad().is_cuda());
}

// The fused-kernel model against the tensor-op model with the same weights, both on
// CUDA, after one forward and backward: fp32 within 1e-5, bf16 autocast within 2e-2.
TEST(TransformerLm, FusedKernelsOnCudaMatchTheTensorOpModel) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    auto make = [](bool fused) {
      return std::make_unique<TransformerLM>(tiny_dims(), std::make_unique<plugins::transformer_lm::testing::SdpaAttention>(),
                                             c10::Device(c10::kCUDA), 21, fused);
    };
    auto naive = make(false), fused = make(true);
    torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(22);
    const runner::Batch batch = naive->random_batch(3, gen);
    auto step = [&](TransformerLM& model) {
      torch::Tensor logits, loss;
      {
        runner::AutocastScope autocast(c10::Device(c10::kCUDA), runner::Precision::parse(precision));
        logits = model.forward(batch.inputs);
        loss = model.loss(logits, batch.targets);
      }
      loss.backward();
      return std::make_pair(logits.detach().to(torch::kDouble), loss.detach().to(torch::kDouble));
    };
    const auto [naive_logits, naive_loss] = step(*naive);
    const auto [fused_logits, fused_loss] = step(*fused);
    const double tol = precision == "fp32" ? 1e-5 : 2e-2;
    auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
      return (a.to(torch::kDouble) - b.to(torch::kDouble)).norm().item<double>() / b.to(torch::kDouble).norm().item<double>();
    };
    EXPECT_LT(rel(fused_logits, naive_logits), tol);
    EXPECT_LT(rel(fused_loss, naive_loss), tol);
    auto naive_params = naive->module().named_parameters();
    for (const auto& p : fused->module().named_parameters())
      EXPECT_LT(rel(p.value().grad(), naive_params[p.key()].grad()), tol) << p.key();
  }
}

// Under bf16 autocast the fused attention reads one packed [3 d, d] working copy: the
// registered copies of q_proj, k_proj and v_proj are its consecutive row blocks, each equal
// to its weight in bf16 bit for bit, re-cast after the weights change through tensor ops.
TEST(TransformerLm, FusedAttentionReadsOnePackedWorkingCopyOfQkv) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto model = std::make_unique<TransformerLM>(tiny_dims(), std::make_unique<plugins::transformer_lm::testing::SdpaAttention>(),
                                               c10::Device(c10::kCUDA), 41, /*fused_kernels=*/true);
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(42);
  const runner::Batch batch = model->random_batch(2, gen);
  auto forward = [&] {
    runner::AutocastScope autocast(c10::Device(c10::kCUDA), runner::Precision::parse("bf16"));
    return model->forward(batch.inputs);
  };
  forward();
  auto params = model->module().named_parameters();
  auto check = [&] {
    std::vector<torch::Tensor> copies;
    for (const char* name : {"q_proj", "k_proj", "v_proj"}) {
      const torch::Tensor w = params[std::string("layers.0.attn.") + name + ".weight"];
      copies.push_back(runner::weight_copy(w));
      ASSERT_TRUE(copies.back().defined()) << name;
      EXPECT_TRUE(torch::equal(copies.back(), w.to(torch::kBFloat16))) << name;
    }
    const auto block = copies[0].numel() * static_cast<std::int64_t>(copies[0].element_size());
    EXPECT_EQ(static_cast<char*>(copies[1].data_ptr()) - static_cast<char*>(copies[0].data_ptr()), block);
    EXPECT_EQ(static_cast<char*>(copies[2].data_ptr()) - static_cast<char*>(copies[1].data_ptr()), block);
  };
  check();
  {
    torch::NoGradGuard no_grad;
    params["layers.0.attn.k_proj.weight"].mul_(0.5);
  }
  forward();
  check();
}

// Ten bf16 train steps (AdamW, one batch) of the fused-kernel model track the tensor-op
// model's losses to 1e-2 relative, step by step: the fused residual add + norm and the
// other kernels change rounding only.
TEST(TransformerLm, FusedKernelsTrainLikeTheTensorOpModelForTenBf16Steps) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto make = [](bool fused) {
    return std::make_unique<TransformerLM>(tiny_dims(), std::make_unique<plugins::transformer_lm::testing::SdpaAttention>(),
                                           c10::Device(c10::kCUDA), 31, fused);
  };
  auto naive = make(false), fused = make(true);
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(32);
  const runner::Batch batch = naive->random_batch(4, gen);
  auto losses = [&](TransformerLM& model) {
    torch::optim::AdamW optimizer(model.module().parameters(), torch::optim::AdamWOptions(1e-2));
    std::vector<double> out;
    for (int step = 0; step < 10; ++step) {
      torch::Tensor loss;
      {
        runner::AutocastScope autocast(c10::Device(c10::kCUDA), runner::Precision::parse("bf16"));
        loss = model.loss(model.forward(batch.inputs), batch.targets);
      }
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      out.push_back(loss.item<double>());
    }
    return out;
  };
  const std::vector<double> expected = losses(*naive), got = losses(*fused);
  EXPECT_LT(got.back(), 0.9 * got.front()) << "the loss must fall on a fixed batch";
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_LT(std::abs(got[i] - expected[i]), 1e-2 * std::abs(expected[i])) << "step " << i;
}

TEST(TransformerLm, CreatesThroughTheRegistryWithNaiveAttentionByDefault) {
  runner::PluginRegistry registry;
  registry.scan({RUNNER_TEST_PLUGIN_DIR});
  runner::Params params = runner::resolve_plugin_options(
      registry, runner::PluginKind::Model, "transformer_lm",
      "{size: custom, d_model: 32, d_ff: 64, num_layers: 1, num_heads: 2, vocab_size: 50, context_length: 8}");
  EXPECT_EQ(params.plugin("attention").plugin_name(), "naive");
  runner::Context ctx;
  ctx.plugins = &registry;
  auto model = ctx.create<runner::Model>(runner::PluginKind::Model, params);
  torch::Generator gen = at::make_generator<at::CPUGeneratorImpl>(12);
  runner::Batch batch = model->random_batch(2, gen);
  EXPECT_EQ(model->forward(batch.inputs).sizes(), (std::vector<std::int64_t>{2, 8, 50}));
}

}  // namespace
