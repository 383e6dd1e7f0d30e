#!/usr/bin/env bash
# The fast path (issue 12) on a GPU host, from the project root, after the build
# (bash .gpu/build.sh, or scripts/setup.sh there):
#
#   scripts/gpu/fast_path.sh build  OUT   configure like .gpu/build.sh, build only what the
#                                         fast path's tests and experiments need
#   scripts/gpu/fast_path.sh tests  OUT   kernel + fast-path GPU tests (ctest), log in OUT
#   scripts/gpu/fast_path.sh adamw  OUT   experiments/fused_adamw.yaml (the optimizer alone)
#   scripts/gpu/fast_path.sh step   OUT [--set ...]  train_step_vs_pytorch, all rows
#   scripts/gpu/fast_path.sh compile OUT [--set ...] torch_compile_model, all rows
#   scripts/gpu/fast_path.sh long   OUT [--set ...]  train_step_vs_pytorch's longer-context parts
#                                         only (context 1024 and 2048, bf16; run dir run-train_step_vs_pytorch-long)
#   scripts/gpu/fast_path.sh diff   OUT [--set ...]  experiments/step_kernel_diff.yaml (kernel classes
#                                         per step, runner fast vs PyTorch compile + CUDA graph)
#   scripts/gpu/fast_path.sh reports OUT  the four experiments with --reports reports,
#                                         records copied to reports/<experiment>/data/
#   scripts/gpu/fast_path.sh slice OUT EXPERIMENT SIZE PRECISION [runner args]
#                                         one size and precision of every context-256 part (a run
#                                         fits one device call; run dir run-EXPERIMENT-SIZE-PRECISION)
#   scripts/gpu/fast_path.sh merge OUT EXPERIMENT
#                                         OUT/EXPERIMENT-*.results.jsonl (the slices) into
#                                         reports/EXPERIMENT/data/, tables into reports/<id>/
#                                         (runs anywhere, RUNNER_BUILD_DIR=build on a CPU)
# Extra arguments go to the runner (e.g. --set parts.cpp.sweep.model.size=[small]).
# Run directories go under $RUN_ROOT (default OUT); OUT gets logs and results.jsonl copies.
set -euo pipefail
stage="$1"; out="$2"; shift 2
mkdir -p "$out"
build="${RUNNER_BUILD_DIR:-build-gpu}"
export RUNNER_PYTHON="${RUNNER_PYTHON:-$(command -v python3)}"
export PYTHONUNBUFFERED=1
run_experiment() {  # name, then runner arguments
  local name="$1"; shift
  local dir="${RUN_ROOT:-$out}/run-$name"
  rm -rf "$dir"
  local status=0
  "$build/runner" "experiments/$name.yaml" --out "$dir" "$@" > "$out/$name.log" 2>&1 || status=$?
  tail -5 "$out/$name.log"
  # Keep what was measured even when a point failed (exit 1).
  cp "$dir/results.jsonl" "$out/$name.results.jsonl" || true
  cp "$dir/reports/$name/$name.md" "$out/$name.md" || true
  return $status
}
case "$stage" in
  build)
    bash scripts/gpu/configure.sh "$build" "$out/configure.log" || { tail -40 "$out/configure.log"; exit 1; }
    cmake --build "$build" -j "$(nproc)" --target runner \
      kernels_adamw_tests kernels_rmsnorm_tests kernels_rope_tests kernels_swiglu_tests kernels_cross_entropy_tests \
      optimizer_adamw_tests task_train_step_tests model_transformer_lm_tests task_optimizer_step_tests \
      task_external_python attention_naive attention_sdpa profiler_kernels 2>&1 | tail -40
    ;;
  tests)
    # The flash kernels are not in this build (scripts/gpu/flash_*_call.sh test them); both
    # suites run even when the first fails.
    status=0
    ctest --test-dir "$build" --output-on-failure -L kernels -E '^flash_attention' > "$out/tests-kernels.log" 2>&1 || status=1
    ctest --test-dir "$build" --output-on-failure \
      -R 'FusedAdamW|AdamW|TrainStep|TransformerLm|OptimizerStep' > "$out/tests-plugins.log" 2>&1 || status=1
    tail -n 3 "$out/tests-kernels.log" "$out/tests-plugins.log"
    exit $status
    ;;
  adamw) run_experiment fused_adamw "$@" ;;
  step) run_experiment train_step_vs_pytorch "$@" ;;
  compile) run_experiment torch_compile_model "$@" ;;
  diff) run_experiment step_kernel_diff "$@" ;;
  long)
    sets=()
    for part in cpp cpp_fast python python_compiled python_compiled_graph python_compiled_model python_max_autotune; do
      sets+=(--set "parts.$part.enabled=false")
    done
    dir="${RUN_ROOT:-$out}/run-train_step_vs_pytorch-long"
    rm -rf "$dir"
    status=0
    "$build/runner" experiments/train_step_vs_pytorch.yaml --out "$dir" "${sets[@]}" "$@" \
      > "$out/train_step_vs_pytorch-long.log" 2>&1 || status=$?
    tail -5 "$out/train_step_vs_pytorch-long.log"
    cp "$dir/results.jsonl" "$out/train_step_vs_pytorch-long.results.jsonl" || true
    exit $status
    ;;
  reports)
    for name in fused_adamw train_step_vs_pytorch torch_compile_model step_kernel_diff; do
      run_experiment "$name" --reports reports "$@" || echo "$name: some points failed (see $out/$name.log)"
      mkdir -p "reports/$name/data"
      cp "${RUN_ROOT:-$out}/run-$name/results.jsonl" "${RUN_ROOT:-$out}/run-$name/config.yaml" "reports/$name/data/"
    done
    ;;
  slice)
    name="$1"; size="$2"; precision="$3"; shift 3
    case "$name" in
      train_step_vs_pytorch) parts="cpp cpp_fast python python_compiled python_compiled_graph" ;;
      torch_compile_model) parts="cpp_eager cpp_graph cpp_fused_graph py_eager_fwd py_eager_step py_graph_fwd py_graph_step py_compile_fwd py_compile_step py_compile_graph_fwd py_compile_graph_step" ;;
      *) echo "slice: unknown experiment $name" >&2; exit 2 ;;
    esac
    sets=()
    for part in $parts; do
      sets+=(--set "parts.$part.sweep.model.size=[$size]" --set "parts.$part.sweep.precision=[$precision]")
    done
    if [[ "$name" == train_step_vs_pytorch ]]; then  # parts that run on small only (see the experiment)
      if [[ "$size" == small ]]; then
        sets+=(--set "parts.python_compiled_model.sweep.precision=[$precision]")
      else
        sets+=(--set parts.python_compiled_model.enabled=false)
      fi
      [[ "$size" == small && "$precision" == bf16 ]] || sets+=(--set parts.python_max_autotune.enabled=false)
      for part in cpp_fast_long python_compiled_graph_1024 python_compiled_graph_2048; do  # the `long` stage's
        sets+=(--set "parts.$part.enabled=false")
      done
    fi
    dir="${RUN_ROOT:-$out}/run-$name-$size-$precision"
    rm -rf "$dir"
    status=0
    "$build/runner" "experiments/$name.yaml" --out "$dir" "${sets[@]}" "$@" > "$out/$name-$size-$precision.log" 2>&1 || status=$?
    tail -5 "$out/$name-$size-$precision.log"
    cp "$dir/results.jsonl" "$out/$name-$size-$precision.results.jsonl" || true
    cp "$dir/config.yaml" "$out/$name.config.yaml" || true
    exit $status
    ;;
  merge)
    # Works where the slices' files were copied to (OUT), e.g. here after device calls.
    # config.yaml is the whole experiment (every slice's sweep), not the last slice's; MERGE_NOTE
    # (optional, one or more lines) says where and when the slices ran.
    name="$1"
    mkdir -p "reports/$name/data"
    # Slices in the experiment's sweep order (small before 2.7B), since tables keep the order in
    # which rows first appear; files named otherwise (re-runs of one part) follow.
    slices=()
    while read -r size precision; do
      f="$out/$name-$size-$precision.results.jsonl"
      [[ -f "$f" && ! " ${slices[*]-} " =~ " $f " ]] && slices+=("$f")
    done < <("$build/runner" "experiments/$name.yaml" --dry-run | grep -o 'model.size=[^ ]* precision=[^ ]*' \
               | sed 's/model.size=//; s/precision=//')
    for f in "$out/$name"-*.results.jsonl; do
      [[ " ${slices[*]-} " =~ " $f " ]] || slices+=("$f")
    done
    cfg=$("$build/runner" "experiments/$name.yaml" --cfg)
    {
      head -n 1 <<< "$cfg"
      echo "# merged from slices (scripts/gpu/fast_path.sh slice), one runner run each:"
      for f in "${slices[@]}"; do echo "#   $(basename "$f" .results.jsonl)"; done
      [[ -z "${MERGE_NOTE:-}" ]] || printf '%s\n' "$MERGE_NOTE" | sed 's/^/# /'
      tail -n +2 <<< "$cfg"
    } > "reports/$name/data/config.yaml"
    cat "${slices[@]}" > "reports/$name/data/results.jsonl"
    for f in "${slices[@]}"; do cat "${f%.results.jsonl}.log" 2>/dev/null; done > "reports/$name/data/log.txt"
    "$build/runner" report "reports/$name/data" --reports reports
    ;;
  *) echo "usage: $0 build|tests|adamw|step|compile|reports|slice|merge OUT ..." >&2; exit 2 ;;
esac
