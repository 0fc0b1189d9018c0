#!/usr/bin/env bash
# record_replay.sh KVSIM DIR ARGS...: record a run's op trace, replay it in a new process,
# and require the same event hash, op count and tick count.
set -eu
kvsim=$1; dir=$2; shift 2
mkdir -p "$dir"
trace="$dir/recorded.trace.jsonl"
run=$("$kvsim" run "$@" --record "$trace" --json)
rep=$("$kvsim" replay "$trace" --json)
for field in event_hash ops ticks; do
  a=$(printf '%s' "$run" | sed -n "s/.*\"$field\":\"\\{0,1\\}\\([0-9a-f]*\\).*/\\1/p")
  b=$(printf '%s' "$rep" | sed -n "s/.*\"$field\":\"\\{0,1\\}\\([0-9a-f]*\\).*/\\1/p")
  [ -n "$a" ] && [ "$a" = "$b" ] || { echo "replay $field $b != recorded $a"; exit 1; }
done
printf '%s' "$rep" | grep -q '"matches":true' || { echo "replay does not match: $rep"; exit 1; }
echo "replayed to the recorded hash, op count and tick count"
