#!/usr/bin/env bash
# SGLang's own RadixCache vs kvsim's core on the same op stream, interleaved in one run.
#
#   SGLANG_ORACLE_RUN=/path/to/sglang_oracle/run.py SGLANG_GIT_DIR=/path/to/sglang.git \
#     bench/sglang_vs_kvsim.sh [RUNS] [CONFIG...]
#
# CONFIG is PAGE:CAPACITY (default: 512:1e6 512:1e7 512:5e7 16:1e7). For each config it
# alternates RUNS times (default 5) one SGLang process and one kvsim process; each process
# replays the whole trace REPEAT times (default 3): the first replay is "fresh" (first touch of
# its memory in that process), the others "warm". Both sides time only the cache calls
# (match, lock, evict, insert, unlock). Prints the medians and the ratios SGLang / kvsim.
# Needs /usr/bin/python3 with torch (Debian python3-torch) and the SGLang oracle driver (see
# docs/benchmarks.md); nothing in CI runs this.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KVSIM="${KVSIM:-$ROOT/build/default/tools/kvsim}"
TRACE="${TRACE:-$ROOT/traces/public/mooncake_synthetic_trace.jsonl}"
RUN_PY="${SGLANG_ORACLE_RUN:?set SGLANG_ORACLE_RUN to the SGLang oracle driver run.py}"
: "${SGLANG_GIT_DIR:?set SGLANG_GIT_DIR to a git dir of SGLang}"
PY=/usr/bin/python3
RUNS="${1:-5}"
shift || true
CONFIGS=("$@")
[ ${#CONFIGS[@]} -gt 0 ] || CONFIGS=(512:1e6 512:1e7 512:5e7 16:1e7)
REPEAT="${REPEAT:-3}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
[ -x "$KVSIM" ] || { echo "build kvsim first ($KVSIM)" >&2; exit 2; }

for cfg in "${CONFIGS[@]}"; do
  P="${cfg%%:*}"; C="${cfg#*:}"
  for ((r = 1; r <= RUNS; r++)); do
    "$PY" "$RUN_PY" --sglang-git-dir "$SGLANG_GIT_DIR" --trace "$TRACE" --page-size "$P" \
      --capacity-tokens "$C" --repeat "$REPEAT" --json >> "$OUT/sglang_${P}_${C}.jsonl"
    "$KVSIM" sglang-replay "$TRACE" --page-size "$P" --capacity-tokens "$C" \
      --repeat "$REPEAT" --json >> "$OUT/kvsim_${P}_${C}.jsonl"
  done
  "$PY" - "$OUT/sglang_${P}_${C}.jsonl" "$OUT/kvsim_${P}_${C}.jsonl" "$P" "$C" <<'PYEOF'
import json, statistics, sys
def load(path):
    runs = [json.loads(l) for l in open(path) if l.strip()]
    fresh = [r["timed_s_all"][0] for r in runs]
    warm = [t for r in runs for t in r["timed_s_all"][1:]] or fresh
    return runs[0], statistics.median(fresh), statistics.median(warm), min(fresh), max(fresh)
s, sf, sw, sfmin, sfmax = load(sys.argv[1])
k, kf, kw, kfmin, kfmax = load(sys.argv[2])
# The oracle reports the median run of its --repeat; our fresh/warm split needs every run.
assert s["hit_tokens"] == k["hit_tokens"], (s["hit_tokens"], k["hit_tokens"])
ops = k["ops"]
print(f"P={sys.argv[3]} C={sys.argv[4]}: hit rate {k['token_hit_rate']:.4f} (same hit tokens), "
      f"{ops} ops, {len(open(sys.argv[1]).readlines())} processes each")
print(f"  SGLang fresh {sf*1e3:8.1f} ms (min {sfmin*1e3:.1f}, max {sfmax*1e3:.1f})  warm {sw*1e3:8.1f} ms")
print(f"  kvsim  fresh {kf*1e3:8.1f} ms (min {kfmin*1e3:.1f}, max {kfmax*1e3:.1f})  warm {kw*1e3:8.1f} ms")
print(f"  ratio SGLang/kvsim: fresh {sf/kf:5.1f}x  warm {sw/kw:5.1f}x   "
      f"(kvsim {ops/kf:,.0f} ops/s fresh, {ops/kw:,.0f} warm)")
runs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
floor = statistics.median(r["one_pass_floor_s"] for r in runs)
print(f"  floor (one read of every prompt token) {floor*1e3:.1f} ms: kvsim fresh {kf/floor:.2f}x it, "
      f"warm {kw/floor:.2f}x; SGLang/floor {sf/floor:.0f}x")
PYEOF
done
