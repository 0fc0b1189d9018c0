#!/usr/bin/env bash
# The mutation runner: each patch in tests/mutants/ puts one seed bug back into the fixed core
# the way a developer could have written it. For each one this script builds kvsim with the
# patch (incrementally, in a scratch worktree), hunts for it with the simulator on random seeds
# of the patch's scenarios within a wall-time budget, shrinks the first failure with
# `kvsim shrink`, checks that the shrunk trace fails on the mutant with the same invariant and
# passes on the fixed core, and prints a table. Exit status 1 if any mutant survives.
#
# Usage: tests/mutants/run_mutants.sh [--budget SECONDS] [--traces DIR] [--only NNN]
#   --budget   wall time per mutant for the hunt (default 60)
#   --traces   also copy each shrunk trace to DIR/seed-NNN.trace.jsonl (e.g. traces/)
#   --only     run one mutant (its id: 002, 003a, ...)
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
budget=60
failures_wanted=5
traces_out=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --traces) traces_out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "run_mutants.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done

work="$root/build/mutants"
src="$work/src"
build="$work/build"
out="$work/out"
mkdir -p "$work" "$out"

# A scratch worktree at HEAD: patches are applied there, never in the developer's checkout.
if [ ! -d "$src/.git" ] && [ ! -f "$src/.git" ]; then
  git -C "$root" worktree add --detach "$src" HEAD >/dev/null 2>&1 ||
    { git -C "$root" worktree prune; git -C "$root" worktree add --detach "$src" HEAD >/dev/null; }
fi
git -C "$src" checkout --detach -q "$(git -C "$root" rev-parse HEAD)"
git -C "$src" checkout -q -- .

generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSIM_CUDA=OFF \
    -DKVSIM_TESTS=OFF -DKVSIM_BENCH=OFF >/dev/null
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$build" --target kvsim -j"$jobs" >/dev/null
cp "$build/tools/kvsim" "$work/kvsim-fixed"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

json_field() {  # json_field NAME < line: the value of "NAME": (string or number)
  sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^,\"}]*\\).*/\\1/p" | head -1
}

rows=()
survivors=0
for patch in "$root"/tests/mutants/[0-9][0-9][0-9]*_*.patch; do
  id=$(basename "$patch" | cut -d_ -f1)  # the seed number, with a letter where a seed has two
  if [ -n "$only" ] && [ "$only" != "$id" ]; then continue; fi
  scenarios=$(sed -n 's/^# kvsim-mutant-scenarios: //p' "$patch")
  git -C "$src" checkout -q -- .
  if ! git -C "$src" apply "$patch" 2>"$out/apply-$id.log"; then
    echo "mutant $id: the patch no longer applies to HEAD (see $out/apply-$id.log)" >&2
    rows+=("$id|PATCH DOES NOT APPLY|-|-|-|-|-")
    survivors=$((survivors + 1))
    continue
  fi
  if ! cmake --build "$build" --target kvsim -j"$jobs" >"$out/build-$id.log" 2>&1; then
    echo "mutant $id: does not build (see $out/build-$id.log)" >&2
    rows+=("$id|BUILD FAILED|-|-|-|-|-")
    survivors=$((survivors + 1))
    continue
  fi
  kvsim="$build/tools/kvsim"
  caught=""
  start=$(now_ms)
  seeds=0
  ops=0
  first_wall=0
  for scenario in $scenarios; do
    left_ms=$((budget * 1000 - ($(now_ms) - start)))
    if [ "$left_ms" -le 0 ]; then break; fi
    left=$((left_ms / 1000)).$(printf '%03d' $((left_ms % 1000)))
    rm -f "$out"/kvsim-*.trace.jsonl
    # Up to $failures_wanted failing seeds: each is shrunk and the smallest kept (a first
    # failure is reported as the time to catch).
    hunt=$("$kvsim" run "$src/scenarios/$scenario.json" --seeds 100000000 \
      --max-failures "$failures_wanted" --time-budget "$left" --no-progress --json \
      --trace-dir "$out" || true)
    summary=$(printf '%s\n' "$hunt" | grep '"hunt"' || true)
    first=$(printf '%s' "$summary" | sed -n 's/.*"first_failure":{\([^}]*\)}.*/\1/p')
    if [ -n "$first" ]; then  # counts up to the first failure only
      seeds=$((seeds + $(printf '%s' "$first" | json_field seeds_tried)))
      ops=$((ops + $(printf '%s' "$first" | json_field ops)))
      first_wall=$(printf '%s' "$first" | json_field wall_s)
    else
      seeds=$((seeds + $(printf '%s' "$summary" | json_field seeds_tried)))
      ops=$((ops + $(printf '%s' "$summary" | json_field ops)))
    fi
    failing=$(printf '%s\n' "$hunt" | grep '"ok":false' || true)
    if [ -n "$failing" ]; then
      caught="$scenario"
      traces=()
      while read -r line; do
        # kvsim names each failing trace uniquely and lists it in --json as "trace".
        traces+=("$(printf '%s' "$line" | sed -n 's/.*"trace":"\([^"]*\)".*/\1/p')")
      done <<<"$failing"
      break
    fi
  done
  wall_ms=$(($(now_ms) - start))
  wall=$((wall_ms / 1000)).$((wall_ms % 1000 / 100))
  if [ -n "$caught" ]; then
    # Seeds, ops and wall time to the first failure come from kvsim's hunt summary (earlier
    # scenarios' budgets spent without a catch are not added: they are in the seeds column).
    wall=$(printf '%.3f' "$first_wall")
  fi
  if [ -z "$caught" ]; then
    rows+=("$id|SURVIVED|$wall|$seeds|$ops|-|-")
    survivors=$((survivors + 1))
    continue
  fi
  shrunk="$out/seed-$id.trace.jsonl"
  steps=""
  for trace in "${traces[@]}"; do
    candidate="$out/candidate.trace.jsonl"
    shrink=$("$kvsim" shrink "$trace" -o "$candidate" --json)
    n=$(printf '%s' "$shrink" | json_field shrunk_ops)
    if [ -z "$steps" ] || [ "$n" -lt "$steps" ]; then
      steps=$n
      invariant=$(printf '%s' "$shrink" | json_field invariant)
      cp "$candidate" "$shrunk"
    fi
  done
  # The shrunk trace must fail on the mutant with the same invariant and pass on the fixed core.
  on_mutant=$("$kvsim" replay "$shrunk" --json || true)
  if [ "$(printf '%s' "$on_mutant" | sed -n 's/.*"violation":{"detail":"[^"]*","invariant":"\([^"]*\)".*/\1/p')" != "$invariant" ]; then
    echo "mutant $id: the shrunk trace does not fail with $invariant on the mutant" >&2
    survivors=$((survivors + 1))
  fi
  if ! "$work/kvsim-fixed" replay "$shrunk" --expect-clean >/dev/null; then
    echo "mutant $id: the shrunk trace also fails on the fixed core" >&2
    survivors=$((survivors + 1))
  fi
  if [ -n "$traces_out" ]; then cp "$shrunk" "$traces_out/seed-$id.trace.jsonl"; fi
  rows+=("$id|caught ($caught)|$wall|$seeds|$ops|$invariant|$steps")
done
git -C "$src" checkout -q -- .

echo
echo "| mutant | result | seconds to first failure | seeds | ops executed | invariant | shrunk ops |"
echo "|---|---|---|---|---|---|---|"
for row in "${rows[@]}"; do
  echo "| ${row//|/ | } |"
done
if [ "$survivors" -gt 0 ]; then
  echo "$survivors mutant(s) survived or failed a check" >&2
  exit 1
fi
