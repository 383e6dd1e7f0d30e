#!/usr/bin/env bash
# Configures a build of the project on the GPU host (shared by fast_path.sh and stages.sh):
# unpacks the staged Debian packages (.gpu/debs, from ../shared/gpu/prepare) into
# /tmp/gpu-prefix once, then runs CMake against the LibTorch inside the host's PyTorch.
#
#   bash scripts/gpu/configure.sh BUILD_DIR LOG      (exit status: CMake's; its output in LOG)
set -euo pipefail
build="$1"; log="$2"
prefix=/tmp/gpu-prefix
if [[ ! -f $prefix/.done ]]; then
  mkdir -p $prefix
  for f in .gpu/debs/*.deb; do dpkg -x "$f" $prefix; done
  touch $prefix/.done
fi
torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
site="$(python3 -c 'import site; print(site.getsitepackages()[0])')"
nccl_lib="$site/nvidia/nccl/lib"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" \
  -DNCCL_INCLUDE_DIR="$site/nvidia/nccl/include" -DNCCL_LIBRARY_DIR="$nccl_lib" \
  -DCMAKE_BUILD_RPATH="$prefix/usr/lib/x86_64-linux-gnu;$site/torch/lib;$nccl_lib" >> "$log" 2>&1
