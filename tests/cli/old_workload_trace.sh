#!/usr/bin/env bash
# old_workload_trace.sh KVSIM OLD_TRACE: a workload trace in the token-list format (written by
# `kvsim gen` before prompts became recipes, for the default scenario, seed 1) replays to the
# same event hash as running the default scenario, seed 1, and as replaying the compact trace
# `kvsim gen` writes now; the compact one is several times smaller.
set -eu
kvsim=$1; old=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
hash() { sed -n 's/.*event hash \([0-9a-f]*\).*/\1/p'; }
a=$("$kvsim" replay "$old" | hash)
b=$("$kvsim" run --seed 1 | hash)
"$kvsim" gen --seed 1 -o "$tmp/new.jsonl" > /dev/null
c=$("$kvsim" replay "$tmp/new.jsonl" | hash)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] ||
  { echo "hashes differ: old trace $a, run $b, compact trace $c"; exit 1; }
old_size=$(stat -c %s "$old"); new_size=$(stat -c %s "$tmp/new.jsonl")
[ $((new_size * 2)) -lt "$old_size" ] || { echo "compact trace $new_size bytes vs $old_size"; exit 1; }
echo "old-format trace, run and compact trace: event hash $a; $old_size -> $new_size bytes"
