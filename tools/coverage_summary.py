#!/usr/bin/env python3
"""Prints llvm-cov's `export -summary-only` JSON as a per-file table (lines, regions, branches)
with a total, plus the requested source files that have no coverage data at all (a header of
declarations only, or code the binary never links): none is dropped silently.

The binary's file names may differ from FILE's (ccache's base dir compiles with relative paths:
build/coverage/../../core/x.cpp), so files are compared by their normalized absolute path.

Usage: coverage_summary.py SUMMARY.json ROOT FILE...   (FILE: the files to count; the rest of
the JSON is ignored)
"""
import json
import os
import sys


def pct(covered, count):
    return "-" if count == 0 else f"{100.0 * covered / count:5.1f}"


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    with open(args[0]) as f:
        data = json.load(f)["data"][0]
    root = os.path.abspath(args[1]) + "/"
    asked = [os.path.abspath(p) for p in args[2:]]
    wanted = set(asked)
    rows = {}
    for entry in data["files"]:
        path = os.path.abspath(entry["filename"])
        if path in wanted:
            rows[path] = entry["summary"]
    kinds = ("lines", "regions", "branches")
    print(f"{'file':48} {'lines':>15} {'regions':>15} {'branches':>15}")
    total = {k: [0, 0] for k in kinds}
    for path in sorted(rows):
        s = rows[path]
        cells = []
        for k in kinds:
            c, n = s[k]["covered"], s[k]["count"]
            total[k][0] += c
            total[k][1] += n
            cells.append(f"{pct(c, n):>6} {c:>4}/{n:<4}")
        print(f"{path.removeprefix(root):48} " + " ".join(f"{x:>15}" for x in cells))
    cells = [f"{pct(c, n):>6} {c:>4}/{n:<4}" for c, n in (total[k] for k in kinds)]
    print(f"{'TOTAL':48} " + " ".join(f"{x:>15}" for x in cells))
    print("core/ total: " + ", ".join(
        f"{k} {pct(*total[k]).strip()} % ({total[k][0]}/{total[k][1]})" for k in kinds))
    missing = [p.removeprefix(root) for p in asked if p not in rows]
    if missing:
        print(f"no code in the binary ({len(missing)} file(s), not in the total): "
              + " ".join(missing))


if __name__ == "__main__":
    main()
