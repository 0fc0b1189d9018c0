#!/usr/bin/env python3
"""Merges the results files of `tools/mutation_score.sh --shard I/N` runs into one table and one
score (docs/mutation-score.md). Each file holds two '#' header lines (the run's seed, sample,
budget, shard and files) and one TSV row per mutant: id, site ("file:line op"), result,
unit-test column, seconds. The shards must come from the same sample, seed and budget; every
shard of the split must be present once, and no mutant may appear twice.

Usage: merge_scores.py --root REPO FILE...   (tools/mutation_score.sh --merge FILE... calls it)
"""
import argparse
import subprocess
import sys


def fail(msg):
    print(f"mutation_score.sh: --merge: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(lines) < 2 or not lines[0].startswith("# kvsim mutation score results:"):
        fail(f"{path}:1: not a mutation_score.sh results file")
    words = lines[0].split(":", 1)[1].split()
    meta = dict(zip(words[0::2], words[1::2]))
    for key in ("seed", "sample", "budget", "shard", "total_sites"):
        if key not in meta:
            fail(f"{path}:1: field {key}: missing")
    if not lines[1].startswith("# files "):
        fail(f"{path}:2: field files: missing")
    meta["files"] = lines[1][len("# files "):]
    rows = []
    for n, line in enumerate(lines[2:], start=3):
        cols = line.split("\t")
        if len(cols) != 5 or not cols[0].isdigit():
            fail(f"{path}:{n}: expected 5 tab-separated columns (id, site, result, unit, s)")
        rows.append(cols)
    return meta, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    metas, rows, seen = [], [], {}
    for path in args.files:
        meta, r = read(path)
        metas.append((path, meta))
        for cols in r:
            if cols[0] in seen:
                fail(f"{path}: mutant {cols[0]} is also in {seen[cols[0]]}")
            seen[cols[0]] = path
        rows += r
    first_path, first = metas[0]
    for path, meta in metas[1:]:
        for key in ("seed", "sample", "budget", "total_sites", "files"):
            if meta[key] != first[key]:
                fail(f"{path}: field {key}: {meta[key]} differs from {first_path}'s {first[key]}")
    shards = sorted(m["shard"] for _, m in metas)
    n = shards[0].split("/")[1]
    want = sorted(f"{i}/{n}" for i in range(int(n)))
    if shards != want:
        fail(f"field shard: got {' '.join(shards)}, need each of {' '.join(want)} once")
    rows.sort(key=lambda c: int(c[0]))
    count = {"killed": 0, "survived": 0, "stillborn": 0, "equivalent": 0, "error": 0}
    unit_killed = 0
    probe_killed = 0
    survivors = []
    print("| id | site | operator | blind hunt | unit tests | s |")
    print("|---|---|---|---|---|---|")
    for mid, where, result, unit, secs in rows:
        site, _, op = where.rpartition(" ")
        print(f"| {mid} | {site} | {op} | {result} | {unit} | {secs} |")
        kind = result.split(" ")[0]
        if kind not in count:
            fail(f"mutant {mid}: unknown result '{result}'")
        count[kind] += 1
        if kind == "survived":
            survivors.append(mid)
        if result.startswith("killed (probe"):
            probe_killed += 1
        if unit == "killed":
            unit_killed += 1
    counted = len(rows) - count["stillborn"] - count["equivalent"] - count["error"]
    score = f"{100 * count['killed'] / counted:.1f}" if counted else "n/a"
    print()
    print(f"mutation score: {count['killed']} killed of {counted} counted = {score} % "
          f"(merged {len(metas)} shards: {len(rows)} of {first['total_sites']} mutants, seed "
          f"{first['seed']}, budget {first['budget']} s; {count['stillborn']} stillborn, "
          f"{count['equivalent']} equivalent (identical object), {count['error']} hunt errors, "
          f"{count['survived']} survived; {probe_killed} of the killed by a probe no longer "
          f"reached)")
    if any(c[3] != "-" for c in rows):
        print(f"unit tests alone kill {unit_killed} of {counted}")
    files = first["files"].split()
    mutate = [sys.executable, f"{args.root}/tools/mutate/mutate.py"]
    if survivors:
        print()
        print("survivors (judge each: a missing check or workload, or equivalent by inspection):")
    for mid in survivors:
        print()
        sys.stdout.flush()
        subprocess.run(mutate + ["show", "--id", mid, "--format",
                                 "--- mutant {id}: {file}:{line} {op} in {function}(); "
                                 "probes of that function: {probes}"] + files,
                       cwd=args.root, check=False)
        subprocess.run(mutate + ["diff", "--id", mid] + files, cwd=args.root, check=False)
    return 2 if count["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
