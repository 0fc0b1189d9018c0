#!/usr/bin/env bash
# storage.sh KVSIM DIR SCENARIO: the file store as users run it, across processes.
#  1. two kvsim processes share one store directory at the same time (--storage-reuse, no
#     injected faults: a torn-write fault leaves a torn page on purpose), both clean, no temp
#     file left behind, and a third run on the result is clean with no damaged page to scrub;
#  2. a run on the warm store records its trace; the trace replays to the recorded hash from the
#     store kept next to it (<trace>.store), although the live store has moved on; without that
#     copy, replay refuses the live store (field cache.storage.digest) instead of running on it.
set -u
kvsim=$1; dir=$2; scenario=$3
rm -rf "$dir"; mkdir -p "$dir/store"
store="$dir/store"
fail() { echo "FAIL: $*"; exit 1; }

"$kvsim" run "$scenario" --storage-dir "$store" --seed 1 --no-faults >"$dir/fill.out" 2>&1 ||
  fail "filling run: $(cat "$dir/fill.out")"

"$kvsim" run "$scenario" --storage-dir "$store" --storage-reuse --seed 2 --seeds 3 --no-faults \
  --no-progress >"$dir/a.out" 2>&1 &
pa=$!
"$kvsim" run "$scenario" --storage-dir "$store" --storage-reuse --seed 7 --seeds 3 --no-faults \
  --no-progress >"$dir/b.out" 2>&1 &
pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
[ $ra -eq 0 ] || fail "process A exited $ra: $(cat "$dir/a.out")"
[ $rb -eq 0 ] || fail "process B exited $rb: $(cat "$dir/b.out")"
temps=$(find "$store" -name '*.tmp.*' | wc -l)
[ "$temps" -eq 0 ] || fail "$temps temp files left in the shared store"
"$kvsim" run "$scenario" --storage-dir "$store" --storage-reuse --seed 20 --no-faults \
  >"$dir/c.out" 2>&1 || fail "run after sharing: $(cat "$dir/c.out")"
grep -q " 0 damaged pages removed before the run" "$dir/c.out" ||
  fail "the shared store held damaged pages: $(cat "$dir/c.out")"
echo "two processes shared $store: ok"

trace="$dir/warm.trace.jsonl"
rec=$("$kvsim" run "$scenario" --storage-dir "$store" --storage-reuse --seed 4 \
  --record "$trace" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
[ -d "$trace.store" ] || fail "no store kept next to the trace"
grep -q '"digest"' "$trace" || fail "the trace header has no store digest"
rep=$("$kvsim" replay "$trace" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
[ -n "$rec" ] && [ "$rec" = "$rep" ] || fail "warm replay hash $rep != recorded $rec"
echo "a warm-store trace replays to its hash $rec"

rm -rf "$trace.store"
find "$store" -name '*.kvpage' | head -1 | xargs rm -f
out=$("$kvsim" replay "$trace" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "replay on another store exited $rc: $out"
printf '%s' "$out" | grep -q "field cache.storage.digest" || fail "unexpected message: $out"
echo "replay refuses another store: ok"
