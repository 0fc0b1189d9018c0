#!/usr/bin/env python3
"""Checks that every #include in core/ and sim/ follows the layering of docs/architecture.md:
a file may include its own folder and the folders below it, never one above.

  core: common → backend → pools → tree → tiers → cache
  sim:  base → config → workload → model → trace → campaign, report   (sim sits above core)

Also reports files in core/ and sim/ past the line limit (600 lines) that do not say at their
top why they are long ("Long file: <reason>"). Prints one line per problem, exits 1 on any.
  tools/check_layers.py [source dir]"""

import os
import re
import sys

CORE = ["common", "backend", "pools", "tree", "tiers", "cache"]
SIM = ["base", "config", "workload", "model", "trace", "campaign", "report"]
# The folders and what each may include (besides itself): everything of a lower rank.
RANK = {("core", m): i for i, m in enumerate(CORE)}
RANK.update({("sim", m): len(CORE) + i for i, m in enumerate(SIM)})
# campaign and report are siblings: neither includes the other.
SIBLINGS = {(("sim", "campaign"), ("sim", "report")), (("sim", "report"), ("sim", "campaign"))}
LINE_LIMIT = 600
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] in ("core", "sim"):
        key = (parts[0], parts[1])
        if key in RANK:
            return key
    return None


def check(root):
    problems = []
    for top in ("core", "sim"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                here = layer_of(rel)
                if here is None:
                    if top == "sim":  # every simulator file lives in a subsystem folder
                        problems.append(f"{rel}: not in a subsystem folder of sim/ ({', '.join(SIM)})")
                    continue
                with open(full, encoding="utf-8") as f:
                    lines = f.read().split("\n")
                for n, line in enumerate(lines, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    there = layer_of(m.group(1))
                    if there is None or there == here:
                        continue
                    if RANK[there] > RANK[here] or (here, there) in SIBLINGS:
                        problems.append(f"{rel}:{n}: includes {m.group(1)}, against the grain "
                                        f"({'/'.join(here)} may not depend on {'/'.join(there)})")
                if len(lines) > LINE_LIMIT and not any("Long file:" in l for l in lines[:15]):
                    problems.append(f"{rel}: {len(lines)} lines, over {LINE_LIMIT} without a "
                                    "'Long file: <reason>' note at its top")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)")
        return 1
    print("check_layers: every include in core/ and sim/ follows the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
