#!/usr/bin/env bash
# output_shape.sh KVSIM SCENARIO: what a person and a parser read (docs/cli.md "Output"). The
# text of a run, a sweep and a hunt ends with its "verdict:" line and prints the probes in one
# line (the list only with --probes); --json is one JSON document for a run and a hunt (probes
# inside) and JSON Lines ending with one {"sweep"} object for a sweep; --report prints its path
# once; a sweep on a non-terminal writes no progress bar.
set -u
kvsim=$1; scenario=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=/usr/bin/python3
"$kvsim" run > "$tmp/run.txt" || fail "run exit $?"
tail -1 "$tmp/run.txt" | grep -q '^verdict: ok: no violation in [0-9]* ops' || fail "run: last line: $(tail -1 "$tmp/run.txt")"
[ "$(grep -c '^probes: ' "$tmp/run.txt")" -eq 1 ] || fail "run: not one probes line"
grep -q 'never reached' "$tmp/run.txt" && fail "run: probe list without --probes"
"$kvsim" run --probes | grep -q '^  never reached:' || fail "run --probes: no list"
"$kvsim" run --json > "$tmp/run.json" || fail "run --json exit $?"
$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verdict"]=="ok" and d["probe_report"]["declared"]>0, d.keys()' "$tmp/run.json" ||
  fail "run --json is not one document with probe_report inside"
"$kvsim" run "$scenario" --seeds 3 --json > "$tmp/sweep.json" 2> "$tmp/sweep.err" || fail "sweep --json exit $?"
$py - "$tmp/sweep.json" <<'PY' || fail "sweep --json is not 3 seed lines then one sweep line"
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
assert len(docs) == 4 and [d.get("seed") for d in docs[:3]] == [1, 2, 3], docs
s = docs[3]["sweep"]
assert s["seeds_tried"] == 3 and s["exit_code"] == 0 and s["probe_report"]["runs"] == 3, s
PY
"$kvsim" run "$scenario" --seeds 3 --report "$tmp/report" > "$tmp/sweep.txt" 2>&1 || fail "sweep --report exit $?"
[ "$(grep -c 'index.html' "$tmp/sweep.txt")" -eq 1 ] || fail "--report path printed $(grep -c 'index.html' "$tmp/sweep.txt") times"
tail -1 "$tmp/sweep.txt" | grep -q '^verdict: ok: no violation in 3 seeds (exit 0)$' || fail "sweep: last line: $(tail -1 "$tmp/sweep.txt")"
grep -q '\[#' "$tmp/sweep.txt" && fail "sweep: a progress bar on a non-terminal"
grep -q '<th>wall time</th><th>threads (-j)</th>' "$tmp/report/index.html" || fail "report: no wall time or -j"
"$kvsim" hunt --units 2 --json --trace-dir "$tmp" > "$tmp/hunt.json" 2>/dev/null || fail "hunt --json exit $?"
$py -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["hunt"]["units"]==2 and "probe_report" in d, d.keys()' "$tmp/hunt.json" ||
  fail "hunt --json is not one document"
"$kvsim" hunt --units 2 --trace-dir "$tmp" > "$tmp/hunt.txt" 2>/dev/null || fail "hunt exit $?"
tail -1 "$tmp/hunt.txt" | grep -q '^verdict: ok: no violation in 2 units (exit 0)$' || fail "hunt: last line: $(tail -1 "$tmp/hunt.txt")"
echo "run, sweep and hunt: verdict last, one probes line, one JSON document (JSON Lines for the sweep), report path once"
