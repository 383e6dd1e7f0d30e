#!/usr/bin/env python3
"""C++ vs PyTorch step-time ratios of train_step_vs_pytorch runs, with their noise.

Pairs: runner naive (part cpp) vs PyTorch eager (part python), and the runner's fast
path (cpp_fast) vs PyTorch compiled (python_compiled). Records of older runs without
a part name pair by the `script` parameter (PyTorch side) alone.

  compare_runs.py RUN/results.jsonl              one run: ratio PyTorch/C++ per cell, ± its standard error
  compare_runs.py RUN1/results.jsonl RUN2/...    two runs: do the ratios agree within their stated noise?

The ratio's relative standard error is the two means' relative standard errors in
quadrature (independent runs). Two runs agree on a cell when their ratios differ
by at most 2 combined standard errors (about 95% for normal errors).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from runner_records import read_records  # noqa: E402


# part -> (pair label, side)
PAIRS = {"cpp": ("naive/eager", "cpp"), "python": ("naive/eager", "py"),
         "cpp_fast": ("fast/compiled", "cpp"), "python_compiled": ("fast/compiled", "py")}


def load(path):
    cells = {}
    for r in read_records(path):
        if r.get("status") != "ok" or "step_ms" not in r.get("metrics", {}):
            continue
        p = r["params"]
        part = r.get("part") or ("python" if "script" in p else "cpp")
        pair, side = PAIRS.get(part, (None, None))
        if pair is None:
            continue
        key = (str(p.get("model.size")), p.get("precision"), pair)
        m = r["metrics"]["step_ms"]
        rse = m.get("rel_stderr")
        if rse is None:
            rse = m["std"] / math.sqrt(m["n"]) / m["mean"] if m["n"] > 1 else float("nan")
        meas = r.get("measurement") or {}
        if isinstance(meas, list):
            meas = meas[0] if meas else {}
        gpu = r.get("gpu") or {}
        cells.setdefault(key, {})[side] = (m["mean"], rse, m["n"], meas.get("target_met"), gpu.get("throttled"))
    out = {}
    for key, sides in cells.items():
        if "py" in sides and "cpp" in sides:
            (py, py_rse, py_n, py_met, py_thr), (cpp, cpp_rse, cpp_n, cpp_met, cpp_thr) = sides["py"], sides["cpp"]
            out[key] = dict(ratio=py / cpp, rse=math.hypot(py_rse, cpp_rse), cpp=cpp, py=py, n=(cpp_n, py_n),
                            met=(cpp_met, py_met), throttled=(cpp_thr, py_thr))
    return out


def main(paths):
    runs = [load(p) for p in paths]
    keys = sorted(set().union(*runs), key=lambda k: (k[2], k[1], k[0]))
    agree = disagree = 0
    for key in keys:
        parts = []
        vals = []
        for run in runs:
            c = run.get(key)
            if c is None:
                parts.append("missing")
                continue
            se = c["ratio"] * c["rse"]
            vals.append((c["ratio"], se))
            parts.append(f"C++ {c['cpp']:.2f} ms, PyTorch {c['py']:.2f} ms, PyTorch/C++ {c['ratio']:.3f} ± {se:.3f}"
                         f" (n={c['n'][0]}/{c['n'][1]}, target met {c['met'][0]}/{c['met'][1]},"
                         f" throttled {c['throttled'][0]}/{c['throttled'][1]})")
        verdict = ""
        if len(vals) == 2:
            (a, sa), (b, sb) = vals
            z = abs(a - b) / math.hypot(sa, sb) if math.hypot(sa, sb) > 0 else float("inf")
            ok = z <= 2
            agree += ok
            disagree += not ok
            verdict = f"  -> {'agree' if ok else 'DISAGREE'} (|diff| = {abs(a - b):.3f} = {z:.1f} combined SE)"
        print(f"{key[2]:>13} {key[0]:>5} {key[1]}: " + " | ".join(parts) + verdict)
    if len(runs) == 2:
        print(f"{agree} cells agree within 2 combined standard errors, {disagree} do not")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1:])
