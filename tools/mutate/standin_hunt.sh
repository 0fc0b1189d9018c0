#!/usr/bin/env bash
# A blind hunt for the mutation score until `kvsim hunt` exists: every named scenario (but the
# slow mooncake_synthetic) gets an equal share of the budget, random seeds, first failure wins.
# No scenario is chosen for the mutant. Same contract as `kvsim hunt`: exit 0 = nothing found,
# 1 = a violation found, 2 = bad input.
# Usage: standin_hunt.sh KVSIM BUDGET_SECONDS SCENARIO_DIR TRACE_DIR
set -uo pipefail
kvsim=$1 budget=$2 scenarios=$3 traces=$4
list=()
for s in "$scenarios"/*.json; do
  case "$(basename "$s")" in mooncake_synthetic.json) ;; *) list+=("$s") ;; esac
done
[ ${#list[@]} -gt 0 ] || { echo "standin_hunt: no scenarios in $scenarios" >&2; exit 2; }
share=$(awk -v b="$budget" -v n="${#list[@]}" 'BEGIN { printf "%.3f", b / n }')
for s in "${list[@]}"; do
  "$kvsim" run "$s" --seed 1 --seeds 100000000 --stop-at-first --time-budget "$share" \
    --no-progress --trace-dir "$traces" >"$traces/last.txt" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ]; then
    grep -m1 -E 'violation|seed [0-9]+:' "$traces/last.txt" | sed "s|^|$(basename "$s" .json): |"
    [ "$rc" -eq 2 ] && exit 2
    exit 1
  fi
done
exit 0
