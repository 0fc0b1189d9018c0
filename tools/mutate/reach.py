#!/usr/bin/env python3
"""Which mutants of the enumeration a blind hunt can reach at all (issue 28, kind 3).

A mutant on code the hunt never executes survives whatever the checks are; so does `if (false)`
on a condition the hunt never saw true, or `if (true)` on one it never saw false. This script
reads a hunt's coverage (`llvm-cov export` JSON of the coverage preset's kvsim, written by
`tools/coverage.sh --hunt SECONDS` as build/coverage/hunt/export.json) and classifies every
mutant of tools/mutate/mutate.py's enumeration by what the hunt did at the mutated text:

  not_run     the code at the mutant's position never ran (count 0)
  never_true  cond_false on a condition the hunt never saw true (the mutant changes nothing)
  never_false cond_true on a condition the hunt never saw false (likewise)
  one_way     another condition operator (negate_cond, rel_boundary, eq_flip, logic_flip) on a
              condition that ran but never went both ways (killable, but only by a flip)
  run         the code ran (and, for a condition, went both ways)
  no_code     coverage has no count there (a declaration, code compiled out)

The first three are inert under that hunt: an upper bound on the blind score is the share of
the rest. Stdlib only. Usage:
  tools/mutate/reach.py EXPORT_JSON [--tsv OUT] [--top N] FILES...
FILES are the mutated files (tools/mutation_score.sh's list), relative to the repository root.
"""
import argparse
import bisect
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutate  # noqa: E402

CONDITION_OPS = {"negate_cond", "cond_true", "cond_false", "logic_flip", "rel_boundary", "eq_flip"}


def repo_relative(path, files):
    """The FILES entry an export's (absolute, possibly build-relative) file name stands for."""
    norm = os.path.normpath(path)
    for f in files:
        if norm == f or norm.endswith(os.sep + f):
            return f
    return None


class FileCoverage:
    def __init__(self, segments, branches):
        # segments: [line, col, count, has_count, is_region_entry, is_gap]
        self.segments = sorted((s[0], s[1], s[2], s[3], s[5] if len(s) > 5 else False)
                               for s in segments)
        self.keys = [(s[0], s[1]) for s in self.segments]
        self.branches = collections.defaultdict(list)  # line -> [(col1, line2, col2, t, f)]
        for b in branches:
            self.branches[b[0]].append((b[1], b[2], b[3], b[4], b[5]))

    def count_at(self, line, col):
        """The execution count at (line, col) (1-based), None where there is no code."""
        i = bisect.bisect_right(self.keys, (line, col)) - 1
        while i >= 0:
            _, _, count, has_count, is_gap = self.segments[i]
            if has_count and not is_gap:
                return count
            if has_count and is_gap:
                return None
            i -= 1
        return None

    def conditions_in(self, line, col, end):
        """Branch records (true, false counts) of the leaf conditions inside [col, end] or
        containing col, on this line (1-based columns)."""
        out = []
        for c1, l2, c2, t, f in self.branches.get(line, []):
            inside = col <= c1 <= end
            around = c1 <= col and (l2 > line or c2 >= col)
            if inside or around:
                out.append((t, f))
        return out


def load_export(path, files):
    with open(path) as f:
        data = json.load(f)
    cov = {}
    for d in data.get("data", []):
        for fe in d.get("files", []):
            rel = repo_relative(fe["filename"], files)
            if rel is not None and rel not in cov:
                cov[rel] = FileCoverage(fe.get("segments", []), fe.get("branches", []))
    return cov


def classify(site, fc):
    if fc is None:
        return "no_code"
    line, col = site["line"], site["col"] + 1
    count = fc.count_at(line, col)
    if count is None:
        # The mutated text may start on whitespace between regions: try its end too.
        count = fc.count_at(line, site["end"])
    if count is None:
        return "no_code"
    if count == 0:
        return "not_run"
    if site["op"] in CONDITION_OPS:
        leaves = fc.conditions_in(line, col, site["end"])
        if leaves:
            ever_true = any(t > 0 for t, _ in leaves)
            ever_false = any(f > 0 for _, f in leaves)
            if site["op"] == "cond_false" and not ever_true:
                return "never_true"
            if site["op"] == "cond_true" and not ever_false:
                return "never_false"
            if all(t == 0 or f == 0 for t, f in leaves):
                return "one_way"
    return "run"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("export")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--tsv", help="write one row per mutant: id, file:line, op, function, class")
    ap.add_argument("--top", type=int, default=25, help="functions listed by inert mutants")
    a = ap.parse_args(argv)
    if not os.path.isfile(a.export):
        print(f"reach.py: {a.export}: no such file (tools/coverage.sh --hunt writes it)",
              file=sys.stderr)
        return 2
    for f in a.files:
        if not os.path.isfile(f):
            print(f"reach.py: {f}: no such file", file=sys.stderr)
            return 2
    try:
        cov = load_export(a.export, a.files)
    except (json.JSONDecodeError, KeyError, IndexError, TypeError) as e:
        print(f"reach.py: {a.export}: not an llvm-cov export ({e})", file=sys.stderr)
        return 2
    if not cov:
        print(f"reach.py: {a.export} covers none of the mutated files", file=sys.stderr)
        return 2
    sites = mutate.all_sites(a.files)
    rows = [(s, classify(s, cov.get(s["file"]))) for s in sites]
    inert = {"not_run", "never_true", "never_false"}
    totals = collections.Counter(c for _, c in rows)
    n = len(rows)
    print(f"{n} mutants; by what the hunt did at the mutated code:")
    for c in ("run", "one_way", "not_run", "never_true", "never_false", "no_code"):
        print(f"  {c:12s} {totals[c]:5d}  {100.0 * totals[c] / n:5.1f} %")
    k = sum(totals[c] for c in inert)
    print(f"inert under this hunt: {k} ({100.0 * k / n:.1f} %)")
    per_file = collections.defaultdict(collections.Counter)
    per_func = collections.Counter()
    for s, c in rows:
        per_file[s["file"]][c] += 1
        if c in inert:
            per_func[(s["file"], s["function"])] += 1
    print("\nper file: mutants, inert (not_run + never_true + never_false), one_way")
    for f in sorted(per_file):
        pc = per_file[f]
        print(f"  {f:44s} {sum(pc.values()):5d} {sum(pc[c] for c in inert):5d} {pc['one_way']:5d}")
    print(f"\nfunctions with the most inert mutants (top {a.top}):")
    for (f, fn), k in per_func.most_common(a.top):
        print(f"  {k:4d}  {f} {fn}")
    if a.tsv:
        with open(a.tsv, "w") as out:
            for s, c in rows:
                out.write(f'{s["id"]}\t{s["file"]}:{s["line"]}\t{s["op"]}\t{s["function"]}\t{c}\n')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
