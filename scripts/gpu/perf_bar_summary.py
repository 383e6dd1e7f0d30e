#!/usr/bin/env python3
"""One line per perf_bar / perf_bar_device point of flash_benchmarking runs: forward, backward and
forward+backward TFLOP/s (from median latency) and the ratio to SDPA in the same run.

  perf_bar_summary.py RUN_DIR [RUN_DIR ...]     (each holds a results.jsonl)

For side-by-side comparisons of kernel variants selected by environment (one run per
variant, each with its own SDPA rows), e.g. the runs stages.sh writes under /tmp/runs.
"""
import json
import os
import sys


def variant(params):
    kernel = params.get("attention.kernel")
    return str(params.get("attention")) + (f"/{kernel}" if kernel else "")


def main(dirs):
    print(f"{'run':<28} {'part':<16} {'seq':>6} {'variant':<16} {'fwd':>6} {'bwd':>6} {'f+b':>6} {'/sdpa':>6}")
    for d in dirs:
        path = os.path.join(d, "results.jsonl")
        if not os.path.exists(path):
            print(f"{os.path.basename(d):<28} (no results.jsonl)")
            continue
        rows = []
        for line in open(path):
            r = json.loads(line)
            if not r.get("part", "").startswith("perf_bar") or r.get("status") != "ok":
                continue
            m = r["metrics"]
            rows.append((r["part"], r["params"]["seq"], variant(r["params"]), *(m[k]["value"] if "value" in m[k] else m[k]["median"]
                         for k in ("forward_tflops", "backward_tflops", "fwd_bwd_tflops"))))
        sdpa = {(part, seq): fb for part, seq, v, _, _, fb in rows if v == "sdpa"}
        for part, seq, v, f, b, fb in sorted(rows):
            ratio = fb / sdpa[part, seq] if (part, seq) in sdpa else float("nan")
            print(f"{os.path.basename(d):<28} {part:<16} {seq:>6} {v:<16} {f:6.0f} {b:6.0f} {fb:6.0f} {ratio:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
