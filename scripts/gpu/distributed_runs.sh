#!/usr/bin/env bash
# On a 2-GPU host (nvidia-h200-x2), from the project root: build, check, then run the
# distributed experiments; logs and a tarball of the run directories go to $OUT.
#   bash scripts/gpu/distributed_runs.sh [stage...]
# stages (default all, in this order): build check comm ddp accounting
#   build       bash .gpu/build.sh (build-gpu/)
#   check       ddp_correctness on 2 GPUs with NCCL, and the refusal of 3 ranks on 2 GPUs
#   comm        distributed_communication_single_node (runner + torch.distributed rows)
#   ddp         ddp_benchmarking (4 strategies, 1 GPU, PyTorch DDP, Kineto trace)
#   accounting  optimizer_state_sharding_accounting
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/distributed-out}
mkdir -p "$out" runs-gpu
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(build ddp comm accounting check)
site="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
export LD_LIBRARY_PATH="/tmp/gpu-prefix/usr/lib/x86_64-linux-gnu:$site/torch/lib:$site/nvidia/nccl/lib:${LD_LIBRARY_PATH:-}"
export RUNNER_PYTHON=python3
runner=build-gpu/runner
nvidia-smi --query-gpu=name,memory.total --format=csv > "$out/gpus.txt" 2>&1
status=0
launch() {  # launch <name> <experiment> [args...]
  local name=$1; shift
  local start=$SECONDS
  rm -rf "runs-gpu/$name"
  "$runner" launch --nproc-per-node 2 "$@" --out "runs-gpu/$name" > "$out/$name.log" 2>&1
  local code=$?
  echo "$name: exit $code in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
  [[ $code -eq 0 ]] || { tail -20 "$out/$name.log"; status=1; }
  tar czf "$out/runs.tgz" --exclude='*/trace.json' runs-gpu  # after every run: a cut-off call keeps what ran
}
for stage in "${stages[@]}"; do
  case $stage in
    build)
      # .gpu/build.sh's configure, then only the runner and its plugins (no test binaries).
      start=$SECONDS
      sed '/^cmake --build/d' .gpu/build.sh > /tmp/configure-gpu.sh
      { bash /tmp/configure-gpu.sh && cmake --build build-gpu --target runner -j "$(nproc)"; } > "$out/build.log" 2>&1 ||
        { tail -60 "$out/build.log"; exit 1; }
      echo "build: $((SECONDS - start)) s" | tee -a "$out/summary.txt" ;;
    check)
      launch ddp_correctness experiments/ddp_correctness.yaml
      "$runner" launch --nproc-per-node 3 experiments/ddp_correctness.yaml > "$out/three_ranks.log" 2>&1
      echo "3 ranks on 2 GPUs: exit $? ($(tail -1 "$out/three_ranks.log"))" | tee -a "$out/summary.txt" ;;
    comm) launch distributed_communication_single_node experiments/distributed_communication_single_node.yaml ;;
    ddp) launch ddp_benchmarking experiments/ddp_benchmarking.yaml ;;
    accounting) launch optimizer_state_sharding_accounting experiments/optimizer_state_sharding_accounting.yaml ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
# Traces apart: each file coming back is limited in size.
tar czf "$out/runs.tgz" --exclude='*/trace.json' runs-gpu
traces=$(find runs-gpu -name trace.json)
[[ -n $traces ]] && tar czf "$out/traces.tgz" $traces
ls -l "$out"
cat "$out/summary.txt"
exit $status
