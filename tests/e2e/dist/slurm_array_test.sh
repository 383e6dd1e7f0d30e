#!/usr/bin/env bash
# `runner submit --slurm --array 4` against a real one-node Slurm: a 12-point CPU sweep
# runs as 4 array tasks and the dependent job merges them into records with every
# point of an unsharded run exactly once; shards of different configs refuse to merge.
# Skips (77) only when the Slurm daemons cannot start on this machine.
#   slurm_array_test.sh <runner> <source dir> <work dir> <echo plugin dir>
set -uo pipefail
runner=$1 src=$2 work=$3 plugins=$4
rm -rf "$work" && mkdir -p "$work"
"$src/scripts/slurm/local_slurm.sh" start "$work/slurm"; code=$?
[[ $code -eq 0 ]] || exit $code
export SLURM_CONF="$work/slurm/slurm.conf"
cleanup() {
  scancel --name=runner-twelve --name=runner-twelve-merge >/dev/null 2>&1
  "$src/scripts/slurm/local_slurm.sh" stop "$work/slurm"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/run/slurm/*.log "$work/slurm/slurmctld.log"; do [[ -f $f ]] && tail -20 "$f"; done; exit 1; }
cd "$work"
export RUNNER_HISTORY=off RUNNER_PLUGIN_PATH=$plugins
cat > twelve.yaml <<'YAML'
experiment: twelve
measure: {warmup_steps: 0, measured_steps: 1}
task: echo
params: {sleep_us: 200000}
sweep: {value: [1, 2, 3, 4, 5, 6], word: [hi, ho]}
report:
  id: twelve
  tables:
    - {name: values, rows: [word], pivot: value, metric: value, format: "%.0f"}
YAML
# The scripts as --dry-run prints them: the array line, each task's shard, the dependency.
"$runner" submit twelve.yaml --slurm --array 4 --parallel 2 --device cpu --out "$work/run" --dry-run > dry.txt ||
  fail "submit --dry-run exited with $?"
grep -q '^#SBATCH --array=0-3%2$' dry.txt || fail "no --array=0-3%2 in the dry run: $(cat dry.txt)"
grep -q -- '--shard "$SLURM_ARRAY_TASK_ID/4"' dry.txt || fail "tasks do not run --shard I/4"
grep -q -- '--resume "$shard"' dry.txt || fail "a requeued task does not resume its shard"
grep -q ' merge .*shard-3.* --out .*merged' dry.txt || fail "the merge job does not merge the 4 shards"
[[ ! -e run ]] || fail "--dry-run created the run directory"
# Too many tasks for the sweep: refused before anything is submitted.
"$runner" submit twelve.yaml --slurm --array 13 --device cpu --out "$work/big" 2> big.err
[[ $? -eq 2 ]] && grep -q "more tasks than the sweep's 12 points" big.err || fail "--array 13 not refused: $(cat big.err)"

"$runner" submit twelve.yaml --slurm --array 4 --parallel 2 --device cpu --out "$work/run" | tee submit.txt ||
  fail "runner submit exited with $?"
grep -q '^array job [0-9]*: 4 shards of 12 points' submit.txt || fail "submit did not print the array job"
grep -q '^merge job [0-9]* (after the array ends)' submit.txt || fail "submit did not print the merge job"
for _ in $(seq 240); do [[ -s run/merged/reports/twelve/twelve.md ]] && break; sleep 1; done
[[ -s run/merged/reports/twelve/twelve.md ]] || fail "no merged report within 240 s"

# Every point exactly once, the same point set and values as an unsharded run.
"$runner" twelve.yaml --device cpu --set params.sleep_us=0 --out "$work/whole" > whole.log 2>&1 || fail "unsharded run failed"
points() { python3 -c '
import json, sys
seen = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["point"], r["labels"]["item"])
    seen[key] = seen.get(key, 0) + 1
    print(r["point"], r["labels"]["item"], r["metrics"]["value"]["value"], r["metrics"]["word"]["text"], r["status"])
assert all(n == 1 for n in seen.values()), "a point recorded twice"
' "$1"; }
points run/merged/results.jsonl > merged.txt || fail "merged records: $(cat merged.txt)"
points whole/results.jsonl > whole.txt || fail "unsharded records"
[[ $(wc -l < merged.txt) -eq 12 ]] || fail "merged has $(wc -l < merged.txt) records, expected 12"
diff whole.txt merged.txt || fail "merged records differ from the unsharded run's"
for i in 0 1 2 3; do grep -q "\"shard\":\"$i/4\"" run/merged/results.jsonl || fail "no record of shard $i/4"; done

# A shard of another config does not merge with these.
"$runner" twelve.yaml --device cpu --set params.word=other --shard 3/4 --out "$work/other" > other.log 2>&1 ||
  fail "the other shard failed"
"$runner" merge run/shard-0 run/shard-1 run/shard-2 other --out "$work/bad" 2> bad.err
[[ $? -eq 2 ]] && grep -q "its resolved config differs" bad.err || fail "different configs merged: $(cat bad.err)"

# A task killed mid-point and requeued (as on preemption) resumes its shard: every point once.
sed -e 's/experiment: twelve/experiment: requeued/' -e 's/sleep_us: 200000/sleep_us: 1500000/' \
  -e 's/id: twelve/id: requeued/' twelve.yaml > requeued.yaml
"$runner" submit requeued.yaml --slurm --array 4 --device cpu --out "$work/requeue" --sbatch-arg=--requeue \
  > requeue-submit.txt || fail "runner submit (requeue) exited with $?"
array=$(awk '/^array job/ {print $3}' requeue-submit.txt); array=${array%:}
for _ in $(seq 120); do [[ -s requeue/shard-0/results.jsonl ]] && break; sleep 0.5; done
[[ -s requeue/shard-0/results.jsonl ]] || fail "shard 0 recorded nothing within 60 s"
scontrol requeue "${array}_0" || fail "scontrol requeue ${array}_0 failed"
# Once its killed task has ended, slurmctld makes a requeued job pending with a begin time
# 2 minutes ahead and starts it on a later scheduling pass (2.5 minutes of this test waiting):
# release it as soon as it is pending. It stays the requeued task (same job, Restarts=1), so
# what is checked below is unchanged; a Slurm that does not hold it just starts it sooner.
for _ in $(seq 150); do [[ $(squeue -h -j "${array}_0" -o %T 2>/dev/null) == PENDING ]] && break; sleep 0.2; done
scontrol update JobId="${array}_0" StartTime=now 2>/dev/null || echo "note: ${array}_0 not released early (not pending)"
for _ in $(seq 300); do [[ -s requeue/merged/reports/requeued/requeued.md ]] && break; sleep 1; done
[[ -s requeue/merged/reports/requeued/requeued.md ]] || fail "no merged report of the requeued sweep within 300 s"
grep -q "resumed requeued" requeue/shard-0/log.txt || fail "the requeued task did not resume its shard: $(cat requeue/shard-0/log.txt)"
points requeue/merged/results.jsonl > requeued.txt || fail "requeued merged records: $(cat requeued.txt)"
[[ $(wc -l < requeued.txt) -eq 12 ]] || fail "the requeued sweep merged $(wc -l < requeued.txt) records, expected 12"
grep -c '"status":"interrupted"' requeue/shard-0/results.jsonl | sed 's/^/interrupted records in shard 0: /'
echo "ok: 4 array tasks merged into 12 points, each once; a requeued task resumed its shard"
