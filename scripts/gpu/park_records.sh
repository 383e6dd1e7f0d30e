#!/usr/bin/env bash
# A device call carries the working tree (tracked files and untracked ones git does not ignore)
# plus its carry paths, 64 MiB in all; the committed records under reports/ take most of that.
# `park` moves the largest tracked files under reports/ (default 20 MB worth, or $1 bytes) to
# $PARK (default /tmp/runner-parked-records) for the call; `restore` puts them back. Run
# scripts/gpu/stamp_commit.sh before parking, so the records the call writes name a clean commit.
# If a session ends while parked, `git checkout -- reports` restores the same files from git.
#
#   bash scripts/gpu/park_records.sh park [BYTES]   |   bash scripts/gpu/park_records.sh restore
set -eu
cd "$(git rev-parse --show-toplevel)"
park=${PARK:-/tmp/runner-parked-records}
case "${1:-}" in
  park)
    want=${2:-20000000}
    [[ -e $park/.list ]] && { echo "park_records: already parked (see $park/.list); restore first" >&2; exit 1; }
    mkdir -p "$park"
    moved=0
    while read -r size path; do
      (( moved >= want )) && break
      mkdir -p "$park/$(dirname "$path")"
      mv "$path" "$park/$path"
      echo "$path" >> "$park/.list"
      moved=$(( moved + size ))
    done < <(git ls-files -z reports | xargs -0 stat -c '%s %n' | sort -rn)
    echo "park_records: parked $(wc -l < "$park/.list") files, $moved bytes, in $park"
    ;;
  restore)
    [[ -e $park/.list ]] || { echo "park_records: nothing parked in $park" >&2; exit 0; }
    while read -r path; do
      mkdir -p "$(dirname "$path")"
      mv "$park/$path" "$path"
    done < "$park/.list"
    rm -f "$park/.list"
    echo "park_records: restored; git status: $(git status --short reports | wc -l) changed paths under reports/"
    ;;
  *) echo "usage: $0 park [BYTES] | restore" >&2; exit 2 ;;
esac
