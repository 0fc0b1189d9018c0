#!/usr/bin/env bash
# The mutation runner: each patch in tests/mutants/ puts one seed bug back into the fixed core
# the way a developer could have written it. For each one this script builds kvsim with the
# patch (incrementally, in a scratch worktree), hunts for it BLIND with `kvsim hunt` (swarm
# configurations and every named scenario, round-robin, one core; the patch names no scenario)
# within a wall-time budget until its first failure, shrinks that failure (`kvsim shrink`),
# checks that the shrunk trace fails on the mutant with the same invariant and passes on the
# fixed core, and prints a table. Exit status 1 if any mutant survives.
#
# Usage: tests/mutants/run_mutants.sh [--budget SECONDS] [--traces DIR] [--only NNN] [--seed S]
#   --budget   wall time per mutant for the hunt, until its first failure (default 60)
#   --seed     the hunt's base seed (default 1)
#   --traces   also copy each shrunk trace to DIR/seed-NNN.trace.jsonl (e.g. traces/)
#   --only     run one mutant (its id: 002, 003a, ...)
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
budget=60
hunt_seed=1
# Replays per shrink: kvsim hunt's own bound. A replay count, not wall time, so the shrunk
# trace (and the table's size) is the same on every machine.
shrink_replays=5000
traces_out=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=$2; shift 2 ;;
    --traces) traces_out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --seed) hunt_seed=$2; shift 2 ;;
    *) echo "run_mutants.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done

work="$root/build/mutants"
src="$work/src"
# The build folder sits in the copy at the depth of the checkout's build/default, so with
# CCACHE_BASEDIR at the checkout every compile command reads the same relative paths as the
# developer's (or CI's) own hardened build and is served from its cache: only the patched file
# is compiled (tools/test.sh builds CI's default preset hardened for this).
build="$src/build/mutant"
out="$work/out"
mkdir -p "$work" "$out"

# A scratch worktree at HEAD: patches are applied there, never in the developer's checkout.
if [ ! -d "$src/.git" ] && [ ! -f "$src/.git" ]; then
  git -C "$root" worktree add --detach "$src" HEAD >/dev/null 2>&1 ||
    { git -C "$root" worktree prune; git -C "$root" worktree add --detach "$src" HEAD >/dev/null; }
fi
# -f: the copy is scratch; tools/mutation_score.sh (KVSIM_MUTATION_WORK=build/mutants, as CI
# runs it) syncs the working tree into it, and an interrupted run leaves a patch applied.
git -C "$src" checkout -f --detach -q "$(git -C "$root" rev-parse HEAD)"
git -C "$src" checkout -q -- .

export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR=1
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
# Hardened (libstdc++ assertions), like tools/mutation_score.sh, which reuses this build in CI.
# KVSIM_UNITY as the build whose compiler cache serves this one (tools/test.sh sets it in CI).
if [ ! -f "$build/CMakeCache.txt" ] || ! grep -q "KVSIM_HARDENED:BOOL=ON" "$build/CMakeCache.txt" ||
  ! grep -q "KVSIM_UNITY:BOOL=${KVSIM_UNITY:-OFF}" "$build/CMakeCache.txt"; then
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S "$src" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DKVSIM_CUDA=OFF \
    -DKVSIM_TESTS=OFF -DKVSIM_BENCH=OFF -DKVSIM_PYTHON=OFF -DKVSIM_HARDENED=ON \
    -DKVSIM_WERROR=OFF -DKVSIM_UNITY="${KVSIM_UNITY:-OFF}" "${launcher[@]}" >/dev/null
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
  # The blind hunt: swarm configurations and every named scenario, round-robin, on one core,
  # with no hint from the patch. It stops at its first failure (caught or not, and the time to
  # catch, are what the runner measures); that failure is shrunk below, by a replay bound.
  rm -rf "${out:?}/$id" && mkdir -p "$out/$id"
  hunt=$("$kvsim" hunt --time-budget "$budget" --seed "$hunt_seed" --failures 1 --no-shrink \
    -j 1 --json --trace-dir "$out/$id" --scenarios "$src/scenarios" | grep '^{"hunt":' || true)
  if [ -z "$hunt" ] || ! printf '%s' "$hunt" | jq -e .hunt >/dev/null 2>&1; then
    echo "mutant $id: kvsim hunt gave no summary" >&2
    rows+=("$id|HUNT FAILED|-|-|-|-|-")
    survivors=$((survivors + 1))
    continue
  fi
  found=$(printf '%s' "$hunt" | jq '.hunt.failures | length')
  if [ "$found" -eq 0 ]; then
    wall=$(printf '%s' "$hunt" | jq -r '.hunt.wall_s | . * 10 | floor / 10')
    rows+=("$id|SURVIVED|$wall|$(printf '%s' "$hunt" | jq -r .hunt.units)|$(printf '%s' "$hunt" | jq -r .hunt.ops)|-|-")
    survivors=$((survivors + 1))
    continue
  fi
  first=$(printf '%s' "$hunt" | jq -c '.hunt.failures | min_by(.unit)')
  wall=$(printf '%s' "$first" | jq -r '.wall_s * 1000 | floor / 1000')
  seeds=$(printf '%s' "$first" | jq -r .units_tried)
  ops=$(printf '%s' "$first" | jq -r .ops_before)
  if [ "$(printf '%s' "$first" | jq -r .invariant)" = hang ]; then
    # A unit that outran kvsim hunt's --unit-timeout: caught, with a scenario and seed to rerun
    # (no op trace: the run never ended).
    rows+=("$id|caught (hang: $(printf '%s' "$first" | jq -r .replay))|$wall|$seeds|$ops|hang|-")
    continue
  fi
  caught=$(printf '%s' "$first" | jq -r .source)
  invariant=$(printf '%s' "$first" | jq -r .invariant)
  shrunk="$out/seed-$id.trace.jsonl"
  shrink=$("$kvsim" shrink "$(printf '%s' "$first" | jq -r .trace)" -o "$shrunk" \
    --max-replays "$shrink_replays" --json 2>"$out/shrink-$id.log" || true)
  steps=$(printf '%s' "$shrink" | jq -r '.shrunk_ops // empty' 2>/dev/null || true)
  if [ -z "$steps" ] || [ ! -s "$shrunk" ]; then
    echo "mutant $id: its failing trace did not shrink (see $out/shrink-$id.log)" >&2
    rows+=("$id|caught, NOT SHRUNK|$wall|$seeds|$ops|$invariant|-")
    survivors=$((survivors + 1))
    continue
  fi
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
