#!/usr/bin/env python3
"""Draws the figures of one report with matplotlib; `runner report` calls it.

  plot.py <figures.json>

The JSON is what the runner selected from stored records (runner/src/report/figure.cpp):
{"figures": [{name, kind: line|bar, title, xlabel, ylabel, logx, logy, categories,
 panels: [{title, series: [{label, points: [{x, y, std?}]}]}], outputs: [.svg, .png, .pdf]}]}.
This script only draws: no selection, no statistics. Output is byte-stable for the same
input (no dates, fixed SVG ids), so re-rendering committed figures changes nothing.
"""
import json
import math
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(f"matplotlib is not installed for {sys.executable} (scripts/setup.sh installs it into the venv)")

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams.update({
    "svg.hashsalt": "runner",
    "svg.fonttype": "none",  # text stays text in SVG
    "pdf.fonttype": 42,
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 7,
})
METADATA = {".svg": {"Date": None}, ".pdf": {"CreationDate": None, "ModDate": None}, ".png": {"Software": None}}


def format_category(text):
    """Integral numbers without a trailing .0 (1.0 MB reads as 1)."""
    try:
        value = float(text)
        return str(int(value)) if value.is_integer() else text
    except ValueError:
        return text


def draw_line(ax, figure, panel):
    categories = figure["categories"]
    for series in panel["series"]:
        points = series["points"]
        xs = [categories.index(p["x"]) if categories else p["x"] for p in points]
        ys = [p["y"] for p in points]
        errors = [p.get("std", 0.0) for p in points]
        label = series["label"] or figure["ylabel"]
        if any(errors):
            ax.errorbar(xs, ys, yerr=errors, marker="o", markersize=3, capsize=2, label=label)
        else:
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
    if categories:
        ax.set_xticks(range(len(categories)), [format_category(c) for c in categories])
    if figure["logx"] and not categories:
        xs = sorted({p["x"] for s in panel["series"] for p in s["points"]})
        ax.set_xscale("log", base=2 if all(x > 0 and math.log2(x).is_integer() for x in xs) else 10)
        if len(xs) <= 12:
            ax.set_xticks(xs, [format_category(repr(x)) for x in xs])
            ax.minorticks_off()


def draw_bar(ax, figure, panel):
    categories = figure["categories"]
    series_list = panel["series"]
    width = 0.8 / max(1, len(series_list))
    for i, series in enumerate(series_list):
        offset = (i - (len(series_list) - 1) / 2) * width
        positions = [categories.index(p["x"]) + offset for p in series["points"]]
        errors = [p.get("std", 0.0) for p in series["points"]]
        ax.bar(positions, [p["y"] for p in series["points"]], width, label=series["label"] or figure["ylabel"],
               yerr=errors if any(errors) else None, capsize=2)
    ax.set_xticks(range(len(categories)), [format_category(c) for c in categories])
    ax.grid(axis="x", visible=False)


def draw(figure):
    panels = figure["panels"]
    columns = min(len(panels), 2)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(6.4 if columns == 1 else 9.6, 3.6 * rows), squeeze=False,
                             sharey=len(panels) > 1 and not figure["logy"])
    for ax, panel in zip(axes.flat, panels):
        (draw_bar if figure["kind"] == "bar" else draw_line)(ax, figure, panel)
        if figure["logy"]:
            ax.set_yscale("log")
        ax.set_title(panel["title"], fontsize=9)
        ax.set_xlabel(figure["xlabel"])
        ax.set_ylabel(figure["ylabel"])
        labels = [s["label"] for s in panel["series"] if s["label"]]
        if labels:
            ax.legend(ncol=2 if len(labels) > 6 else 1)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(figure["title"], fontsize=10)
    fig.tight_layout()
    for path in figure["outputs"]:
        extension = path[path.rfind("."):]
        fig.savefig(path, dpi=150 if extension == ".png" else None, metadata=METADATA.get(extension))
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        job = json.load(f)
    for figure in job["figures"]:
        try:
            draw(figure)
        except Exception as e:  # name the figure; the runner prints this last line
            sys.exit(f"figure {figure.get('name')}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
