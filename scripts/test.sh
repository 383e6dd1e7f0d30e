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
# Headless Chromium checks the trends site (tests/history); about a minute of apt
# on Debian, and the test skips without it. RUNNER_NO_BROWSER=1 leaves it out.
if [[ -z ${RUNNER_NO_BROWSER:-} ]] && ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  echo "test: installing chromium for the trends-site browser test"
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null ||
    echo "test: could not install chromium; the browser test will skip"
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --timeout 900 "$@"
