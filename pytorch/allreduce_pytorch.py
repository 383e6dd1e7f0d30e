"""torch.distributed.all_reduce twin of the runner's task/allreduce_bench.

Run by task/external_python on every rank of a multi-process run (see
pytorch/torch_dist.py). One float32 tensor of --size-mb MB (10^6 bytes), SUM over
all ranks; each iteration timed alone after warm-up: CUDA events around the
all_reduce (NCCL, the rank's GPU) or perf_counter (Gloo, CPU); the device is
synchronized after every iteration. Prints one record line per size (labels
impl=pytorch, backend, size_mb, processes) with time_ms, algbw_gbps and busbw_gbps
samples (busbw = algbw * 2 (n - 1) / n).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_dist  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--sizes-mb", required=True, help="comma-separated, e.g. 1,10,100,1000")
    p.add_argument("--backend", choices=["gloo", "nccl"], required=True)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--store-prefix", default="allreduce_pytorch")
    args, _ = p.parse_known_args()  # external_python also passes --device, --model.* ...

    _, _, local_rank = torch_dist.rank_env()
    nccl = args.backend == "nccl"
    device = torch.device("cuda", local_rank) if nccl else torch.device("cpu")
    if nccl:
        torch.cuda.set_device(device)
    prefix = f"{args.store_prefix}/{args.backend}/{args.sizes_mb}"
    _, world_size, _ = torch_dist.init(prefix, "cpu:gloo,cuda:nccl" if nccl else "gloo",
                                       device if nccl else torch.device("cpu"))
    for size_mb in (float(s) for s in args.sizes_mb.split(",")):
        numel = int(size_mb * 1e6 / 4)
        data = torch.rand(numel, dtype=torch.float32, device=device)
        times = []
        for i in range(args.warmup + args.steps):
            if nccl:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                dist.all_reduce(data)
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                dist.all_reduce(data)
                ms = (time.perf_counter() - t0) * 1e3
            if i >= args.warmup:
                times.append(ms)
        del data
        nbytes = numel * 4
        algbw = [nbytes / (ms * 1e-3) / 1e9 for ms in times]
        busbw = [a * 2 * (world_size - 1) / world_size for a in algbw]
        labels = {"impl": "pytorch", "backend": args.backend, "size_mb": f"{size_mb:g}", "processes": str(world_size)}
        print(json.dumps({"labels": labels,
                          "metrics": {"time_ms": {"unit": "ms", "samples": times},
                                      "algbw_gbps": {"unit": "GB/s", "samples": algbw},
                                      "busbw_gbps": {"unit": "GB/s", "samples": busbw},
                                      "bytes": {"unit": "bytes", "value": nbytes},
                                      "torch_version": {"text": torch.__version__}}}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
