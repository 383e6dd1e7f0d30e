// The flash-attention kernels and their tiled reference as PyTorch custom operators:
//   torch.ops.load_library("<build>/kernels/flash_attention/libflash_attention_ops.so")
//   out, lse = torch.ops.runner_flash.forward(q, k, v, causal, kernel="auto")   # CUDA kernels
//   dq, dk, dv = torch.ops.runner_flash.backward(q, k, v, out, dout, lse, causal, kernel="auto")
// kernel: "auto", "mma_sync" or "wgmma" (Hopper, bf16/fp16). Each op takes window=0 after
// causal: window > 0 with causal = True is a sliding window of that many keys (mask.hpp).
//   torch.ops.runner_flash.tiled_forward / tiled_backward (tensor ops, any device)
// runner_flash_attention.py (beside this file) wraps each pair in a torch.autograd.Function.
#include <torch/library.h>

#include <string>
#include <tuple>

#include "flash_attention.hpp"
#include "flash_reference.hpp"

namespace {

namespace flash = kernels::flash;

flash::Mask mask_of(bool causal, std::int64_t window) {
  TORCH_CHECK(window == 0 || causal, "runner_flash: window ", window, " needs causal=True (a causal sliding window)");
  if (window > 0) return flash::Mask::of(flash::MaskKind::sliding_window, static_cast<int>(window));
  return flash::Mask::of(causal ? flash::MaskKind::causal : flash::MaskKind::none);
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                           c10::string_view kernel, std::int64_t window) {
  auto r = flash::forward(q, k, v, mask_of(causal, window), flash::parse_kernel_family(std::string(kernel)));
  return {r.out, r.lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                        const at::Tensor& out, const at::Tensor& dout,
                                                        const at::Tensor& lse, bool causal, c10::string_view kernel,
                                                        std::int64_t window) {
  auto g = flash::backward(q, k, v, out, dout, lse, mask_of(causal, window), flash::parse_kernel_family(std::string(kernel)));
  return {g.dq, g.dk, g.dv};
}

std::tuple<at::Tensor, at::Tensor> tiled_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 bool causal, std::int64_t tile_q, std::int64_t tile_k, std::int64_t window) {
  auto r = flash::reference::forward(q, k, v, mask_of(causal, window), {tile_q, tile_k});
  return {r.out, r.lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tiled_backward(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, const at::Tensor& out,
                                                              const at::Tensor& dout, const at::Tensor& lse,
                                                              bool causal, std::int64_t tile_q, std::int64_t tile_k, std::int64_t window) {
  auto g = flash::reference::backward(q, k, v, out, dout, lse, mask_of(causal, window), {tile_q, tile_k});
  return {g.dq, g.dk, g.dv};
}

}  // namespace

TORCH_LIBRARY(runner_flash, m) {
  m.def("forward(Tensor q, Tensor k, Tensor v, bool causal, str kernel=\"auto\", int window=0) -> (Tensor, Tensor)", &forward);
  m.def("backward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor dout, Tensor lse, bool causal,"
        " str kernel=\"auto\", int window=0) -> (Tensor, Tensor, Tensor)",
        &backward);
  m.def("tiled_forward(Tensor q, Tensor k, Tensor v, bool causal, int tile_q=64, int tile_k=64, int window=0) -> (Tensor, Tensor)",
        &tiled_forward);
  m.def("tiled_backward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor dout, Tensor lse, bool causal,"
        " int tile_q=64, int tile_k=64, int window=0) -> (Tensor, Tensor, Tensor)",
        &tiled_backward);
}
