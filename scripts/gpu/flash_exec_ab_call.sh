#!/usr/bin/env bash
# One device call that asks whether issue 27's small bar rows measure the kernels or the host
# (kernels/flash_attention/NOTES, 2026-11-26): the `bar`, `bar_batch` and `bar_padded` parts of
# experiments/flash_benchmarking.yaml twice in one call, once with attention_bench's eager
# execution (the reports' way) and once with `execution: cuda_graph` (forward and forward+backward
# replayed from CUDA graphs, no host gaps inside the events), on both sides (ours and every SDPA
# backend). From the project root on the GPU host with the kit staged; runs and logs come back in
# $OUT/exec.tgz, then here: scripts/gpu/perf_bar_summary.py on each run.
#
#   bash scripts/gpu/flash_exec_ab_call.sh [BUDGET_S]      (default 300)
set -u
budget="${1:-300}"
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
build_targets 210 "${bench_targets[@]}"
log "build rc=$?"
for execution in eager cuda_graph; do
  stage_fits 30 "$execution" || continue
  rm -rf "$runs/$execution"
  timeout -k 10 "$(cap 150)" build-gpu/runner experiments/flash_benchmarking.yaml --out "$runs/$execution" \
    --set parts.grid.enabled=false --set parts.perf_bar.enabled=false --set parts.perf_bar_device.enabled=false \
    --set "parts.bar.params.execution=$execution" --set "parts.bar_batch.params.execution=$execution" \
    --set "parts.bar_padded.params.execution=$execution" > "$logs/$execution.log" 2>&1
  log "$execution rc=$? $(grep -c '"status":"ok"' "$runs/$execution/results.jsonl" 2>/dev/null) ok points"
  tar -C $runs -czf "$OUT/exec.tgz" . 2>/dev/null
done
cat "$logs/stages.txt"
