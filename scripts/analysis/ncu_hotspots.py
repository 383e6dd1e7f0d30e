#!/usr/bin/env python3
"""Where a kernel's warps stall, instruction by instruction, from Nsight Compute's source page.

  ncu --import REPORT.ncu-rep --page source --csv --print-source sass > SRC.csv
  ncu_hotspots.py SRC.csv [TOP]

Prints the columns the page has, the total of each stall-sampling column, and the TOP
(default 40) SASS instructions with the most warp-stall samples, each with its share and
its largest stall reasons. Needs a report taken with source counters (--set full) of a
binary built with -lineinfo.
"""
import csv
import sys


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0


def main(path, top):
    rows = list(csv.reader(open(path, newline="")))
    start = next(i for i, r in enumerate(rows) if any("Sampling" in c for c in r))
    header, body = rows[start], [r for r in rows[start + 1:] if len(r) == len(rows[start])]
    print("columns:", " | ".join(header))
    total_col = next(i for i, c in enumerate(header) if "Warp Stall Sampling (All" in c)
    reason_cols = [i for i, c in enumerate(header) if c.startswith("stall_")]
    text_col = next((i for i, c in enumerate(header) if c.lower() in ("source", "sass")), 1)
    total = sum(number(r[total_col]) for r in body) or 1.0
    print(f"instructions {len(body)}, stall samples {total:.0f}")
    sums = {header[i]: sum(number(r[i]) for r in body) for i in reason_cols}
    for name, value in sorted(sums.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {name:<48} {100 * value / total:5.1f} %")
    for r in sorted(body, key=lambda r: -number(r[total_col]))[:top]:
        share = 100 * number(r[total_col]) / total
        reasons = sorted(((number(r[i]), header[i]) for i in reason_cols), reverse=True)[:2]
        why = ", ".join(f"{name} {100 * v / total:.1f}" for v, name in reasons if v > 0)
        print(f"{share:5.1f} %  {r[0][:8]:>8}  {r[text_col][:70]:<70}  {why}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
