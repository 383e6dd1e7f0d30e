// Low-precision working copies of fp32 master weights, shared by two plugins: a model
// whose forward reads the bf16 (or fp16) copy instead of casting the weight at every
// matmul, and an optimizer that rewrites the copy in the same pass that updates the
// weight (AdamW impl: fused), so the per-step casts leave the step.
//
// The model owns each copy and registers it here; the registry keeps weak references
// (an entry dies with its weight or its copy). A plugin that changes a weight without
// rewriting its copy changes it through tensor ops, which bump the weight's version
// counter: the model compares it with the version its copy was made from and re-casts.
#pragma once
#include <ATen/core/Tensor.h>

namespace runner {

// Registers `copy` (a bf16 or fp16 tensor of the weight's shape and device) as the
// working copy of `weight`, replacing any earlier one.
void register_weight_copy(const at::Tensor& weight, const at::Tensor& copy);

// The registered copy of `weight`, or an undefined tensor when it has none (or it died).
at::Tensor weight_copy(const at::Tensor& weight);

}  // namespace runner
