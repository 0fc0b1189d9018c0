#!/usr/bin/env bash
# liveness_replay_shrink.sh KVSIM DIR SCENARIO: a liveness failure writes an op trace that
# replays to the same verdict ("matches", exit 1) and shrinks; two runs of one scenario write
# two traces (never overwriting), each listed in --json.
set -u
kvsim=$1; dir=$2; scenario=$3
rm -rf "$dir"; mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
a=$("$kvsim" run "$scenario" --json --trace-dir "$dir"); [ $? -eq 1 ] || fail "run: expected exit 1"
b=$("$kvsim" run "$scenario" --json --trace-dir "$dir" --full-every 2); [ $? -eq 1 ] || fail "second run"
ta=$(printf '%s' "$a" | sed -n 's/.*"trace":"\([^"]*\)".*/\1/p')
tb=$(printf '%s' "$b" | sed -n 's/.*"trace":"\([^"]*\)".*/\1/p')
[ -n "$ta" ] && [ -f "$ta" ] || fail "--json does not list the trace: $a"
[ -n "$tb" ] && [ -f "$tb" ] && [ "$ta" != "$tb" ] || fail "second run overwrote the first trace: $ta $tb"
printf '%s' "$a" | grep -q '"invariant":"liveness"' || fail "not a liveness failure: $a"
r=$("$kvsim" replay "$ta"); rc=$?
[ $rc -eq 1 ] || fail "replay exit $rc (expected 1): $r"
printf '%s' "$r" | grep -q "replay matches the recording (violation liveness)" || fail "replay: $r"
ops_run=$(printf '%s' "$a" | sed -n 's/.*"ops":\([0-9]*\).*/\1/p')
ops_rep=$("$kvsim" replay "$ta" --json | sed -n 's/.*"ops":\([0-9]*\).*/\1/p')
[ "$ops_run" = "$ops_rep" ] || fail "run reports $ops_run ops, replay $ops_rep"
s=$("$kvsim" shrink "$ta" -o "$dir/shrunk.trace.jsonl"); [ $? -eq 0 ] || fail "shrink: $s"
r=$("$kvsim" replay "$dir/shrunk.trace.jsonl"); rc=$?
[ $rc -eq 1 ] && printf '%s' "$r" | grep -q "matches the recording (violation liveness)" ||
  fail "shrunk trace replay (exit $rc): $r"
echo "liveness: replayed, shrunk ($s), two traces: $ta $tb"
