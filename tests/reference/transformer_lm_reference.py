"""Plain-PyTorch reference of the runner's transformer_lm, for the C++ cross-check.

Architecture (the spec's "Model under test"): token embedding; pre-norm blocks
x + attn(RMSNorm(x)), x + SwiGLU(RMSNorm(x)); final RMSNorm; untied lm_head.
RMSNorm eps 1e-5 in fp32; RoPE on q and k rotating interleaved pairs (2i, 2i+1);
causal softmax attention; no biases. Parameter names are the state-dict names
the C++ model must reproduce.

Usage: transformer_lm_reference.py IN_DIR OUT_DIR --num-heads H [--rope-theta T]
IN_DIR holds every parameter plus `inputs` and `targets` (see tensor_files.py);
OUT_DIR receives `logits`, `loss` and `grad.<parameter name>` for each parameter.
"""
import argparse
import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tensor_files import read_tensors, write_tensors  # noqa: E402


class Linear(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))

    def forward(self, x):
        return x @ self.weight.T


class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))

    def forward(self, ids):
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.promote_types(in_dtype, torch.float32))
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype)


def rope(x, theta):
    """x [..., T, d]: rotate pair (2i, 2i+1) at position p by p * theta^(-2i/d)."""
    seq_len, d = x.shape[-2], x.shape[-1]
    pos = torch.arange(seq_len, dtype=torch.float64)
    freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = pos[:, None] * freq[None, :]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    out = torch.empty_like(x)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


def causal_attention(q, k, v):
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    seq_q, seq_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(seq_q, seq_k, dtype=torch.bool).tril()
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, d_model, num_heads, theta):
        super().__init__()
        self.num_heads, self.theta = num_heads, theta
        self.q_proj = Linear(d_model, d_model)
        self.k_proj = Linear(d_model, d_model)
        self.v_proj = Linear(d_model, d_model)
        self.output_proj = Linear(d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        h = self.num_heads

        def heads(y):
            return y.reshape(b, t, h, d // h).permute(0, 2, 1, 3)

        q = rope(heads(self.q_proj(x)), self.theta)
        k = rope(heads(self.k_proj(x)), self.theta)
        v = heads(self.v_proj(x))
        o = causal_attention(q, k, v).permute(0, 2, 1, 3).reshape(b, t, d)
        return self.output_proj(o)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w1 = Linear(d_model, d_ff)
        self.w2 = Linear(d_ff, d_model)
        self.w3 = Linear(d_model, d_ff)

    def forward(self, x):
        a = self.w1(x)
        return self.w2(a * torch.sigmoid(a) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, theta):
        super().__init__()
        self.ln1 = RMSNorm(d_model)
        self.attn = Attention(d_model, num_heads, theta)
        self.ln2 = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TransformerLM(nn.Module):
    def __init__(self, vocab_size, d_model, num_layers, num_heads, d_ff, theta):
        super().__init__()
        self.token_embeddings = Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(Block(d_model, num_heads, d_ff, theta) for _ in range(num_layers))
        self.ln_final = RMSNorm(d_model)
        self.lm_head = Linear(d_model, vocab_size)

    def forward(self, ids):
        x = self.token_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.ln_final(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("in_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--num-heads", type=int, required=True)
    parser.add_argument("--rope-theta", type=float, default=10000.0)
    args = parser.parse_args()

    # (Not torch.use_deterministic_algorithms: it imports dynamo, ~2 s; CPU ops here are deterministic.)
    tensors = read_tensors(args.in_dir)
    inputs, targets = tensors.pop("inputs"), tensors.pop("targets")
    vocab_size, d_model = tensors["token_embeddings.weight"].shape
    d_ff = tensors["layers.0.ffn.w1.weight"].shape[0]
    num_layers = len({k.split(".")[1] for k in tensors if k.startswith("layers.")})

    model = TransformerLM(vocab_size, d_model, num_layers, args.num_heads, d_ff, args.rope_theta)
    model = model.to(tensors["lm_head.weight"].dtype)
    model.load_state_dict(tensors, strict=True)  # names and shapes must match exactly

    logits = model(inputs)
    loss = nn.functional.cross_entropy(logits.float().reshape(-1, vocab_size), targets.reshape(-1))
    loss.backward()

    out = {"logits": logits, "loss": loss}
    out.update({"grad." + name: p.grad for name, p in model.named_parameters()})
    write_tensors(args.out_dir, out)


if __name__ == "__main__":
    main()
