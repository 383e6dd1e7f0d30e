#!/usr/bin/env bash
# One device call for the warp-specialized wgmma backward (issue 27), from the project root on
# the GPU host with the kit staged: build the flash targets; the wgmma and strided-layout kernel
# tests first (a hang is cut off, not waited out); experiments/flash_backward_schedules.yaml
# (fused and warp-specialized backward beside SDPA cuDNN, one run, one GPU); the remaining flash
# kernel and plugin tests; then, with time left, Nsight Compute on the 16k causal d128 backward
# of each. Logs and the run come back in $OUT/flash-backward.tgz; the last lines printed are the summary.
#
#   bash scripts/gpu/flash_backward_call.sh [BUDGET_S]      (default 420)
set -u
budget="${1:-420}"
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
exp=flash_backward_schedules
tests=build-gpu/kernels/flash_attention/kernels_flash_attention_tests
first='FlashWgmmaKernel.*:FlashBshdKernel.*'
pack() { tar -C $runs -czf "$OUT/flash-backward.tgz" logs $exp 2>/dev/null; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 200 "${bench_targets[@]}" kernels_flash_attention_tests attention_flash_tests
log "build rc=$?"

timeout -k 10 "$(cap 100)" "$tests" --gtest_filter="$first" > "$logs/tests-wgmma.log" 2>&1
log "wgmma + bshd tests rc=$? $(verdict "$logs/tests-wgmma.log")"
pack

timeout -k 10 "$(cap 100)" build-gpu/runner experiments/$exp.yaml --out $runs/$exp > "$logs/schedules.log" 2>&1
log "$exp rc=$? $(grep -c '"status":"ok"' $runs/$exp/results.jsonl) ok points"
pack

timeout -k 10 "$(cap 60)" "$tests" --gtest_filter="-$first" > "$logs/tests-rest.log" 2>&1
log "other kernel tests rc=$? $(verdict "$logs/tests-rest.log")"
timeout -k 10 "$(cap 40)" build-gpu/plugins/attention/flash/attention_flash_tests > "$logs/tests-plugin.log" 2>&1
log "plugin tests rc=$? $(verdict "$logs/tests-plugin.log")"

# Nsight Compute, one launch of each dK/dV/dQ kernel at seq 16384, causal, d 128 (a few sections).
for backward in fused warp_specialized; do
  stage_fits 50 "ncu $backward" || continue
  timeout -k 10 "$(cap 60)" ncu --section SpeedOfLight --section LaunchStats --section WarpStateStats \
    --kernel-name regex:'flash_dkdv_sm90_kernel|flash_backward_sm90_ws' --launch-skip 1 --launch-count 1 \
    build-gpu/runner experiments/$exp.yaml --out $runs/ncu-$backward \
    --set 'parts.bar_backward.sweep.seq=[16384]' \
    --set 'parts.bar_backward.sweep.d_head=[128]' --set 'parts.bar_backward.sweep.causal=[true]' \
    --set "parts.bar_backward.sweep.attention=[{name: flash, kernel: wgmma, forward_schedule: warp_specialized, backward: $backward}]" \
    --set measure.warmup_steps=1 --set measure.measured_steps=1 > "$logs/ncu-$backward.txt" 2>&1
  log "ncu $backward rc=$?"
done

nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
pack
cat "$logs/stages.txt"
grep -hE '^\[  FAILED|Failure|error:' "$logs"/tests-*.log | head -20
python3 - "$runs/$exp/results.jsonl" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("status") != "ok": continue
    p, m = r["params"], r["metrics"]
    who = "cudnn" if p.get("attention") == "sdpa" else p.get("attention.backward", "?")
    val = lambda k: m[k]["value"] if k in m else None
    rows.setdefault((p.get("d_head"), p.get("causal"), p.get("seq")), {})[who] = [val(k) for k in ("forward_tflops", "backward_tflops", "fwd_bwd_tflops")]
print("d causal seq | bwd TFLOP/s cudnn fused ws | ws/fused ws/cudnn | fwd+bwd cudnn fused ws")
f = lambda x: "-" if x is None else "%.0f" % x
ratio = lambda a, b: "%.2f" % (a / b) if a and b else "-"
for key in sorted(rows):
    c, fu, w = (rows[key].get(k, [None] * 3) for k in ("cudnn", "fused", "warp_specialized"))
    print(*key, "|", f(c[1]), f(fu[1]), f(w[1]), "|", ratio(w[1], fu[1]), ratio(w[1], c[1]), "|", f(c[2]), f(fu[2]), f(w[2]))
PY
for backward in fused warp_specialized; do
  grep -E "^    (Duration|Registers Per Thread|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible)" \
    "$logs/ncu-$backward.txt" 2>/dev/null | sed "s/^/$backward /" | head -8
done
