#!/usr/bin/env python3
"""Bus bandwidth vs tensor size from distributed_communication_single_node records, as SVG
(log-log, one line per backend x implementation x process count, slowest-rank medians).

  scripts/figures/allreduce_bandwidth.py <results.jsonl> <out.svg>
Standard library only.
"""
import json
import math
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    series = {}
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("status") != "ok" or "rank" in r.get("labels", {}) or "busbw_gbps" not in r.get("metrics", {}):
            continue
        labels, params = r["labels"], r["params"]
        backend = labels.get("backend", params.get("backend"))
        size = float(labels.get("size_mb", params.get("size_mb")))
        key = f'{backend} {labels.get("impl")} {labels.get("processes")} proc'
        series.setdefault(key, {})[size] = r["metrics"]["busbw_gbps"]["median"]
    if not series:
        sys.exit("no busbw records")
    width, height, left, bottom, top = 760, 440, 70, 50, 30
    sizes = sorted({s for v in series.values() for s in v})
    bws = [b for v in series.values() for b in v.values() if b > 0]
    lo, hi = math.floor(math.log10(min(bws))), math.ceil(math.log10(max(bws)))
    xs = {s: left + i * (width - left - 180) / max(1, len(sizes) - 1) for i, s in enumerate(sizes)}

    def y(b):
        return top + (hi - math.log10(b)) / (hi - lo) * (height - top - bottom)

    colours = ["#4a78b5", "#d9822b", "#3a9b5b", "#b54a78", "#7b6ab5", "#8c8c3a"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="18" font-size="14">All-reduce bus bandwidth (GB/s, median, slowest rank)</text>']
    for e in range(lo, hi + 1):
        out.append(f'<line x1="{left}" x2="{width - 180}" y1="{y(10**e):.1f}" y2="{y(10**e):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{y(10**e) + 4:.1f}" text-anchor="end">{10**e:g}</text>')
    for s, x in xs.items():
        out.append(f'<text x="{x:.1f}" y="{height - bottom + 18}" text-anchor="middle">{s:g} MB</text>')
    for i, (key, points) in enumerate(sorted(series.items())):
        c = colours[i % len(colours)]
        dash = ' stroke-dasharray="5,3"' if "pytorch" in key else ""
        pts = " ".join(f"{xs[s]:.1f},{y(b):.1f}" for s, b in sorted(points.items()) if b > 0)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{width - 170}" y="{top + 16 * i + 10}" fill="{c}">{key}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
