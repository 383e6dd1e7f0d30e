#!/usr/bin/env bash
# Builds the fuzzers with clang (libFuzzer, AddressSanitizer, UBSan) into $bd/
# and runs each for SECONDS on a copy of its committed corpus.
#   scripts/fuzz.sh [SECONDS=600] [TARGETS=config,records,history] [extra libFuzzer flags]
#                                e.g. -runs=N: stop after N executions (or SECONDS, if first)
#   scripts/fuzz.sh --merge      minimize tests/fuzz/corpus/* with -merge=1 (seeds:
#                                the corpus, experiments/*.yaml, tests/hostile)
# Targets: config (YAML experiments, --set, --smoke, report specs), records (the
# results.jsonl reader and the tables built from it), history (import into the
# history, read back, compared). New inputs land in $bd/corpus-<target>;
# crashes in $bd/crashes-<target>/. Commit crashers to tests/fuzz/crashers
# (config) or tests/hostile/records (records, history) after the fix: ctest replays them.
# Exit code 0 when no target found a crash; 77 when no clang with libFuzzer is here.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
merge=0
if [[ ${1:-} == --merge ]]; then merge=1; shift; fi
seconds="${1:-600}"; shift || true
targets="${1:-config,records,history}"; shift || true
cxx=""
for c in clang++-16 clang++-15 clang++-14 clang++; do
  if command -v "$c" >/dev/null && echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, long) { return 0; }' |
       "$c" -x c++ -fsanitize=fuzzer - -o /tmp/runner-fuzz-probe.$$ 2>/dev/null; then
    cxx="$c"; break
  fi
done
rm -f /tmp/runner-fuzz-probe.$$
[[ -n $cxx ]] || { echo "fuzz: needs clang with libFuzzer (Debian: clang-14 libclang-rt-14-dev)" >&2; exit 77; }
cc="${cxx/clang++/clang}"
python="${RUNNER_PYTHON:-${RUNNER_VENV:-.venv}/bin/python}"
torch_prefix="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
bd="${RUNNER_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cmake -S . -B "$bd" -G Ninja -DRUNNER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
IFS=, read -r -a names <<< "$targets"
for t in "${names[@]}"; do cmake --build "$bd" --target "runner_${t}_fuzzer"; done

corpus_of() { [[ $1 == config ]] && echo config || echo records; }
seeds_of() {
  case "$1" in
    config) echo "$root/tests/fuzz/corpus/config $root/tests/fuzz/crashers $root/experiments $root/tests/hostile/config" ;;
    *) echo "$root/tests/fuzz/corpus/records $root/tests/hostile/records" ;;
  esac
}
# Inputs up to 64 KiB: 10,000 nested parentheses in a report value (a stack overflow
# once) need more than the old 8,192 bytes to be reachable at all.
max_len=65536
# detect_leaks=0: LibTorch's static registries are reported as leaks at exit.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
declare -A merged
for t in "${names[@]}"; do
  bin="$bd/tests/fuzz/runner_${t}_fuzzer"
  if [[ $merge == 1 ]]; then
    # records and history share one corpus: the second merge adds what the first lacks.
    # The files ctest replays anyway (experiments/*.yaml, tests/hostile) go in first
    # as replayed-* and leave after: the corpus keeps only what they do not cover.
    fresh="$bd/merged-$(corpus_of "$t")"
    if [[ -z ${merged[$(corpus_of "$t")]:-} ]]; then
      rm -rf "$fresh"; mkdir -p "$fresh"
      for f in $(seeds_of "$t"); do
        case "$f" in */experiments|*/tests/hostile/*) for g in "$f"/*; do cp "$g" "$fresh/replayed-$(basename "$g")"; done ;; esac
      done
    fi
    merged[$(corpus_of "$t")]=1
    mkdir -p "$bd/corpus-$t"
    # shellcheck disable=SC2046
    "$bin" -merge=1 -max_len=$max_len -timeout=10 "$fresh" $(seeds_of "$t") "$bd/corpus-$t" \
      > "$bd/merge-$t.log" 2>&1
    continue
  fi
  mkdir -p "$bd/corpus-$t" "$bd/crashes-$t"
  # shellcheck disable=SC2046
  if ! "$bin" "$bd/corpus-$t" $(seeds_of "$t") -max_total_time="$seconds" -max_len=$max_len -timeout=10 \
       -rss_limit_mb=4096 -artifact_prefix="$bd/crashes-$t/" -print_final_stats=1 "$@" \
       > "$bd/fuzz-$t.log" 2>&1; then
    status=1
    echo "fuzz: $t FOUND A CRASH: $bd/crashes-$t/ (log: $bd/fuzz-$t.log)" >&2
  fi
  # libFuzzer's own count and time ("Done N runs in S second(s)"): -runs=N may stop it before SECONDS.
  echo "fuzz: $t: $(grep -E '^Done [0-9]+ runs in' "$bd/fuzz-$t.log" | tail -1 | awk '{print $2 " executions in " $5 " s"}')"
done
if [[ $merge == 1 ]]; then
  for c in "${!merged[@]}"; do
    rm -f "$bd/merged-$c"/replayed-*
    rm -rf "tests/fuzz/corpus/$c"; mv "$bd/merged-$c" "tests/fuzz/corpus/$c"
    echo "fuzz: tests/fuzz/corpus/$c: $(ls "tests/fuzz/corpus/$c" | wc -l) inputs after -merge=1"
  done
fi
exit $status
