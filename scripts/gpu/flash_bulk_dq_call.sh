#!/usr/bin/env bash
# One device call for the bulk-dQ warp-specialized backward (issue 27), from the project root on
# the GPU host with the kit staged: build the flash targets; the wgmma and strided-layout kernel
# tests first (a hang is cut off, not waited out); experiments/flash_backward_bulk_dq.yaml (dQ by
# atomics and by bulk reduce beside SDPA cuDNN, one GPU), twice if time allows (the second run
# shows the row-to-row spread); the remaining flash kernel and plugin tests; then, with time left,
# Nsight Compute on the 16k causal d128 backward of the bulk kernel (then the atomic one). Logs and
# runs come back in $OUT/bulk-dq.tgz; the last lines printed are the summary.
#
#   bash scripts/gpu/flash_bulk_dq_call.sh [BUDGET_S]      (default 440)
set -u
budget="${1:-440}"
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
exp=flash_backward_bulk_dq
tests=build-gpu/kernels/flash_attention/kernels_flash_attention_tests
first='FlashWgmmaKernel.*:FlashBshdKernel.*'
pack() { tar -C $runs -czf "$OUT/bulk-dq.tgz" logs $exp $exp-b 2>/dev/null; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 210 "${bench_targets[@]}" kernels_flash_attention_tests attention_flash_tests
log "build rc=$?"
cuobjdump -res-usage build-gpu/kernels/flash_attention/libkernels_flash_attention.a 2>/dev/null |
  grep -A1 'flash_backward_sm90_ws' | grep -E 'Function|REG' > "$logs/res-usage.txt"

# One quick bulk-dQ check first: a hang of the new kernel costs 30 s here, not every later stage.
timeout -k 5 "$(cap 30)" "$tests" --gtest_filter='FlashWgmmaKernel.SavesTheRowLogSumExpAndRepeatsBitForBit' \
  > "$logs/tests-quick.log" 2>&1
quick=$?
log "quick bulk-dQ check rc=$quick $(verdict "$logs/tests-quick.log")"
if (( quick == 124 || quick == 137 )); then
  log "the bulk-dQ kernel hangs: skipping its tests, bench and ncu"
  timeout -k 10 "$(cap 100)" "$tests" --gtest_filter="-*Bulk*:FlashWgmmaKernel.*:FlashBshdKernel.*" > "$logs/tests-rest.log" 2>&1
  log "other kernel tests rc=$? $(verdict "$logs/tests-rest.log")"
  pack; cat "$logs/stages.txt"; exit 1
fi
timeout -k 10 "$(cap 120)" "$tests" --gtest_filter="$first" > "$logs/tests-wgmma.log" 2>&1
log "wgmma + bshd tests rc=$? $(verdict "$logs/tests-wgmma.log")"
pack

timeout -k 10 "$(cap 90)" build-gpu/runner experiments/$exp.yaml --out $runs/$exp > "$logs/bench.log" 2>&1
log "$exp rc=$? $(grep -c '"status":"ok"' $runs/$exp/results.jsonl) ok points"
pack

timeout -k 10 "$(cap 60)" "$tests" --gtest_filter="-$first" > "$logs/tests-rest.log" 2>&1
log "other kernel tests rc=$? $(verdict "$logs/tests-rest.log")"
timeout -k 10 "$(cap 40)" build-gpu/plugins/attention/flash/attention_flash_tests > "$logs/tests-plugin.log" 2>&1
log "plugin tests rc=$? $(verdict "$logs/tests-plugin.log")"
pack

if (( $(left) > 150 )); then
  timeout -k 10 "$(cap 90)" build-gpu/runner experiments/$exp.yaml --out $runs/$exp-b > "$logs/bench-b.log" 2>&1
  log "$exp (second run) rc=$? $(grep -c '"status":"ok"' $runs/$exp-b/results.jsonl) ok points"
  pack
fi

# Nsight Compute, one launch of the dK/dV/dQ kernel at seq 16384, causal, d 128.
for backward in warp_specialized_bulk_dq warp_specialized; do
  stage_fits 50 "ncu $backward" || continue
  timeout -k 10 "$(cap 70)" ncu --section SpeedOfLight --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --kernel-name regex:'flash_backward_sm90_ws' --launch-skip 1 --launch-count 1 \
    build-gpu/runner experiments/$exp.yaml --out $runs/ncu-$backward \
    --set parts.d64_causal.enabled=false --set parts.d128_full.enabled=false \
    --set 'parts.d128_causal.sweep.seq=[16384]' \
    --set "parts.d128_causal.sweep.attention=[{name: flash, kernel: wgmma, forward_schedule: warp_specialized, backward: $backward}]" \
    --set measure.warmup_steps=1 --set measure.measured_steps=1 > "$logs/ncu-$backward.txt" 2>&1
  log "ncu $backward rc=$?"
  pack
done

nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
pack
cat "$logs/stages.txt" "$logs/res-usage.txt"
grep -hE '^\[  FAILED|Failure|error:' "$logs"/tests-*.log | head -20
python3 - $runs/$exp/results.jsonl $runs/$exp-b/results.jsonl <<'PY'
import json, os, sys
print("run batch d causal seq | bwd TFLOP/s cudnn atomics bulk | bulk/atomics bulk/cudnn | fwd+bwd cudnn atomics bulk")
f = lambda x: "-" if x is None else "%.0f" % x
ratio = lambda a, b: "%.2f" % (a / b) if a and b else "-"
for n, path in enumerate(sys.argv[1:]):
    if not os.path.exists(path): continue
    rows = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("status") != "ok": continue
        p, m = r["params"], r["metrics"]
        who = "cudnn" if p.get("attention") == "sdpa" else p.get("attention.backward", "?")
        val = lambda k: m[k]["value"] if k in m else None
        rows.setdefault((p.get("batch"), p.get("d_head"), p.get("causal"), p.get("seq")), {})[who] = [
            val(k) for k in ("forward_tflops", "backward_tflops", "fwd_bwd_tflops")]
    for key in sorted(rows):
        c, w, b = (rows[key].get(k, [None] * 3) for k in ("cudnn", "warp_specialized", "warp_specialized_bulk_dq"))
        print("ab"[n], *key, "|", f(c[1]), f(w[1]), f(b[1]), "|", ratio(b[1], w[1]), ratio(b[1], c[1]), "|",
              f(c[2]), f(w[2]), f(b[2]))
PY
for backward in warp_specialized_bulk_dq warp_specialized; do
  grep -E "^    (Duration|Registers Per Thread|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|L2 Cache Throughput|Warp Cycles Per Issued)" \
    "$logs/ncu-$backward.txt" 2>/dev/null | sed "s/^/$backward /" | head -10
done
