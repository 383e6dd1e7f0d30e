#!/usr/bin/env bash
# The 2-rank Gloo experiment through a real Slurm: srun starts two runner processes,
# which find each other from SLURM_PROCID / SLURM_NTASKS / SLURM_JOB_NODELIST.
# Skips (77) only when the Slurm daemons cannot start on this machine.
#   slurm_test.sh <runner> <source dir> <work dir>
set -uo pipefail
runner=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
"$src/scripts/slurm/local_slurm.sh" start "$work/slurm"; code=$?
[[ $code -eq 0 ]] || exit $code
trap '"$src/scripts/slurm/local_slurm.sh" stop "$work/slurm"' EXIT
export SLURM_CONF="$work/slurm/slurm.conf"
cd "$src"
timeout 240 srun -N1 -n2 --kill-on-bad-exit=1 "$runner" experiments/ddp_correctness.yaml --device cpu \
  --set 'parts.ddp.sweep.micro_batches=[1]' --out "$work/run"
code=$?
[[ $code -eq 0 ]] || { echo "srun exited with $code" >&2; exit 1; }
# Rank 0 wrote every point, with both ranks' records and the aggregate.
records=$(grep -c '"status":"ok"' "$work/run/results.jsonl")
[[ $records -ge 9 ]] || { echo "expected the points of both ranks in results.jsonl, found $records ok records" >&2; exit 1; }
grep -q '"launcher":"srun"' "$work/run/results.jsonl" || { echo "records do not say launcher srun" >&2; exit 1; }
echo "ok: $records records via srun"
