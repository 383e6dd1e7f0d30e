#!/usr/bin/env bash
# On a multi-GPU host, from the project root: build, check, then run the distributed
# experiments; logs and a tarball of the run directories go to $OUT.
#   NPROC=4 bash scripts/gpu/distributed_runs.sh [stage...]
# NPROC: ranks of the comm/ddp/accounting/check runs (default 2). Stages (default: build ddp
# comm accounting check):
#   build       bash .gpu/build.sh's configure, then the runner and its plugins (build-gpu/)
#   check       ddp_correctness on NPROC GPUs with NCCL, and the refusal of NPROC+1 ranks
#   comm        distributed_communication_single_node (runner + torch.distributed rows), Gloo
#               with 20 measured steps; run dir distributed_communication_single_node_<NPROC>
#   ddp         ddp_benchmarking (4 strategies, 1 GPU, PyTorch DDP, Kineto trace)
#   accounting  optimizer_state_sharding_accounting
#   bf16_reduce ddp_bf16_reduce at 2, 4 and 8 ranks (those the host has), global batch 4 per rank
#   scaling     ddp_scaling at 2, 4 and 8 ranks (those the host has), global batch 4 per rank,
#               then rank 0's trace of the largest run drawn into logs/ddp_scaling_trace.*
set -uo pipefail
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
out=${OUT:-/tmp/distributed-out}
logs=/tmp/distributed-logs/logs  # packed into $out/logs.tgz after every run: the device returns at most 8 files
mkdir -p "$out" "$logs" runs-gpu
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=(build ddp comm accounting check)
site="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
export LD_LIBRARY_PATH="/tmp/gpu-prefix/usr/lib/x86_64-linux-gnu:$site/torch/lib:$site/nvidia/nccl/lib:${LD_LIBRARY_PATH:-}"
export RUNNER_PYTHON=python3
# The commit the records name (scripts/gpu/stamp_commit.sh, run here before the call).
[[ -f .gpu/commit ]] && export RUNNER_GIT_COMMIT="$(< .gpu/commit)"
runner=build-gpu/runner
nvidia-smi --query-gpu=name,memory.total --format=csv > "$logs/gpus.txt" 2>&1
nvidia-smi topo -m > "$logs/topology.txt" 2>&1
status=0
nproc=${NPROC:-2}
gpus=$(nvidia-smi -L | wc -l)
launch() {  # launch <name> <experiment> [args...]; NRANKS overrides NPROC for one call
  local name=$1; shift
  local start=$SECONDS
  rm -rf "runs-gpu/$name"
  "$runner" launch --nproc-per-node "${NRANKS:-$nproc}" "$@" --out "runs-gpu/$name" > "$logs/$name.log" 2>&1
  local code=$?
  echo "$name: exit $code in $((SECONDS - start)) s" | tee -a "$out/summary.txt"
  [[ $code -eq 0 ]] || { tail -20 "$logs/$name.log"; status=1; }
  pack  # after every run: a cut-off call keeps what ran
}
pack() {
  tar czf "$out/runs.tgz" --exclude='*/trace.json' runs-gpu
  tar czf "$out/logs.tgz" -C "$(dirname "$logs")" logs
}
for stage in "${stages[@]}"; do
  case $stage in
    build)
      # .gpu/build.sh's configure, then only the runner and its plugins (no test binaries).
      start=$SECONDS
      sed '/^cmake --build/d' .gpu/build.sh > /tmp/configure-gpu.sh
      { bash /tmp/configure-gpu.sh && cmake --build build-gpu --target runner -j "$(nproc)"; } > "$logs/build.log" 2>&1 ||
        { tail -60 "$logs/build.log"; pack; exit 1; }
      echo "build: $((SECONDS - start)) s" | tee -a "$out/summary.txt" ;;
    check)
      launch "ddp_correctness_$nproc" experiments/ddp_correctness.yaml
      "$runner" launch --nproc-per-node $((gpus + 1)) experiments/ddp_correctness.yaml > "$logs/too_many_ranks.log" 2>&1
      echo "$((gpus + 1)) ranks on $gpus GPUs: exit $? ($(tail -1 "$logs/too_many_ranks.log"))" | tee -a "$out/summary.txt" ;;
    comm)
      launch "distributed_communication_single_node_$nproc" experiments/distributed_communication_single_node.yaml \
        --set parts.gloo.measure.measured_steps=20 --set parts.gloo_pytorch.measure.measured_steps=20 ;;
    scaling)
      for n in 2 4 8; do
        (( n <= gpus )) || continue
        b=$((4 * n))
        NRANKS=$n launch "ddp_scaling_$n" experiments/ddp_scaling.yaml \
          --set parts.bucketed.params.batch_size=$b --set parts.bucketed_bf16.params.batch_size=$b \
          --set parts.trace.params.batch_size=$b --set "parts.pytorch_ddp.params.args=[--batch-size, '$b']" \
          --set "parts.pytorch_ddp_bf16.params.args=[--batch-size, '$b', --sdpa, --fused-adamw]" \
          --set "parts.pytorch_ddp_compiled.params.args=[--batch-size, '$b', --compile-blocks]" \
          --set "parts.pytorch_ddp_bf16_compiled.params.args=[--batch-size, '$b', --sdpa, --fused-adamw, --compile-blocks]"
        last=$n
      done
      trace=$(find "runs-gpu/ddp_scaling_${last:-0}" -path '*rank0/trace.json' 2>/dev/null | head -1)
      [[ -n $trace ]] && python3 scripts/figures/trace_overlap.py "$trace" "$logs/ddp_scaling_trace" \
        --title "Rank 0 of ${last} GPUs, two bucketed (1000 MiB) XL fp32 steps" \
        > "$logs/ddp_scaling_trace.json" 2>&1
      [[ -n $trace ]] && tar czf "$out/traces.tgz" "$trace"
      pack ;;
    bf16_reduce)
      for n in 2 4 8; do
        (( n <= gpus )) || continue
        NRANKS=$n launch "ddp_bf16_reduce_$n" experiments/ddp_bf16_reduce.yaml \
          --set parts.bucketed.params.batch_size=$((4 * n)) --set parts.bucketed_fp32.params.batch_size=$((4 * n))
      done ;;
    ddp) launch ddp_benchmarking experiments/ddp_benchmarking.yaml ;;
    accounting) launch optimizer_state_sharding_accounting experiments/optimizer_state_sharding_accounting.yaml ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
# Traces apart: each file coming back is limited in size.
pack
[[ -f $out/traces.tgz ]] || { traces=$(find runs-gpu -path '*rank0/trace.json'); [[ -z $traces ]] || tar czf "$out/traces.tgz" $traces; }
ls -l "$out"
cat "$out/summary.txt"
exit $status
