// FlashAttention-2 in plain tensor ops with explicit tiles: the readable reference for
// the CUDA kernels (same outputs, same saved L, same backward recomputation), on any
// device and dtype. Tiles of tile_q queries x tile_k keys (at least 16 each); the math
// runs in fp32 (fp64 for fp64 inputs) and O is cast back to the input dtype.
//   forward:  for each query tile, one loop over key tiles keeping the running row max m,
//             sum l and unnormalised O; O /= l; L = m + log l. Masks (mask.hpp): key tiles
//             no query of the tile sees are skipped, only tiles crossing the rule are masked.
//   backward: delta = rowsum(O * dO); for each key tile and query tile:
//             P = exp(scale Q K^T - L), dV += P^T dO, dP = dO V^T, dS = P (dP - delta),
//             dQ += scale dS K, dK += scale dS^T Q.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "flash_attention.hpp"

namespace kernels::flash::reference {

struct Tiles {
  std::int64_t query = 64, key = 64;
};

ForwardResult forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Mask& mask, Tiles tiles);
Gradients backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                   const at::Tensor& dout, const at::Tensor& lse, const Mask& mask, Tiles tiles);

}  // namespace kernels::flash::reference
