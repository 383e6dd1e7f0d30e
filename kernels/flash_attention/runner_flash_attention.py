"""Our FlashAttention-2 kernels (and their tiled tensor-op reference) from PyTorch.

    import runner_flash_attention as rfa
    rfa.load("build/kernels/flash_attention/libflash_attention_ops.so")  # or $RUNNER_FLASH_OPS_LIB
    out = rfa.flash_attention(q, k, v, causal=True)        # CUDA, fp32/bf16/fp16, d a multiple of 8 up to 128
    out = rfa.tiled_flash_attention(q, k, v, causal=True)  # any device, tiles >= 16

Both are differentiable: forward saves O and the row log-sum-exp L, backward recomputes
P from Q, K, V and L (torch.ops.runner_flash.backward / tiled_backward).
"""
import os

import torch


def load(path=None):
    """Loads the operator library once; path defaults to $RUNNER_FLASH_OPS_LIB."""
    path = path or os.environ.get("RUNNER_FLASH_OPS_LIB")
    if not path:
        raise RuntimeError("runner_flash_attention.load: give the path of libflash_attention_ops.so "
                           "(or set RUNNER_FLASH_OPS_LIB)")
    if not hasattr(torch.ops.runner_flash, "forward"):
        torch.ops.load_library(path)


class FlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, kernel):
        out, lse = torch.ops.runner_flash.forward(q, k, v, causal, kernel)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.kernel = causal, kernel
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.ops.runner_flash.backward(q, k, v, out, dout.contiguous(), lse, ctx.causal, ctx.kernel)
        return dq, dk, dv, None, None


class TiledFlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, tile_q, tile_k):
        out, lse = torch.ops.runner_flash.tiled_forward(q, k, v, causal, tile_q, tile_k)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.args = (causal, tile_q, tile_k)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.ops.runner_flash.tiled_backward(q, k, v, out, dout, lse, *ctx.args)
        return dq, dk, dv, None, None, None


def flash_attention(q, k, v, causal=False, kernel="auto"):
    """softmax(q k^T / sqrt(d) + causal mask) v on our CUDA kernels (q, k, v contiguous).

    kernel: "auto", "mma_sync" or "wgmma" (Hopper GPUs, bf16/fp16, head dims 64 and 128).
    """
    return FlashAttentionFunction.apply(q, k, v, causal, kernel)


def tiled_flash_attention(q, k, v, causal=False, tile_q=64, tile_k=64):
    """The same in tensor ops with explicit tiles (the kernels' reference)."""
    return TiledFlashAttentionFunction.apply(q, k, v, causal, tile_q, tile_k)
