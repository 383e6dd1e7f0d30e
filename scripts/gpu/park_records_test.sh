#!/usr/bin/env bash
# scripts/gpu/park_records.sh on a made-up repository: park moves the largest tracked files under
# reports/ until the asked bytes are out (untracked and smaller files stay), refuses to park twice,
# and restore puts every file back byte for byte.
set -eu
script="$(cd "$(dirname "$0")" && pwd)/park_records.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
git init -q repo && cd repo
mkdir -p reports/a/data reports/b/runs/x
head -c 3000 /dev/urandom > reports/a/data/results.jsonl
head -c 2000 /dev/urandom > reports/b/runs/x/results.jsonl
head -c 100 /dev/urandom > reports/a/a.md
git add reports && git -c user.email=t@t -c user.name=t commit -qm records
head -c 9000 /dev/urandom > reports/untracked.bin
sums="$(md5sum reports/a/data/results.jsonl reports/b/runs/x/results.jsonl reports/a/a.md)"
export PARK="$tmp/park"
bash "$script" park 4000 > out.txt
[[ ! -e reports/a/data/results.jsonl && ! -e reports/b/runs/x/results.jsonl ]] || { echo "largest not parked"; exit 1; }
[[ -e reports/a/a.md && -e reports/untracked.bin ]] || { echo "parked too much"; exit 1; }
if bash "$script" park 10 2> err.txt; then echo "parked twice"; exit 1; fi
bash "$script" restore > out2.txt
after="$(md5sum reports/a/data/results.jsonl reports/b/runs/x/results.jsonl reports/a/a.md)"
[[ "$after" == "$sums" ]] || { echo "restore differs"; exit 1; }
[[ -z "$(git status --short reports/a reports/b)" ]] || { echo "tree not clean after restore"; exit 1; }
echo "park_records: ok"
