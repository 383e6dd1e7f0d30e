#!/usr/bin/env bash
# One device call that times two trees of the flash kernels side by side: the tree it runs in
# ("new") and a copy of another tree at BASE (a folder with the project's sources, e.g. made by
# `git archive REV | tar -x -C runs/base`, carried to the device; BASE/.commit, one line, is what
# its records name as their commit, e.g. `git rev-parse --short=12 REV > runs/base/.commit`). Both build runner and the
# attention plugins (BASE into BASE/build-gpu); the new tree's flash kernel tests run; then
# EXPERIMENT runs ROUNDS times per tree, alternating base, new, base, new, ... so drift in the
# GPU's clocks falls on both. Extra arguments go to every runner run (e.g. --set
# parts.graphs.enabled=false). Runs and logs come back in $OUT/tree-ab.tgz: runs base-1, new-1, ...
#
#   bash scripts/gpu/flash_tree_ab_call.sh BUDGET_S BASE EXPERIMENT [ROUNDS] [RUNNER ARGS...]
set -u
budget="$1"; base="$2"; exp="$3"; rounds="${4:-2}"; shift 4 2>/dev/null || shift $#
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"
pack() { tar -C $runs -czf "$OUT/tree-ab.tgz" . 2>/dev/null; }

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader >> "$logs/stages.txt"
build_targets 200 "${bench_targets[@]}" kernels_flash_attention_tests
log "new build rc=$?"
( cd "$base" && build_log="$logs/build-base.log" build_targets 200 "${bench_targets[@]}" )
log "base build rc=$?"
tests=build-gpu/kernels/flash_attention/kernels_flash_attention_tests
timeout -k 5 "$(cap 60)" "$tests" --gtest_filter='FlashWgmmaKernel.*:FlashBshdKernel.*' > "$logs/tests-wgmma.log" 2>&1
log "new tree: wgmma + bshd kernel tests rc=$? $(verdict "$logs/tests-wgmma.log")"
pack
for round in $(seq 1 "$rounds"); do
  for tree in base new; do
    stage_fits 30 "$tree-$round" || continue
    bin=build-gpu/runner; commit="${RUNNER_GIT_COMMIT:-}"
    if [[ $tree == base ]]; then
      bin="$base/build-gpu/runner"
      commit="base tree $(cat "$base/.commit" 2>/dev/null || echo "(no $base/.commit)")"
    fi
    rm -rf "$runs/$tree-$round"
    RUNNER_GIT_COMMIT="$commit" timeout -k 10 "$(cap 150)" "$bin" "experiments/$exp.yaml" \
      --out "$runs/$tree-$round" "$@" > "$logs/$tree-$round.log" 2>&1
    log "$tree-$round rc=$? $(grep -c '"status":"ok"' "$runs/$tree-$round/results.jsonl" 2>/dev/null) ok points"
    pack
  done
done
cat "$logs/stages.txt"
