#!/usr/bin/env bash
# The trends site in headless Chromium: four runs of a three-point experiment in
# two parts (the last run three times slower: a step the series' own spread must
# show), `runner history --html`, then the page must load with no console message,
# draw every plot, mark the slowdown, filter by part and by parameter (the
# address's #part=...&value=...), and leave a screenshot (trends.png next to this
# test's files).
#   trends_browser_test.sh <runner> <work dir> <echo plugin dir>
set -euo pipefail
runner=$1 work=$2 plugins=$3
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $browser ]]; then
  echo "SKIP: no chromium here (Debian: apt-get install chromium); the trends site is not checked in a browser"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export RUNNER_HISTORY=$work/history.sqlite RUNNER_PLUGIN_PATH=$plugins
cat > sleepy.yaml <<'YAML'
experiment: sleepy
measure: {warmup_steps: 1, measured_steps: 12}
parts:
  - name: short
    task: echo
    params: {sleep_us: 2000}
    sweep:
      value: [1.0, 2.0]
  - name: long
    task: echo
    params: {sleep_us: 3000, value: 1.0}
YAML
"$runner" sleepy.yaml --device cpu --out run1 > run1.log 2>&1
"$runner" sleepy.yaml --device cpu --out run2 > run2.log 2>&1
"$runner" sleepy.yaml --device cpu --out run3 > run3.log 2>&1
# Three times slower code, same parameters (the echo plugin's extra sleep).
RUNNER_ECHO_EXTRA_SLEEP_US=4000 "$runner" sleepy.yaml --device cpu --out run4 > run4.log 2>&1
"$runner" history --html site
page=file://$work/site/sleepy.html
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --virtual-time-budget=3000)
"$browser" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "$page" > dom.html 2> console.log
"$browser" "${flags[@]}" --hide-scrollbars --window-size=1200,900 --screenshot="$work/trends.png" "$page" > /dev/null 2>&1
fail=0
if grep -E 'CONSOLE|Uncaught' console.log; then echo "FAIL: the page wrote to the console (above)"; fail=1; fi
plots=$(grep -o 'data-plots="[0-9]*"' dom.html | grep -o '[0-9]*' || true)
drawn=$(grep -o 'data-plots-drawn="[0-9]*"' dom.html | grep -o '[0-9]*' || true)
# Three points x sleep_ms; `value` is the same in every run, so it is named, not plotted.
if [[ "$plots" != 3 || "$drawn" != 3 ]]; then echo "FAIL: expected 3 plots drawn, page says plots=$plots drawn=$drawn"; fail=1; fi
shown=$(grep -o 'data-plots-shown="[0-9]*"' dom.html | grep -o '[0-9]*' || true)
[[ "$shown" == 3 ]] || { echo "FAIL: unfiltered, the page shows $shown of 3 charts"; fail=1; }
# Filters from the address, as a shared link would set them: charts shown, parts hidden.
filtered() {
  "$browser" "${flags[@]}" --dump-dom "$page#$1" 2> /dev/null > "filtered-$2.html"
  grep -o 'data-plots-shown="[0-9]*"' "filtered-$2.html" | grep -o '[0-9]*' || true
}
[[ $(filtered part=short part) == 2 ]] || { echo "FAIL: #part=short does not show the 2 charts of part short"; fail=1; }
grep -q '<section class="part" data-part="long" hidden' filtered-part.html ||
  { echo "FAIL: #part=short leaves part long's section shown"; fail=1; }
[[ $(filtered value=1.0 value) == 2 ]] || { echo "FAIL: #value=1.0 does not show the 2 charts with value 1.0"; fail=1; }
[[ $(filtered 'part=long&value=2.0' none) == 0 ]] || { echo "FAIL: #part=long&value=2.0 shows a chart"; fail=1; }
grep -q '<select name="sleep_us">' dom.html || { echo "FAIL: no filter for sleep_us (2000 and 3000)"; fail=1; }
if ! grep -q 'Constant in every run (not plotted): value' dom.html; then echo "FAIL: the constant metric is not named"; fail=1; fi
if ! grep -q 'class="regression"' dom.html; then echo "FAIL: the slower fourth run is not marked"; fail=1; fi
if [[ ! -s trends.png ]] || (( $(stat -c %s trends.png) < 5000 )); then echo "FAIL: no screenshot"; fail=1; fi
grep -q 'href="runs/4.json"' dom.html || { echo "FAIL: no link to run 4's records"; fail=1; }
python3 -c "import json,sys; d=json.load(open('site/runs/4.json')); sys.exit(0 if len(d['records'])==3 else 1)" ||
  { echo "FAIL: runs/4.json does not hold run 4's three records"; fail=1; }
(( fail == 0 )) && echo "ok: 3 plots drawn, step marked, filters by part and value work, screenshot $work/trends.png"
exit $fail
