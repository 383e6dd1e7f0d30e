#!/usr/bin/env python3
"""Every link in the reports' prose leads to a file that exists.

    check_report_links.py <repository root>

Reads every reports/**/*.md and checks
  - each relative Markdown link or image, [text](target) and ![alt](target), resolved from
    the .md file's own folder (a #fragment is ignored; http:, https:, mailto: and pure
    #anchors are not files; a figure block `runner report` wrote for a figure it had no
    records to draw, "No matching records yet.", links the file a later run draws);
  - each path quoted from the repository root in backticks, `reports/...`, `experiments/...`,
    `kernels/...`, `scripts/...` (a {a,b} list expands to each name; a path with a <placeholder>
    or a * names many files and is skipped).
and that reports/README.md, the index, names every folder of reports/ (`<folder>/`).
Prints one line per broken link, `file:line: target`, and exits 1 when there is any.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
UNDRAWN_FIGURE = re.compile(r"<!-- runner:figure (\S+) begin -->.*?No matching records yet\..*?"
                            r"<!-- runner:figure \1 end -->", re.S)
QUOTED = re.compile(r"`((?:reports|experiments|kernels|scripts|plugins|bench|pytorch|tests)/[^`\s]*)`")
BRACES = re.compile(r"\{([^{}]*)\}")


def expand(path):
    """a{b,c}d -> [abd, acd], one brace list at a time."""
    m = BRACES.search(path)
    if not m:
        return [path]
    out = []
    for choice in m.group(1).split(","):
        out.extend(expand(path[: m.start()] + choice + path[m.end():]))
    return out


def broken_links(root):
    problems = []
    for md in sorted(glob.glob(os.path.join(root, "reports", "**", "*.md"), recursive=True)):
        folder = os.path.dirname(md)
        with open(md, encoding="utf-8") as f:
            text = f.read()
        # Blank undrawn figure blocks, keeping their line breaks so line numbers hold.
        text = UNDRAWN_FIGURE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        lines = text.split("\n")
        for number, line in enumerate(lines, 1):
            where = f"{os.path.relpath(md, root)}:{number}"
            for target in LINK.findall(line):
                if re.match(r"^(https?:|mailto:|#)", target):
                    continue
                path = target.split("#", 1)[0]
                if path and not os.path.exists(os.path.join(folder, path)):
                    problems.append(f"{where}: ({target}) does not resolve from {os.path.relpath(folder, root)}/")
            for quoted in QUOTED.findall(line):
                if "<" in quoted or "*" in quoted or "$" in quoted:
                    continue
                for path in expand(quoted.rstrip(".,;:")):
                    if not os.path.exists(os.path.join(root, path)):
                        problems.append(f"{where}: `{path}` does not exist")
    index = os.path.join(root, "reports", "README.md")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as f:
            text = f.read()
        for folder in sorted(os.listdir(os.path.join(root, "reports"))):
            if os.path.isdir(os.path.join(root, "reports", folder)) and not folder.startswith(".") \
                    and f"`{folder}/`" not in text:
                problems.append(f"reports/README.md: the index does not list `{folder}/`")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = broken_links(root)
    for p in problems:
        print(p)
    count = len(glob.glob(os.path.join(root, "reports", "**", "*.md"), recursive=True))
    if problems:
        print(f"{len(problems)} broken links in {count} reports/**/*.md files")
        return 1
    print(f"every relative link and quoted path in {count} reports/**/*.md files resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
