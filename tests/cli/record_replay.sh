#!/usr/bin/env bash
# record_replay.sh KVSIM DIR ARGS...: record a run's op trace, replay it in a new process,
# and require the same event hash.
set -eu
kvsim=$1; dir=$2; shift 2
mkdir -p "$dir"
trace="$dir/recorded.trace.jsonl"
a=$("$kvsim" run "$@" --record "$trace" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
b=$("$kvsim" replay "$trace" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "replay hash $b != recorded $a"; exit 1; }
echo "replayed to the recorded hash $a"
