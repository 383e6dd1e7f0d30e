#include "transformer_lm.hpp"

#include <string>

#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/randint.h>
#include <torch/nn/modules/container/modulelist.h>

#include "cross_entropy/cross_entropy.hpp"
#include "runner/device.hpp"
#include "runner/range.hpp"

namespace plugins::transformer_lm {

LanguageModelNet::LanguageModelNet(const TransformerDims& dims, runner::Attention* attention,
                                   const c10::Device& device, at::Generator& gen, bool fused)
    : fused_(fused) {
  token_embeddings_ = register_module("token_embeddings",
                                      std::make_shared<Embedding>(dims.vocab_size, dims.d_model, device, gen));
  rope_ = std::make_unique<RotaryEmbedding>(dims.d_head(), dims.context_length, dims.rope_theta, device);
  torch::nn::ModuleList layers;
  for (std::int64_t i = 0; i < dims.num_layers; ++i) {
    layers_.push_back(std::make_shared<TransformerBlock>(dims.d_model, dims.num_heads, dims.d_ff, rope_.get(),
                                                         attention, device, gen, fused));
    layers->push_back(layers_.back());
  }
  register_module("layers", layers);
  ln_final_ = register_module("ln_final", std::make_shared<RMSNorm>(dims.d_model, device, 1e-5, fused));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(dims.d_model, dims.vocab_size, device, gen, fused));
}

torch::Tensor LanguageModelNet::forward(const torch::Tensor& token_ids) const {
  torch::Tensor x;
  {
    runner::ScopedRange range("embedding");
    x = token_embeddings_->forward(token_ids);
  }
  if (fused_) {
    // Each residual add runs inside the norm after it (add_rms_norm): layer i's feed-forward
    // range ends with layer i+1's ln1, the last one's with the final norm.
    torch::Tensor y = layers_.empty() ? ln_final_->forward(x) : layers_.front()->ln1().forward(x);
    for (size_t i = 0; i < layers_.size(); ++i) {
      runner::ScopedRange range("layer" + std::to_string(i));
      const RMSNorm& next = i + 1 < layers_.size() ? layers_[i + 1]->ln1() : *ln_final_;
      std::tie(x, y) = layers_[i]->forward_fused(x, y, next);
    }
    x = y;
  } else {
    for (size_t i = 0; i < layers_.size(); ++i) {
      runner::ScopedRange range("layer" + std::to_string(i));
      x = layers_[i]->forward(x);
    }
    runner::ScopedRange range("final_norm");
    x = ln_final_->forward(x);
  }
  runner::ScopedRange range("lm_head");
  return lm_head_->forward(x);
}

TransformerLM::TransformerLM(const TransformerDims& dims, std::unique_ptr<runner::Attention> attention,
                             const c10::Device& device, std::uint64_t seed, bool fused_kernels)
    : dims_(dims), device_(device), fused_kernels_(fused_kernels), attention_(std::move(attention)) {
  check_dims(dims_);
  at::Generator gen = runner::seeded_generator(device, seed);
  net_ = std::make_shared<LanguageModelNet>(dims_, attention_.get(), device, gen, fused_kernels_);
}

runner::Batch TransformerLM::random_batch(std::int64_t batch_size, torch::Generator& generator) {
  // One sequence one token longer than the context, split into input and next-token target.
  const auto opts = at::TensorOptions().dtype(at::kLong).device(generator.device());
  const torch::Tensor tokens =
      at::randint(dims_.vocab_size, {batch_size, dims_.context_length + 1}, generator, opts).to(device_);
  return {tokens.narrow(1, 0, dims_.context_length).contiguous(),
          tokens.narrow(1, 1, dims_.context_length).contiguous()};
}

torch::Tensor TransformerLM::loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  // Reads bf16 logits as they are: no fp32 copy, statistics in fp32 inside the kernel.
  if (fused_kernels_) return kernels::cross_entropy::cross_entropy(logits.flatten(0, -2), targets.flatten());
  // Log-softmax over 10k classes in bf16 is too coarse; PyTorch references upcast too.
  const torch::Tensor wide = logits.to(at::promote_types(logits.scalar_type(), at::kFloat));
  return at::cross_entropy_loss(wide.flatten(0, -2), targets.flatten());
}

}  // namespace plugins::transformer_lm
