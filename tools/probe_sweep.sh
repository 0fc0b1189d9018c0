#!/usr/bin/env bash
# The code-probe sweep (docs/probes.md): runs a bounded sweep of every named scenario with the
# probe report in JSON, sums the reports and fails naming every probe no run reached (a path
# the harness does not test), except the probes core/common/probe_list.h marks
# expected_unreached, which are listed as such. Also runs 600 units of `kvsim hunt` (~20 s)
# when the binary has that subcommand, and the stateful property tests (their probes).
# Usage: tools/probe_sweep.sh [kvsim binary] [seeds per scenario]   (default: 40; the
#        mooncake_synthetic scenario, 9 s a seed, runs 1 seed)
# Env:   KVSIM_PROBE_REPORTS=DIR  take the scenarios' reports from a sweep that already ran
#        (DIR/<scenario>.jsonl, `kvsim run ... --json`; CI's sweep) instead of sweeping again
# Budget: about 1 minute on 2 cores with the default seeds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kvsim="${1:-$root/build/default/tools/kvsim}"
seeds="${2:-${KVSIM_PROBE_SEEDS:-40}}"
jobs="${KVSIM_PROBE_JOBS:-2}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

run_one() {  # <scenario> <seeds>
  local name
  name=$(basename "$1" .json)
  # A sweep's --json is JSON Lines ending with {"sweep": {..., "probe_report": ...}}; a single
  # run (1 seed) is one document with "probe_report" inside (docs/cli.md "Output").
  "$kvsim" run "$1" --seeds "$2" --no-progress --json --trace-dir "$out" |
    jq -c 'if .sweep then {probe_report: .sweep.probe_report}
           elif .probe_report then {probe_report} else empty end' \
      >"$out/$name.probes.json" || true
}
export -f run_one
export kvsim out

if [ -n "${KVSIM_PROBE_REPORTS:-}" ]; then
  # A sweep that already ran (CI's: tools/test.sh) left each scenario's --json output as
  # DIR/<scenario>.jsonl: its probe reports are used instead of sweeping again. Every scenario
  # must have one.
  for s in "$root"/scenarios/*.json; do
    name=$(basename "$s" .json)
    f="$KVSIM_PROBE_REPORTS/$name.jsonl"
    [ -s "$f" ] || { echo "probe_sweep.sh: no sweep output $f for scenario $name" >&2; exit 2; }
    # The last report: a sweep's summary line, or a single run's one document.
    jq -c 'if .sweep then {probe_report: .sweep.probe_report}
           elif .probe_report then {probe_report} else empty end' "$f" | tail -1 \
      >"$out/$name.probes.json"
    [ -s "$out/$name.probes.json" ] || { echo "probe_sweep.sh: $f has no probe report" >&2; exit 2; }
  done
else
  {
    for s in "$root"/scenarios/*.json; do
      if [ "$(basename "$s")" = mooncake_synthetic.json ]; then
        echo "$s 1"
      else
        echo "$s $seeds"
      fi
    done
  } | xargs -P "$jobs" -L 1 bash -c 'run_one "$0" "$1"'
fi

# A fixed number of hunt units (not a time budget): which units run, and so which probes they
# reach, is the same on every machine. The hunt's swarm configurations and adversarial
# workloads reach tree_divergence_mid_page, tree_ns_shared_tokens,
# cache_evict_write_back_no_room and lb_below_threshold, which no named scenario does.
if "$kvsim" --help 2>/dev/null | grep -qE '^ +hunt( |$)'; then
  "$kvsim" hunt --units "${KVSIM_PROBE_HUNT_UNITS:-600}" --time-budget 0 -j "$jobs" --json \
    --trace-dir "$out" 2>/dev/null | jq -c '{probe_report}' >"$out/hunt.probes.json" || true
fi

# The stateful property tests drive the core's API directly (a lock on any node, a load-back
# with no scheduler around it): paths a simulator run never takes, such as
# full_lock_skips_evicted. A fixed RapidCheck seed keeps the sweep the same on every machine.
props="$(dirname "$kvsim")/../tests/kvsim_property_tests"
if [ -x "$props" ]; then
  KVSIM_PROBE_REPORT="$out/property.probes.json" RC_PARAMS="seed=1" \
    "$props" --gtest_filter='HiCacheStateful.*' >/dev/null 2>&1 || true
fi

python3 "$root/tools/probes/sum_reports.py" "$out"/*.probes.json
