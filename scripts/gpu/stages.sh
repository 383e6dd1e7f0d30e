#!/usr/bin/env bash
# One device call as a list of stages under a time budget, everything that comes back
# packed into at most four files (the device tool returns 8 files of 16 MiB at most).
# Run from the project root on the GPU host, with the kit staged (../shared/gpu/prepare):
#
#   bash scripts/gpu/stages.sh BUDGET_S STAGE [STAGE ...]
#
# BUDGET_S: seconds for all stages (leave ~30 s of the call's limit for `pack`); a stage
# gets what is left, and a stage cut off still leaves what it wrote. Stages:
#   build                runner, runner-torch, all plugins, the flash ops library (~75-100 s)
#   build_tests          the GPU tests of kernels, fused path, attention and profilers
#   ctest                ctest -L 'kernels|python', then those plugins' tests
#   pyop                 python/test_flash_attention_op.py against the ops library
#   flash                only the flash kernels' gtests (builds just them): the quick loop for kernel work
#   ncu:REGEX            Nsight Compute (--set full) on the kernels matching REGEX while the perf_bar
#                        point runs (seq 16384, flash kernel=$NCU_FAMILY, default wgmma) -> logs/ncu-*.txt;
#                        skips $NCU_SKIP (1) matching launches, profiles $NCU_COUNT (2): the point runs
#                        3 steps, so one kernel's regex matches 3 launches
#   aoti                 the attention/aoti CUDA packages (fp32) in aoti-packages/: the ctest fixture's,
#                        else exported here (~1-2 min)
#   exp:NAME[:TAG]       experiments/NAME.yaml into /tmp/runs/NAME[-TAG] (extra flags: $RUNNER_ARGS_NAME;
#                        with a TAG, extra environment VAR=VALUE words from $RUNNER_ENV_TAG)
#   resume:NAME          the same run, --resume (e.g. a run directory carried in .gpu/NAME)
#   slice:EXP:SIZE:PREC  scripts/gpu/fast_path.sh slice: every part of one size and precision
#   pack                 /tmp/runs and the logs -> $OUT/runs.tgz; files under reports/ (reports/<id>/) that the
#                        stages wrote -> $OUT/reports.tgz
# A warm machine keeps build-gpu/ and /tmp between calls; a cold one needs `build` again.
set -u
budget="$1"; shift
source "$(dirname "${BASH_SOURCE[0]}")/call_budget.sh"  # environment, left, cap, log, build_targets
export RUNNER_PYTHON="${RUNNER_PYTHON:-$(command -v python3)}"
touch /tmp/runs/.stamp
limit() { cap "$budget"; }  # what is left, never 0: `timeout 0` means no limit

for stage in "$@"; do
  log "$stage (left $(left) s)"
  case "$stage" in
    build) build_targets "$budget" runner runner_torch runner_plugins flash_attention_ops; log "build rc=$?" ;;
    build_tests)
      build_targets "$budget" kernels_flash_attention_tests flash_attention_ops kernels_adamw_tests kernels_rmsnorm_tests \
        kernels_rope_tests kernels_swiglu_tests kernels_cross_entropy_tests optimizer_adamw_tests \
        task_train_step_tests attention_flash_tests attention_sdpa_tests model_transformer_lm_tests \
        task_optimizer_step_tests profiler_kernels_tests profiler_memory_tests attention_aoti attention_aoti_tests
      log "build_tests rc=$?" ;;
    ctest)
      timeout "$(limit)" ctest --test-dir build-gpu --output-on-failure -j 3 -L 'kernels|python' > "$logs/ctest-kernels.log" 2>&1
      log "ctest kernels rc=$? $(grep -E 'tests passed' "$logs/ctest-kernels.log")"
      timeout "$(limit)" ctest --test-dir build-gpu --output-on-failure -j 3 \
        -R 'FusedAdamW|AdamW|TrainStep|TransformerLm|OptimizerStep|Flash|Sdpa|KernelProfiler|KernelBreakdown|KernelNames|KernelClasses|MemoryProfiler|Aoti' \
        > "$logs/ctest-plugins.log" 2>&1
      log "ctest plugins rc=$? $(grep -E 'tests passed' "$logs/ctest-plugins.log")" ;;
    pyop)
      RUNNER_FLASH_OPS_LIB=$PWD/build-gpu/kernels/flash_attention/libflash_attention_ops.so \
        timeout "$(limit)" python3 -X faulthandler python/test_flash_attention_op.py > "$logs/pyop.log" 2>&1
      log "pyop rc=$?" ;;
    flash)
      build_targets "$budget" kernels_flash_attention_tests
      timeout "$(limit)" build-gpu/kernels/flash_attention/kernels_flash_attention_tests > "$logs/flash-tests.log" 2>&1
      log "flash tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$logs/flash-tests.log" | tr '\n' ' ')" ;;
    ncu:*)
      regex=${stage#ncu:}; tag=$(echo "$regex" | tr -c 'A-Za-z0-9_\n' '_')
      timeout "$(limit)" ncu --kernel-name "regex:$regex" --launch-skip "${NCU_SKIP:-1}" --launch-count "${NCU_COUNT:-2}" --set full \
        -f -o "/tmp/runs/ncu-$tag" build-gpu/runner experiments/flash_benchmarking.yaml --out /tmp/runs/ncu-run \
        --set parts.grid.enabled=false --set 'parts.perf_bar.sweep.seq=[16384]' \
        --set "parts.perf_bar.sweep.attention=[{name: flash, kernel: ${NCU_FAMILY:-wgmma}}]" \
        --set parts.perf_bar.measure.warmup_steps=1 --set parts.perf_bar.measure.measured_steps=2 \
        > "$logs/ncu-$tag.run.log" 2>&1
      log "ncu $regex rc=$?"
      ncu --import "/tmp/runs/ncu-$tag.ncu-rep" --page details > "$logs/ncu-$tag.txt" 2>&1 ;;
    aoti)
      # The ctest fixture (stage ctest) exports the same CUDA packages for the tests: reuse them.
      if [[ -f build-gpu/aoti-test-packages/attention_fwd_cuda_fp32_full.pt2 ]]; then
        ln -sfn build-gpu/aoti-test-packages aoti-packages; log "aoti: linked the ctest fixture's packages"
      else
        timeout "$(limit)" python3 plugins/attention/aoti/export_attention.py --out aoti-packages --device cuda \
          --dtype fp32 --causal false true > "$logs/aoti.log" 2>&1
        log "aoti rc=$? $(grep -c '^exported' "$logs/aoti.log") exported"
      fi ;;
    exp:*|resume:*)
      IFS=: read -r _ name tag <<< "$stage"
      var="RUNNER_ARGS_${name}"; envvar="RUNNER_ENV_${tag}"
      read -r -a extra <<< "${!var:-}"
      read -r -a env_extra <<< "${tag:+${!envvar:-}}"
      dir=$name${tag:+-$tag}
      if [[ $stage == resume:* ]]; then where=(--resume "${RESUME_DIR:-$PWD/.gpu/$dir}"); else
        rm -rf "/tmp/runs/$dir"; where=(--out "/tmp/runs/$dir"); fi
      env "${env_extra[@]}" timeout "$(limit)" build-gpu/runner "experiments/$name.yaml" "${where[@]}" "${extra[@]}" \
        > "$logs/$dir.log" 2>&1
      log "$stage rc=$?" ;;
    slice:*)
      IFS=: read -r _ exp size precision <<< "$stage"
      RUN_ROOT=/tmp/runs RUNNER_BUILD_DIR=build-gpu timeout "$(limit)" \
        bash scripts/gpu/fast_path.sh slice "$logs" "$exp" "$size" "$precision" > "$logs/$exp-$size-$precision.out" 2>&1
      log "$stage rc=$?" ;;
    pack)
      tar -C /tmp/runs --exclude='*/trace.json' --exclude='*.pickle' -czf "$OUT/runs.tgz" .
      find reports -newer /tmp/runs/.stamp -type f | tar -czf "$OUT/reports.tgz" -T -
      ls -la "$OUT" ;;
    *) log "unknown stage '$stage'" ;;
  esac
done
log "done"
