#!/usr/bin/env bash
# One device call that re-measures the flash reports whose kernels changed since their records:
# experiments/flash_backward.yaml and experiments/flash_benchmarking.yaml (the default backward,
# `backward: auto`, is the bulk-dQ warp-specialized one since version 11), after the flash kernel
# tests of the version in the tree. From the project root on the GPU host with the kit staged
# (../shared/gpu/prepare); every stage is cut at what the budget leaves. Runs and logs come back in
# $OUT/flash-reports.tgz; the last lines printed are the summary.
#
#   bash scripts/gpu/flash_reports_call.sh [BUDGET_S] [EXPERIMENT...]
#        (default 380 s; experiments flash_backward flash_benchmarking; each experiment is cut at
#        EXPERIMENT_CAP_S, default 150 s: flash_benchmarking with 100-step bar parts needs about 200;
#        RUNNER_ARGS, split on spaces, go to every runner run, e.g. "--set parts.long.params.d_head=128")
set -u
budget="${1:-380}"; shift || true
experiments=("$@"); (( ${#experiments[@]} )) || experiments=(flash_backward flash_benchmarking)
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
pack() { tar -C $runs -czf "$OUT/flash-reports.tgz" . 2>/dev/null; }
tests=build-gpu/kernels/flash_attention/kernels_flash_attention_tests

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 200 "${bench_targets[@]}" attention_naive attention_flash_tiled kernels_flash_attention_tests
log "build rc=$?"
# The warp-specialized kernels (the defaults) first: a hang costs this stage only.
timeout -k 5 "$(cap 60)" "$tests" --gtest_filter='FlashWgmmaKernel.*:FlashBshdKernel.*' > "$logs/tests-wgmma.log" 2>&1
log "wgmma + bshd kernel tests rc=$? $(verdict "$logs/tests-wgmma.log")"
pack
for exp in "${experiments[@]}"; do
  timeout -k 10 "$(cap "${EXPERIMENT_CAP_S:-150}")" build-gpu/runner "experiments/$exp.yaml" --out "$runs/$exp" ${RUNNER_ARGS:-} > "$logs/$exp.log" 2>&1
  log "$exp rc=$? $(grep -c '"status":"ok"' "$runs/$exp/results.jsonl" 2>/dev/null) ok points"
  pack
done
if (( $(left) > 40 )); then
  timeout -k 5 "$(cap 40)" "$tests" --gtest_filter='-FlashWgmmaKernel.*:FlashBshdKernel.*' > "$logs/tests-rest.log" 2>&1
  log "other kernel tests rc=$? $(verdict "$logs/tests-rest.log")"
fi
pack
cat "$logs/stages.txt"
