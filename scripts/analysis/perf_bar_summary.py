#!/usr/bin/env python3
"""One line per perf_bar* / bar* point of flash_benchmarking runs: forward, backward and
forward+backward TFLOP/s (from median latency) and the ratio to SDPA's cuDNN backend in the
same run (to plain `sdpa` where a run has no cuDNN rows).

  perf_bar_summary.py RUN_DIR [RUN_DIR ...]     (each holds a results.jsonl)

For side-by-side comparisons of kernel variants selected by environment (one run per
variant, each with its own SDPA rows), e.g. the runs stages.sh writes under /tmp/runs.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from runner_records import read_records  # noqa: E402


def variant(params):
    option = params.get("attention.kernel") or params.get("attention.backend")
    name = str(params.get("attention")) + (f"/{option}" if option else "")
    # The wgmma forward schedule tells variants of one kernel family apart (flash_forward_schedules).
    schedule = params.get("attention.forward_schedule")
    if schedule and schedule != "auto":
        name += f"/{schedule}"
        if schedule == "warp_specialized" and params.get("attention.pingpong") is False:
            name += "-no-pingpong"
    return name


def point(params):
    """What names a point besides its variant: d, causal, batch, seq."""
    return tuple(params.get(k) for k in ("d_head", "causal", "batch", "seq"))


def value(metrics, key):
    if key not in metrics:
        return float("nan")
    return metrics[key]["value"] if "value" in metrics[key] else metrics[key]["median"]


def main(dirs):
    print(f"{'run':<24} {'part':<16} {'d, causal, batch, seq':<24} {'variant':<40} {'fwd':>6} {'bwd':>6} {'f+b':>6} "
          f"{'/cudnn':>6}")
    for d in dirs:
        path = os.path.join(d, "results.jsonl")
        if not os.path.exists(path):
            print(f"{os.path.basename(d):<28} (no results.jsonl)")
            continue
        rows = []
        for r in read_records(path):
            if not r.get("part", "").startswith(("perf_bar", "bar")) or r.get("status") != "ok":
                continue
            m = r["metrics"]
            # execution: cuda_graph records have no backward of their own (forward and forward+backward only).
            rows.append((r["part"], point(r["params"]), variant(r["params"]), *(value(m, k)
                         for k in ("forward_tflops", "backward_tflops", "fwd_bwd_tflops"))))
        base = {(part, p): fb for part, p, v, _, _, fb in rows if v == "sdpa/cudnn"}
        base.update({(part, p): fb for part, p, v, _, _, fb in rows if v in ("sdpa", "sdpa/auto") and (part, p) not in base})
        for part, p, v, f, b, fb in sorted(rows, key=lambda row: tuple(str(x) for x in row[:3])):
            ratio = fb / base[part, p] if (part, p) in base else float("nan")
            where = ", ".join(str(x) for x in p)
            print(f"{os.path.basename(d):<24} {part:<16} {where:<24} {v:<40} {f:6.0f} {b:6.0f} {fb:6.0f} {ratio:6.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
