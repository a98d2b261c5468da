#!/usr/bin/env bash
# scripts/fuzz.sh — the fuzzing campaign: every fuzz target of the module, one
# after the other, each for a time budget, then the inputs that found new
# coverage are added to the committed corpus (testdata/fuzz/<Target>).
#
# Usage: scripts/fuzz.sh [budget] [target-regexp]
#   budget         per target, a Go duration (default 2m)
#   target-regexp  only targets whose name matches (default: all)
# Environment:
#   FUZZ_PARALLEL  fuzzing workers per target (default 1: the machine is shared)
#   FUZZ_KEEP      at most this many new inputs kept per target, the smallest
#                  first (default 40): the corpus stays reviewable
#   FUZZ_CACHE     where the campaign's own corpus cache lives (default a
#                  temporary directory; reuse one to resume a campaign)
#
# It prints one line per target (execs, new inputs kept, PASS/FAIL) and a
# summary; a failing target leaves its crasher in testdata/fuzz/<Target>
# (Go writes it there) and makes the script exit 1 after the others ran.
# `go test ./...` replays every committed input, so a fixed finding stays fixed.
set -uo pipefail
cd "$(dirname "$0")/.."

budget=${1:-2m}
only=${2:-.}
parallel=${FUZZ_PARALLEL:-1}
keep=${FUZZ_KEEP:-40}
cache=${FUZZ_CACHE:-$(mktemp -d)}
mkdir -p "$cache"

# target list: "<package dir> <Target>", benchcore excluded from nothing.
targets=$(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' . |
  grep -v '^./bench/' | sed -E 's#^\./(.*)/[^/]+_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]+)\(.*#\1 \2#' |
  sort -u | grep -E " .*${only}")

failed=0
printf '%-22s %-26s %12s %8s %s\n' package target execs kept result
while read -r dir target; do
  [ -n "$dir" ] || continue
  out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$budget" -parallel "$parallel" \
    "./$dir" -test.fuzzcachedir="$cache/$dir" 2>&1)
  rc=$?
  execs=$(printf '%s\n' "$out" | grep -oE 'execs: [0-9]+' | tail -1 | grep -oE '[0-9]+')
  # Keep the smallest new inputs: each found new coverage, small ones are
  # the readable, fast-to-replay ones.
  kept=0
  if [ -d "$cache/$dir/$target" ]; then
    mkdir -p "$dir/testdata/fuzz/$target"
    for f in $(ls -S -r "$cache/$dir/$target" | head -n "$keep"); do
      if [ ! -e "$dir/testdata/fuzz/$target/$f" ]; then
        cp "$cache/$dir/$target/$f" "$dir/testdata/fuzz/$target/$f"
        kept=$((kept + 1))
      fi
    done
  fi
  result=PASS
  if [ $rc -ne 0 ]; then
    result=FAIL
    failed=1
    printf '%s\n' "$out" | grep -E -- '--- FAIL|panic|Failing input|fuzz_test|_test.go' | head -20 >&2
  fi
  printf '%-22s %-26s %12s %8s %s\n' "$dir" "$target" "${execs:-?}" "$kept" "$result"
done <<<"$targets"
exit $failed
