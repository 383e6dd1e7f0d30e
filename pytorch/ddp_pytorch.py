"""PyTorch DistributedDataParallel twin of task/train_step with a ddp plugin.

Run by task/external_python on every rank of a multi-process run (the Python
copies meet through the runner's store, see pytorch/torch_dist.py). Same model
(pytorch/train_step_pytorch.py's reference LM and init), the same global batch split
over ranks, torch.optim.AdamW with the C++ defaults, torch.nn.parallel.
DistributedDataParallel with its defaults (bucket_cap_mb 25 unless
--bucket-cap-mb, gradient_as_bucket_view False unless --gradient-as-bucket-view),
NCCL on the rank's GPU (Gloo on the CPU with --device cpu, for smoke tests).
--precision bf16 runs the forward and loss under torch.autocast (bf16), as the C++
task does; --sdpa swaps in F.scaled_dot_product_attention and --fused-adamw
torch.optim.AdamW(fused=True); --compile-blocks compiles every transformer block, the
final norm and the loss (torch.compile, default mode) before DDP wraps the model, as
pytorch/train_step_pytorch.py's fastest single-GPU step does. --cuda-graph captures the
whole data-parallel step (forward, backward with DDP's all-reduces, optimizer) in one
CUDA graph, following PyTorch's CUDA-graphs notes for DDP: DDP constructed on a side
stream, 11 eager iterations there before capture, AdamW(fused=True, capturable=True),
autocast's weight cache off; replays are timed as one phase, "graph". --bf16-compress
registers DDP's bf16_compress_hook (gradients all-reduced in bf16). The record's label
`variant` is eager, compile(blocks), each + cuda_graph, and ` bf16 hook` when compressed.
Phases as in the C++ task: forward, backward
(zero_grad(set_to_none) + loss.backward(), during which DDP all-reduces) and
optimizer, CUDA events, synchronize after every step. Prints one record line.
"""
import argparse
import contextlib
import faulthandler
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_dist  # noqa: E402
import train_step_pytorch as single  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=4, help="global batch, split over ranks")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--store-prefix", default="ddp_pytorch")
    p.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention(is_causal=True)")
    p.add_argument("--fused-adamw", action="store_true", help="torch.optim.AdamW(fused=True)")
    p.add_argument("--compile-blocks", action="store_true", help="torch.compile each block, the final norm and the loss")
    p.add_argument("--cuda-graph", action="store_true", help="capture the whole DDP step in one CUDA graph (needs CUDA)")
    p.add_argument("--bf16-compress", action="store_true", help="DDP comm hook bf16_compress_hook (bf16 on the wire)")
    p.add_argument("--time-limit-s", type=float, default=900.0,
                   help="print all stacks and exit after this long (0: no limit)")
    p.add_argument("--model.size", dest="size", default="xl", choices=list(single.SIZES) + ["custom"])
    for name in ("d_model", "d_ff", "num_layers", "num_heads"):
        p.add_argument(f"--model.{name}", dest=name, type=int, default=0, help="0 = from --model.size")
    p.add_argument("--model.vocab_size", dest="vocab_size", type=int, default=10000)
    p.add_argument("--model.context_length", dest="context_length", type=int, default=256)
    p.add_argument("--model.rope_theta", dest="rope_theta", type=float, default=10000.0)
    args, _ = p.parse_known_args()  # the rest of external_python's flags
    dims = list(single.SIZES.get(args.size, (0, 0, 0, 0)))
    for i, name in enumerate(("d_model", "d_ff", "num_layers", "num_heads")):
        dims[i] = getattr(args, name) or dims[i]
    if min(dims) <= 0:
        p.error("--model.size custom needs --model.d_model, --model.d_ff, --model.num_layers, --model.num_heads")
    args.d_model, args.d_ff, args.num_layers, args.num_heads = dims
    return args


def main():
    args = parse_args()
    if args.time_limit_s > 0:  # a hung collective or capture prints every thread's stack, then exits
        faulthandler.dump_traceback_later(args.time_limit_s, exit=True)
    _, _, local_rank = torch_dist.rank_env()
    cuda = args.device == "cuda"
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    graphed = args.cuda_graph and cuda  # on a CPU the eager step, as task/train_step's cuda_graph does
    prefix = (f"{args.store_prefix}/{args.size}/{args.bucket_cap_mb}/{args.batch_size}/{args.precision}/"
              f"{args.sdpa}/{args.fused_adamw}/{args.compile_blocks}/{graphed}/{args.bf16_compress}")
    rank, world_size, _ = torch_dist.init(prefix, "nccl" if cuda else "gloo", device)
    if args.batch_size % world_size:
        raise SystemExit(f"--batch-size {args.batch_size} does not split over {world_size} ranks")
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    autocast_dtype = single.AUTOCAST_DTYPES.get(args.precision)
    if args.sdpa:
        single.reference.causal_attention = single.sdpa_causal_attention
    torch.manual_seed(args.seed)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    model = single.build_model(args, device, generator)
    loss_from_logits = single_loss(args.vocab_size)
    if args.compile_blocks:
        single.fill_rope_table(args, device)
        single.compile_blocks(model)
        loss_from_logits = torch.compile(loss_from_logits)
    if graphed and not args.fused_adamw:
        raise SystemExit("--cuda-graph needs --fused-adamw (a capturable optimizer step)")
    side = torch.cuda.Stream() if graphed else None
    if graphed:  # DDP's constructor and the eager iterations run on a side stream (PyTorch's notes)
        side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side) if graphed else contextlib.nullcontext():
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None,
                                                  bucket_cap_mb=args.bucket_cap_mb,
                                                  gradient_as_bucket_view=args.gradient_as_bucket_view)
    if args.bf16_compress:
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                  fused=True if args.fused_adamw else None, capturable=graphed)
    tokens = torch.randint(args.vocab_size, (args.batch_size, args.context_length + 1), generator=generator,
                           device=device)
    local = args.batch_size // world_size
    tokens = tokens[rank * local:(rank + 1) * local]
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    state = {}

    def forward():
        # A graph must not capture casts that autocast's weight cache then hands to later steps.
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None,
                            cache_enabled=not graphed):
            state["loss"] = loss_from_logits(ddp(inputs), targets)

    def backward():
        optimizer.zero_grad(set_to_none=True)
        state["loss"].backward()

    # The peak covers the eager warm-up, the capture and the measured steps, as the runner's does.
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    graph = None
    if graphed:
        with torch.cuda.stream(side):
            for _ in range(11):  # DDP needs 11 eager iterations before capture (PyTorch's CUDA-graphs notes)
                forward()
                backward()
                optimizer.step()
        torch.cuda.current_stream().wait_stream(side)
        optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        # Captured on the stream DDP was built and warmed up on: DDP keeps the AccumulateGrad
        # nodes of that stream, and a capture on another one would have to wait for it.
        with torch.cuda.graph(graph, stream=side):
            forward()
            state["loss"].backward()
            optimizer.step()

    samples = {}
    marks = single.Marks(cuda, 8)  # CUDA events created before the loop, reused
    for i in range(args.warmup + args.steps):
        marks.reset()
        timer = single.PhaseTimer(marks)
        t0 = time.perf_counter()
        if graph is not None:
            timer.phase("graph", graph.replay)
        else:
            timer.phase("forward", forward)
            timer.phase("backward", backward)
            timer.phase("optimizer", optimizer.step)
        if cuda:
            torch.cuda.synchronize()
        if i < args.warmup:
            continue
        for name, ms in timer.milliseconds():  # the phases, then "step": first start to last end
            samples.setdefault(name, []).append(ms)
        samples.setdefault("wall", []).append((time.perf_counter() - t0) * 1e3)
    metrics = {f"{name}_ms": {"unit": "ms", "samples": values} for name, values in samples.items()}
    if cuda:
        metrics["peak_memory_gib"] = {"unit": "GiB", "value": torch.cuda.max_memory_allocated(device) / 2**30}
    metrics["loss_last"] = {"unit": "", "value": state["loss"].item()}
    metrics["torch_version"] = {"text": torch.__version__}
    variant = "compile(blocks)" if args.compile_blocks else "eager"
    if graphed:
        variant += " + cuda_graph"
    if args.bf16_compress:
        variant += " bf16 hook"
    print(json.dumps({"labels": {"processes": str(world_size), "variant": variant}, "metrics": metrics}), flush=True)
    if graphed:
        # destroy_process_group() never returned (0 % GPU for minutes, PyTorch 2.11, 2xH200) while a
        # CUDA graph held captured NCCL work; the record is out, so leave without tearing NCCL down.
        sys.stderr.flush()
        os._exit(0)
    dist.destroy_process_group()


def single_loss(vocab_size):
    def loss_from_logits(logits, targets):
        return nn.functional.cross_entropy(logits.float().reshape(-1, vocab_size), targets.reshape(-1))
    return loss_from_logits


if __name__ == "__main__":
    main()
