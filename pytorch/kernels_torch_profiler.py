#!/usr/bin/env python3
"""The Python side of profiler/kernels: the same Transformer LM step profiled by
torch.profiler, its top kernels per phase set beside the runner's.

The model is pytorch/train_step_pytorch.py's (the reference LM with the C++ init,
batch of random tokens reused every step, AdamW with the C++ defaults, forward
under no_grad in --mode forward, as task/train_step). --warmup steps run
unprofiled, then --steps steps under torch.profiler (CPU, and CUDA when on the GPU),
each step and phase inside record_function ranges and synchronized. A kernel (on
CUDA: every GPU kernel, memcpy and memset, through the op that launched it; on a
CPU: every aten op with its self time) belongs to the phase whose range holds its launch,
whatever thread launched it (backward runs on autograd's threads). Prints the top
--top kernels of each phase with their share of the phase's kernel time.

With --runner-results RESULTS.jsonl --point PART-INDEX (a runner point with
profilers: [kernels] and the same model options), each phase's top list is
compared with the runner's: exit 1 unless at least --min-overlap of the top
--top names agree and the top kernel is the same (--report-only: print only).

  python pytorch/kernels_torch_profiler.py --device cuda --model.size small --model.context_length 128 \\
      --mode train_step --runner-results reports/nsys_profile/data/results.jsonl --point train_step-0
"""
import argparse
import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "scripts"))
import kernel_compare  # noqa: E402
import train_step_pytorch as twin  # noqa: E402

PHASES = ("forward", "backward", "optimizer")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--mode", default="train_step", choices=["forward", "forward_backward", "train_step"])
    twin.add_model_args(p)
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--runner-results", help="results.jsonl of a runner run with profiler/kernels")
    p.add_argument("--point", help="<part>-<index> of that run (its artifacts/ folder name)")
    p.add_argument("--min-overlap", type=int, default=None, help="names in common of the top lists (default: all)")
    p.add_argument("--report-only", action="store_true",
                   help="print the comparison without judging it (CPU timings of tiny ops on a shared machine "
                        "are noise); still fails when a phase of the runner's is missing here")
    p.add_argument("--trace", help="also write torch.profiler's Chrome trace here")
    args = p.parse_args()
    if bool(args.runner_results) != bool(args.point):
        p.error("--runner-results and --point go together")
    twin.resolve_model_dims(p, args)
    return args


def make_step(args, device):
    generator = torch.Generator(device=device).manual_seed(args.seed)
    model = twin.build_model(args, device, generator)
    optimizer = None
    if args.mode == "train_step":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    tokens = torch.randint(args.vocab_size, (args.batch_size, args.context_length + 1), generator=generator,
                           device=device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step(i):
        with torch.profiler.record_function(f"step_{i}"):
            with torch.profiler.record_function("forward"), torch.set_grad_enabled(args.mode != "forward"):
                logits = model(inputs)
                loss = nn.functional.cross_entropy(logits.float().reshape(-1, args.vocab_size), targets.reshape(-1))
            if args.mode != "forward":
                with torch.profiler.record_function("backward"):
                    model.zero_grad(set_to_none=True)
                    loss.backward()
            if optimizer is not None:
                with torch.profiler.record_function("optimizer"):
                    optimizer.step()
            sync()

    return step


def phase_totals(events, cuda):
    """{phase: {kernel: summed µs}} with phase "step" for everything inside a step."""
    ranges = [(e.name, e.time_range.start, e.time_range.end) for e in events
              if e.name in PHASES or e.name.startswith("step_")]

    def phases_at(t):
        return ["step" if name.startswith("step_") else name for name, start, end in ranges if start <= t <= end]

    totals = {}
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CPU or e.name in PHASES or e.name.startswith("step_"):
            continue
        if cuda:
            work = [(k.name, k.duration) for k in e.kernels]
        else:
            work = [(e.name, e.self_cpu_time_total)]
        for name, us in work:
            for phase in phases_at(e.time_range.start):
                totals.setdefault(phase, {})
                totals[phase][name] = totals[phase].get(name, 0.0) + us
    return totals


def runner_phases(args):
    phases = []
    for phase in ("step",) + PHASES:
        try:
            kernel_compare.runner_table(args.runner_results, args.point, phase)
            phases.append(phase)
        except SystemExit:
            pass
    return phases


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    cuda = args.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    step = make_step(args, device)
    for i in range(args.warmup):
        step(i)
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        for i in range(args.steps):
            step(i)
    if args.trace:
        prof.export_chrome_trace(args.trace)
    totals = phase_totals(prof.events(), cuda)
    failures = 0
    for phase in ("step",) + PHASES:
        if phase not in totals:
            if args.runner_results and phase in runner_phases(args):
                failures += 1
                print(f"missing: the runner has phase {phase}, torch.profiler saw none of its kernels")
            continue
        theirs = kernel_compare.shares(totals[phase])
        if not args.runner_results:
            print(f"## {phase}\n\n" + kernel_compare.markdown(theirs, {}, args.top, "-"))
            continue
        runner = kernel_compare.runner_table(args.runner_results, args.point, phase)
        ours = {name: share for name, (share, _) in runner.items()}
        short = {name: label for name, (_, label) in runner.items()}
        print(f"## {phase}: runner vs torch.profiler, top {args.top}\n")
        print(kernel_compare.markdown(ours, theirs, args.top, "torch.profiler", short))
        a, b = kernel_compare.top(ours, args.top), kernel_compare.top(theirs, args.top)
        overlap = len(set(a) & set(b))
        need = min(args.top if args.min_overlap is None else args.min_overlap, len(a), len(b))
        if overlap < need or a[:1] != b[:1]:
            failures += 1
            print(f"disagree: {phase}: {overlap} of the top {args.top} in common (need {need}); "
                  f"top kernel {a[:1]} vs {b[:1]}\n")
    if args.runner_results:
        print("agree" if not failures else f"{failures} phase(s) disagree")
    # --report-only prints the same verdict (a report must not claim agreement it did not check)
    # and exits 0 whatever it says.
    return 1 if failures and not args.report_only else 0


if __name__ == "__main__":
    sys.exit(main())
