#!/bin/sh
# build_writeup.sh <runner> <source dir> <scratch dir> [python]
# Copies reports/ (without its records) to <scratch dir>, re-renders the experiments that
# name figures from the committed records in <source dir>/reports/data/<experiment>, and builds
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
( cd "$src/reports" && tar --exclude=./data --exclude=./.latex --exclude=./writeup.pdf -cf - . ) | ( cd "$out" && tar -xf - )
for config in "$src"/reports/data/*/config.yaml; do
  run_dir=$(dirname "$config")
  grep -q "^ *figures:" "$config" || continue
  # Only the dataset named after its experiment: re-runs and earlier sessions kept beside it
  # (train_step_vs_pytorch_stop9, ddp_nccl_ctas2, ...) render to the same report id and, in
  # glob order, would replace it.
  grep -q "^experiment: $(basename "$run_dir")\$" "$config" || continue
  "$runner" report "$run_dir" --reports "$out"
done
"$runner" report --pdf --reports "$out"
pages=$(sed -n 's/^Output written on .*(\([0-9]*\) pages.*/\1/p' "$out/.latex/writeup.log")
echo "writeup.pdf: ${pages:-?} pages"
for figure in "$out"/figures/*-*.pdf; do
  [ -e "$figure" ] || continue
  echo "figure: $(basename "$figure")"
done
