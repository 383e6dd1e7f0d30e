#!/usr/bin/env python3
"""Redraw the memory profiler's SVG timelines as PDF, for the LaTeX writeup.

usage: svg_chart.py <chart.svg>... [--out DIR]

plugins/profiler/memory writes each active-memory timeline as a small SVG (bands as <rect>
with a <title>, grid <line>s, axis <text>, one <polyline>); pdfLaTeX reads no SVG and this
machine has no SVG renderer, so the same shapes are drawn again with matplotlib, in the SVG's
own pixel coordinates, into <stem>.pdf next to it (or in DIR; the Markdown embeds the SVG). The title's
"peak" is the peak of the drawn curve (the measured steps), and says so.
"""
import os
import sys
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"
METADATA = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}


def number(element, key, default=0.0):
    return float(element.get(key, default))


def redraw(svg_path, out_dir):
    root = ET.parse(svg_path).getroot()
    width, height = number(root, "width"), number(root, "height")
    fig = plt.figure(figsize=(width / 100, height / 100))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    for element in root:
        tag = element.tag.replace(NS, "")
        if tag == "rect":
            if element.get("fill") == "white" and number(element, "width") == width:
                continue
            fill = element.get("fill", "none")
            ax.add_patch(plt.Rectangle((number(element, "x"), number(element, "y")), number(element, "width"),
                                       number(element, "height"), facecolor="none" if fill == "none" else fill,
                                       alpha=float(element.get("fill-opacity", 1)) if fill != "none" else 1,
                                       edgecolor=element.get("stroke", "none"), linewidth=0.8))
        elif tag == "line":
            ax.plot([number(element, "x1"), number(element, "x2")], [number(element, "y1"), number(element, "y2")],
                    color=element.get("stroke", "black"), linewidth=0.6)
        elif tag == "polyline":
            points = [tuple(map(float, p.split(","))) for p in element.get("points", "").split()]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, color=element.get("stroke", "black"), linewidth=float(element.get("stroke-width", 1)))
        elif tag == "text":
            text = "".join(element.itertext())
            if text.startswith("Active memory") and ": peak " in text:
                text = text.replace(": peak ", ": peak of the drawn steps ")
            anchor = {"middle": "center", "end": "right"}.get(element.get("text-anchor"), "left")
            rotation = 90 if "rotate(-90" in element.get("transform", "") else 0
            ax.text(number(element, "x"), number(element, "y"), text, ha=anchor, va="baseline", rotation=rotation,
                    rotation_mode="anchor", fontsize=float(element.get("font-size", root.get("font-size", 12))) * 0.72)
    stem = os.path.join(out_dir or os.path.dirname(svg_path), os.path.basename(svg_path)[:-4])
    fig.savefig(stem + ".pdf", metadata=METADATA)
    plt.close(fig)
    return stem


def main():
    args = sys.argv[1:]
    out_dir = None
    if "--out" in args:
        i = args.index("--out")
        out_dir = args[i + 1]
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    for path in args:
        print(redraw(path, out_dir))


if __name__ == "__main__":
    main()
