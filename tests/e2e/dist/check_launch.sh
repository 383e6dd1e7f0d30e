#!/bin/sh
# check_launch.sh <expected exit code> <stderr regex> <max seconds> -- <command...>
# Runs the command, and passes when it exits with that code, within that time,
# and its stderr matches the regex (grep -E). An argument @RUNDIR@ becomes a fresh
# directory path (for --out), removed afterwards.
want_code=$1 want_text=$2 max_s=$3; shift 4
err=$(mktemp); rundir=$(mktemp -d)/run; start=$(date +%s)
for a in "$@"; do
  shift
  if [ "$a" = "@RUNDIR@" ]; then set -- "$@" "$rundir"; else set -- "$@" "$a"; fi
done
"$@" 2>"$err" >/dev/null; code=$?
rm -rf "$(dirname "$rundir")"
took=$(( $(date +%s) - start ))
cat "$err" >&2
grep -Eq -- "$want_text" "$err"; found=$?; rm -f "$err"
[ "$code" = "$want_code" ] || { echo "FAIL: exit code $code, expected $want_code" >&2; exit 1; }
[ "$found" = 0 ] || { echo "FAIL: stderr does not match: $want_text" >&2; exit 1; }
[ "$took" -le "$max_s" ] || { echo "FAIL: took ${took}s, more than ${max_s}s" >&2; exit 1; }
echo "ok: exit $code in ${took}s"
