"""Kernel tables side by side: the runner's per-phase kernel records (profiler/kernels)
against another tool's breakdown of the same work (HTA, torch.profiler).

Shared by scripts/hta_kernel_check.py and pytorch/kernels_torch_profiler.py.
Standard library only.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner_records import read_records  # noqa: E402


def runner_table(results_path, point, phase="step"):
    """{full kernel name: (share %, short name)} of one point's phase, from results.jsonl.

    `point` is "<part>-<index>" as in the run's artifacts/ folder names; a path ending
    in .gz is read through gzip.
    """
    part, _, index = point.rpartition("-")
    table = {}
    for r in read_records(results_path):
        labels = r.get("labels", {})
        if (r.get("part") != part or str(r.get("point")) != index or labels.get("profiler") != "kernels"
                or labels.get("table") != "kernels" or labels.get("phase") != phase):
            continue
        m = r["metrics"]
        table[m["kernel_name"]["text"]] = (m["share"]["value"], labels.get("kernel", m["kernel_name"]["text"]))
    if not table:
        raise SystemExit(f"{results_path}: no profiler=kernels records of point {point}, phase {phase} "
                         "(is the point name <part>-<index>, and did it run with profilers: [kernels]?)")
    return table


def shares(totals):
    """{name: total} -> {name: share of the sum, %}."""
    whole = sum(totals.values())
    return {k: 100.0 * v / whole for k, v in totals.items()} if whole > 0 else {}


def self_times(ops):
    """CPU ops as (thread, start, duration, name), nested per thread -> {name: summed self
    time}: each op's duration less that of the ops directly inside it (on a CPU these
    stand in for kernels, as in profiler/kernels)."""
    totals = {}
    ops = sorted(ops, key=lambda o: (o[0], o[1], -o[2]))
    own = [o[2] for o in ops]
    open_ops = []
    for i, (thread, start, dur, _) in enumerate(ops):
        while open_ops and (ops[open_ops[-1]][0] != thread or ops[open_ops[-1]][1] + ops[open_ops[-1]][2] <= start):
            open_ops.pop()
        if open_ops:
            own[open_ops[-1]] -= dur
        open_ops.append(i)
    for (_, _, _, name), t in zip(ops, own):
        totals[name] = totals.get(name, 0.0) + max(0.0, t)
    return totals


def top(table, n):
    return sorted(table, key=lambda k: -table[k])[:n]


def compare(ours, theirs, n, tolerance, min_overlap=None):
    """Problems (empty when they agree): the top-n kernels of both sides must overlap in
    at least `min_overlap` names (default: all n), and every kernel of either top n must
    have shares within `tolerance` percentage points on both sides."""
    min_overlap = n if min_overlap is None else min_overlap
    a, b = top(ours, n), top(theirs, n)
    problems = []
    overlap = len(set(a) & set(b))
    if overlap < min(min_overlap, len(a), len(b)):
        problems.append(f"top {n} differ ({overlap} in common): ours {a}, theirs {b}")
    for name in dict.fromkeys(a + b):
        x, y = ours.get(name, 0.0), theirs.get(name, 0.0)
        if abs(x - y) > tolerance:
            problems.append(f"{name}: share {x:.2f}% (ours) vs {y:.2f}% (theirs), beyond {tolerance} points")
    return problems


def markdown(ours, theirs, n, their_name, short=None):
    short = short or {}
    rows = [f"| # | kernel | runner (%) | {their_name} (%) |", "|---:|---|---:|---:|"]
    for i, name in enumerate(dict.fromkeys(top(ours, n) + top(theirs, n)), 1):
        label = short.get(name, name).replace("|", "\\|")
        mine = f"{ours[name]:.1f}" if name in ours else "–"
        other = f"{theirs[name]:.1f}" if name in theirs else "–"
        rows.append(f"| {i} | `{label}` | {mine} | {other} |")
    return "\n".join(rows) + "\n"
