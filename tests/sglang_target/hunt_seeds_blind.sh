#!/usr/bin/env bash
# Seeds 000-003 in SGLang's own code, from the SGLang bundle (docs/sglang-hunt.md; seed 004 has
# its own script, hunt_seed004.sh): at each seed's buggy commit the blind hunt (default seed, no
# hint of the bug) reaches the seed's kind within the budget. --until stops the hunt at that
# kind (--until-detail: seed 003's `content` of a resumed request's sparse index, not the
# `content` of a host KV that the write-back bug at that commit shows first); it changes only
# where the hunt stops, not what it draws or runs, so failures of other kinds present at these
# old commits (seed 004's, seed 002's) are passed over, as a developer reading the whole report
# would. That each kind is clean at its fix is checked by the replays
# of the shrunk traces (python/tests_target: test_mamba_units.py, test_hybrid_swa.py,
# test_retract_resume.py).
# Skips (exit 77) without torch or the bundle.
# Usage: hunt_seeds_blind.sh KVSIM SOURCE_DIR WORK_DIR [BUDGET_S]
set -uo pipefail
# shellcheck source=bundle_env.sh
source "$(dirname "$0")/bundle_env.sh" "$@"

failed=0
# seed TAG INVARIANT DETAIL: the hunt at TAG stops at INVARIANT, whose detail contains DETAIL.
seed() {
  local name=$1 tag=$2 invariant=$3 detail=$4 dir="$work/$1" rc
  mkdir -p "$dir"
  (cd "$dir" && "$kvsim" hunt --target sglang --sglang-src "bundle:$tag" --time-budget "$budget" \
     -j 1 --no-shrink --failures 100 --until "$invariant" --until-detail "$detail" --json \
     --trace-dir "$dir" \
     >"$dir/hunt.json" 2>"$dir/hunt.err")
  rc=$?
  local stopped last got at units
  stopped=$(jq -r '.hunt.stopped // empty' "$dir/hunt.json" 2>/dev/null)
  last=$(jq -r '.hunt.failures[-1] // empty | "\(.invariant)\t\(.detail)"' "$dir/hunt.json" 2>/dev/null)
  got=${last%%$'\t'*}
  at=$(jq -r '.hunt.failures[-1].wall_s // empty' "$dir/hunt.json" 2>/dev/null)
  units=$(jq -r '.hunt.units // empty' "$dir/hunt.json" 2>/dev/null)
  if [ "$rc" -eq 1 ] && [ "$stopped" = until ] && [ "$got" = "$invariant" ] &&
    [[ "${last#*$'\t'}" == *"$detail"* ]]; then
    printf 'seed %s at %s: %s after %.1f s (%s units)\n' "$name" "$tag" "$invariant" "$at" "$units"
  else
    echo "FAIL: seed $name at $tag: the blind hunt did not reach $invariant ('$detail') in $budget s" \
      "(exit $rc, stopped ${stopped:-?}, last failure: ${last:-none}, $units units)"
    tail -5 "$dir/hunt.err"
    failed=1
  fi
}
seed 000 sglang-900aad5f72 kernel_input ""
seed 001 sglang-82254bd9c5 residency.host_index_on_device ""
seed 002 sglang-c016246b0f lock.prefix_uncovered ""
seed 003 sglang-e264b5785d content "sparse index"
[ "$failed" -eq 0 ] && echo "hunt_seeds_blind: ok"
exit "$failed"
