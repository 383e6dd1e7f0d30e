#!/usr/bin/env bash
# One device call for the flash kernels' block order (issue 27), from the project root on the GPU
# host with the kit staged: build the flash targets, run experiments/flash_head_group.yaml (heads
# per group against forward and backward TFLOP/s, beside SDPA cuDNN), then, with time left, Nsight
# Compute on one launch of the backward kernel (d 64, not causal, batch 8, seq 2048) for each
# head_group in NCU_GROUPS (default "0 8"): its L2 hit rate and DRAM traffic say whether the order
# thrashes the L2. Runs and logs come back in $OUT/head-group.tgz; the last lines are the summary.
#
#   bash scripts/gpu/flash_head_group_call.sh [BUDGET_S]      (default 300)
set -u
budget="${1:-300}"
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
exp=flash_head_group
pack() { tar -C $runs -czf "$OUT/head-group.tgz" logs $exp 2>/dev/null; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 210 "${bench_targets[@]}"
log "build rc=$?"
timeout -k 10 "$(cap 150)" build-gpu/runner experiments/$exp.yaml --out $runs/$exp > "$logs/bench.log" 2>&1
log "$exp rc=$? $(grep -c '"status":"ok"' $runs/$exp/results.jsonl) ok points"
pack
for group in ${NCU_GROUPS:-0 8}; do
  stage_fits 40 "ncu head_group $group" || continue
  timeout -k 10 "$(cap 60)" ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --kernel-name regex:'flash_backward_sm90_ws' --launch-skip 1 --launch-count 1 \
    build-gpu/runner experiments/$exp.yaml --out $runs/ncu-$group --set parts.seq8192.enabled=false \
    --set 'parts.seq2048.sweep.d_head=[64]' --set 'parts.seq2048.sweep.causal=[false]' \
    --set 'parts.seq2048.sweep.batch=[8]' \
    --set "parts.seq2048.sweep.attention=[{name: flash, kernel: wgmma, head_group: $group}]" \
    --set measure.warmup_steps=1 --set measure.measured_steps=1 > "$logs/ncu-group-$group.txt" 2>&1
  log "ncu head_group $group rc=$?"
  pack
done
pack
cat "$logs/stages.txt"
for f in "$logs"/ncu-group-*.txt; do
  echo "== $f"; grep -E 'Duration|L2 Hit Rate|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|L1/TEX Hit' "$f" | head -8
done
