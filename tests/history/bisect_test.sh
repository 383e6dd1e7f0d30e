#!/usr/bin/env bash
# `runner bisect` on a tiny git repository: six commits, the fourth makes the
# point three times slower. Its "runner" is a script that records one point
# whose step time is the number in the file `speed` (what a build of that
# commit would measure); bisect must name the fourth commit, leave the
# repository on its branch, and refuse a BAD that does not regress.
#   bisect_test.sh <runner> <work dir>
set -euo pipefail
runner=$1 work=$2
rm -rf "$work" && mkdir -p "$work/repo" && cd "$work/repo"
git init -q -b main . && git config user.email t@example.com && git config user.name test
cat > fake_runner.sh <<'SH'
#!/usr/bin/env bash
# Records one point: 12 steps around the time in ./speed (ms).
set -eu
out=
while (($#)); do [[ $1 == --out ]] && out=$2; shift; done
mkdir -p "$out"
speed=$(cat speed)
samples=$(awk -v s="$speed" 'BEGIN { for (i = 0; i < 12; i++) printf "%s%.6f", (i ? "," : ""), s * (1 + 0.002 * ((i * 7) % 12 - 6) / 12) }')
printf '{"experiment":"tiny","part":"main","point":0,"task":"fake","status":"ok","params":{"size":1,"device":"cpu"},"labels":{},"env":{"device":"cpu","cpu":"Test CPU"},"time":"2026-11-23T00:00:00Z","artifacts":[],"metrics":{"step_ms":{"unit":"ms","n":12,"mean":%s,"std":0.001,"median":%s,"min":%s,"max":%s,"samples":[%s]}}}\n' \
  "$speed" "$speed" "$(awk -v s="$speed" 'BEGIN{print s*0.999}')" "$(awk -v s="$speed" 'BEGIN{print s*1.001}')" "$samples" > "$out/results.jsonl"
SH
chmod +x fake_runner.sh
echo "experiment: tiny" > tiny.yaml
commit() { git add -A && git commit -q -m "$1" && git rev-parse HEAD; }
echo 1.0 > speed; c1=$(commit "first")
echo note > notes.txt; c2=$(commit "notes")
echo 1.001 > speed; c3=$(commit "tiny change")
echo 3.0 > speed; c4=$(commit "the slow one")
echo more >> notes.txt; c5=$(commit "more notes")
echo again >> notes.txt; c6=$(commit "last")
fail=0
set +e
"$runner" bisect "$c1" "$c6" --experiment tiny.yaml --filter main --build true --runner ./fake_runner.sh \
  --work "$work/runs" > bisect.log 2>&1
code=$?
set -e
cat bisect.log
[[ $code == 0 ]] || { echo "FAIL: bisect exited $code"; fail=1; }
grep -q "^first bad commit: $c4 (${c4:0:7} the slow one)" bisect.log || { echo "FAIL: expected first bad commit $c4"; fail=1; }
[[ $(git symbolic-ref --short HEAD) == main ]] || { echo "FAIL: the repository is not back on main"; fail=1; }
[[ -z $(git status --porcelain --untracked-files=no) ]] || { echo "FAIL: the work tree changed"; fail=1; }
# BAD that does not regress (c3 is 0.1 % slower): nothing to bisect, exit 2.
set +e
"$runner" bisect "$c1" "$c3" --experiment tiny.yaml --filter main --build true --runner ./fake_runner.sh \
  --work "$work/runs2" > same.log 2>&1
code=$?
set -e
[[ $code == 2 ]] && grep -q "does not regress against GOOD" same.log || { cat same.log; echo "FAIL: a BAD that does not regress was bisected (exit $code)"; fail=1; }
(( fail == 0 )) && echo "ok: first bad commit ${c4:0:12}"
exit $fail
