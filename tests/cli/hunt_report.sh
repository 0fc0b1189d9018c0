#!/usr/bin/env bash
# kvsim hunt --report DIR writes DIR/index.html (tools/kvsim/hunt_report.h). Checked here:
#  1. a hunt that finds the planted liveness failure (tests/data/hunt) exits 1 and its page has
#     every table, one failure row naming the invariant, links to the op and shrunk traces that
#     resolve to the files the hunt wrote, the replay command, and per unit the event hash the
#     written trace recorded;
#  2. a clean hunt's units table (seeds, verdicts, event hashes) is the same with 1 and 2 worker
#     processes, and its page says no unit failed;
#  3. headless Chromium (Debian package `chromium`) loads both pages and its DOM holds every table
#     with one row per unit. Without Chromium 1-2 still run, then the test is skipped (exit 77).
# Usage: hunt_report.sh <kvsim> <planted scenarios folder> <work dir>
set -euo pipefail
kvsim="$1"; planted="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "hunt report: $*"; exit 1; }
tables="summary budget failures units features scenarios faults probes"

# 1. The planted failure.
set +e
"$kvsim" hunt --units 2 --scenarios "$planted" --trace-dir "$work/found" \
  --report "$work/found/report" >"$work/found.log"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "a hunt that finds a failure exited $rc, expected 1"
page="$work/found/report/index.html"
grep -q "report: $page" "$work/found.log" || fail "the hunt did not print the page's path"
for id in $tables; do
  grep -q "<table id=\"$id\">" "$page" || fail "table $id missing from the page"
done
if grep -q "<script\|http://\|https://" "$page"; then fail "not self-contained"; fi
python3 - "$page" "$work/found.log" <<'PY'
import html.parser, json, os, re, sys
page, log = sys.argv[1], sys.argv[2]
class P(html.parser.HTMLParser):
    def __init__(s):
        super().__init__(); s.t = None; s.rows = {}; s.row = None; s.cell = None
    def handle_starttag(s, tag, a):
        a = dict(a)
        if tag == "table": s.t = a.get("id"); s.rows[s.t] = []
        if tag == "tr" and s.t: s.row = {"cells": [], "links": []}; s.rows[s.t].append(s.row)
        if tag in ("td", "th") and s.row is not None: s.cell = ""
        if tag == "a" and s.row is not None: s.row["links"].append(a["href"])
    def handle_endtag(s, tag):
        if tag in ("td", "th") and s.row is not None: s.row["cells"].append(s.cell); s.cell = None
        if tag == "table": s.t = None; s.row = None
    def handle_data(s, d):
        if s.cell is not None: s.cell += d
p = P(); p.feed(open(page).read())
def die(m): print("hunt report:", m); sys.exit(1)
fails = p.rows["failures"][1:]
if len(fails) != 1: die(f"{len(fails)} failure rows, expected 1")
f = fails[0]["cells"]
if f[1] != "liveness_one_tick" or f[3] != "liveness": die(f"failure row {f}")
links = fails[0]["links"]
if len(links) != 2: die(f"failure row links {links}, expected the op trace and the shrunk trace")
for l in links:
    if not os.path.isfile(os.path.join(os.path.dirname(page), l)): die(f"link {l} does not resolve")
if "shrunk" not in links[1]: die(f"second link {links[1]} is not the shrunk trace")
if not f[-1].startswith("kvsim replay ") or not f[-1].endswith(".shrunk.trace.jsonl"):
    die(f"replay command {f[-1]!r}")
units = p.rows["units"][1:]
if len(units) != 2: die(f"{len(units)} unit rows, expected 2")
if [u["cells"][4] for u in units] != ["ok", "violation"]: die("verdicts " + str([u["cells"] for u in units]))
# The failing unit's event hash is the one its written op trace recorded.
trace = os.path.join(os.path.dirname(page), links[0])
end = [json.loads(l) for l in open(trace) if l.startswith('{"end"')][0]["end"]
if units[1]["cells"][5] != end["event_hash"]: die(f"unit hash {units[1]['cells'][5]} != trace's {end['event_hash']}")
if not units[0]["cells"][2].startswith("swarm: "): die(f"swarm unit lacks its features: {units[0]['cells'][2]}")
# The page's fault counts are the hunt's text summary's ("faults fired: site n ...").
line = [l for l in open(log) if l.startswith("  faults fired:")][0]
text = dict(re.findall(r"(\w+) (\d+)", line.split(":", 1)[1]))
page_faults = {r["cells"][0]: r["cells"][1] for r in p.rows["faults"][1:] if r["cells"][1] != "0"}
if any(r["cells"][0] == "?" for r in p.rows["faults"]): die("a fault row for an unnamed site number")
if not text or page_faults != text: die(f"faults fired: page {page_faults}, text summary {text}")
print("hunt report: failure row, links, hashes and", len(text), "fault sites agree")
PY

# 2. A clean hunt, 1 and 2 workers: the same units.
for j in 1 2; do
  "$kvsim" hunt --units 4 --time-budget 0 -j $j --trace-dir "$work/clean$j" \
    --report "$work/clean$j/report" >"$work/clean$j.log"
  grep -q 'id="no-failures"' "$work/clean$j/report/index.html" || fail "-j $j: no 'no failures' line"
  sed -n '/<table id="units">/,/<\/table>/p' "$work/clean$j/report/index.html" >"$work/units$j.html"
done
[ "$(grep -c '<tr class="ok">' "$work/units1.html")" -eq 4 ] || fail "clean hunt: not 4 ok units"
cmp -s "$work/units1.html" "$work/units2.html" || fail "the units table differs between -j 1 and -j 2"

# 3. Chromium.
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then echo "hunt report: chromium not installed; skipped the browser check"; exit 77; fi
for case in found:2 clean1:4; do
  dir=${case%%:*}; want=${case##*:}
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --dump-dom \
    "file://$work/$dir/report/index.html" >"$work/$dir.dom.html" 2>"$work/$dir.chromium.log"
  for id in summary budget units features scenarios faults probes; do
    grep -q "<table id=\"$id\">" "$work/$dir.dom.html" || fail "$dir: Chromium's DOM lacks table $id"
  done
  rows=$(python3 "$(dirname "$0")/table_rows.py" "$work/$dir.dom.html" units)
  [ "$rows" -eq $((want + 1)) ] || fail "$dir: Chromium's units table has $rows rows, expected $((want + 1))"
done
echo "hunt report: Chromium loaded both pages; every table and one row per unit present"
