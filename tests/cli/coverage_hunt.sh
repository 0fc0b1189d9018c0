#!/usr/bin/env bash
# tools/coverage.sh --hunt: a short hunt's coverage of core/ is printed, counts the worker's
# units (the parent process runs none: without the worker's per-unit profile writes, files only
# units touch would show 0 lines), includes the rebuild check's snapshot/restore, and names the
# CUDA backend as not counted. Needs clang and the coverage preset's build (minutes from cold);
# not in the default ctest run. Usage: coverage_hunt.sh SOURCE_DIR [SECONDS]
set -euo pipefail
src=$1 seconds=${2:-5}
out=$("$src/tools/coverage.sh" --hunt "$seconds" 2>&1) || { printf '%s\n' "$out"; exit 1; }
fail() { printf 'coverage_hunt: %s\n--- output (tail) ---\n%s\n' "$1" "$(printf '%s\n' "$out" | tail -40)"; exit 1; }
total=$(printf '%s\n' "$out" | grep -E '^core/ total: lines [0-9.]+ %' ) || fail "no core/ total line"
lines=$(printf '%s\n' "$total" | sed -E 's/^core\/ total: lines ([0-9]+)\..*/\1/')
[ "$lines" -ge 50 ] || fail "core/ line coverage $lines % (a hunt alone reaches ~80 %; the worker's counts lost?)"
for f in core/tree/radix_tree_insert.cpp core/tree/radix_tree_snapshot.cpp core/tree/wide_ids.cpp; do
  row=$(printf '%s\n' "$out" | grep -E "^$f ") || fail "no row for $f"
  covered=$(printf '%s\n' "$row" | awk '{split($3, a, "/"); print a[1]}')
  [ "$covered" -gt 0 ] || fail "$f: no line executed by the hunt"
done
printf '%s\n' "$out" | grep -q 'not counted: core/backend/cuda/' || fail "the CUDA backend is not named"
printf '%s\n' "$total"
