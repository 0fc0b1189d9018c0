#!/usr/bin/env bash
# Mutation score of the core under a BLIND hunt (docs/mutation-score.md). Enumerates source
# mutants of core/tree, core/cache and core/tiers (tools/mutate/mutate.py), picks a sample,
# and for each one: applies it to a private copy of the tree (build/mutation/src), builds kvsim
# incrementally (ccache), and hunts it blind for --budget seconds with no scenario hint.
#   stillborn   the mutant does not compile (not counted)
#   equivalent  its object file, debug info stripped, is byte-identical to the original's (not
#               counted); others judged equivalent by inspection are listed in the doc
#   killed      the hunt found a violation (exit 1), crashed, or hung past 2 x budget + 30 s
#   survived    the hunt ran its budget and found nothing (exit 0)
# score = killed / (total - stillborn - equivalent). Prints a table, the score, and each
# survivor's diff with the probes its code sits behind (the probes of the same function).
#
# Usage: tools/mutation_score.sh [--sample N] [--seed S] [--budget SECONDS] [--unit-tests]
#                                [--min-score PERCENT] [--files "FILE..."] [--list]
#                                [--shard I/N] [--results FILE] [--ids "ID..."]
#        tools/mutation_score.sh --merge FILE...
#   --sample N     mutants to pick (default 15; 0 = every mutant)
#   --seed S       the sample's seed (default 1)
#   --budget S     blind-hunt seconds per mutant (default 60)
#   --unit-tests   also run the mutated module's unit tests (a separate column, not the score)
#   --min-score P  exit 1 if the score is below P percent (default: no threshold)
#   --files "..."  the files to mutate (default below); --list prints the mutants and exits
#   --shard I/N    run only the sampled mutants whose id i has i % N == I, in its own work folder
#                  ($KVSIM_MUTATION_WORK or build/mutation, suffixed -shardI), so N shards run
#                  side by side, one per core
#   --results FILE also write the rows as TSV (default: <work>/score-out/results.tsv)
#   --ids "ID..."  hunt exactly these mutant ids instead of a sample (e.g. the survivors of an
#                  earlier run, re-hunted after a harness change; ids are those of --list)
#   --merge FILE.. print one table and one score from several shards' results files (same
#                  sample, seed and budget), with the survivors' diffs; runs nothing
# The hunt: HUNT_CMD, a command template with {kvsim} {budget} {scenarios} {traces}. Default:
# `{kvsim} hunt --time-budget {budget}` when kvsim has a hunt subcommand, otherwise the stand-in
# tools/mutate/standin_hunt.sh (every scenario, equal share of the budget, first failure).
set -euo pipefail
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
sample=15
only_ids=""
seed=1
budget=60
unit=0
min_score=""
list_only=0
shard_i=0
shard_n=1
results=""
# file_storage.cpp: no simulator path uses it; sha256.cpp: a hash; hi_cache_options.cpp:
# parsing and names; storage_backend.cpp: status names; radix_tree_sanity.cpp and
# hi_cache_sanity.cpp: checking code only. Checking functions (sanity_check, check_*) are
# skipped inside mutate.py.
files="core/tree/child_list.cpp core/tree/eviction_policy.cpp core/tree/full_component.cpp
core/tree/leaf_order.cpp core/tree/mamba_component.cpp core/tree/radix_tree.cpp
core/tree/radix_tree_aux.cpp core/tree/radix_tree_evict.cpp core/tree/radix_tree_insert.cpp
core/tree/radix_tree_locks.cpp core/tree/radix_tree_match.cpp core/tree/radix_tree_residency.cpp
core/tree/radix_tree_snapshot.cpp core/tree/swa_component.cpp core/tree/wide_ids.cpp
core/cache/hi_cache.cpp core/cache/hi_cache_load_back.cpp core/cache/hi_cache_side_pools.cpp
core/cache/hi_cache_storage.cpp core/cache/request_kv.cpp core/cache/side_pool.cpp
core/tiers/cache_controller.cpp core/tiers/memory_storage.cpp core/tiers/page_hash.cpp"
while [ $# -gt 0 ]; do
  case "$1" in
    --sample) sample=$2; shift 2 ;;
    --ids) only_ids=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --unit-tests) unit=1; shift ;;
    --min-score) min_score=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --list) list_only=1; shift ;;
    --shard)
      case "$2" in
        [0-9]*/[0-9]*) shard_i=${2%%/*}; shard_n=${2##*/} ;;
        *) echo "mutation_score.sh: --shard: expected I/N (e.g. 0/2), got '$2'" >&2; exit 2 ;;
      esac
      case "$shard_i$shard_n" in *[!0-9]*) echo "mutation_score.sh: --shard: expected I/N (e.g. 0/2), got '$2'" >&2; exit 2 ;; esac
      if [ "$shard_n" -lt 1 ] || [ "$shard_i" -ge "$shard_n" ]; then
        echo "mutation_score.sh: --shard: need 0 <= I < N, got '$2'" >&2; exit 2
      fi
      shift 2 ;;
    --results) results=$2; shift 2 ;;
    --merge) shift; exec python3 "$root/tools/mutate/merge_scores.py" --root "$root" "$@" ;;
    *) echo "mutation_score.sh: unknown argument '$1' (see the header for usage)" >&2; exit 2 ;;
  esac
done
for v in "$sample" "$seed" "$budget"; do
  case "$v" in '' | *[!0-9]*) echo "mutation_score.sh: --sample, --seed and --budget take whole numbers" >&2; exit 2 ;; esac
done
mutate() { (cd "$root" && python3 tools/mutate/mutate.py "$@"); }
# shellcheck disable=SC2086
if [ "$list_only" = 1 ]; then mutate list $files; exit 0; fi
if [ -n "$only_ids" ]; then  # checked before the minutes of building and the baseline hunt
  # shellcheck disable=SC2086
  n_sites=$(mutate count $files)
  for i in $only_ids; do
    case "$i" in *[!0-9]*) echo "mutation_score.sh: --ids: '$i' is not a mutant id" >&2; exit 2 ;; esac
    if [ "$i" -ge "$n_sites" ]; then
      echo "mutation_score.sh: --ids: $i: there are only $n_sites mutants (0..$((n_sites - 1)))" >&2
      exit 2
    fi
  done
fi

# KVSIM_MUTATION_WORK: where the copy and its build live (CI reuses the mutation runner's,
# build/mutants, whose src and build have the same layout). Compile commands relative to the
# checkout (CCACHE_BASEDIR) match the checkout's own hardened build's.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}" CCACHE_NOHASHDIR=1
work="${KVSIM_MUTATION_WORK:-$root/build/mutation}"
case "$work" in /*) ;; *) work="$root/$work" ;; esac
if [ "$shard_n" -gt 1 ]; then work="$work-shard$shard_i"; fi  # a copy and a build per shard
src="$work/src"
build="$src/build/mutant"  # at the depth of build/default: ccache serves the unchanged files
out="$work/score-out"
pristine="$work/pristine"
mkdir -p "$src" "$out" "$pristine"
rm -rf "${out:?}"/*
python3 "$root/tools/mutate/sync_tree.py" "$root" "$src" >/dev/null
for f in $files; do mkdir -p "$pristine/$(dirname "$f")"; cp "$root/$f" "$pristine/$f"; done
# From here on every enumeration (the sample, each mutant's file and label, the survivors'
# diffs) reads the snapshot this run mutates, with the copy's mutate.py, never the live
# checkout: an edit of core/ while a run goes on moved the live ids under a session-24 run, so
# labels, the equivalence test's object and the file restored named other mutants' files.
mutate() { (cd "$pristine" && python3 "$src/tools/mutate/mutate.py" "$@"); }

tests_flag=OFF
if [ "$unit" = 1 ]; then tests_flag=ON; fi
if [ ! -f "$build/CMakeCache.txt" ] || ! grep -q "KVSIM_TESTS:BOOL=$tests_flag" "$build/CMakeCache.txt" ||
  ! grep -q "KVSIM_HARDENED:BOOL=ON" "$build/CMakeCache.txt" ||
  ! grep -q "KVSIM_UNITY:BOOL=${KVSIM_UNITY:-OFF}" "$build/CMakeCache.txt"; then
  # KVSIM_UNITY as the build whose compiler cache serves this one (tools/test.sh sets it in CI)
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSIM_CUDA=OFF \
    -DKVSIM_TESTS="$tests_flag" -DKVSIM_BENCH=OFF -DKVSIM_HARDENED=ON -DKVSIM_WERROR=OFF \
    -DKVSIM_UNITY="${KVSIM_UNITY:-OFF}" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
jobs=${KVSIM_MUTATION_JOBS:-2}
build_kvsim() { nice cmake --build "$build" --target kvsim -j"$jobs"; }
echo "mutation score: building the original in $build"
build_kvsim >"$out/build-original.log" 2>&1 || { echo "the original does not build: $out/build-original.log" >&2; exit 2; }

object_of() {  # object_of core/tree/radix_tree.cpp -> its .o in the build dir
  local dir mod
  dir=$(dirname "$1")
  mod=$(basename "$dir")
  echo "$build/$dir/CMakeFiles/kvsim_$mod.dir/$(basename "$1").o"
}
stripped() { objcopy --strip-debug "$1" "$2"; }
for f in $files; do
  o=$(object_of "$f")
  [ -f "$o" ] || { echo "mutation_score.sh: no object $o for $f" >&2; exit 2; }
  mkdir -p "$pristine/obj/$(dirname "$f")"
  stripped "$o" "$pristine/obj/$f.o"
done

kvsim="$build/tools/kvsim"
if [ -z "${HUNT_CMD:-}" ]; then
  if "$kvsim" --help 2>/dev/null | grep -qE '^ +hunt( |$)'; then
    # --no-shrink: the score needs the first failure, not a small trace; shrinking a long
    # (e.g. liveness) trace on a mutant can outlast the 2 x budget + 30 s limit, which read as
    # "killed (hang)" with no output although the hunt had found the failure in seconds.
    # --probes: the probe list probe_drop.py compares (without it the hunt prints one line).
    HUNT_CMD='{kvsim} hunt --time-budget {budget} --no-shrink --probes --scenarios {scenarios} --trace-dir {traces}'
  else
    HUNT_CMD="$root/tools/mutate/standin_hunt.sh {kvsim} {budget} {scenarios} {traces}"
  fi
fi
echo "mutation score: hunt = $HUNT_CMD"
# run_hunt TRACES LOG: runs HUNT_CMD on the current build, traces into TRACES, output to LOG; its
# exit status (124/137 when it outran 2 x budget + 30 s).
run_hunt() {
  local c=${HUNT_CMD//\{kvsim\}/$kvsim}
  c=${c//\{budget\}/$budget}
  c=${c//\{scenarios\}/$src/scenarios}
  c=${c//\{traces\}/$1}
  timeout $((budget * 2 + 30)) bash -c "$c" >"$2" 2>&1
}

# The baseline: the same hunt on the unmutated core must find nothing, or every mutant that
# survives until the original's own failure would be counted as killed.
baseline_traces="$out/traces-original"
mkdir -p "$baseline_traces"
echo "mutation score: hunting the original core for $budget s (it must be clean)"
set +e
run_hunt "$baseline_traces" "$out/hunt-original.log"
baseline_rc=$?
set -e
if [ "$baseline_rc" -ne 0 ]; then
  echo "mutation score: the hunt fails on the ORIGINAL core (exit $baseline_rc): no score is" \
    "possible until it is clean; see $out/hunt-original.log" >&2
  exit 2
fi
rm -rf "$baseline_traces"  # the log stays: probe_drop.py compares each mutant's probes with it

# shellcheck disable=SC2086
total_sites=$(mutate count $files)
if [ -n "$only_ids" ]; then
  ids=$only_ids
elif [ "$sample" = 0 ]; then
  # shellcheck disable=SC2086
  ids=$(mutate list $files | cut -f1)
else
  # shellcheck disable=SC2086
  ids=$(mutate sample --sample "$sample" --seed "$seed" $files)
fi
sampled=$(echo "$ids" | wc -w)
if [ "$shard_n" -gt 1 ]; then
  ids=$(for i in $ids; do if [ $((i % shard_n)) -eq "$shard_i" ]; then echo "$i"; fi; done)
fi
n_ids=$(echo "$ids" | wc -w)
echo "mutation score: $n_ids of $total_sites mutants (seed $seed, shard $shard_i/$shard_n of a sample of $sampled), blind hunt $budget s each"

now() { date +%s; }
killed=0 survived=0 stillborn=0 equivalent=0 errors=0 unit_killed=0 probe_killed=0
rows=()
survivors=()
restore() { cp "$pristine/$1" "$src/$1"; }  # a fresh mtime: the next build recompiles it
for id in $ids; do
  # shellcheck disable=SC2086
  file=$(mutate show --id "$id" --format '{file}' $files)
  # shellcheck disable=SC2086
  where=$(mutate show --id "$id" --format '{file}:{line} {op}' $files)
  mutate apply --id "$id" --root "$src" $files  # reads the pristine files, writes the copy
  start=$(now)
  result=""
  unit_col="-"
  if ! build_kvsim >"$out/build-$id.log" 2>&1; then
    result="stillborn"
    stillborn=$((stillborn + 1))
  else
    stripped "$(object_of "$file")" "$out/mutant.o"
    if cmp -s "$out/mutant.o" "$pristine/obj/$file.o"; then
      result="equivalent"
      equivalent=$((equivalent + 1))
    else
      traces="$out/traces-$id"
      mkdir -p "$traces"
      set +e
      run_hunt "$traces" "$out/hunt-$id.log"
      rc=$?
      set -e
      case "$rc" in
        0)
          # No violation: did the hunt still take every path the original takes often? A code
          # probe the baseline reached hundreds of times that this hunt never reached is a
          # behaviour change it observed (tools/mutate/probe_drop.py).
          # probe_drop.py: 0 nothing dropped, 1 a probe dropped, 2 a log it cannot read (an
          # error of the tool, never a kill).
          drop_rc=0
          dropped=$(python3 "$root/tools/mutate/probe_drop.py" "$out/hunt-original.log" "$out/hunt-$id.log") || drop_rc=$?
          case $drop_rc in
            0) result="survived"; survived=$((survived + 1)); survivors+=("$id") ;;
            1) result="killed (probe ${dropped%% *})"; killed=$((killed + 1)); probe_killed=$((probe_killed + 1)) ;;
            *) result="error (probe_drop.py exit $drop_rc)"; errors=$((errors + 1)) ;;
          esac ;;
        1) result="killed"; killed=$((killed + 1)) ;;
        2) result="error"; errors=$((errors + 1)) ;;
        124 | 137) result="killed (hang)"; killed=$((killed + 1)) ;;
        *) result="killed (crash $rc)"; killed=$((killed + 1)) ;;
      esac
      rm -rf "$traces"
      if [ "$unit" = 1 ]; then
        mod=$(basename "$(dirname "$file")")
        if nice cmake --build "$build" --target "kvsim_${mod}_tests" -j"$jobs" >"$out/unit-$id.log" 2>&1 &&
          timeout 120 "$build/tests/kvsim_${mod}_tests" >>"$out/unit-$id.log" 2>&1; then
          unit_col="survived"
        else
          unit_col="killed"
          unit_killed=$((unit_killed + 1))
        fi
      fi
    fi
  fi
  restore "$file"
  secs=$(($(now) - start))
  rows+=("$id|$where|$result|$unit_col|$secs")
  printf 'mutant %5s  %-48s %-18s %4ss\n' "$id" "$where" "$result" "$secs"
done
build_kvsim >/dev/null 2>&1 || true  # leave the copy built as the original

results=${results:-$out/results.tsv}
{
  echo "# kvsim mutation score results: seed $seed sample $sample sampled $sampled budget $budget shard $shard_i/$shard_n total_sites $total_sites"
  echo "# files $(echo $files)"
  for r in "${rows[@]}"; do printf '%s\n' "$r" | tr '|' '\t'; done
} >"$results"
echo "mutation score: rows written to $results (merge shards with --merge)"
counted=$((n_ids - stillborn - equivalent - errors))
score="n/a"
if [ "$counted" -gt 0 ]; then score=$(awk -v k="$killed" -v c="$counted" 'BEGIN { printf "%.1f", 100 * k / c }'); fi
echo
echo "| id | site | operator | blind hunt | unit tests | s |"
echo "|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
  IFS='|' read -r id where result unit_col secs <<<"$r"
  echo "| $id | ${where% *} | ${where##* } | $result | $unit_col | $secs |"
done
echo
echo "mutation score: $killed killed of $counted counted = $score % (sample of $n_ids of $total_sites mutants, seed $seed, budget $budget s; $stillborn stillborn, $equivalent equivalent (identical object), $errors hunt errors, $survived survived; $probe_killed of the killed by a probe no longer reached)"
if [ "$unit" = 1 ]; then echo "unit tests alone kill $unit_killed of $counted"; fi
if [ ${#survivors[@]} -gt 0 ]; then
  echo
  echo "survivors (judge each: a missing check or workload, or equivalent by inspection):"
  for id in "${survivors[@]}"; do
    echo
    # shellcheck disable=SC2086
    mutate show --id "$id" --format '--- mutant {id}: {file}:{line} {op} in {function}(); probes of that function: {probes}' $files
    # shellcheck disable=SC2086
    mutate diff --id "$id" $files
  done
fi
if [ "$errors" -gt 0 ]; then echo "mutation score: $errors hunts ended with bad input (exit 2): see $out" >&2; exit 2; fi
if [ -n "$min_score" ] && [ "$counted" -gt 0 ] &&
  awk -v s="$score" -v m="$min_score" 'BEGIN { exit !(s < m) }'; then
  echo "mutation score: $score % is below --min-score $min_score" >&2
  exit 1
fi
exit 0
