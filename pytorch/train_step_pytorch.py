"""PyTorch twin of the runner's task/train_step, for train_step_vs_pytorch and
torch_compile_model: eager by default, or what a PyTorch user runs for speed.

The same transformer LM (tests/reference/transformer_lm_reference.py), the same
random-token batch reused every step, torch.optim.AdamW (lr 1e-3, betas 0.9/0.999,
eps 1e-8, weight decay 0.01, PyTorch's default implementation: foreach on CUDA),
and the same phases and timing as the C++ side:

  forward   = model forward + cross-entropy on logits.float(), inside autocast for bf16/fp16
  backward  = zero_grad(set_to_none=True) + loss.backward(), outside autocast
  optimizer = optimizer.step()

Measurement follows the runner's model (README, "Measurement model"): a step is the
span from the first phase's start to the last phase's end; CUDA phases are timed
with CUDA events created before the measured loop and the device is synchronized
after every step; on CPU time.perf_counter brackets each phase. With
--target-rel-stderr > 0 each repetition measures at least --min-steps and stops
when the relative standard error of the mean step time is at or below the target,
or at --max-steps, or after --max-seconds; otherwise exactly --steps.
--repetitions reruns warm-up + measurement. --cache cold writes a buffer twice
the L2 size before every step. Peak memory is torch.cuda.max_memory_allocated()
over warm-up and measured steps (reset before warm-up). Prints one JSON record
line (the protocol of task/external_python) with a "measurement" summary, or
{"oom": true, ...} when the device runs out of memory.

Speed options (combine freely; the record's label `pytorch_variant` names them):
  --compile [MODE]  torch.compile of forward + loss (backward through AOTAutograd),
                    MODE default or max-autotune-no-cudagraphs (... or any torch mode);
                    compilation happens in the first warm-up step
  --compile-scope model|blocks
                    model (default): one torch.compile of the whole forward + loss;
                    blocks: each Transformer block compiled on its own, then the final
                    norm and the loss (regional compilation, as torchtitan does; the
                    embedding gather and the LM head's matmul stay eager). The blocks
                    are identical, so Dynamo compiles one block graph and reuses it for
                    every layer: compile time no longer grows with depth. The record's
                    compiled_graphs counts the graphs Dynamo made, and first_step_s
                    (every run) is the first warm-up step's wall time, compilation or
                    capture included.
  --compile-cache cold|shared
                    cold (default): Inductor's and Triton's caches live in a fresh
                    directory for this run, so first_step_s is a cold compile whatever
                    ran before; shared: the user's caches
  --sdpa            attention by F.scaled_dot_product_attention(is_causal=True)
                    (also chosen by --model.attention sdpa|flash, as the runner passes it)
  --fused-adamw     torch.optim.AdamW(fused=True)
  --cuda-graph      whole step (forward, loss, backward, optimizer) captured in one
                    torch.cuda.CUDAGraph after 2 eager steps on a side stream and
                    replayed; needs --fused-adamw (capturable); one phase "graph". On a CPU
                    the eager step runs (as task/train_step's cuda_graph does)
Kernel classes (experiments/step_kernel_diff.yaml):
  --kernel-classes RULES  after the measurement, --profile-steps more steps under torch.profiler;
                    every kernel, memcpy and memset they ran (a CUDA graph's too; on a CPU every
                    aten op's self time) is sorted by profiler/kernels' class rules file RULES
                    (pytorch/kernel_classes.py's class_metrics), and the record gets
                    kernel_ms, kernels_per_step and <class>_kernel_ms, <class>_kernels, share_<class>
                    per step, as profiler/kernels records for the runner's step (the record is
                    labelled table: phases, phase: step, as that profiler's)
--model.fused_kernels is accepted (the runner passes every model option) and has no
effect here: PyTorch's fusion is --compile.

Standalone: python pytorch/train_step_pytorch.py --device cuda --model.size small --precision bf16 \
            --compile --sdpa --fused-adamw
"""
import argparse
import atexit
import json
import math
import os
import shutil
import sys
import tempfile
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import transformer_lm_reference as reference  # noqa: E402

# The spec's "Model under test" sizes: d_model, d_ff, num_layers, num_heads.
SIZES = {
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7B": (2560, 10240, 32, 32),
}
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10, help="measured steps when --target-rel-stderr is 0")
    p.add_argument("--target-rel-stderr", type=float, default=0.0, help="> 0: adaptive stopping")
    p.add_argument("--min-steps", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=1000)
    p.add_argument("--max-seconds", type=float, default=60.0)
    p.add_argument("--repetitions", type=int, default=1)
    p.add_argument("--cache", default="warm", choices=["warm", "cold"])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--mode", default="train_step", choices=["forward", "forward_backward", "train_step"])
    # The runner's model/transformer_lm options, as task/external_python passes them.
    p.add_argument("--model", default="transformer_lm", choices=["transformer_lm"])
    add_model_args(p)
    p.add_argument("--model.attention", dest="attention", default="naive", choices=["naive", "sdpa", "flash"],
                   help="naive: the reference's textbook attention; sdpa/flash: F.scaled_dot_product_attention")
    p.add_argument("--model.fused_kernels", dest="fused_kernels", default="false", choices=["true", "false"],
                   help="accepted for the runner's model options; no effect (use --compile)")
    p.add_argument("--compile", nargs="?", const="default", default=None, metavar="MODE",
                   help="torch.compile forward + loss (mode: default, max-autotune-no-cudagraphs, ...)")
    p.add_argument("--compile-scope", default="model", choices=["model", "blocks"],
                   help="model: compile forward + loss as one graph; "
                        "blocks: each block, then the final norm and the loss")
    p.add_argument("--compile-cache", default="cold", choices=["cold", "shared"],
                   help="cold: Inductor and Triton caches in a fresh directory per run, so first_step_s is a "
                        "cold compile; shared: the user's caches (a run may reuse an earlier run's kernels)")
    p.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention(is_causal=True)")
    p.add_argument("--fused-adamw", action="store_true", help="torch.optim.AdamW(fused=True)")
    p.add_argument("--cuda-graph", action="store_true", help="capture the whole step in one CUDA graph")
    p.add_argument("--kernel-classes", metavar="RULES",
                   help="profile --profile-steps steps after the measurement; kernel time and count per class")
    p.add_argument("--profile-steps", type=int, default=5)
    args = p.parse_args()
    args.sdpa = args.sdpa or args.attention in ("sdpa", "flash")
    if args.cuda_graph and args.mode == "train_step" and not args.fused_adamw:
        p.error("--cuda-graph with --mode train_step needs --fused-adamw (a capturable optimizer)")
    resolve_model_dims(p, args)
    return args


def add_model_args(p):
    """The shape options of the runner's model/transformer_lm, as task/external_python passes them."""
    p.add_argument("--model.size", dest="size", default="small", choices=list(SIZES) + ["custom"])
    for name in ("d_model", "d_ff", "num_layers", "num_heads"):
        p.add_argument(f"--model.{name}", dest=name, type=int, default=0, help="0 = from --model.size")
    p.add_argument("--model.vocab_size", dest="vocab_size", type=int, default=10000)
    p.add_argument("--model.context_length", dest="context_length", type=int, default=256)
    p.add_argument("--model.rope_theta", dest="rope_theta", type=float, default=10000.0)


def resolve_model_dims(p, args):
    """Sets args.d_model, d_ff, num_layers, num_heads from --model.size and explicit overrides."""
    dims = list(SIZES.get(args.size, (0, 0, 0, 0)))
    for i, name in enumerate(("d_model", "d_ff", "num_layers", "num_heads")):
        if getattr(args, name):
            dims[i] = getattr(args, name)
    if min(dims) <= 0:
        p.error("--model.size custom needs --model.d_model, --model.d_ff, --model.num_layers, --model.num_heads")
    args.d_model, args.d_ff, args.num_layers, args.num_heads = dims


# The reference builds its RoPE tables and causal mask on the CPU at every call (it is
# written for a CPU cross-check). These keep its math but cache both on the tensor's
# device, as the C++ model does, so the benchmark times the model and not table setup.
_rope_tables = {}
_masks = {}


def cached_rope(x, theta):
    seq_len, d = x.shape[-2], x.shape[-1]
    key = (seq_len, d, theta, x.device)
    if key not in _rope_tables:
        pos = torch.arange(seq_len, dtype=torch.float64, device=x.device)
        freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
        angle = pos[:, None] * freq[None, :]
        _rope_tables[key] = (torch.cos(angle).float(), torch.sin(angle).float())
    cos, sin = (t.to(x.dtype) for t in _rope_tables[key])
    out = torch.empty_like(x)
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    out[..., 0::2] = x_even * cos - x_odd * sin
    out[..., 1::2] = x_even * sin + x_odd * cos
    return out


def cached_causal_attention(q, k, v):
    seq_q, seq_k = q.shape[-2], k.shape[-2]
    key = (seq_q, seq_k, q.device)
    if key not in _masks:
        _masks[key] = torch.ones(seq_q, seq_k, dtype=torch.bool, device=q.device).triu(1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(_masks[key], float("-inf")), dim=-1) @ v


def sdpa_causal_attention(q, k, v):
    return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


reference.rope = cached_rope
reference.causal_attention = cached_causal_attention


def variant_name(args):
    scope = "" if args.compile_scope == "model" else ",blocks"
    parts = [f"compile({args.compile}{scope})" if args.compile else "eager"]
    if args.cuda_graph:
        parts.append("cuda_graph")
    parts.append("sdpa" if args.sdpa else "naive_attention")
    if args.mode == "train_step":
        parts.append("fused_adamw" if args.fused_adamw else "foreach_adamw")
    return "+".join(parts)


def fill_rope_table(args, device):
    """Fill the RoPE table before compiling: its filling inside a compiled block would make
    Dynamo compile that block twice (once before, once after the table exists)."""
    cached_rope(torch.empty(args.context_length, args.d_model // args.num_heads, device=device), args.rope_theta)


def compile_blocks(model, mode=None):
    """torch.compile every transformer block and the final norm, in place (one graph that every
    layer reuses)."""
    for module in (*model.layers, model.ln_final):
        module.compile(mode=mode)


def build_model(args, device, generator):
    """The reference LM with the C++ model's init: truncated normal, cut at +-3 std."""
    with torch.device(device):
        model = reference.TransformerLM(args.vocab_size, args.d_model, args.num_layers, args.num_heads,
                                        args.d_ff, args.rope_theta)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("token_embeddings.weight"):
                std = 1.0
            elif p.dim() == 2:
                std = math.sqrt(2.0 / (p.shape[0] + p.shape[1]))
            else:  # RMSNorm gains
                p.fill_(1.0)
                continue
            nn.init.trunc_normal_(p, 0.0, std, -3 * std, 3 * std, generator=generator)
    return model


class Marks:
    """Time marks: CUDA events created up front and reused, or perf_counter values."""

    def __init__(self, cuda, count):
        self.cuda = cuda
        self.events = [torch.cuda.Event(enable_timing=True) for _ in range(count)] if cuda else []
        self.times = []
        self.next = 0

    def mark(self):
        i = self.next
        self.next += 1
        if self.cuda:
            if i == len(self.events):  # more phases than seen in warm-up
                self.events.append(torch.cuda.Event(enable_timing=True))
            self.events[i].record()
        else:
            self.times.append(time.perf_counter())
        return i

    def ms(self, a, b):
        if self.cuda:
            return self.events[a].elapsed_time(self.events[b])
        return (self.times[b] - self.times[a]) * 1e3

    def reset(self):
        self.next = 0
        self.times = []


class PhaseTimer:
    """Marks named phases of one step."""

    def __init__(self, marks):
        self.marks = marks
        self.phases = []  # (name, start mark, end mark)

    def phase(self, name, fn):
        if self.marks.cuda:
            torch.cuda.nvtx.range_push(name)
        start = self.marks.mark()
        fn()
        end = self.marks.mark()
        if self.marks.cuda:
            torch.cuda.nvtx.range_pop()
        self.phases.append((name, start, end))

    def milliseconds(self):  # after the step's synchronize
        out = [(name, self.marks.ms(s, e)) for name, s, e in self.phases]
        out.append(("step", self.marks.ms(self.phases[0][1], self.phases[-1][2])))
        return out


def rel_stderr(values):
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(var) / math.sqrt(n) / abs(mean) if mean else 0.0


def measure(args, step, sync, cuda, device):
    """Warm-up + measured steps per repetition; returns samples, repetition sizes, summary."""
    adaptive = args.target_rel_stderr > 0
    if args.warmup < 0 or args.steps < 1 or args.repetitions < 1:
        raise SystemExit("need --warmup >= 0, --steps >= 1, --repetitions >= 1")
    if adaptive and not 2 <= args.min_steps <= args.max_steps:
        raise SystemExit("adaptive stopping needs 2 <= --min-steps <= --max-steps")
    flush = None
    if args.cache == "cold":
        l2 = torch.cuda.get_device_properties(device).L2_cache_size if cuda else 32 << 20
        flush = torch.empty(max(2 * l2, 8 << 20), dtype=torch.uint8, device=device)
    samples, sizes = {}, []
    summary = {"mode": "adaptive" if adaptive else "fixed", "cache": args.cache, "repetitions": args.repetitions,
               "target_rel_stderr": args.target_rel_stderr, "target_met": True, "measured_seconds": 0.0}
    marks = Marks(cuda, 16)
    for _ in range(args.repetitions):
        used = 0
        for i in range(args.warmup):
            if flush is not None:
                flush.fill_(i % 255)
            marks.reset()
            w0 = time.perf_counter()
            step(PhaseTimer(marks))
            sync()
            summary.setdefault("first_step_s", time.perf_counter() - w0)
            used = max(used, marks.next)
        marks = Marks(cuda, max(used, 2))  # created before the measured loop
        limit = args.max_steps if adaptive else args.steps
        rep = {}
        sync()
        t0 = time.perf_counter()
        while True:
            if flush is not None:
                flush.fill_(len(rep.get("step", [])) % 255)
            marks.reset()
            timer = PhaseTimer(marks)
            w0 = time.perf_counter()
            step(timer)
            sync()
            wall_ms = (time.perf_counter() - w0) * 1e3
            for name, ms in timer.milliseconds():
                rep.setdefault(name, []).append(ms)
            rep.setdefault("wall", []).append(wall_ms)
            n = len(rep["step"])
            elapsed = time.perf_counter() - t0
            if not adaptive:
                reason = "fixed"
                if n >= args.steps:
                    break
                continue
            met = n >= args.min_steps and rel_stderr(rep["step"]) <= args.target_rel_stderr
            reason = "target" if met else "max_steps" if n >= limit else "max_seconds" if elapsed >= args.max_seconds and n >= 2 else None
            if reason:
                summary["target_met"] = summary["target_met"] and met
                break
        summary["stop_reason"] = reason
        summary["measured_seconds"] += time.perf_counter() - t0
        sizes.append(len(rep["step"]))
        for name, values in rep.items():
            samples.setdefault(name, []).extend(values)
    summary["n"] = len(samples["step"])
    summary["rel_stderr"] = rel_stderr(samples["step"])
    return samples, sizes, summary


def stats_metric(unit, values, sizes):
    metric = {"unit": unit, "samples": values}
    if len(sizes) > 1:
        at, means = 0, []
        for size in sizes:
            means.append(sum(values[at:at + size]) / size)
            at += size
        metric["repetition_means"] = means
    return metric


def profile_classes(args, step, sync, cuda):
    """Kernel time and count per class over --profile-steps steps under torch.profiler."""
    import kernel_classes
    rules, classes = kernel_classes.load_class_rules(args.kernel_classes)
    if args.profile_steps < 1:
        raise SystemExit("--profile-steps must be >= 1")
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    sync()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(args.profile_steps):
            step(PhaseTimer(Marks(False, 0)))
            sync()
    work = kernel_classes.device_work(prof.events(), cuda)
    metrics = kernel_classes.class_metrics(work, rules, classes, args.profile_steps)
    metrics["profiled_steps"] = {"unit": "count", "value": args.profile_steps}
    return metrics


def main():
    args = parse_args()
    cuda = args.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    generator = torch.Generator(device=device).manual_seed(args.seed)
    autocast_dtype = AUTOCAST_DTYPES.get(args.precision)
    if args.sdpa:
        reference.causal_attention = sdpa_causal_attention

    model = build_model(args, device, generator)
    optimizer = None
    if args.mode == "train_step":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                                      fused=True if args.fused_adamw else None,
                                      capturable=args.cuda_graph)  # step() inside a CUDA graph needs it
    tokens = torch.randint(args.vocab_size, (args.batch_size, args.context_length + 1), generator=generator,
                           device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]

    state = {}

    def model_loss(inputs, targets):
        logits = model(inputs)
        return loss_from_logits(logits, targets)

    def loss_from_logits(logits, targets):
        return nn.functional.cross_entropy(logits.float().reshape(-1, args.vocab_size), targets.reshape(-1))

    if args.compile and args.compile_cache == "cold":
        # Read lazily by Inductor, so setting them before the first compile is enough.
        cache = tempfile.mkdtemp(prefix="inductor-cold-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    if args.compile:
        fill_rope_table(args, device)
        mode = None if args.compile == "default" else args.compile
        if args.compile_scope == "blocks":
            compile_blocks(model, mode)
            loss_from_logits = torch.compile(loss_from_logits, mode=mode)
        else:
            model_loss = torch.compile(model_loss, mode=mode)

    def forward():
        # A graph must not capture casts that autocast's weight cache then hands to later steps.
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None,
                            cache_enabled=not args.cuda_graph):
            state["loss"] = model_loss(inputs, targets)

    def backward():
        model.zero_grad(set_to_none=True)
        state["loss"].backward()

    def eager_step(timer):
        timer.phase("forward", forward)
        if "first_loss" not in state:
            state["first_loss"] = state["loss"].detach()
        if args.mode != "forward":
            timer.phase("backward", backward)
        if optimizer is not None:
            timer.phase("optimizer", optimizer.step)

    graph = {}

    def graph_step(timer):
        """First call: 2 eager steps on a side stream, capture, replay; then replay only."""
        if "g" not in graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    eager_step(PhaseTimer(Marks(False, 0)))
            torch.cuda.current_stream().wait_stream(side)
            if args.mode != "forward":
                model.zero_grad(set_to_none=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                forward()
                if args.mode != "forward":
                    state["loss"].backward()
                if optimizer is not None:
                    optimizer.step()
            graph["g"] = g
        timer.phase("graph", graph["g"].replay)

    step = graph_step if args.cuda_graph and cuda else eager_step  # on a CPU the eager step, as task/train_step

    def sync():
        if cuda:
            torch.cuda.synchronize()

    with torch.no_grad() if args.mode == "forward" else torch.enable_grad():
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        samples, sizes, summary = measure(args, step, sync, cuda, device)

    metrics = {f"{name}_ms": stats_metric("ms", values, sizes) for name, values in samples.items()}
    n_tokens = targets.numel()
    metrics["tokens_per_s"] = stats_metric("tokens/s", [n_tokens / (ms * 1e-3) for ms in samples["step"]], sizes)
    metrics["parameters"] = {"unit": "count", "value": sum(p.numel() for p in model.parameters())}
    if cuda:
        peak = torch.cuda.max_memory_allocated(device)
        metrics["peak_memory_bytes"] = {"unit": "bytes", "value": peak}
        metrics["peak_memory_gib"] = {"unit": "GiB", "value": peak / 2**30}
    metrics["loss_first"] = {"unit": "", "value": state["first_loss"].item()}
    metrics["loss_last"] = {"unit": "", "value": state["loss"].item()}
    if "first_step_s" in summary:
        metrics["first_step_s"] = {"unit": "s", "value": summary.pop("first_step_s")}
    if args.compile:
        metrics["compiled_graphs"] = {"unit": "count",
                                      "value": torch._dynamo.utils.counters["stats"]["unique_graphs"]}
    metrics["torch_version"] = {"text": torch.__version__}
    if args.kernel_classes:
        metrics.update(profile_classes(args, step, sync, cuda))
    labels = {"pytorch_variant": variant_name(args)}
    if args.kernel_classes:  # the labels of profiler/kernels' step record, so one report table holds both
        labels.update({"table": "phases", "phase": "step"})
    print(json.dumps({"labels": labels, "metrics": metrics, "measurement": summary}),
          flush=True)


if __name__ == "__main__":
    try:
        main()
    except torch.OutOfMemoryError as e:
        print(json.dumps({"oom": True, "error": str(e).splitlines()[0]}), flush=True)
