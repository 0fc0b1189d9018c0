#!/usr/bin/env bash
# sweep_jobs.sh KVSIM SEEDS ARGS...: a sweep gives the same per-seed results (JSON lines,
# event hashes and probe hits included, and the final {"sweep": ...} line with its probe report,
# but for its wall_s and jobs) and the same text output for -j 1, 2 and 3, and its shards 0/3,
# 1/3, 2/3 together hold exactly its seeds with the same results.
set -eu
kvsim=$1; seeds=$2; shift 2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for j in 1 2 3; do
  "$kvsim" run "$@" --seeds "$seeds" -j $j --json --trace-dir "$tmp" |
    jq -c 'if .sweep then .sweep |= del(.wall_s, .jobs) else . end' > "$tmp/json.$j" || true
  "$kvsim" run "$@" --seeds "$seeds" -j $j --no-progress --trace-dir "$tmp" > "$tmp/text.$j" || true
done
[ "$(grep -vc '^{"sweep"' "$tmp/json.1")" -eq "$seeds" ] || { echo "expected $seeds JSON lines"; cat "$tmp/json.1"; exit 1; }
[ "$(grep -c '^{"sweep"' "$tmp/json.1")" -eq 1 ] || { echo "expected one sweep line last"; tail -2 "$tmp/json.1"; exit 1; }
for j in 2 3; do
  cmp -s "$tmp/json.1" "$tmp/json.$j" || { echo "-j $j JSON differs from -j 1"; diff "$tmp/json.1" "$tmp/json.$j"; exit 1; }
  cmp -s "$tmp/text.1" "$tmp/text.$j" || { echo "-j $j text differs from -j 1"; diff "$tmp/text.1" "$tmp/text.$j"; exit 1; }
done
: > "$tmp/shards"
for i in 0 1 2; do
  "$kvsim" run "$@" --seeds "$seeds" --shard $i/3 -j 2 --json --trace-dir "$tmp" >> "$tmp/shards" || true
done
# Per-seed lines only (each shard ends with its own sweep line).
grep -v '^{"sweep"' "$tmp/json.1" | sort > "$tmp/a"
grep -v '^{"sweep"' "$tmp/shards" | jq -c . | sort > "$tmp/b"
cmp -s "$tmp/a" "$tmp/b" || { echo "shards 0/3..2/3 do not partition the sweep"; diff "$tmp/a" "$tmp/b"; exit 1; }
echo "$seeds seeds: -j 1/2/3 identical ($(tail -1 "$tmp/text.1")); 3 shards partition them"
