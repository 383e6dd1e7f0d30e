#!/usr/bin/env bash
# Builds runner (installing what is missing, like setup.sh) and runs the whole test
# suite through ctest: unit tests, plugin tests, end-to-end runs, and --smoke of
# every experiment. GPU-only tests skip cleanly without a GPU.
#   scripts/test.sh [extra ctest args]     e.g. scripts/test.sh -L smoke
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/setup.sh" --no-quickstart
build_dir="${RUNNER_BUILD_DIR:-build}"
[[ -f .gpu/build.sh && -d build-gpu ]] && python3 -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && build_dir=build-gpu
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --timeout 900 "$@"
