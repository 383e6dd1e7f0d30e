#!/usr/bin/env bash
# Installs what this machine lacks to build runner, then builds it.
#   scripts/setup.sh                 packages + venv with PyTorch 2.11 + build + quickstart run
#   scripts/setup.sh --no-quickstart  the same without the quickstart run and the PATH link (scripts/test.sh uses it)
# The full form also links ~/.local/bin/runner to the built runner, so `runner` works from
# any directory (RUNNER_NO_LINK=1: no link; an existing ~/.local/bin/runner that is not a
# link is left alone).
# Idempotent: a second run installs nothing and rebuilds incrementally.
# Environment: RUNNER_BUILD_DIR (default build), RUNNER_VENV (default .venv),
#              BUILD_TYPE (default Release).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${RUNNER_BUILD_DIR:-build}"
venv="${RUNNER_VENV:-.venv}"
torch_version=2.11.0
quickstart() {
  if [[ "${1:-}" != "--no-quickstart" ]]; then
    link_runner "$root/$2/runner"
    echo "setup: quickstart: a one-minute run (matmul and a tiny LM's train step), results below"
    "$2/runner" experiments/quickstart.yaml
  fi
}
link_runner() {
  local bin="$HOME/.local/bin" target=$1
  [[ -n ${RUNNER_NO_LINK:-} ]] && return 0
  if [[ -e $bin/runner && ! -L $bin/runner ]]; then
    echo "setup: $bin/runner exists and is not a link; left alone (run $target)"
    return 0
  fi
  mkdir -p "$bin" && ln -sfn "$target" "$bin/runner"
  echo "setup: linked $bin/runner -> $target"
  case ":$PATH:" in
    *":$bin:"*) ;;
    *) echo "setup: $bin is not on your PATH; add it: echo 'export PATH=\$HOME/.local/bin:\$PATH' >> ~/.bashrc" ;;
  esac
}

debian_packages=(build-essential cmake ninja-build python3 python3-venv pkg-config
  libyaml-cpp-dev libboost-dev libboost-program-options-dev libboost-filesystem-dev
  libgtest-dev libgloo-dev nlohmann-json3-dev libsqlite3-dev)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The writeup PDF (runner report --pdf, ctest -R writeup): pdflatex, latexmk and the few
# packages reports/writeup.tex uses (booktabs, float, caption, xcolor, hyperref, lmodern),
# without recommends, so a clean clone pulls no TeX documentation or extra fonts.
tex_packages=(latexmk texlive-latex-base texlive-latex-recommended lmodern)
tex_missing=()
for p in "${tex_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || tex_missing+=("$p")
done
if (( ${#missing[@]} + ${#tex_missing[@]} )); then
  echo "setup: installing Debian packages: ${missing[*]} ${tex_missing[*]}"
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  if (( ${#missing[@]} )); then
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
  fi
  if (( ${#tex_missing[@]} )); then
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${tex_missing[@]}"
  fi
fi

# PyTorch: use one that is already importable at the right version (e.g. a GPU box's own),
# else a project venv with the PyPI wheel (a CUDA build that also runs on CPU).
python_bin=""
for candidate in "$venv/bin/python" python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$torch_version' else 1)" 2>/dev/null; then
    python_bin="$candidate"; break
  fi
done
if [[ -z $python_bin ]]; then
  echo "setup: creating $venv with torch==$torch_version (a few GB, once)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "torch==$torch_version" numpy
  python_bin="$venv/bin/python"
fi
"$python_bin" -c 'import numpy' 2>/dev/null || "$python_bin" -m pip install -q numpy || true
# SciPy only checks runner's Mann-Whitney U test (tests/history); that test skips without it.
"$python_bin" -c 'import scipy' 2>/dev/null || "$python_bin" -m pip install -q scipy || true
# Holistic Trace Analysis reads profiler/kernels' traces for the cross-check
# (scripts/hta_kernel_check.py); its ctest skips without it.
"$python_bin" -c 'import hta' 2>/dev/null || "$python_bin" -m pip install -q HolisticTraceAnalysis==0.5.0 || true
# matplotlib draws the report figures (scripts/figures/plot.py); without it tables still render.
"$python_bin" -c 'import matplotlib' 2>/dev/null || "$python_bin" -m pip install -q matplotlib || true

# Absolute, without resolving symlinks (a venv's python is a link to the system one,
# but only through the venv path does it see the venv's torch).
python_path="$(command -v "$python_bin")"
[[ $python_path == /* ]] || python_path="$(cd "$(dirname "$python_path")" && pwd)/$(basename "$python_path")"
torch_prefix="$("$python_bin" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
echo "setup: LibTorch from $torch_prefix"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DRUNNER_PYTHON="$python_path" >/dev/null
cmake --build "$build_dir"
echo "setup: built $build_dir/runner"
quickstart "${1:-}" "$build_dir"
