#!/usr/bin/env python3
"""Sums the probe_report lines of several kvsim runs (tools/probe_sweep.sh).

Each argument is a file holding `{"probe_report": {...}}` lines. Prints the reached probes with
their counts and, per file, which probes only that file reached; exits 1 naming every probe
that no file reached, unless it is marked expected_unreached in core/common/probe_list.h.
"""
import json
import os
import sys


def main(paths):
    total = {}
    expected = set()
    runs = 0
    per_file = {}
    for path in paths:
        name = os.path.basename(path).replace(".probes.json", "")
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                rep = json.loads(line)["probe_report"]
                if not rep.get("enabled", True):
                    print("probe sweep: kvsim was built with KVSIM_PROBES=OFF", file=sys.stderr)
                    return 2
                runs += rep["runs"]
                expected.update(rep["expected_unreached"])
                for probe, count in rep["probes"].items():
                    total[probe] = total.get(probe, 0) + count
                    if count:
                        per_file.setdefault(probe, set()).add(name)
    if not total:
        print("probe sweep: no probe report found (did kvsim run?)", file=sys.stderr)
        return 2
    reached = [p for p, c in total.items() if c]
    never = [p for p, c in total.items() if not c]
    print(f"probe sweep: {len(reached)} of {len(total)} probes reached in {runs} runs")
    for p in total:
        if total[p]:
            where = ",".join(sorted(per_file[p]))
            print(f"  {p:34} {total[p]:>10}  {where}")
    missing = [p for p in never if p not in expected]
    for p in never:
        if p in expected:
            print(f"  {p:34} {'0':>10}  (expected unreached)")
    hit_expected = [p for p in reached if p in expected]
    for p in hit_expected:
        print(f"note: {p} is marked expected_unreached but was reached: drop the mark")
    if missing:
        for p in missing:
            print(f"probe sweep: FAIL: probe {p} was never reached", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
