#!/usr/bin/env python3
"""Measures compare's detector and renders the README table from the measurement.

    scripts/regression_detection.py [--build build] [--compares 20] [--aa 200] [--measured FILE]

Runs build/tests/history/runner_detection_tool over the three record layouts
(summary: what runs record by default; repetitions; per-step samples), keeps
its JSON lines in bench/history/regression_detection.jsonl, and rewrites the
table between the regression-detection markers of README.md from them.
--render-only skips the measurement and renders the kept file.
"""
import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- regression-detection table begin -->", "<!-- regression-detection table end -->"


def render(rows):
    layouts = {"summary": "summary (default: 10 steps)", "repetitions": "5 repetitions x 10 steps",
               "samples": "30 per-step samples"}
    out = ["| records | effect | compares | flagged compares | slower points |", "|---|---|---:|---:|---:|"]
    for r in rows:
        out.append("| {} | {} | {} | {} ({:.0%}) | {} of {} ({:.1%}) |".format(
            layouts.get(r["records"], r["records"]), r["effect_name"], r["compares"], r["flagged_compares"],
            r["compare_rate"], r["slower_points"], r["points"], r["point_rate"]))
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--compares", type=int, default=20)
    p.add_argument("--aa", type=int, default=200)
    p.add_argument("--measured", default=str(ROOT / "bench/history/regression_detection.jsonl"))
    p.add_argument("--render-only", action="store_true")
    a = p.parse_args()
    measured = pathlib.Path(a.measured)
    if not a.render_only:
        tool = pathlib.Path(a.build) / "tests/history/runner_detection_tool"
        if not tool.exists():
            sys.exit(f"regression_detection.py: {tool} is missing; build it: cmake --build build --target runner_detection_tool")
        out = subprocess.run([str(tool), "--compares", str(a.compares), "--aa", str(a.aa), "--records",
                              "summary,repetitions,samples"], check=True, capture_output=True, text=True).stdout
        measured.write_text(out)
    rows = [json.loads(line) for line in measured.read_text().splitlines() if line.strip()]
    readme = ROOT / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"regression_detection.py: README.md has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + BEGIN + "\n" + render(rows) + "\n" + END + tail)
    print(f"rendered {len(rows)} rows from {measured} into README.md")


if __name__ == "__main__":
    main()
