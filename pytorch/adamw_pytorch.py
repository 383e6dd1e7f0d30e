"""torch.optim.AdamW alone on the transformer LM's parameter shapes: the PyTorch side
of experiments/fused_adamw.yaml (task/optimizer_step is the C++ side).

Parameters fp32 with the shapes of model/transformer_lm at --model.size (embedding,
per layer q/k/v/output projections, w1/w2/w3, two RMSNorm gains, final gain, lm_head),
random gradients (std 0.01, --grad-dtype) made once and reused, AdamW lr 1e-3, betas
0.9/0.999, eps 1e-8, weight decay 0.01, implementation --impl (fused, foreach or
forloop). Each step timed with CUDA events, device synchronized after every step.
Prints one JSON record line (task/external_python's protocol).

  python pytorch/adamw_pytorch.py --device cuda --model.size 2.7B --impl fused
"""
import argparse
import json
import time

import torch

SIZES = {  # d_model, d_ff, num_layers (the spec's table)
    "small": (768, 3072, 12),
    "medium": (1024, 4096, 24),
    "large": (1280, 5120, 36),
    "xl": (1600, 6400, 48),
    "2.7B": (2560, 10240, 32),
}
GRAD_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32")  # passed by the runner; the step is fp32 either way
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--impl", default="fused", choices=["fused", "foreach", "forloop"])
    p.add_argument("--grad-dtype", default="fp32", choices=list(GRAD_DTYPES))
    p.add_argument("--bytes-per-param", type=float, default=28.0)
    p.add_argument("--model", default="transformer_lm", choices=["transformer_lm"])
    p.add_argument("--model.size", dest="size", default="small", choices=list(SIZES) + ["custom"])
    for name in ("d_model", "d_ff", "num_layers"):
        p.add_argument(f"--model.{name}", dest=name, type=int, default=0)
    p.add_argument("--model.vocab_size", dest="vocab_size", type=int, default=10000)
    args, _ = p.parse_known_args()  # other --model.* options do not change the shapes
    dims = list(SIZES.get(args.size, (0, 0, 0)))
    for i, name in enumerate(("d_model", "d_ff", "num_layers")):
        if getattr(args, name):
            dims[i] = getattr(args, name)
    if min(dims) <= 0:
        p.error("--model.size custom needs --model.d_model, --model.d_ff, --model.num_layers")
    args.d_model, args.d_ff, args.num_layers = dims
    return args


def shapes(args):
    d, f, v = args.d_model, args.d_ff, args.vocab_size
    out = [(v, d)]
    for _ in range(args.num_layers):
        out += [(d,), (d, d), (d, d), (d, d), (d, d), (d,), (f, d), (d, f), (f, d)]
    return out + [(d,), (v, d)]


def main():
    args = parse_args()
    cuda = args.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    gen = torch.Generator(device=device).manual_seed(args.seed)
    params = []
    for shape in shapes(args):
        p = torch.nn.Parameter(torch.randn(shape, generator=gen, device=device))
        p.grad = (torch.randn(shape, generator=gen, device=device) * 1e-2).to(GRAD_DTYPES[args.grad_dtype])
        params.append(p)
    kwargs = {"fused": True} if args.impl == "fused" else {"foreach": args.impl == "foreach"}
    optimizer = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, **kwargs)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    samples = []
    for i in range(args.warmup + args.steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            optimizer.step()
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            optimizer.step()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= args.warmup:
            samples.append(ms)
    count = sum(p.numel() for p in params)
    moved = args.bytes_per_param * count
    metrics = {
        "optimizer_ms": {"unit": "ms", "samples": samples},
        "gbps": {"unit": "GB/s", "samples": [moved / (ms * 1e-3) / 1e9 for ms in samples]},
        "parameters": {"unit": "count", "value": count},
        "bytes_moved": {"unit": "bytes", "value": moved},
        "torch_version": {"text": torch.__version__},
    }
    if cuda:
        metrics["peak_memory_gib"] = {"unit": "GiB", "value": torch.cuda.max_memory_allocated(device) / 2**30}
    print(json.dumps({"labels": {"pytorch_adamw": args.impl}, "metrics": metrics}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except torch.OutOfMemoryError as e:
        print(json.dumps({"oom": True, "error": str(e).splitlines()[0]}), flush=True)
