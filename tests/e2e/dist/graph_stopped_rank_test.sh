#!/bin/sh
# graph_stopped_rank_test.sh <runner> <source dir> <scratch dir>
# Two NCCL ranks replay a graph-captured bucketed DDP step; once they are replaying, rank 1 gets
# SIGSTOP. The launcher must exit non-zero within 30 s and name rank 1 (heartbeat every 2 s).
# Exit 77 (skip) with fewer than 2 GPUs.
set -u
runner=$1 src=$2 out=$3
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${n:-0}" -lt 2 ]; then echo "skip: needs 2 GPUs"; exit 77; fi
rm -rf "$out" && mkdir -p "$out"
marker="graph_stopped_rank_$$"
RUNNER_DIST_HEARTBEAT_S=2 GRAPH_STOPPED_RANK_MARKER=$marker \
  "$runner" launch --nproc-per-node 2 "$src/tests/e2e/dist/graph_stopped_rank.yaml" --out "$out/run" \
  >"$out/out.txt" 2>&1 &
launcher=$!
# The ranks are replaying once rank 1's point has started and had time to capture.
rank1=""
for _ in $(seq 1 120); do
  for env in /proc/[0-9]*/environ; do
    if tr '\0' '\n' <"$env" 2>/dev/null | grep -qx "GRAPH_STOPPED_RANK_MARKER=$marker" &&
       tr '\0' '\n' <"$env" 2>/dev/null | grep -qx "RANK=1"; then
      pid=${env#/proc/}; pid=${pid%/environ}
      # the rank itself, not a child it started for a point: its parent is the launcher
      [ "$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null)" = "$launcher" ] && rank1=$pid
    fi
  done
  [ -n "$rank1" ] && grep -q "graph_stopped_rank" "$out/run/log.txt" 2>/dev/null && break
  sleep 1
done
if [ -z "$rank1" ]; then echo "FAIL: rank 1 never started"; cat "$out/out.txt"; kill "$launcher"; exit 1; fi
sleep 20  # CUDA and NCCL start, 11 eager steps, the capture; then the replays
kill -STOP "$rank1"
stopped=$(date +%s)
code=0
for _ in $(seq 1 30); do
  kill -0 "$launcher" 2>/dev/null || break
  sleep 1
done
if kill -0 "$launcher" 2>/dev/null; then
  echo "FAIL: the launcher still runs 30 s after rank 1 stopped"; kill -CONT "$rank1"; kill "$launcher"; cat "$out/out.txt"; exit 1
fi
wait "$launcher"; code=$?
kill -KILL "$rank1" 2>/dev/null
echo "launcher exit $code after $(( $(date +%s) - stopped )) s"
cat "$out/out.txt" | tail -5
[ "$code" -ne 0 ] || { echo "FAIL: exit 0"; exit 1; }
grep -q "rank 1 stopped responding" "$out/out.txt" || { echo "FAIL: rank 1 not named"; exit 1; }
echo "ok: the stopped rank was named during graph replays"
