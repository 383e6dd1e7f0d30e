#!/usr/bin/env bash
# `runner schedule --slurm` against a real one-node Slurm (scripts/slurm/local_slurm.sh,
# started here and stopped on exit): the job runs the sweep, logs a verdict line and
# resubmits itself with --begin; --remove cancels it. Skips (77) only when the Slurm
# daemons cannot start on this machine.
#   slurm_schedule_test.sh <runner> <source dir> <work dir> <echo plugin dir>
set -uo pipefail
runner=$1 src=$2 work=$3 plugins=$4
rm -rf "$work" && mkdir -p "$work"
"$src/scripts/slurm/local_slurm.sh" start "$work/slurm"; code=$?
[[ $code -eq 0 ]] || exit $code
export SLURM_CONF="$work/slurm/slurm.conf"
cleanup() {
  scancel --name=runner-slurmtest >/dev/null 2>&1
  "$src/scripts/slurm/local_slurm.sh" stop "$work/slurm"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/schedules/*.log "$work/slurm/slurmctld.log"; do [[ -f $f ]] && tail -20 "$f"; done; exit 1; }
cd "$work"
export RUNNER_HISTORY=$work/history.sqlite RUNNER_PLUGIN_PATH=$plugins RUNNER_SCHEDULE_DIR=$work/schedules
cat > sleepy.yaml <<'YAML'
experiment: sleepy
measure: {warmup_steps: 1, measured_steps: 5}
task: echo
params: {sleep_us: 1000}
YAML
"$runner" schedule sleepy.yaml --name slurmtest --every 1m --slurm --device cpu --log "$work/regressions.log" ||
  fail "runner schedule --slurm exited with $?"
for _ in $(seq 120); do [[ -s regressions.log ]] && break; sleep 1; done
cat regressions.log 2>/dev/null
grep -q 'slurmtest ok run 1' regressions.log 2>/dev/null || fail "the Slurm job logged no verdict within 120 s"
# The job ran the sweep into the history, and resubmitted itself for the next interval.
"$runner" history --experiment sleepy | grep -q ' ok ' || fail "the scheduled run is not in the history"
sleep 2
squeue -h --name=runner-slurmtest -o '%i %T %S' | tee queue.txt
grep -q PENDING queue.txt || fail "no resubmitted (pending) job"
"$runner" schedule --list | grep -q slurmtest || fail "schedule --list does not show slurmtest"
"$runner" schedule --remove slurmtest || fail "schedule --remove exited with $?"
sleep 2
[[ -z $(squeue -h --name=runner-slurmtest -t PENDING -o %i) ]] || fail "--remove left a pending job"
[[ ! -e schedules/slurmtest.sbatch ]] || fail "--remove left the sbatch script"
echo "ok: Slurm job ran, logged, resubmitted, removed"
