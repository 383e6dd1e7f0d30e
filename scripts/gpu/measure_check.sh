#!/usr/bin/env bash
# Issue 13's GPU check: build, the CUDA-side tests of the measurement model, and
# train_step_vs_pytorch with adaptive stopping. Run on the GPU host from the
# project root, one step per device call (each fits the 10-minute limit):
#
#   bash scripts/gpu/measure_check.sh build  "$OUT"   # build-gpu + ctest of the touched tests
#   bash scripts/gpu/measure_check.sh run1   "$OUT"   # first run  -> $OUT/run1.tar.gz, $OUT/run1.summary.txt
#   bash scripts/gpu/measure_check.sh run2   "$OUT"   # second run (a separate call) -> $OUT/run2.*
#
# Then, anywhere: python3 scripts/gpu/compare_runs.py run1/results.jsonl run2/results.jsonl
# says whether the C++/PyTorch step ratios of the two runs agree within their noise.
set -euo pipefail
step="${1:?build|run1|run2}"
out="${2:?output directory}"
mkdir -p "$out"
site="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
export LD_LIBRARY_PATH="/tmp/gpu-prefix/usr/lib/x86_64-linux-gnu:$site/torch/lib:${LD_LIBRARY_PATH:-}"
export RUNNER_PYTHON="${RUNNER_PYTHON:-python3}"

case "$step" in
  build)
    bash .gpu/build.sh > "$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }
    ctest --test-dir build-gpu --output-on-failure -j 4 \
      -R 'Measure\.|Stats\.|EndToEnd\.|task_train_step|task_device_ceilings|DeviceCeilings|TrainStep|ExternalPython' \
      > "$out/ctest.log" 2>&1 || { tail -80 "$out/ctest.log"; exit 1; }
    tail -5 "$out/ctest.log"
    # One cold-cache point and one NVML-recorded point, to show the record fields.
    build-gpu/runner experiments/device_ceilings.yaml --set 'parts.matmul.sweep.size=[4096]' \
      --set 'parts.matmul.sweep.dtype=[bf16]' --set 'parts.copy.sweep.size=[256]' \
      --set 'parts.copy.sweep.dtype=[fp32]' --set measure.cache=cold --set measure.target_rel_stderr=0.005 \
      --out /tmp/measure-ceilings > "$out/ceilings.log" 2>&1 || { tail -40 "$out/ceilings.log"; exit 1; }
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    m = r["metrics"]; key = "tflops" if "tflops" in m else "gbps"
    print(r["part"], key, round(m[key]["mean"], 1), "rse", round(m[key]["rel_stderr"], 4),
          "measurement", json.dumps(r.get("measurement")), "gpu", json.dumps(r.get("gpu")))' \
      /tmp/measure-ceilings/results.jsonl | tee "$out/ceilings.summary.txt"
    ;;
  run1|run2)
    test -x build-gpu/runner || { echo "build first: bash $0 build \$OUT"; exit 1; }
    rm -rf "/tmp/$step"
    # The experiment's own measure settings (1% target, 20-300 steps, 10 s), so the runs can
    # be merged with fast-path slices. About 5 minutes on an H100; if a call ends first, go on
    # in the next with --resume (in place of --out) on a copy of the run directory.
    build-gpu/runner experiments/train_step_vs_pytorch.yaml \
      --set parts.cpp_fast.enabled=false --set parts.python_compiled.enabled=false \
      --out "/tmp/$step" > "$out/$step.log" 2>&1 || true
    tar -C /tmp -czf "$out/$step.tar.gz" "$step"
    python3 scripts/gpu/compare_runs.py "/tmp/$step/results.jsonl" | tee "$out/$step.summary.txt"
    ;;
  *) echo "unknown step '$step': build, run1 or run2"; exit 2 ;;
esac
