#!/usr/bin/env bash
# One device call: every kernel of one forward+backward step, with its device time, for SDPA's
# cuDNN backend and ours side by side at a few shapes (Nsight Compute, one metric,
# gpu__time_duration; caches and clocks left as they are, so the times are a warm run's).
# Answers where a step's time goes: the main kernels against the backward's preprocessing
# (delta, zeroed dQ accumulator) and dQ conversion, and what cuDNN launches instead. From the
# project root on the GPU host with the kit staged; results in $OUT/kernel-times.tgz, a summary
# (scripts/gpu/kernel_times.py) printed last.
#
#   bash scripts/gpu/flash_kernel_times_call.sh [BUDGET_S] [SHAPE...]
#        SHAPE = d_head:causal:batch:seq (default 128:false:8:2048 64:false:8:2048 128:false:1:16384)
set -u
budget="${1:-200}"; shift || true
shapes=("$@"); (( ${#shapes[@]} )) || shapes=(128:false:8:2048 64:false:8:2048 128:false:1:16384)
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
pack() { tar -C $runs -czf "$OUT/kernel-times.tgz" logs 2>/dev/null; }
build_targets 200 "${bench_targets[@]}"
log "build rc=$?"
for shape in "${shapes[@]}"; do
  IFS=: read -r d causal batch seq <<< "$shape"
  for impl in '{name: sdpa, backend: cudnn}' '{name: flash, kernel: wgmma}'; do
    stage_fits 30 "kernel times $shape $impl" || continue
    tag="d${d}_${causal}_b${batch}_s${seq}_$( [[ $impl == *sdpa* ]] && echo cudnn || echo flash )"
    # Warm-up 1, measured 1: the second half of the kernels is the measured step.
    timeout -k 10 "$(cap 60)" ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none --csv \
      build-gpu/runner experiments/flash_head_group.yaml --out "$runs/run-$tag" \
      --set parts.seq8192.enabled=false --set "parts.seq2048.sweep.attention=[$impl]" \
      --set "parts.seq2048.sweep.d_head=[$d]" --set "parts.seq2048.sweep.causal=[$causal]" \
      --set "parts.seq2048.sweep.batch=[$batch]" --set "parts.seq2048.params.seq=$seq" \
      --set measure.warmup_steps=1 --set measure.measured_steps=1 > "$logs/$tag.csv" 2> "$logs/$tag.err"
    log "ncu $tag rc=$?"
    pack
  done
done
cat "$logs/stages.txt"
python3 scripts/gpu/kernel_times.py "$logs"/*.csv
