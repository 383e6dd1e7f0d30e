// The spec's decoder-only transformer LM as a runner::Model:
//   token_embeddings -> num_layers x pre-norm block -> ln_final -> lm_head (untied)
// Parameters are fp32 on ctx.device; precision comes from the caller's autocast.
// Named ranges: "embedding", "layer<i>" (with "attention" and "feed_forward"
// inside), "final_norm", "lm_head".
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/nn/module.h>

#include "modules.hpp"
#include "runner/model.hpp"
#include "transformer_lm_dims.hpp"

namespace plugins::transformer_lm {

class LanguageModelNet : public torch::nn::Module {
 public:
  LanguageModelNet(const TransformerDims& dims, runner::Attention* attention, const c10::Device& device,
                   at::Generator& gen, bool fused = false);
  torch::Tensor forward(const torch::Tensor& token_ids) const;  // [B, T] -> logits [B, T, vocab]

 private:
  std::shared_ptr<Embedding> token_embeddings_;
  std::unique_ptr<RotaryEmbedding> rope_;
  std::vector<std::shared_ptr<TransformerBlock>> layers_;  // also registered as "layers.<i>"
  std::shared_ptr<RMSNorm> ln_final_;
  std::shared_ptr<Linear> lm_head_;
  bool fused_;
};

class TransformerLM : public runner::Model {
 public:
  // Weights are drawn from a generator on `device` seeded with `seed`. fused_kernels:
  // RMSNorm, RoPE, SwiGLU and the loss use kernels/ (their tensor-op references off CUDA).
  TransformerLM(const TransformerDims& dims, std::unique_ptr<runner::Attention> attention,
                const c10::Device& device, std::uint64_t seed, bool fused_kernels = false);

  torch::nn::Module& module() override { return *net_; }
  // Random token ids [B, context_length]; targets are the inputs shifted by one.
  runner::Batch random_batch(std::int64_t batch_size, torch::Generator& generator) override;
  torch::Tensor forward(const torch::Tensor& inputs) override { return net_->forward(inputs); }
  // Mean cross-entropy over all positions, in (at least) fp32.
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) override;

  const TransformerDims& dims() const { return dims_; }

 private:
  TransformerDims dims_;
  c10::Device device_;
  bool fused_kernels_;
  std::unique_ptr<runner::Attention> attention_;  // shared by all layers; outlives net_'s use
  std::shared_ptr<LanguageModelNet> net_;
};

}  // namespace plugins::transformer_lm
