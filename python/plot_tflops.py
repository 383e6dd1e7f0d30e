"""Figure for flash_benchmarking: forward+backward TFLOP/s against sequence length.

    python3 python/plot_tflops.py reports/data/flash_benchmarking/results.jsonl reports/figures/flash_benchmarking-tflops.svg

One panel per dtype, one line per (attention, d_head), log2 x axis; OOM points are
left out (and listed in the legend as OOM from the first failing length). Plain SVG,
standard library only, so it runs wherever the records are.
"""
import json
import math
import sys
from collections import defaultdict

COLORS = {"naive": "#d62728", "sdpa": "#1f77b4", "flash": "#2ca02c"}
DASHES = {16: "2,3", 32: "6,3", 64: "10,3,2,3", 128: ""}


def load(path):
    series = defaultdict(dict)  # (dtype, attention, d) -> {seq: tflops or None}
    for line in open(path):
        r = json.loads(line)
        if r.get("part") != "grid":
            continue
        p = r["params"]
        key = (p["dtype"], p["attention"], int(p["d_head"]))
        value = r["metrics"]["fwd_bwd_tflops"]["value"] if r["status"] == "ok" else None
        series[key][int(p["seq"])] = value
    return series


def panel(series, dtype, x0, width, height):
    keys = sorted(k for k in series if k[0] == dtype)
    seqs = sorted({s for k in keys for s in series[k]})
    top = max((v for k in keys for v in series[k].values() if v), default=1.0)
    top = 10 ** math.ceil(math.log10(top))
    left, bottom, pw, ph = x0 + 60, 40 + height, width - 80, height
    lo, hi = math.log2(seqs[0]), math.log2(seqs[-1])
    bottom_v = top / 1e4
    sx = lambda s: left + (math.log2(s) - lo) / (hi - lo) * pw
    sy = lambda v: bottom - (math.log10(max(v, bottom_v)) - math.log10(bottom_v)) / 4 * ph
    out = [f'<text x="{left + pw / 2}" y="25" text-anchor="middle" font-size="14">{dtype}: forward+backward TFLOP/s (causal, batch 1)</text>',
           f'<rect x="{left}" y="{bottom - ph}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for e in range(5):
        v = bottom_v * 10 ** e
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#eee"/>'
                   f'<text x="{left - 5}" y="{sy(v) + 4:.1f}" text-anchor="end" font-size="10">{v:g}</text>')
    for s in seqs:
        out.append(f'<text x="{sx(s):.1f}" y="{bottom + 15}" text-anchor="middle" font-size="10">2^{int(math.log2(s))}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{bottom + 32}" text-anchor="middle" font-size="11">sequence length</text>')
    legend_y = bottom - ph + 12
    for attention, d in sorted({(k[1], k[2]) for k in keys}, key=lambda a: (list(COLORS).index(a[0]), a[1])):
        pts = series[(dtype, attention, d)]
        xy = [(sx(s), sy(v)) for s, v in sorted(pts.items()) if v]
        oom = [s for s, v in sorted(pts.items()) if v is None]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        out.append(f'<polyline points="{path}" fill="none" stroke="{COLORS[attention]}" stroke-width="1.5" '
                   f'stroke-dasharray="{DASHES[d]}"/>')
        label = f"{attention} d={d}" + (f" (OOM from 2^{int(math.log2(oom[0]))})" if oom else "")
        out.append(f'<line x1="{left + 8}" x2="{left + 38}" y1="{legend_y}" y2="{legend_y}" stroke="{COLORS[attention]}" '
                   f'stroke-width="1.5" stroke-dasharray="{DASHES[d]}"/><text x="{left + 42}" y="{legend_y + 4}" font-size="10">{label}</text>')
        legend_y += 13
    return out


def main(src, dst):
    series = load(src)
    width, height = 560, 380
    dtypes = sorted({k[0] for k in series})
    body = []
    for i, dtype in enumerate(dtypes):
        body += panel(series, dtype, i * width, width, height)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * len(dtypes)}" height="{height + 90}" '
           f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>' + "".join(body) + "</svg>\n")
    with open(dst, "w") as f:
        f.write(svg)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
