#!/usr/bin/env python3
"""Draws the figures of one report with matplotlib; `runner report` calls it.

  plot.py <figures.json>

The JSON is what the runner selected from stored records (runner/host/report/figure.cpp):
{"figures": [{name, kind: line|bar, title, xlabel, ylabel, logx, logy, categories,
 panels: [{title, series: [{label, points: [{x, y, std?}]}]}], outputs: [.svg, .pdf]}]}.
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
import matplotlib.ticker  # noqa: E402

matplotlib.rcParams.update({
    "svg.hashsalt": "runner",
    "svg.fonttype": "none",  # text stays text in SVG
    "pdf.fonttype": 42,
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.fontsize": 7,
})
METADATA = {".svg": {"Date": None}, ".pdf": {"CreationDate": None, "ModDate": None}}


def format_category(text):
    """Integral numbers without a trailing .0 (1.0 MB reads as 1)."""
    try:
        value = float(text)
        return str(int(value)) if value.is_integer() else text
    except ValueError:
        return text


COLOURS = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 3)), "x")]


def series_styles(panel):
    """Colour by the first series key, line style and marker by the others, so twelve lines of
    (attention, d_head) read as three colours times four styles; one key: colours only."""
    firsts, rests = [], []
    for s in panel["series"]:
        parts = s.get("parts") or [s["label"]]
        if parts[0] not in firsts:
            firsts.append(parts[0])
        if tuple(parts[1:]) not in rests:
            rests.append(tuple(parts[1:]))
    styles = []
    # Up to ten lines each get a colour of their own (on top of the style), so lines that
    # differ only in a later key (Gloo on 2, 4 and 6 ranks) never share one.
    own_colours = len(panel["series"]) <= len(COLOURS)
    for i, s in enumerate(panel["series"]):
        parts = s.get("parts") or [s["label"]]
        if len(rests) <= 1:
            styles.append((COLOURS[i % len(COLOURS)], "-", "o"))
        else:
            line, marker = STYLES[rests.index(tuple(parts[1:])) % len(STYLES)]
            colour = COLOURS[i] if own_colours else COLOURS[firsts.index(parts[0]) % len(COLOURS)]
            styles.append((colour, line, marker))
    return styles


def tick_label(x):
    return format_category(repr(x))


def draw_line(ax, figure, panel):
    categories = figure["categories"]
    for series, (colour, line, marker) in zip(panel["series"], series_styles(panel)):
        points = series["points"]
        xs = [categories.index(p["x"]) if categories else p["x"] for p in points]
        ys = [p["y"] for p in points]
        errors = [p.get("std", 0.0) for p in points]
        label = series["label"] or figure["ylabel"]
        style = {"color": colour, "linestyle": line, "marker": marker, "markersize": 3, "label": label}
        if any(errors):
            ax.errorbar(xs, ys, yerr=errors, capsize=2, **style)
        else:
            ax.plot(xs, ys, **style)
    if categories:
        ax.set_xticks(range(len(categories)), [format_category(c) for c in categories])
    if figure["logx"] and not categories:
        xs = sorted({p["x"] for s in panel["series"] for p in s["points"]})
        powers_of_two = all(x > 0 and math.log2(x).is_integer() for x in xs)
        ax.set_xscale("log", base=2 if powers_of_two else 10)
        if len(xs) <= 12:
            many = powers_of_two and len(xs) > 6  # 16384 32768 65536 would collide: 2^14 ...
            ax.set_xticks(xs, [f"$2^{{{int(math.log2(x))}}}$" if many else tick_label(x) for x in xs])
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
            plain = matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}")  # 600, not 6x10^2
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain if ax.get_ylim()[1] / ax.get_ylim()[0] < 100 else
                                         matplotlib.ticker.NullFormatter())
        elif all(p["y"] >= 0 for s in panel["series"] for p in s["points"]):
            # A linear axis starts at zero, so heights compare; headroom for error bars.
            top = max((p["y"] + p.get("std", 0.0) for s in panel["series"] for p in s["points"]), default=0)
            ax.set_ylim(0, top * 1.08 if top > 0 else None)
        ax.set_title(panel["title"], fontsize=9)
        ax.set_xlabel(figure["xlabel"])
        ax.set_ylabel(figure["ylabel"])
        labels = [s["label"] for s in panel["series"] if s["label"]]
        if labels and figure["kind"] != "bar":
            ax.legend(ncol=2 if len(labels) > 6 else 1)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(figure["title"], fontsize=10)
    handles, labels = [], []
    for ax in axes.flat:  # every series of every panel, once
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if figure["kind"] == "bar" and labels:
        # One legend for all panels, below them: inside an axis it hides the tallest bars.
        columns = min(len(labels), 3)
        rows_of_legend = math.ceil(len(labels) / columns)
        fig.tight_layout(rect=(0, 0.05 + 0.045 * rows_of_legend, 1, 1))
        fig.legend(handles, labels, loc="lower center", ncol=columns, frameon=False)
    else:
        fig.tight_layout()
    for path in figure["outputs"]:
        extension = path[path.rfind("."):]
        fig.savefig(path, metadata=METADATA.get(extension))
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
