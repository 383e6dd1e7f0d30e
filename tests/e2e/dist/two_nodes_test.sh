#!/usr/bin/env bash
# Two nodes on one machine, two ranks each, Gloo on CPU, started the way two hosts would be:
#   launch    two `runner launch --nnodes 2 --node-rank {0,1} --master-addr --master-port`
#   torchrun  two `torchrun --nnodes 2 --node-rank {0,1} --nproc-per-node 2 --rdzv-endpoint`
#   slurm     one Slurm describing two nodes on this host, `srun -N2 -n4`
#   failure   as launch, but rank 3 (node 1) exits 3: both launchers stop, node 0 names it
# Each node runs in its own working directory (as on its own host), without --out for the
# launchers. Passes when every launcher exits 0, the one run directory is node 0's (node 1's
# directory stays empty), every point has ranks 0-3 at local rank r % 2 on node r / 2 in four
# processes, and ddp_check finds every strategy's weights equal to single-process training.
#   two_nodes_test.sh <mode> <runner> <source dir> <work dir> <python>
# Exit 77 (skip): torchrun without torch, slurm when the daemons cannot start.
set -uo pipefail
mode=$1 runner=$2 src=$3 work=$4 python=$5
rm -rf "$work" && mkdir -p "$work/node0" "$work/node1"
fail() { echo "FAIL ($mode): $*" >&2; exit 1; }
# A free port from the kernel (ctest -j runs several of these at once).
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
experiment=$src/experiments/ddp_correctness.yaml
run_args=(--device cpu --smoke --set 'parts.ddp.sweep.micro_batches=[1]' --history off)
export RUNNER_DIST_TIMEOUT_S=120

# Starts node 1's launcher first (its side must wait for node 0, not fail), then node 0's;
# @NODE@ in the command becomes the node rank. Sets code0 and code1.
two_launchers() {
  local pids=() node
  for node in 1 0; do
    ( cd "$work/node$node" && exec timeout 240 "${@//@NODE@/$node}" ) 2>"$work/node$node.err" &
    pids[node]=$!
    [[ $node == 1 ]] && sleep 1
  done
  wait "${pids[0]}"; code0=$?
  wait "${pids[1]}"; code1=$?
}

case $mode in
  launch|failure)
    if [[ $mode == failure ]]; then
      experiment=$src/tests/e2e/dist/rank_failure.yaml
      run_args=(--set params.fail_rank=3 --set params.exit_code=3 --plugin-path "${DIST_TEST_PLUGINS:?the test_plugins/dist directory}"
                --history off)
    fi
    two_launchers "$runner" launch --nnodes 2 --node-rank @NODE@ --master-addr 127.0.0.1 --master-port "$port" \
                  --nproc-per-node 2 "$experiment" "${run_args[@]}"
    ;;
  torchrun)
    "$python" -c 'import torch.distributed.run' 2>/dev/null || { echo "skip: no torch in $python"; exit 77; }
    two_launchers "$python" -m torch.distributed.run --nnodes 2 --node-rank @NODE@ --nproc-per-node 2 \
                  --rdzv-endpoint "127.0.0.1:$port" --no-python "$runner" "$experiment" "${run_args[@]}"
    ;;
  slurm)
    "$src/scripts/slurm/local_slurm.sh" start "$work/slurm" 2; code=$?
    [[ $code -eq 0 ]] || exit $code
    trap '"$src/scripts/slurm/local_slurm.sh" stop "$work/slurm"' EXIT
    # The nodes' names resolve nowhere; both are this host.
    ( cd "$work/node0" && SLURM_CONF=$work/slurm/slurm.conf MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        exec timeout 240 srun -N2 -n4 --ntasks-per-node=2 --kill-on-bad-exit=1 "$runner" "$experiment" \
        "${run_args[@]}" ) 2>"$work/node0.err"
    code0=$? code1=0
    ;;
  *) fail "unknown mode (launch, torchrun, slurm, failure)" ;;
esac
cat "$work/node0.err" >&2
[[ -f $work/node1.err ]] && cat "$work/node1.err" >&2

if [[ $mode == failure ]]; then
  [[ $code1 == 3 ]] || fail "node 1's launcher exited $code1, expected rank 3's code 3"
  [[ $code0 != 0 ]] || fail "node 0's launcher exited 0 although rank 3 failed"
  grep -q "node 1: rank 3 exited with code 3" "$work/node0.err" || fail "node 0 does not name node 1's rank 3"
  echo "ok: rank 3 on node 1 stopped both nodes (exit codes $code0, $code1)"
  exit 0
fi
[[ $code0 == 0 && $code1 == 0 ]] || fail "exit codes node 0: $code0, node 1: $code1"
[[ -z $(ls -A "$work/node1") ]] || fail "node 1 wrote into its directory: $(ls -A "$work/node1")"
runs=("$work"/node0/runs/ddp_correctness/*)
[[ ${#runs[@]} == 1 && -f ${runs[0]}/results.jsonl ]] || fail "expected one run directory under node0/runs, found ${runs[*]}"
"$python" - "${runs[0]}/results.jsonl" "$mode" <<'PY' || exit 1
import json, sys
records = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
launcher = {"launch": "runner launch", "torchrun": "torchrun", "slurm": "srun"}[sys.argv[2]]
points = {}
for r in records:
    points.setdefault((r["part"], r["point"]), []).append(r)  # point indices count within a part
errors = []
for point, rs in sorted(points.items()):
    ranks = {int(r["labels"]["rank"]): r for r in rs if "rank" in r["labels"]}
    aggregates = [r for r in rs if "rank" not in r["labels"]]
    if sorted(ranks) != [0, 1, 2, 3] or len(aggregates) != 1:
        errors.append(f"point {point}: ranks {sorted(ranks)}, {len(aggregates)} aggregate(s)")
        continue
    for rank, r in ranks.items():
        p = r.get("placement", {})
        want = {"rank": rank, "local_rank": rank % 2, "node_rank": rank // 2, "nodes": 2, "world_size": 4}
        got = {k: p.get(k) for k in want}
        if got != want:
            errors.append(f"point {point} rank {rank}: placement {got}, expected {want}")
    if len({r["placement"]["pid"] for r in ranks.values()}) != 4:
        errors.append(f"point {point}: ranks share a process")
    for r in rs:
        if r["status"] != "ok":
            errors.append(f"point {point} ({r['part']}): {r['status']} {r.get('error', '')}")
        if r["env"].get("launcher") != launcher or r["env"].get("world_size") != 4:
            errors.append(f"point {point}: env launcher {r['env'].get('launcher')}, world {r['env'].get('world_size')}")
    err = aggregates[0]["metrics"].get("relative_error", {}).get("value")
    tol = aggregates[0]["params"]["tolerance"]
    if err is None or not err <= tol:
        errors.append(f"point {point}: relative error {err} above {tol}")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"ok: {len(points)} points, ranks 0-3 on nodes 0-1, every DDP run equal to single-process training")
PY
