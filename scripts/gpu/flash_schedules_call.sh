#!/usr/bin/env bash
# One device call for the wgmma forward schedules (issue 27), from the project root on the GPU
# host with the kit staged: build the flash targets; the warp-specialized kernel's tests first
# (a hang is cut off, not waited out); experiments/flash_forward_schedules.yaml (every schedule
# beside SDPA cuDNN, one run, one GPU); the remaining flash kernel and plugin tests; then, with
# time left, Nsight Compute on the 16k causal d128 forward of each schedule. Logs and the run
# come back in $OUT/flash-schedules.tgz; the last lines printed are the summary.
#
#   bash scripts/gpu/flash_schedules_call.sh [BUDGET_S]      (default 450)
set -u
budget="${1:-450}"
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
tests=build-gpu/kernels/flash_attention/kernels_flash_attention_tests
first='FlashWgmmaKernel.*:FlashBshdKernel.*:FlashForwardSchedule.*'

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 240 "${bench_targets[@]}" kernels_flash_attention_tests attention_flash_tests
log "build rc=$?"

timeout -k 10 "$(cap 100)" "$tests" --gtest_filter="$first" > "$logs/tests-wgmma.log" 2>&1
log "wgmma + bshd tests rc=$? $(verdict "$logs/tests-wgmma.log")"

timeout -k 10 "$(cap 150)" build-gpu/runner experiments/flash_forward_schedules.yaml --out $runs/flash_forward_schedules \
  > "$logs/schedules.log" 2>&1
log "flash_forward_schedules rc=$? $(grep -c '"status":"ok"' $runs/flash_forward_schedules/results.jsonl) ok points"

timeout -k 10 "$(cap 80)" "$tests" --gtest_filter="-$first" > "$logs/tests-rest.log" 2>&1
log "other kernel tests rc=$? $(verdict "$logs/tests-rest.log")"
timeout -k 10 "$(cap 60)" build-gpu/plugins/attention/flash/attention_flash_tests > "$logs/tests-plugin.log" 2>&1
log "plugin tests rc=$? $(verdict "$logs/tests-plugin.log")"

# Nsight Compute, one launch of each forward schedule at seq 16384, causal, d 128.
for schedule in pipelined warp_specialized; do
  stage_fits 70 "ncu $schedule" || continue
  timeout -k 10 "$(cap 90)" ncu --set full --kernel-name regex:flash_forward_sm90 --launch-skip 1 --launch-count 1 \
    build-gpu/runner experiments/flash_forward_schedules.yaml --out $runs/ncu-$schedule \
    --set parts.bar_schedules_batch.enabled=false --set 'parts.bar_schedules.sweep.seq=[16384]' \
    --set 'parts.bar_schedules.sweep.d_head=[128]' --set 'parts.bar_schedules.sweep.causal=[true]' \
    --set "parts.bar_schedules.sweep.attention=[{name: flash, kernel: wgmma, forward_schedule: $schedule}]" \
    --set measure.warmup_steps=1 --set measure.measured_steps=1 > "$logs/ncu-$schedule.txt" 2>&1
  log "ncu $schedule rc=$?"
done

nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
tar -C $runs -czf "$OUT/flash-schedules.tgz" logs flash_forward_schedules
cat "$logs/stages.txt"
grep -hE '^\[  FAILED|Failure|error:' "$logs"/tests-*.log | head -20
python3 scripts/gpu/perf_bar_summary.py $runs/flash_forward_schedules | cut -c26-
for schedule in pipelined warp_specialized; do
  grep -E "^    (Duration|Registers Per Thread|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible)" \
    "$logs/ncu-$schedule.txt" 2>/dev/null | sed "s/^/$schedule /" | head -8
done
