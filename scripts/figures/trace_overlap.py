#!/usr/bin/env python3
"""Draws one GPU's kernels from a Kineto Chrome trace (profiler/kernels) as SVG:
compute kernels on one lane, NCCL kernels on another, so all-reduces that overlap
backward show as bars under the compute bars. Prints how much NCCL kernel time
overlaps compute kernels.

  scripts/figures/trace_overlap.py <trace.json> <out.svg> [--title TEXT]
Standard library only.
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("svg")
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
    width, left, lane, gap = 1200, 90, 36, 14
    height = 60 + 2 * (lane + gap) + 40
    scale = (width - left - 20) / (t1 - t0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{left}" y="20" font-size="14">{args.title}</text>',
             f'<text x="{left}" y="38">NCCL kernel time {stats["nccl_kernel_ms"]:.1f} ms, '
             f'{100 * stats["nccl_overlap_fraction"]:.0f}% of it under compute kernels; window {stats["window_ms"]:.1f} ms</text>']
    for row, (label, spans, colour) in enumerate((("compute", compute_m, "#4a78b5"), ("NCCL", nccl_m, "#d9822b"))):
        y = 55 + row * (lane + gap)
        parts.append(f'<text x="8" y="{y + lane / 2 + 4}">{label}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{width - left - 20}" height="{lane}" fill="#f2f2f2"/>')
        for s, t in spans:
            w = max(0.5, (t - s) * scale)
            parts.append(f'<rect x="{left + (s - t0) * scale:.2f}" y="{y}" width="{w:.2f}" height="{lane}" fill="{colour}"/>')
    axis_y = 55 + 2 * (lane + gap) + 5
    for i in range(6):
        x = left + i * (width - left - 20) / 5
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 12}" text-anchor="middle">{(t1 - t0) * i / 5 / 1e3:.0f} ms</text>')
    parts.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(parts) + "\n")
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
