// Mean cross-entropy of logits [rows, classes] against int64 targets [rows], with
// a forward that reads each logit once (online max and sum of exponentials) and
// keeps only the per-row log-sum-exp (4 B per row) for the backward, which reads
// the logits once more and writes their gradient in the logits' dtype. The
// tensor-op version first makes an fp32 copy of the logits and keeps an fp32
// log-softmax of the same size.
//   loss = mean_i (lse_i - logits[i, t_i]),  lse_i = log sum_j exp(logits[i, j])
//   d logits[i, j] = (exp(logits[i, j] - lse_i) - [j == t_i]) * g / rows
//
// Bytes (rows x classes, size s): forward reads s per logit, backward reads s and
// writes s. Roofline on the H100 (~3.0 TB/s): B 4 x T 256 x vocab 10000 in bf16:
// forward 20.5 MB -> 6.8 us, backward 41 MB -> 13.7 us; fp32 twice that.
// Measured: not timed alone yet (the two H100 calls of issue 12 ran the kernel tests and
// the AdamW benchmark); torch_compile_model's "C++ fused + graph" column shows the effect.
#pragma once
#include <ATen/core/Tensor.h>

namespace kernels::cross_entropy {

// Autograd-capable; returns an fp32 scalar. CUDA logits (fp32, bf16, fp16) run the
// kernels, others the reference.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

// at::cross_entropy_loss on the logits upcast to fp32: the reference and CPU path.
at::Tensor cross_entropy_reference(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace kernels::cross_entropy
