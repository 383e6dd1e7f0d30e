#!/usr/bin/env bash
# scripts/gpu/refresh_sources.sh on a made-up tree: a source whose content changed while its
# modification time went back (as a re-sent tree's may) is touched, an unchanged one is not.
set -eu
script="$(cd "$(dirname "$0")" && pwd)/refresh_sources.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
mkdir -p kernels/k build
echo 'int a;' > kernels/k/a.cu
echo 'int b;' > kernels/k/b.hpp
touch -d '2020-01-01' kernels/k/a.cu kernels/k/b.hpp
bash "$script" build > out1.txt
[[ -s build/.source-hashes && ! -s out1.txt ]] || { echo "first run should only record"; exit 1; }
echo 'int a2;' > kernels/k/a.cu
touch -d '2020-01-01' kernels/k/a.cu          # changed content, old time
bash "$script" build > out2.txt
grep -q 'kernels/k/a.cu changed' out2.txt || { echo "a.cu not reported"; cat out2.txt; exit 1; }
[[ $(stat -c %Y kernels/k/a.cu) -gt $(date -d '2021-01-01' +%s) ]] || { echo "a.cu not touched"; exit 1; }
[[ $(stat -c %Y kernels/k/b.hpp) -lt $(date -d '2021-01-01' +%s) ]] || { echo "b.hpp touched"; exit 1; }
rm kernels/k/b.hpp                             # a deleted source is not recreated
bash "$script" build > out3.txt
[[ ! -e kernels/k/b.hpp ]] || { echo "b.hpp recreated"; exit 1; }
echo "refresh_sources: ok"
