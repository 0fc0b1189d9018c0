#!/usr/bin/env bash
# same_hash_twice.sh KVSIM ARGS...: two separate processes, same seed → same event hash.
set -eu
kvsim=$1; shift
a=$("$kvsim" run "$@" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
b=$("$kvsim" run "$@" --json | sed -n 's/.*"event_hash":"\([0-9a-f]*\)".*/\1/p')
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "hashes differ: $a vs $b"; exit 1; }
echo "same event hash in two processes: $a"
