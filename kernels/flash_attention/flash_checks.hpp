// The input checks forward_bshd and backward_bshd share with the [..., seq, d] entry points
// (flash_options.cpp defines them). Internal: not part of flash_attention.hpp.
#pragma once
#include <ATen/core/Tensor.h>

namespace kernels::flash::detail {

// What every entry point checks: dtypes, devices, head dim. q, k, v already have one rank.
void check_common(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
// q [batch, lq, heads, d], k = v [batch, lk, heads, d]: shapes, sizes, then check_common.
void check_bshd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace kernels::flash::detail
