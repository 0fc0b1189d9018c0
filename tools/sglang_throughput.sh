#!/usr/bin/env bash
# Throughput of the SGLang target (SGLang's own HiRadixCache driven by kvsim, docs/sglang-hunt.md)
# against kvsim's core on the same hunt units: the same swarm seeds 1..UNITS, each drawn scenario
# fitted to its target (sim/campaign/target_fit.cpp: SGLang's units are capped to ~800 ops, the
# core's run as drawn, so compare ops/s), run one after another on one core (-j 1).
#
#   tools/sglang_throughput.sh [UNITS] [SGLANG_SRC]      (defaults: 6, bundle:sglang-6ed5780c4f)
#
# Prints per target: units, ops, wall seconds, ops/s and units per minute (wall clock, with the
# fork server: one driver start per kvsim process); then the CPU seconds of kvsim plus the fork
# server and its forked drivers (the server waits for them, kvsim for the server), the server's
# one start included, and ops/s and units per minute per core from them. Wall figures on a shared
# machine depend on its load (printed); CPU seconds less so.
# Needs /usr/bin/python3 with torch and the SGLang bundle (../shared/sglang) for bundle: sources.
# KVSIM=path/to/kvsim (default: build/default/tools/kvsim).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/default/tools/kvsim}"
UNITS="${1:-6}"
SRC="${2:-bundle:sglang-6ed5780c4f}"
[ -x "$KVSIM" ] || { echo "build kvsim first ($KVSIM), or set KVSIM" >&2; exit 2; }
command -v jq >/dev/null || { echo "needs jq" >&2; exit 2; }
export KVSIM_SOURCE_DIR="${KVSIM_SOURCE_DIR:-$ROOT}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/no-scenarios"  # no named scenarios: every unit is a swarm unit

hunt() {  # hunt NAME [flags...] -> NAME.json, NAME.time (user sys wall)
  local name="$1"; shift
  /usr/bin/time -f "%U %S %e" -o "$WORK/$name.time" "$KVSIM" hunt --units "$UNITS" --time-budget 0 -j 1 \
    --unit-timeout 0 --no-shrink --failures "$UNITS" --json --scenarios "$WORK/no-scenarios" \
    --trace-dir "$WORK/$name" "$@" \
    >"$WORK/$name.json" 2>"$WORK/$name.err" || [ $? -eq 1 ]  # 1: a failure found (still timed)
}

report() {  # report NAME LABEL
  local units ops wall failures
  units=$(jq -r '.hunt.units' "$WORK/$1.json"); ops=$(jq -r '.hunt.ops' "$WORK/$1.json")
  wall=$(jq -r '.hunt.wall_s' "$WORK/$1.json"); failures=$(jq -r '.hunt.failures | length' "$WORK/$1.json")
  awk -v l="$2" -v u="$units" -v o="$ops" -v w="$wall" -v f="$failures" 'BEGIN {
    printf "%-28s %3d units %7d ops %8.2f s wall  %9.0f ops/s  %7.1f units/min  (%d failures)\n",
           l, u, o, w, o / w, u * 60 / w, f }'
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); kvsim: $KVSIM; SGLang: $SRC; swarm seeds 1..$UNITS"
hunt core
report core "kvsim's core"
hunt sglang --target sglang --sglang-src "$SRC"
report sglang "SGLang's cache (fork server)"
# (time -o writes "Command exited with non-zero status 1" first when a failure was found)
read -r cu cs cw < <(tail -1 "$WORK/core.time"); read -r su ss sw < <(tail -1 "$WORK/sglang.time")
units=$(jq -r '.hunt.units' "$WORK/sglang.json"); ops=$(jq -r '.hunt.ops' "$WORK/sglang.json")
awk -v u="$units" -v o="$ops" -v c="$su" -v cs="$ss" -v k="$cu" -v ks="$cs" 'BEGIN {
  c += cs; k += ks
  printf "CPU: kvsim core %.2f s; SGLang %.2f s for %d units (fork server and drivers): %.0f ops/s, %.1f units/min per core\n",
         k, c, u, o / c, u * 60 / c }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
