#!/usr/bin/env python3
"""Per-kernel device times of the measured step from `ncu --csv --metrics gpu__time_duration.sum`.

  kernel_times.py FILE.csv...

Each file holds the kernels of a warm-up step and a measured step (one runner point with
warmup_steps 1 and measured_steps 1) after the kernels that made the inputs. The measured step
is the last half of the kernels launched from the first attention kernel on; printed with each
kernel's time in microseconds, its share, and the step's sum.
"""
import csv
import os
import sys


def rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    out = []
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(str(r["Metric Value"]).replace(",", ""))
        unit = r.get("Metric Unit", "")
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
                 "second": 1e6}[unit]
        out.append((r["Kernel Name"], value * scale))
    return out


def main(paths):
    for path in paths:
        kernels = rows(path)
        print(f"== {os.path.basename(path)}: {len(kernels)} kernels profiled")
        if not kernels:
            continue
        step = kernels[len(kernels) - len(kernels) // 2:] if len(kernels) > 1 else kernels
        # The inputs' kernels (random fills) come before the two steps; the steps repeat, so the
        # measured one is the tail whose names equal the step before it.
        for n in range(len(kernels) // 2, 0, -1):
            a, b = kernels[-2 * n:-n], kernels[-n:]
            if [k for k, _ in a] == [k for k, _ in b]:
                step = b
                break
        total = sum(t for _, t in step)
        for name, t in step:
            print(f"  {t:10.1f} us {100 * t / total:5.1f} %  {name[:110]}")
        print(f"  {total:10.1f} us total")


if __name__ == "__main__":
    main(sys.argv[1:])
