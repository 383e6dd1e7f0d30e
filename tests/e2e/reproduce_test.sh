#!/usr/bin/env bash
# scripts/reproduce.sh on a made-up project with a stand-in runner (no GPU): every experiment
# with committed records runs, multi-GPU ones through `runner launch` only with 2 GPUs, the
# records replace reports/<name>/data/ and the report is rendered; a second invocation skips
# what finished and resumes what stopped (runner --resume), and the time of each is printed.
#   reproduce_test.sh <project root>
set -eu
src=$1
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/experiments" "$tmp/build"
cp "$src/scripts/reproduce.sh" "$tmp/scripts/"
for name in alpha beta; do
  echo "experiment: $name" > "$tmp/experiments/$name.yaml"
  mkdir -p "$tmp/reports/$name/data"
  printf 'experiment: %s\n' "$name" > "$tmp/reports/$name/data/config.yaml"
  echo '{"time":"2026-01-01T00:00:00Z"}' > "$tmp/reports/$name/data/results.jsonl"
done
printf 'experiment: pair\nprocesses: 2\n' > "$tmp/experiments/pair.yaml"
mkdir -p "$tmp/reports/pair/data"
echo "experiment: pair" > "$tmp/reports/pair/data/config.yaml"
echo "# merged reports" > "$tmp/reports/renders.txt"
# The stand-in: logs its arguments; a run writes its records into --out or --resume; beta
# stops halfway the first time (exit 130, as after Ctrl-C), until stop-beta is removed.
cat > "$tmp/build/runner" <<'EOF'
#!/usr/bin/env bash
echo "$*" >> calls.txt
[[ $1 == report ]] && exit 0
dir="" exp=""
while (($#)); do
  case $1 in --out|--resume) dir=$2; shift ;; experiments/*) exp=$(basename "$1" .yaml) ;; esac
  shift
done
mkdir -p "$dir"
echo "experiment: $exp" > "$dir/config.yaml"
echo "log of $exp" > "$dir/log.txt"
echo "{\"experiment\":\"$exp\",\"time\":\"2026-01-02T00:00:00Z\"}" >> "$dir/results.jsonl"
[[ $exp == beta && -f stop-beta ]] && exit 130
exit 0
EOF
chmod +x "$tmp/build/runner"
cd "$tmp"
touch stop-beta
fail() { echo "FAIL: $*"; cat calls.txt; exit 1; }

set +e
out=$(scripts/reproduce.sh --gpus 1 2>&1)
code=$?
set -e
[[ $code -eq 1 ]] || fail "first run: exit $code, expected 1 (beta stopped)"$'\n'"$out"
grep -q '"experiment":"alpha"' reports/alpha/data/results.jsonl || fail "alpha's records did not replace data/"
grep -q '2026-01-01' reports/beta/data/results.jsonl || fail "beta's committed records were replaced by a stopped run"
grep -q '^report reports/alpha/data --reports reports$' calls.txt || fail "alpha's report was not rendered"
grep -q 'launch' calls.txt && fail "pair ran with 1 GPU"
grep -q 'pair skipped: needs 2 GPUs' <<< "$out" || fail "no word on the skipped multi-GPU experiment"$'\n'"$out"
grep -q 'alpha ok in [0-9]* s' <<< "$out" || fail "no elapsed time for alpha"$'\n'"$out"

rm stop-beta calls.txt
out=$(scripts/reproduce.sh --gpus 2 2>&1) || fail "second run failed"$'\n'"$out"
grep -q 'alpha' calls.txt && fail "alpha ran again although it had finished"
grep -q '^experiments/beta.yaml --resume runs/reproduce/beta$' calls.txt || fail "beta was not resumed"
grep -q '^launch --nproc-per-node 2 experiments/pair.yaml --out runs/reproduce/pair$' calls.txt ||
  fail "pair did not run through runner launch"
grep -q 'alpha done earlier' <<< "$out" || fail "the summary does not name alpha as done earlier"$'\n'"$out"
[[ $(grep -c '"experiment":"beta"' reports/beta/data/results.jsonl) -eq 2 ]] ||
  fail "beta's resumed records (both halves) are not in data/"
echo "ok: runs, skips what finished, resumes what stopped, multi-GPU only with 2 GPUs"
