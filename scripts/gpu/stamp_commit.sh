#!/usr/bin/env bash
# Run here, before a device call: writes the commit of this checkout (12 hex digits, "-dirty"
# when tracked files differ from it) to .gpu/commit, which the call carries with the kit. On
# the GPU host the copy's own git metadata can be older than the tree (records of 2026-11-26
# named the session's first commit for every later tree), so call_budget.sh exports this as
# RUNNER_GIT_COMMIT, which the runner's records take as their git_commit.
#
#   bash scripts/gpu/stamp_commit.sh      (from the project root; prints the stamp)
set -euo pipefail
mkdir -p .gpu
commit=$(git rev-parse --short=12 HEAD)
[[ -z "$(git status --porcelain --untracked-files=no)" ]] || commit+="-dirty"
echo "$commit" > .gpu/commit
echo "$commit"
