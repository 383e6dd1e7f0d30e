#!/usr/bin/env bash
# One device call that measures slices of a fast-path experiment (scripts/gpu/fast_path.sh slice:
# one size and precision of every part, side by side in one runner run), as many as the budget
# allows: a slice starts only while at least SLICE_S seconds (default 330) are left. Optionally the
# fast-path GPU tests first. From the project root on the GPU host with the kit staged
# (../shared/gpu/prepare); each slice's results.jsonl, log and config come back in
# $OUT/slices.tgz (one file: the device returns only a few files per call).
#
#   bash scripts/gpu/fast_path_slices_call.sh BUDGET_S EXPERIMENT [--tests] SIZE:PRECISION...
#   e.g. bash scripts/gpu/fast_path_slices_call.sh 590 torch_compile_model --tests small:fp32 small:bf16
# Afterwards, here: unpack the slices of every call into one folder and run
# `fast_path.sh merge FOLDER EXPERIMENT`.
set -u
budget="$1"; experiment="$2"; shift 2
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
slice_s="${SLICE_S:-330}"
pack() { tar -C "$logs" -czf "$OUT/slices.tgz" . 2>/dev/null; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
timeout -k 10 "$(cap 240)" scripts/gpu/fast_path.sh build "$logs" > "$logs/build.log" 2>&1
log "build rc=$?"
if [[ "${1:-}" == --tests ]]; then
  shift
  timeout -k 10 "$(cap 150)" scripts/gpu/fast_path.sh tests "$logs" > /dev/null 2>&1
  log "tests rc=$? kernels: $(tail -n 3 "$logs/tests-kernels.log" | grep -o '[0-9]* tests failed out of [0-9]*')," \
    "plugins: $(tail -n 3 "$logs/tests-plugins.log" | grep -o '[0-9]* tests failed out of [0-9]*')"
fi
for slice in "$@"; do
  size="${slice%%:*}"; precision="${slice##*:}"
  if (( $(left) < slice_s )); then log "$slice not started: $(left) s left"; continue; fi
  RUN_ROOT=$runs timeout -k 10 "$(cap 600)" scripts/gpu/fast_path.sh slice "$logs" "$experiment" "$size" "$precision" \
    > /dev/null 2>&1
  log "$slice rc=$? $(grep -c '"status":"ok"' "$logs/$experiment-$size-$precision.results.jsonl" 2>/dev/null) ok points"
  pack
done
pack
cat "$logs/stages.txt"
