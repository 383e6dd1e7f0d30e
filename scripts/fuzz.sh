#!/usr/bin/env bash
# Builds the config fuzzer with clang-16 (libFuzzer, AddressSanitizer, UBSan) into
# build-fuzz/ and runs it on a copy of the committed corpus.
#   scripts/fuzz.sh [seconds=600] [extra libFuzzer flags]
# New corpus entries land in build-fuzz/corpus; crashes in build-fuzz/crashes/.
# Commit interesting ones to tests/fuzz/corpus (inputs) or tests/fuzz/crashers
# (fixed bugs), which ctest replays on every build (fuzz.config_replay).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-600}"; shift || true
command -v clang++-16 >/dev/null || { echo "fuzz: needs clang-16 and libclang-rt-16-dev (apt-get install clang-16 libclang-rt-16-dev)" >&2; exit 2; }
venv="${RUNNER_VENV:-.venv}"
torch_prefix="$("$venv/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cmake -S . -B build-fuzz -G Ninja -DRUNNER_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-16 -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build build-fuzz --target runner_config_fuzzer
mkdir -p build-fuzz/corpus build-fuzz/crashes
cp -n tests/fuzz/corpus/* build-fuzz/corpus/ 2>/dev/null || true
cd build-fuzz
# detect_leaks=0: LibTorch's static registries are reported as leaks at exit.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./runner_config_fuzzer corpus "$root/tests/fuzz/crashers" -max_total_time="$seconds" -max_len=8192 \
  -artifact_prefix=crashes/ -print_final_stats=1 "$@"
