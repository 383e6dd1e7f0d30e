#!/usr/bin/env bash
# Touches every source under the given tree whose content differs from what the last build of
# BUILD_DIR compiled, then records the current contents: ninja rebuilds by modification times,
# and a tree sent again to a warm GPU host (build-gpu/ kept) need not have newer times than the
# objects built from another tree (one call ran a branch's binary after the tree went back to
# main, ninja printing "no work to do"). Run from the project root before building:
#
#   bash scripts/gpu/refresh_sources.sh [BUILD_DIR]      (default build-gpu)
#
# The first run (no record yet) only records. Build-system files are left to CMake.
set -u
build_dir="${1:-build-gpu}"
list="$build_dir/.source-hashes"
mkdir -p "$build_dir"
if [[ -f $list ]]; then
  # Only content mismatches ("path: FAILED"); a file gone since ("FAILED open or read") is not recreated.
  sha1sum --check --quiet "$list" 2>/dev/null | sed -n 's/: FAILED$//p' | while IFS= read -r path; do
    touch -- "$path" && echo "refresh_sources: $path changed since the last build"
  done
fi
find kernels plugins runner tests python \( -name '*.cu' -o -name '*.cuh' -o -name '*.cpp' -o -name '*.hpp' \
  -o -name '*.h' -o -name '*.cc' \) -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha1sum > "$list.new" &&
  mv "$list.new" "$list"
