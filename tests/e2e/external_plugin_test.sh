#!/bin/sh
# A plugin configured and built outside the tree with the one documented command
# (only -DRunner_DIR: Torch and its CUDA settings come from the package), listed by
# `runner plugins --plugin-path`, and run with its example experiments: the task
# (hello.yaml) and the attention (attention.yaml, against attention/naive).
#   external_plugin_test.sh SOURCE_DIR BUILD_DIR RUNNER_DIR RUNNER PYTHON
set -u
src=$1 out=$2 runner_dir=$3 runner=$4 python=$5
fail() { echo "external_plugin: $*" >&2; exit 1; }
rm -rf "$out" "$out-run" "$out-attention"
cmake -S "$src/examples/external_plugin" -B "$out" -G Ninja -DRunner_DIR="$runner_dir" > "$out.log" 2>&1 &&
  cmake --build "$out" >> "$out.log" 2>&1 || { tail -30 "$out.log"; fail "configure or build failed"; }
# Torch's "library kineto not found" is answered by the package (RunnerConfig.cmake).
! grep -n "kineto" "$out.log" || fail "configure warned about kineto (above)"
# Torch's CUDA_ARCHITECTURES warning likewise (a machine with a CUDA toolkit).
! grep -n "not compatible with .CMAKE_CUDA_ARCHITECTURES" "$out.log" || fail "configure warned about CUDA_ARCHITECTURES (above)"
"$runner" plugins --plugin-path "$out" > "$out.plugins" 2>&1
grep -F "$out/task_hello.so" "$out.plugins" > /dev/null || fail "task/hello not listed: $(cat "$out.plugins")"
grep -F "$out/attention_scaled.so" "$out.plugins" > /dev/null || fail "attention/scaled not listed: $(cat "$out.plugins")"
"$runner" "$src/examples/external_plugin/hello.yaml" --plugin-path "$out" --out "$out-run" |
  grep -F "[2/2] main greeting=bonjour  ok  nothing_ms" || fail "hello.yaml did not run"
"$runner" "$src/examples/external_plugin/attention.yaml" --plugin-path "$out" --out "$out-attention" \
  > "$out-attention.log" 2>&1 || { cat "$out-attention.log"; fail "attention.yaml failed"; }
# Temperature 1 is the textbook attention (error against naive at rounding level);
# temperature 2 is not (the check sees it).
"$python" - "$out-attention/results.jsonl" <<'PY' || fail "attention errors as above"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
errors = {(r["params"]["attention"], r["params"].get("attention.temperature")): r["metrics"]["error_max"]["value"]
          for r in rows if r["status"] == "ok"}
print(errors)
assert len(errors) == 3, errors
assert errors[("scaled", 1)] < 1e-5 and errors[("scaled", 2)] > 1e-2, errors
PY
# Its table keeps the naive row, which has no temperature (a blank cell, not a lost row).
grep -F "| naive |  |" "$out-attention/reports/scaled_attention/scaled_attention.md" > /dev/null ||
  fail "no naive row in $out-attention/reports/scaled_attention/scaled_attention.md"
