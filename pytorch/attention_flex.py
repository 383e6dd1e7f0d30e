"""FlexAttention with a causal sliding window: the PyTorch side of experiments/flash_sliding_window.yaml
(part flex; part time is task/attention_bench with attention/flash).

q, k, v, dO: seeded randn [batch, heads, seq, d_head] in --dtype. Mask as the flash kernels' one
(kernels/flash_attention/mask.hpp): query i sees keys i - window + 1 .. i; window 0 = causal. One run
times every window of --windows and prints one record per window (task/external_python's protocol).
The window is a tensor the mask_mod reads, so Dynamo makes one graph for all windows > 0 (an int
would be a constant, guarded: a compile per window) and one for causal. compile_s: the first forward
+ backward of each window, synchronized and untimed (the compile, for the first window of a graph).

Timing as attention_bench's measure_steps (runner/api/measure.cpp): phase forward = the compiled call
on q, k, v with requires_grad (autograd graph built); phase backward = clear the grads, o.backward(dO);
each bracketed by CUDA events. Warm-up: --warmup steps, more until --warmup-seconds passed, synchronized
after each. Measured: batches of at most 32 steps (kMaxHeldSteps), read once per batch. --hold-stream
is measure.hold_stream: the runner queues a batch behind a wait on a host flag it releases once the
batch is queued (runner/api/stream_hold.hpp), so no host launch gap falls between a step's events.
Here the batch queues behind torch.cuda._sleep, twice the slowest recent warm-up step's enqueue time
per step; a batch whose enqueue outlasts the sleep counts in short_holds (the runner's watchdog
releases) and doubles the next sleep. The runner passes neither warmup_seconds nor hold_stream to a
script: the experiment's args do. --cache cold writes 2x L2 before each step, as the runner does.
TFLOP/s from the medians with the kernels' count (forward_flops, kernels/flash_attention/flash_options.cpp).

On the CPU, PyTorch has no FlexAttention backward: calling it raises an error.
Only the forward runs there: eager (it materializes the scores), without requires_grad, timed
on the host clock. The record's `note` says so, and its attention.kernel is eager.

--compile-mode max-autotune-no-cudagraphs lets Inductor time the FlexAttention templates' tile
configurations and keep the fastest (attention.kernel max-autotune); default is torch.compile's default.

  python pytorch/attention_flex.py --device cuda --seq 16384 --d-head 128 --windows 0,256 --hold-stream
"""
import argparse
import json
import statistics
import time
import warnings

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# attention.kernel label of each --compile-mode (the report's row key)
COMPILE_KERNELS = {"default": "torch.compile", "max-autotune-no-cudagraphs": "max-autotune"}
MAX_HELD_STEPS = 32  # runner/api/measure.cpp kMaxHeldSteps: the stream's queue is finite


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32")  # passed by the runner; --dtype sets the inputs
    for name, default in (("seed", 0), ("warmup", 10), ("steps", 100), ("repetitions", 1),  # the runner's
                          ("batch", 1), ("heads", 16), ("seq", 16384), ("d-head", 128)):  # the shape
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--cache", default="warm", choices=["warm", "cold"])
    p.add_argument("--warmup-seconds", type=float, default=0.0)  # measure.warmup_seconds
    p.add_argument("--hold-stream", action="store_true")  # measure.hold_stream
    p.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    p.add_argument("--windows", default="0,256,1024,4096")
    # torch.compile's mode: max-autotune-no-cudagraphs benchmarks the FlexAttention templates' tile
    # configurations and keeps the fastest (a longer compile); no CUDA graphs, since the events time
    # device work and the held stream already hides the launches.
    p.add_argument("--compile-mode", default="default", choices=list(COMPILE_KERNELS))
    args, _ = p.parse_known_args(argv)  # --model.* and adaptive flags: a fixed step count here
    args.windows = [int(w) for w in args.windows.split(",")]
    return args


def mask_mod_for(window, device):
    """The flash kernels' rule: key <= query and, with a window, query - key < window."""
    if window == 0:
        return lambda b, h, q_idx, kv_idx: q_idx >= kv_idx
    w = torch.tensor(window, device=device)  # a graph input, not a constant: one compile for all windows

    def sliding_window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < w)
    return sliding_window


def block_mask_for(window, seq, device):
    return create_block_mask(mask_mod_for(window, device), B=None, H=None, Q_LEN=seq, KV_LEN=seq, device=device)


def forward_flops(batch_heads, seq, d, window):
    """4 d per (query, key) pair a query sees; causal counts half of seq x seq, as the kernels do."""
    if window == 0:
        return 4.0 * batch_heads * d * seq * seq / 2
    return 4.0 * batch_heads * d * sum(min(i + 1, window) for i in range(seq))


def measure_window(args, attend, q, k, v, dout, block_mask, cuda):
    backward = q.requires_grad
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    flush = None
    if args.cache == "cold":  # as runner/api/measure.cpp's CacheFlusher: twice the last-level cache
        l2 = torch.cuda.get_device_properties(q.device).L2_cache_size if cuda else 32 << 20
        flush = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device=q.device)

    def step(marks):  # marks: 4 CUDA events, or a list the host clock's times are appended to
        def mark(i):
            if cuda:
                marks[i].record()
            else:
                marks.append(time.perf_counter())
        if flush is not None:
            flush.fill_(1)
        mark(0)
        o = attend(q, k, v, block_mask=block_mask)
        mark(1)
        if backward:
            mark(2)
            q.grad = k.grad = v.grad = None
            o.backward(dout)
            mark(3)

    def new_marks():
        return [torch.cuda.Event(enable_timing=True) for _ in range(4)] if cuda else []

    def ms(marks, a, b):
        return marks[a].elapsed_time(marks[b]) if cuda else (marks[b] - marks[a]) * 1e3

    t0 = time.perf_counter()
    step(new_marks())
    sync()
    compile_s = time.perf_counter() - t0
    fwd, bwd, whole, short_holds, cycles_per_ms, measured_s = [], [], [], 0, 0.0, 0.0
    for _ in range(args.repetitions):
        enqueue_ms, t0, i = [], time.perf_counter(), 0
        while i < args.warmup or time.perf_counter() - t0 < args.warmup_seconds:
            e0 = time.perf_counter()
            step(new_marks())
            enqueue_ms.append((time.perf_counter() - e0) * 1e3)  # host time to queue one step
            sync()
            i += 1
        if cuda and args.hold_stream and not cycles_per_ms:  # _sleep counts SM cycles: calibrate once, warm
            a, b = new_marks()[:2]
            a.record()
            torch.cuda._sleep(10**7)
            b.record()
            sync()
            cycles_per_ms = 10**7 / a.elapsed_time(b)
        hold_ms = 2 * max(enqueue_ms[-8:] or [1.0])
        t_rep, done = time.perf_counter(), 0
        while done < args.steps:
            batch = [new_marks() for _ in range(min(MAX_HELD_STEPS, args.steps - done))]
            sync()
            held = cycles_per_ms > 0
            if held:  # the GPU sleeps while the host queues the whole batch behind it
                sleep_ms = hold_ms * len(batch) + 1.0
                torch.cuda._sleep(int(sleep_ms * cycles_per_ms))
                queued_from = time.perf_counter()
            for marks in batch:
                step(marks)
            if held and (time.perf_counter() - queued_from) * 1e3 > sleep_ms:
                short_holds += 1
                hold_ms *= 2
            sync()
            for marks in batch:
                fwd.append(ms(marks, 0, 1))
                if backward:
                    bwd.append(ms(marks, 2, 3))
                whole.append(ms(marks, 0, 3 if backward else 1))
            done += len(batch)
        measured_s += time.perf_counter() - t_rep
    return compile_s, fwd, bwd, whole, short_holds, measured_s


def samples(values, repetitions):
    """A stats metric; with repetitions, each one's mean too (every repetition has --steps samples)."""
    out = {"unit": "ms", "samples": values}
    if repetitions > 1:
        n = len(values) // repetitions
        out["repetition_means"] = [statistics.fmean(values[i * n:(i + 1) * n]) for i in range(repetitions)]
    return out


def main():
    args = parse_args()
    cuda = args.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    gen = torch.Generator(device=device).manual_seed(args.seed)
    shape = (args.batch, args.heads, args.seq, args.d_head)
    q, k, v, dout = (torch.randn(shape, generator=gen, device=device, dtype=DTYPES[args.dtype]) for _ in range(4))
    if cuda:
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
        attend = torch.compile(flex_attention, dynamic=False, mode=args.compile_mode)
    else:
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        attend = flex_attention
    tflops = lambda flops, ms: flops / (ms * 1e-3) / 1e12
    for window in args.windows:
        block_mask = block_mask_for(window, args.seq, device)
        compile_s, fwd, bwd, whole, short_holds, measured_s = measure_window(
            args, attend, q, k, v, dout, block_mask, cuda)
        flops = forward_flops(args.batch * args.heads, args.seq, args.d_head, window)
        block = "x".join(str(b) for b in block_mask.BLOCK_SIZE)
        metrics = {
            "forward_ms": samples(fwd, args.repetitions),
            "step_ms": samples(whole, args.repetitions),
            "forward_tflops": {"unit": "TFLOP/s", "value": tflops(flops, statistics.median(fwd))},
            "compile_s": {"unit": "s", "value": compile_s},
            "torch_version": {"text": torch.__version__},
        }
        if bwd:
            metrics["backward_ms"] = samples(bwd, args.repetitions)
            metrics["backward_tflops"] = {"unit": "TFLOP/s", "value": tflops(2.5 * flops, statistics.median(bwd))}
        if cuda:
            metrics["mechanism"] = {"text": f"FlexAttention, torch.compile mode {args.compile_mode}, block mask {block}"}
            metrics["short_holds"] = {"unit": "count", "value": short_holds}
        else:
            metrics["mechanism"] = {"text": f"FlexAttention, eager (scores materialized), block mask {block}"}
            metrics["note"] = {"text": "CPU: forward only, eager; PyTorch has no FlexAttention backward on CPU"}
        n = len(whole)
        rse = statistics.stdev(whole) / n ** 0.5 / statistics.fmean(whole) if n > 1 else 0.0
        labels = {"attention": "flex", "attention.kernel": COMPILE_KERNELS[args.compile_mode] if cuda else "eager",
                  "d_head": str(args.d_head), "window": str(window)}
        measurement = {"mode": "fixed", "n": n, "rel_stderr": rse, "target_rel_stderr": 0.0, "target_met": True,
                       "stop_reason": "fixed", "measured_seconds": measured_s, "repetitions": args.repetitions,
                       "cache": args.cache}
        print(json.dumps({"labels": labels, "metrics": metrics, "measurement": measurement}), flush=True)


if __name__ == "__main__":
    try:
        main()
    except torch.OutOfMemoryError as e:
        print(json.dumps({"oom": True, "error": str(e).splitlines()[0]}), flush=True)
