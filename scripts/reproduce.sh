#!/usr/bin/env bash
# Reproduces the reports on your own GPU box: every experiment whose records reports/ holds
# (reports/<experiment>/data/) runs once into runs/reproduce/<experiment>/, its records replace
# reports/<experiment>/data/, and reports/ is re-rendered from them. Prints each experiment's
# elapsed time as it finishes and a table at the end.
#
#   scripts/setup.sh --no-quickstart       # once: packages, PyTorch, the CUDA build in build/
#   scripts/reproduce.sh [--gpus N] [--only NAME]... [--dry-run]
#
# Resumable: run it again after a stop and finished experiments are skipped, an interrupted one
# continues where it stopped (runner --resume); delete runs/reproduce/<experiment>* to redo one.
#   --gpus N     GPUs for the multi-GPU experiments (default: every GPU nvidia-smi lists). They
#                need 2; with 4 or more, ddp_scaling and ddp_bf16_reduce also run on 4 GPUs
#                (their runs/four_gpus/). Runs merged from other hosts (reports/renders.txt) stay
#                as committed otherwise.
#   --only NAME  just this experiment (repeatable).
#   --dry-run    print what would run and how long the committed run of each took, run nothing.
# Environment: RUNNER_BUILD_DIR (default build), RUNNER_RUNS (default runs/reproduce).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
runner="${RUNNER_BUILD_DIR:-build}/runner"
runs="${RUNNER_RUNS:-runs/reproduce}"
gpus="" only=() dry=""
while (($#)); do
  case $1 in
    --gpus|--only)
      (($# >= 2)) || { echo "reproduce: $1 needs a value (scripts/reproduce.sh --help)" >&2; exit 2; }
      if [[ $1 == --gpus ]]; then gpus=$2; else only+=("$2"); fi
      shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "reproduce: unknown argument '$1' (scripts/reproduce.sh --help)" >&2; exit 2 ;;
  esac
done
[[ -z $gpus ]] && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if ! [[ $gpus =~ ^[0-9]+$ ]]; then
  echo "reproduce: --gpus $gpus: expected a number of GPUs, e.g. --gpus 4" >&2
  exit 2
fi

# The experiments, from the committed records: name and process count of each data/ run.
# Those that read other reports' records (analytic_accounting, scaling_model) run last.
first=() multi=() last=()
for config in reports/*/data/config.yaml; do
  name=$(sed -n 's/^experiment: *//p' "$config" | head -1)
  [[ -f experiments/$name.yaml ]] || continue
  if ((${#only[@]})) && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  case $name in
    analytic_accounting|scaling_model) last+=("$name") ;;  # they read the others' reports/*/data
    *) if grep -q '^processes:' "experiments/$name.yaml"; then multi+=("$name"); else first+=("$name"); fi ;;
  esac
done
for name in "${only[@]}"; do
  [[ -f reports/$name/data/config.yaml ]] ||
    { echo "reproduce: --only $name: no reports/$name/data/ (scripts/reproduce.sh --dry-run lists them)" >&2; exit 2; }
done
if [[ -z $dry && ! -x $runner ]]; then
  echo "reproduce: $runner: not built; run scripts/setup.sh --no-quickstart first (or set RUNNER_BUILD_DIR)" >&2
  exit 2
fi

# How long the committed records took, first to last record (their `time` stamps): what a
# run on a similar GPU costs. Records merged from several runs span those runs.
committed_minutes() {
  python3 - "$1" <<'PY' 2>/dev/null || echo "unknown (no records)"
import datetime, json, sys
times = []
for line in open(sys.argv[1], encoding="utf-8"):
    try:
        times.append(datetime.datetime.fromisoformat(json.loads(line)["time"].replace("Z", "+00:00")))
    except (ValueError, KeyError):
        pass
gpu = ""
for line in open(sys.argv[1], encoding="utf-8"):
    gpu = json.loads(line).get("env", {}).get("gpu", "")
    break
print(f"{(max(times) - min(times)).total_seconds() / 60:.0f} min from its first record to its last"
      + (f" ({gpu})" if gpu else ""))
PY
}

[[ -n $dry ]] || mkdir -p "$runs"
summary=() status=0
# run <label> <experiment> <records dir under reports/> [runner arguments...]; returns 0 only
# when the experiment ran and finished now (so its report needs rendering).
run() {
  local label=$1 name=$2 records=$3; shift 3
  local dir="$runs/$label" start=$SECONDS code
  if [[ -f $dir.done ]]; then
    summary+=("$label done earlier ($(<"$dir.done") s)")
    echo "reproduce: $label: done earlier ($(<"$dir.done") s), skipped"
    return 1
  fi
  local where=(--out "$dir")
  [[ -f $dir/config.yaml ]] && where=(--resume "$dir")
  echo "reproduce: $label: $runner $* experiments/$name.yaml ${where[*]}"
  if [[ -n $dry ]]; then
    echo "  the committed run: $(committed_minutes "$records/results.jsonl")"
    return 1  # nothing ran: nothing to render
  fi
  "$runner" "$@" "experiments/$name.yaml" "${where[@]}"
  code=$?
  local took=$((SECONDS - start))
  if ((code == 0)); then
    # The run's records become the committed ones.
    mkdir -p "$records"
    cp "$dir/results.jsonl" "$dir/config.yaml" "$dir/log.txt" "$records/"
    echo "$took" > "$dir.done"
    summary+=("$label ok in $took s")
  else
    summary+=("$label exit $code after $took s (records so far in $dir)")
    status=1
  fi
  echo "reproduce: $label: exit $code in $took s"
  return $code
}

# Renders a report from its committed runs: the ones reports/renders.txt merges, else data/.
render() {
  local name=$1 line
  [[ -n $dry ]] && return 0
  line=$(awk -v f="experiments/$name.yaml" '$1 == f' reports/renders.txt)
  if [[ -n $line ]]; then
    "$runner" report ${line#* } --spec "experiments/$name.yaml" --reports reports
  else
    "$runner" report "reports/$name/data" --reports reports
  fi || status=1
}

# torch_compile's AOTInductor rows need the compiled packages (once).
if [[ " ${first[*]} " == *" torch_compile "* && ! -d aoti-packages && -z $dry ]]; then
  python_bin=$(sed -n 's/^RUNNER_PYTHON:[A-Z]*=//p' "${RUNNER_BUILD_DIR:-build}/CMakeCache.txt" 2>/dev/null)
  "${python_bin:-python3}" plugins/attention/aoti/export_attention.py --out aoti-packages || status=1
fi
for name in "${first[@]}"; do
  run "$name" "$name" "reports/$name/data" && render "$name"
done
for name in "${multi[@]}"; do
  if ((gpus < 2)); then
    summary+=("$name skipped: needs 2 GPUs, --gpus $gpus")
    continue
  fi
  case $name in
    ddp_scaling|ddp_bf16_reduce)
      # Weak scaling at 4 sequences per rank: the global batch is 4 x GPUs.
      for n in 2 4; do
        ((n <= gpus)) || continue
        b=$((4 * n)) sets=()
        if [[ $name == ddp_scaling ]]; then
          sets=(--set parts.bucketed.params.batch_size=$b --set parts.bucketed_eager.params.batch_size=$b
                --set parts.trace.params.batch_size=$b
                --set "parts.pytorch_graph.params.args=[--batch-size, '$b', --sdpa, --fused-adamw, --compile-blocks, --cuda-graph, --bucket-cap-mb, '100', --gradient-as-bucket-view]")
        else
          sets=(--set parts.bucketed.params.batch_size=$b --set parts.bucketed_fp32.params.batch_size=$b)
        fi
        records="reports/$name/data"
        ((n == 4)) && records="reports/$name/runs/four_gpus"
        run "${name}_$n" "$name" "$records" launch --nproc-per-node "$n" "${sets[@]}"
      done
      render "$name" ;;
    *)
      run "$name" "$name" "reports/$name/data" launch --nproc-per-node 2 && render "$name" ;;
  esac
done
for name in "${last[@]}"; do
  run "$name" "$name" "reports/$name/data" && render "$name"
done

if ((${#summary[@]})); then
  echo
  printf '%s\n' "${summary[@]}"
fi
((status == 0)) && [[ -z $dry ]] && echo "reproduce: done; 'git diff --stat reports/' shows what changed"
exit $status
