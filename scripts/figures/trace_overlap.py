#!/usr/bin/env python3
"""Draws one GPU's kernels from a Kineto Chrome trace (profiler/kernels) with
matplotlib: compute kernels on one lane, NCCL kernels on another, so all-reduces that
overlap backward show as bars under the compute bars. Prints how much NCCL kernel time
overlaps compute kernels (JSON).

  scripts/figures/trace_overlap.py <trace.json> <out stem> [--title TEXT]
writes <out stem>.svg, .png and .pdf (reports/writeup.tex includes the .pdf), e.g.
  scripts/figures/trace_overlap.py runs/ddp_trace/artifacts/trace-0/rank0/trace.json reports/ddp_overlap_individual_parameters/figures/ddp_overlap_trace
"""
import argparse
import json
import sys


def kernels(trace):
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            yield e


def merged(intervals):
    out = []
    for s, t in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], t)
        else:
            out.append([s, t])
    return out


def overlap_us(a, b):
    total, j = 0.0, 0
    for s, t in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < t:
            total += max(0.0, min(t, b[k][1]) - max(s, b[k][0]))
            k += 1
    return total


def draw(args, t0, compute, nccl, stats):
    try:
        import matplotlib
    except ImportError:
        sys.exit(f"matplotlib is not installed for {sys.executable} (scripts/setup.sh installs it into the venv)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams.update({"svg.hashsalt": "runner", "svg.fonttype": "none", "font.size": 9})
    fig, ax = plt.subplots(figsize=(9.6, 2.4))
    for row, (spans, colour) in enumerate(((compute, "tab:blue"), (nccl, "tab:orange"))):
        ax.broken_barh([((s - t0) / 1e3, (t - s) / 1e3) for s, t in spans], (row - 0.4, 0.8), color=colour)
    ax.set_yticks([0, 1], ["compute", "NCCL"])
    ax.set_xlabel("time (ms)")
    ax.set_title(f'{args.title}: NCCL kernel time {stats["nccl_kernel_ms"]:.1f} ms, '
                 f'{100 * stats["nccl_overlap_fraction"]:.0f}% of it under compute kernels', fontsize=9)
    fig.tight_layout()
    metadata = {".svg": {"Date": None}, ".pdf": {"CreationDate": None, "ModDate": None}, ".png": {"Software": None}}
    for extension, meta in metadata.items():
        fig.savefig(args.stem + extension, dpi=150 if extension == ".png" else None, metadata=meta)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("stem", help="output path without extension")
    p.add_argument("--title", default="GPU kernels: compute vs NCCL")
    args = p.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = list(kernels(trace))
    if not events:
        sys.exit(f"{args.trace}: no GPU kernel events (was the trace taken on a GPU?)")
    device = min(e.get("pid") for e in events if isinstance(e.get("pid"), int)) if any(
        isinstance(e.get("pid"), int) for e in events) else events[0].get("pid")
    events = [e for e in events if e.get("pid") == device]
    nccl = [(e["ts"], e["ts"] + e["dur"]) for e in events if "nccl" in e["name"].lower()]
    compute = [(e["ts"], e["ts"] + e["dur"]) for e in events if "nccl" not in e["name"].lower()]
    t0 = min(s for s, _ in nccl + compute)
    t1 = max(t for _, t in nccl + compute)
    nccl_m, compute_m = merged(nccl), merged(compute)
    nccl_total = sum(t - s for s, t in nccl_m)
    hidden = overlap_us(nccl_m, compute_m)
    stats = {"window_ms": (t1 - t0) / 1e3, "nccl_kernel_ms": nccl_total / 1e3,
             "nccl_overlapping_compute_ms": hidden / 1e3,
             "nccl_overlap_fraction": hidden / nccl_total if nccl_total else 0.0,
             "compute_busy_ms": sum(t - s for s, t in compute_m) / 1e3, "nccl_kernels": len(nccl)}
    draw(args, t0, compute_m, nccl_m, stats)
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
