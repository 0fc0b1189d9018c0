#!/usr/bin/env bash
# kvsim run --seeds N --report DIR writes DIR/index.html; headless Chromium (Debian package
# `chromium`) loads it and its DOM holds every table, with one row per seed. Without Chromium
# the page is still checked as text, then the test is skipped (exit 77).
# Usage: report_chromium.sh <kvsim> <scenario> <work dir>
set -euo pipefail
kvsim="$1"; scenario="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
"$kvsim" run "$scenario" --seeds 6 --no-progress --trace-dir "$work" --report "$work/report" \
  >"$work/run.log"
grep -q "report: $work/report/index.html" "$work/run.log"
page="$work/report/index.html"
for id in summary seeds checks faults probes hits; do
  grep -q "<table id=\"$id\">" "$page" || { echo "report: table $id missing from the page"; exit 1; }
done
if grep -q "<script\|http://\|https://" "$page"; then echo "report: not self-contained"; exit 1; fi
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then echo "report: chromium not installed; skipped the browser check"; exit 77; fi
timeout 60 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$page" \
  >"$work/dom.html" 2>"$work/chromium.log"
for id in summary seeds checks faults probes hits; do
  grep -q "<table id=\"$id\">" "$work/dom.html" || { echo "report: Chromium's DOM lacks table $id"; exit 1; }
done
# One row per seed in the seeds table (plus its header), as the browser parsed it.
rows=$(python3 "$(dirname "$0")/table_rows.py" "$work/dom.html" seeds)
[ "$rows" -eq 7 ] || { echo "report: the seeds table has $rows rows, expected 7"; exit 1; }
echo "report: Chromium loaded $page; 6 seed rows and every table present"
