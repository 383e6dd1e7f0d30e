# Sourced by the one-call device scripts (scripts/gpu/*_call.sh, stages.sh) after they set
# `budget` (seconds the whole call may take): the environment every stage runs in,
# /tmp/runs/logs, and the helpers that cut each stage at what the budget leaves.
#   left          seconds left of the budget
#   cap N         min(N, left), never below 1: a `timeout` for the next stage
#   log TEXT      "[elapsed s] TEXT", also appended to $logs/stages.txt
#   verdict LOG   the gtest PASSED/FAILED summary lines of LOG on one line
#   stage_fits N LABEL   true while more than N seconds are left; else logs "LABEL skipped
#                 (left S s)" and fails, so a stage loop writes `stage_fits 45 "$x" || continue`
#   build_targets CAP TARGET...   touch the sources whose content changed since build-gpu's last
#                 build (refresh_sources.sh), configure build-gpu (configure.sh), then build TARGETs cut at
#                 min(CAP, left); output in $build_log (default $logs/build.log); the status is
#                 the build's. In another tree: ( cd TREE && build_log=FILE build_targets ... )
#   bench_targets  what an attention_bench experiment needs: runner, the flash and SDPA
#                 plugins, the task
t0=$SECONDS
export RUNNER_HISTORY=off NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=/tmp/gpu-prefix/usr/lib/x86_64-linux-gnu:$site/torch/lib:$site/nvidia/nccl/lib
runs=/tmp/runs; logs=$runs/logs
mkdir -p "$logs"
# The commit the records name (scripts/gpu/stamp_commit.sh, run before the call): the host's copy
# of the git metadata may be older than the tree it was sent with.
if [[ -f .gpu/commit ]]; then
  export RUNNER_GIT_COMMIT="$(< .gpu/commit)"
  echo "[0s] records name commit $RUNNER_GIT_COMMIT (.gpu/commit)" >> "$logs/stages.txt"
else
  echo "[0s] no .gpu/commit (scripts/gpu/stamp_commit.sh): records name the host copy's git metadata" >> "$logs/stages.txt"
fi
left() { echo $(( budget - (SECONDS - t0) )); }
cap() { local t; t=$(left); (( t > $1 )) && t=$1; (( t < 1 )) && t=1; echo "$t"; }
log() { echo "[$(( SECONDS - t0 ))s] $*" | tee -a "$logs/stages.txt"; }
verdict() { grep -hE '^\[  (PASSED|FAILED) ' "$@" | tr '\n' ' '; }
stage_fits() { (( $(left) > $1 )) && return 0; log "$2 skipped (left $(left) s)"; return 1; }
bench_targets=(runner attention_flash attention_sdpa task_attention_bench)
build_targets() {
  local wanted="$1"; shift
  local out="${build_log:-$logs/build.log}"
  bash scripts/gpu/refresh_sources.sh build-gpu >> "$out" 2>&1  # sources changed since the last build -> newer
  bash scripts/gpu/configure.sh build-gpu "$out" || return 1
  timeout -k 10 "$(cap "$wanted")" cmake --build build-gpu -j "$(nproc)" --target "$@" >> "$out" 2>&1
}
