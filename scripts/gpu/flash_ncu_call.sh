#!/usr/bin/env bash
# One device call: Nsight Compute (--set full) on one launch each of the warp-specialized flash
# forward and backward kernels at one shape (default: d 128, not causal, batch 1, 16 heads, seq
# 8192, the part seq8192 of experiments/flash_head_group.yaml with the default options), from the
# project root on the GPU host with the kit staged. For each kernel: the details page, the source
# page as CSV and scripts/gpu/ncu_hotspots.py's top stalls. Everything comes back in $OUT/ncu.tgz.
#
#   bash scripts/gpu/flash_ncu_call.sh [BUDGET_S] [runner --set arguments...]
set -u
budget="${1:-240}"; shift || true
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
pack() { tar -C $runs -czf "$OUT/ncu.tgz" logs 2>/dev/null; }
build_targets 210 "${bench_targets[@]}"
log "build rc=$?"
for kernel in flash_forward_sm90_ws flash_backward_sm90_ws; do
  stage_fits 45 "ncu $kernel" || continue
  rm -rf "$runs/run-$kernel"
  timeout -k 10 "$(cap 90)" ncu --set full --import-source yes --kernel-name regex:"$kernel" --launch-skip 1 \
    --launch-count 1 -o "$logs/$kernel" build-gpu/runner experiments/flash_head_group.yaml --out "$runs/run-$kernel" \
    --set parts.seq2048.enabled=false --set 'parts.seq8192.sweep.attention=[{name: flash, kernel: wgmma}]' \
    --set measure.warmup_steps=1 --set measure.measured_steps=1 "$@" > "$logs/ncu-$kernel.log" 2>&1
  log "ncu $kernel rc=$?"
  ncu --import "$logs/$kernel.ncu-rep" --page details > "$logs/$kernel.details.txt" 2>&1
  ncu --import "$logs/$kernel.ncu-rep" --page source --csv --print-source sass > "$logs/$kernel.source.csv" 2>&1
  python3 scripts/gpu/ncu_hotspots.py "$logs/$kernel.source.csv" 25 > "$logs/$kernel.hotspots.txt" 2>&1
  pack
done
cat "$logs/stages.txt"
for kernel in flash_forward_sm90_ws flash_backward_sm90_ws; do
  echo "== $kernel"
  grep -E '^    (Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc Active)' \
    "$logs/$kernel.details.txt" | head -8
done
