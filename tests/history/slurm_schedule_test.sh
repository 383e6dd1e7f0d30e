#!/usr/bin/env bash
# `runner schedule --slurm` against a real Slurm: the job runs the sweep, logs a
# verdict line and resubmits itself with --begin; --remove cancels it.
#   slurm_schedule_test.sh <runner> <work dir> <echo plugin dir>
set -euo pipefail
runner=$1 work=$2 plugins=$3
if ! command -v sbatch >/dev/null || ! timeout 10 sinfo -h >/dev/null 2>&1; then
  echo "SKIP: no Slurm answering here (sbatch/sinfo); start the one-node Slurm of the multi-process tests first"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export RUNNER_HISTORY=$work/history.sqlite RUNNER_PLUGIN_PATH=$plugins RUNNER_SCHEDULE_DIR=$work/schedules
cat > sleepy.yaml <<'YAML'
experiment: sleepy
measure: {warmup_steps: 1, measured_steps: 5}
task: echo
params: {sleep_us: 1000}
YAML
"$runner" schedule sleepy.yaml --name slurmtest --every 1m --slurm --device cpu --log "$work/regressions.log"
for _ in $(seq 120); do [[ -s regressions.log ]] && break; sleep 1; done
cat regressions.log || true
grep -q 'slurmtest ok run 1' regressions.log || { echo "FAIL: the Slurm job logged no verdict"; exit 1; }
# It resubmitted itself for the next interval.
squeue -h --name=runner-slurmtest -o '%i %T %S' | tee queue.txt
[[ -s queue.txt ]] || { echo "FAIL: no resubmitted job"; exit 1; }
"$runner" schedule --remove slurmtest
sleep 2
if [[ -n $(squeue -h --name=runner-slurmtest -t PENDING -o %i) ]]; then echo "FAIL: --remove left a pending job"; exit 1; fi
echo "ok: Slurm job ran, logged, resubmitted, removed"
