#!/usr/bin/env bash
# The blind hunt against SGLang's own cache (docs/sglang-hunt.md), from the SGLang bundle:
#  1. seed 004's buggy commit (sglang-27659ea8c8): the hunt, told nothing of the bug, finds a
#     prefetch.abandoned_with_free_memory violation within the budget, and its trace replays;
#  2. its fix (sglang-4a04a9818e): the same hunt (same seeds) finds no failure of that kind;
#  3. the newest snapshot (sglang-6ed5780c4f): one whole hunt unit runs to its end, and a
#     failure it reports replays bit for bit (an open finding since session 26: below).
# Skips (exit 77) without torch or the bundle.
# Usage: hunt_seed004.sh KVSIM SOURCE_DIR WORK_DIR [BUDGET_S]
set -uo pipefail
# shellcheck source=bundle_env.sh
source "$(dirname "$0")/bundle_env.sh" "$@"

hunt() {  # hunt TAG DIR BUDGET -> exit code; JSON summary in DIR/hunt.json
  mkdir -p "$2"
  (cd "$2" && "$kvsim" hunt --target sglang --sglang-src "bundle:$1" --time-budget "$3" -j 1 \
     --no-shrink --json --trace-dir "$2" >"$2/hunt.json" 2>"$2/hunt.err")
}

hunt sglang-27659ea8c8 "$work/parent" 120; rc=$?  # stops at the first failure
first=$(jq -r '.hunt.failures[0].invariant // empty' "$work/parent/hunt.json" 2>/dev/null)
units=$(jq -r '.hunt.units // empty' "$work/parent/hunt.json" 2>/dev/null)
echo "parent 27659ea8c8: exit $rc, first failure: ${first:-none} after ${units:-?} units"
if [ "$rc" -ne 1 ] || [ "$first" != "prefetch.abandoned_with_free_memory" ]; then
  echo "FAIL: the blind hunt did not find seed 004's kind at its buggy commit"; tail -5 "$work/parent/hunt.err"; exit 1
fi
trace=$(jq -r '.hunt.failures[0].trace' "$work/parent/hunt.json")
"$kvsim" replay "$trace" >"$work/parent/replay.txt" 2>&1; rrc=$?
[ "$rrc" -eq 1 ] || { echo "FAIL: the trace did not replay to its violation (exit $rrc)"; cat "$work/parent/replay.txt"; exit 1; }
grep -q "prefetch.abandoned_with_free_memory" "$work/parent/replay.txt" ||
  { echo "FAIL: the replay names another violation"; cat "$work/parent/replay.txt"; exit 1; }
# The same trace against the fix: the driver runs the fixed tree, no violation of that kind.
# (--expect-clean: exit 0 exactly when the replay finds no violation.)
"$kvsim" replay "$trace" --sglang-src bundle:sglang-4a04a9818e --expect-clean >"$work/parent/fixed.txt" 2>&1 ||
  { echo "FAIL: the parent's trace is not clean at the fix"; cat "$work/parent/fixed.txt"; exit 1; }

hunt sglang-4a04a9818e "$work/fix" "$budget"; rc=$?
if grep -q "prefetch.abandoned_with_free_memory" "$work/fix/hunt.json"; then
  echo "FAIL: seed 004's kind found at its fix"; jq -c '.hunt.failures' "$work/fix/hunt.json"; exit 1
fi
echo "fix 4a04a9818e: exit $rc, $(jq -r '.hunt.units' "$work/fix/hunt.json") units, no failure of seed 004's kind"

# One whole unit (swarm seed 1, its requests capped for this target: seconds): a budget could end
# before it.
mkdir -p "$work/newest"
(cd "$work/newest" && "$kvsim" hunt --target sglang --sglang-src bundle:sglang-6ed5780c4f --units 1 \
   --time-budget 0 -j 1 --no-shrink --json --trace-dir "$work/newest" \
   >"$work/newest/hunt.json" 2>"$work/newest/hunt.err"); rc=$?
units=$(jq -r '.hunt.units' "$work/newest/hunt.json")
echo "newest 6ed5780c4f: exit $rc, $units unit(s)"
[ "$units" = "1" ] || { echo "FAIL: the unit at the newest snapshot did not finish"; tail -5 "$work/newest/hunt.err"; exit 1; }
# A unit that finds something must leave a trace that replays to it bit for bit. Since session
# 26 (the covering array's prefetch-threshold factor moved every swarm row), swarm seed 1 draws
# an SWA unit (window 8, pages of 5) that reports `content` on a node's device SWA KV at this
# snapshot: SGLang's SWA use-after-free when the window is not a page multiple (triaged in
# session 27: docs/sglang-hunt.md, "What it has found so far"), printed here, not hidden.
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 1 ] || { echo "FAIL: the hunt at the newest snapshot exited $rc"; tail -5 "$work/newest/hunt.err"; exit 1; }
  echo "newest 6ed5780c4f: open finding: $(jq -c '.hunt.failures[0] | {invariant, detail}' "$work/newest/hunt.json")"
  ntrace=$(jq -r '.hunt.failures[0].trace' "$work/newest/hunt.json")
  "$kvsim" replay "$ntrace" >"$work/newest/replay.txt" 2>&1; nrc=$?
  { [ "$nrc" -eq 1 ] && grep -q "replay matches the recording" "$work/newest/replay.txt"; } ||
    { echo "FAIL: the finding at the newest snapshot does not replay (exit $nrc)"; tail -5 "$work/newest/replay.txt"; exit 1; }
fi
echo "hunt_seed004: ok"
