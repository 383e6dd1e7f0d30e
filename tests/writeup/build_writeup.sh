#!/bin/sh
# build_writeup.sh <runner> <source dir> <scratch dir> [python]
# Copies reports/ (without its records) to <scratch dir>, re-renders the experiments that
# name figures from the committed records in <source dir>/reports/<experiment>/data, and builds
# writeup.pdf there with `runner report --pdf`. Exit 77 (skip) when latexmk is missing.
set -eu
runner=$1 src=$2 out=$3
[ -n "${4:-}" ] && export RUNNER_PYTHON="$4"
if ! command -v latexmk >/dev/null 2>&1; then
  echo "skip: latexmk is not installed (scripts/setup.sh installs it)"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
( cd "$src/reports" && tar --exclude=./*/data --exclude=./*/runs --exclude=./.latex --exclude=./writeup.pdf -cf - . ) |
  ( cd "$out" && tar -xf - )
for config in "$src"/reports/*/data/config.yaml; do
  run_dir=$(dirname "$config")
  experiment=$(basename "$(dirname "$run_dir")")
  grep -q "^ *figures:" "$config" || continue
  # Only the run named after its experiment: the runs kept beside it (reports/<experiment>/runs/)
  # render to the same report id and would replace it.
  grep -q "^experiment: $experiment\$" "$config" || continue
  # With the experiment file's current report spec, as `runner report --check` renders it.
  spec="$src/experiments/$experiment.yaml"
  # A report merged from several runs renders from all of them (reports/renders.txt).
  merged=$(awk -v run="reports/$experiment/data" '$2 == run' "$src/reports/renders.txt" 2>/dev/null)
  if [ -n "$merged" ]; then
    # shellcheck disable=SC2086
    (cd "$src" && "$runner" report $(echo "$merged" | cut -d' ' -f2-) --spec $(echo "$merged" | cut -d' ' -f1) --reports "$out" --allow-dirty)
  elif [ -f "$spec" ]; then
    "$runner" report "$run_dir" --spec "$spec" --reports "$out" --allow-dirty
  else
    "$runner" report "$run_dir" --reports "$out" --allow-dirty
  fi
done
# The memory profiler's timelines are SVG; pdfLaTeX needs them redrawn as PDF.
if ls "$out"/memory_profiling/figures/memory_profiling-*.svg >/dev/null 2>&1; then
  "${RUNNER_PYTHON:-python3}" "$src/scripts/figures/svg_chart.py" "$out"/memory_profiling/figures/memory_profiling-*.svg >/dev/null
fi
"$runner" report --pdf --reports "$out"
pages=$(sed -n 's/^Output written on .*(\([0-9]*\) pages.*/\1/p' "$out/.latex/writeup.log")
echo "writeup.pdf: ${pages:-?} pages"
for figure in "$out"/*/figures/*-*.pdf; do
  [ -e "$figure" ] || continue
  echo "figure: $(basename "$figure")"
done
