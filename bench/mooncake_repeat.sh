#!/usr/bin/env bash
# mooncake_repeat.sh IN OUT [COPIES=3]: a longer Mooncake-format trace made of COPIES copies of
# IN one after another. Copy k has every timestamp shifted by k x (last timestamp + 1 s) and
# every hash id by k x (largest id + 1), so the copies share no block and arrive in order.
# Expects the FAST'25 release's layout: {"timestamp": T, "input_length": L,
# "output_length": O, "hash_ids": [id, ...]} on one line per request (awk only, no Python).
set -euo pipefail
in=$1; out=$2; copies=${3:-3}
[ -r "$in" ] || { echo "mooncake_repeat: $in: cannot read" >&2; exit 2; }
case $copies in ''|*[!0-9]*|0) echo "mooncake_repeat: COPIES must be a positive integer" >&2; exit 2;; esac
read -r max_id last_ts < <(awk '
  { i = index($0, "["); j = index($0, "]")
    n = split(substr($0, i + 1, j - i - 1), a, /, */)
    for (k = 1; k <= n; k++) if (a[k] + 0 > m) m = a[k] + 0
    if (match($0, /"timestamp": *[0-9]+/)) { t = substr($0, RSTART, RLENGTH); sub(/.*: */, "", t); ts = t + 0 } }
  END { printf "%d %d\n", m, ts }' "$in")
awk -v copies="$copies" -v id_step="$((max_id + 1))" -v ts_step="$((last_ts + 1000))" '
  { lines[NR] = $0 }
  END {
    for (c = 0; c < copies; c++) {
      for (r = 1; r <= NR; r++) {
        line = lines[r]; i = index(line, "["); j = index(line, "]")
        head = substr(line, 1, i); tail = substr(line, j)
        n = split(substr(line, i + 1, j - i - 1), a, /, */)
        ids = ""
        for (k = 1; k <= n; k++) ids = ids (k > 1 ? ", " : "") sprintf("%d", a[k] + c * id_step)
        match(head, /"timestamp": *[0-9]+/); t = substr(head, RSTART, RLENGTH); sub(/.*: */, "", t)
        sub(/"timestamp": *[0-9]+/, sprintf("\"timestamp\": %d", t + c * ts_step), head)
        print head ids tail
      }
    }
  }' "$in" > "$out"
echo "$out: $(wc -l < "$out") requests ($copies copies of $in; ids offset by $((max_id + 1)), timestamps by $((last_ts + 1000)) ms)"
