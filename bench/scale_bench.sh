#!/usr/bin/env bash
# scale_bench.sh [KVSIM] [RUNS=3]: the scale figures of docs/benchmarks.md ("Scale: memory,
# long traces, parallel sweeps"), each next to the command that produced it. Wall time and
# user CPU time are the median of RUNS runs; peak memory is the largest resident set
# (/usr/bin/time -f %M). Single runs are pinned to one core when taskset exists.
# Needs /usr/bin/time (Debian package `time`). Takes about 2 minutes on an idle 2-core box.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kvsim=$(realpath "${1:-$here/build/default/tools/kvsim}")
runs=${2:-3}
[ -x /usr/bin/time ] || { echo "scale_bench: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
pin=(); command -v taskset >/dev/null && pin=(taskset -c 0)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# measure NAME CMD...: runs CMD `runs` times; prints median wall/user and max peak MB.
measure() {
  local name=$1; shift
  : > "$tmp/times"
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %U %M" -o "$tmp/t" "$@" > "$tmp/out" 2>&1 || {
      echo "scale_bench: $name failed:"; cat "$tmp/out"; exit 1; }
    cat "$tmp/t" >> "$tmp/times"
  done
  local wall user peak
  wall=$(cut -d' ' -f1 "$tmp/times" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  user=$(cut -d' ' -f2 "$tmp/times" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  peak=$(cut -d' ' -f3 "$tmp/times" | sort -n | tail -1)
  printf '%-34s wall %6.2f s  user %6.2f s  peak %5d MB\n' "$name" "$wall" "$user" $((peak / 1024))
}

echo "kvsim: $kvsim; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== kvsim run scenarios/mooncake_synthetic.json (every check: content, amortized full walk)"
measure "mooncake_synthetic run" "${pin[@]}" "$kvsim" run "$here/scenarios/mooncake_synthetic.json"
grep -E "seed [0-9]+: |event hash" "$tmp/out" | sed 's/^/    /'

echo "== 3x Mooncake trace (bench/mooncake_repeat.sh: 3 copies, ids and timestamps offset)"
"$here/bench/mooncake_repeat.sh" "$here/traces/public/mooncake_synthetic_trace.jsonl" "$tmp/x3.jsonl" 3 |
  sed 's/^/    /'
measure "import-mooncake x3" "${pin[@]}" "$kvsim" import-mooncake "$tmp/x3.jsonl" -o "$tmp/x3.workload.jsonl" \
  --scenario "$here/scenarios/mooncake_synthetic.json"
printf '    Mooncake input %d MB -> workload trace %d MB\n' \
  $(( $(stat -c %s "$tmp/x3.jsonl") / 1048576 )) $(( $(stat -c %s "$tmp/x3.workload.jsonl") / 1048576 ))
sed -e "s|\"../traces/public/mooncake_synthetic_trace.jsonl\"|\"$tmp/x3.jsonl\"|" \
    -e 's|"requests": 3993|"requests": 11979|' -e 's|"name": "mooncake_synthetic"|"name": "mooncake_x3"|' \
    "$here/scenarios/mooncake_synthetic.json" > "$tmp/x3.json"
measure "run x3 (scenario on the trace)" "${pin[@]}" "$kvsim" run "$tmp/x3.json"
grep -E "seed [0-9]+: |event hash" "$tmp/out" | sed 's/^/    /'
measure "replay x3 (imported workload)" "${pin[@]}" "$kvsim" replay "$tmp/x3.workload.jsonl"
grep -E "seed [0-9]+: |event hash" "$tmp/out" | sed 's/^/    /'

echo "== kvsim run --seeds 200 (default scenario), -j 1 vs -j 2"
measure "seeds 200 -j 1" "$kvsim" run --seeds 200 -j 1 --no-progress
j1=$(cut -d' ' -f1 "$tmp/times" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
grep "seeds from" "$tmp/out" | sed 's/^/    /'
measure "seeds 200 -j 2" "$kvsim" run --seeds 200 -j 2 --no-progress
j2=$(cut -d' ' -f1 "$tmp/times" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
grep "seeds from" "$tmp/out" | sed 's/^/    /'
awk -v a="$j1" -v b="$j2" 'BEGIN { printf "    speed-up -j 2 over -j 1: %.2fx\n", a / b }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
