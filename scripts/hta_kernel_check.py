#!/usr/bin/env python3
"""Cross-checks profiler/kernels against Holistic Trace Analysis (HTA), an analyzer
made for PyTorch profiler traces: HTA reads the point's Chrome trace on its own, and
its per-kernel breakdown must agree with the runner's table of that point (same top
kernels, shares within --tolerance percentage points).

  scripts/hta_kernel_check.py TRACE --results RESULTS.jsonl --point PART-INDEX
      [--phase step] [--top 5] [--tolerance 3] [--markdown OUT.md]

TRACE is the point's trace.json (or .json.gz), RESULTS the run's results.jsonl (or
reports/<experiment>/data/results.jsonl). GPU traces: HTA's get_gpu_kernel_breakdown
(kernels, memcpy and memset, every stream). CPU traces have no GPU kernels; there the
runner's "kernels" are the aten ops with their self time, so the check takes HTA's
parsed trace (its own parser and symbol table) and sums the cpu_op events' self time
per name.
The runner's phase must be one covering the whole trace: `step` (the default).
Exit 1 when they disagree, 2 on bad input, 77 without HTA (ctest: skipped).
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_compare  # noqa: E402


def hta_totals(trace_path):
    """{name: summed duration} and whether these are GPU kernels, as HTA sees the trace."""
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("hta_kernel_check: HolisticTraceAnalysis is not installed (pip install HolisticTraceAnalysis==0.5.0; "
              "scripts/setup.sh does it); skipped")
        sys.exit(77)

    with tempfile.TemporaryDirectory() as folder:
        suffix = ".json.gz" if trace_path.endswith(".gz") else ".json"
        os.symlink(os.path.abspath(trace_path), os.path.join(folder, "rank0" + suffix))
        analysis = TraceAnalysis(trace_dir=folder)
        df = analysis.t.get_trace(0)
        symbols = analysis.t.symbol_table.get_sym_table()
        if (df["stream"] >= 0).any():
            _, kernels = analysis.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0,
                                                           num_kernels=10**9, include_memory_kernels=True)
            # HTA 0.5 names the column "sum (us)" (older releases: "sum"); "others" is its
            # bucket for kernels past num_kernels per type, not a kernel.
            column = "sum (us)" if "sum (us)" in kernels.columns else "sum"
            return {row["name"]: float(row[column]) for _, row in kernels.iterrows() if row["name"] != "others"}, True
        cpu_op = symbols.index("cpu_op")
        ops = df[df["cat"] == cpu_op]
        totals = kernel_compare.self_times(
            [(tid, float(ts), float(dur), symbols[name]) for tid, ts, dur, name in
             ops[["tid", "ts", "dur", "name"]].itertuples(index=False)])
        return totals, False


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--results", required=True)
    p.add_argument("--point", required=True, help="<part>-<index>, as the artifacts/ folder")
    p.add_argument("--phase", default="step")
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--tolerance", type=float, default=3.0, help="percentage points")
    p.add_argument("--markdown", help="also write the side-by-side table here")
    p.add_argument("--skip-missing", action="store_true", help="exit 77 (ctest: skipped) when a file is missing")
    args = p.parse_args()
    for path in (args.trace, args.results):
        if not os.path.isfile(path):
            p.exit(77 if args.skip_missing else 2, f"hta_kernel_check: no such file: {path}\n")

    runner = kernel_compare.runner_table(args.results, args.point, args.phase)
    ours = {name: share for name, (share, _) in runner.items()}
    short = {name: label for name, (_, label) in runner.items()}
    totals, gpu = hta_totals(args.trace)
    theirs = kernel_compare.shares(totals)
    table = kernel_compare.markdown(ours, theirs, args.top, "HTA")
    what = "GPU kernel breakdown" if gpu else "CPU op self time in HTA's parsed trace"
    print(f"{args.point}, phase {args.phase}: runner vs HTA ({what}), top {args.top}\n\n{table}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(kernel_compare.markdown(ours, theirs, args.top, "HTA", short))
    problems = kernel_compare.compare(ours, theirs, args.top, args.tolerance)
    for problem in problems:
        print("disagree: " + problem)
    if problems:
        return 1
    print(f"agree: same top {args.top}, shares within {args.tolerance} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
