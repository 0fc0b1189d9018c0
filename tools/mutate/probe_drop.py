#!/usr/bin/env python3
"""A code probe the unmutated core's hunt reaches often that a mutant's hunt never reaches.

    probe_drop.py BASELINE_LOG MUTANT_LOG [--min-count N] [--min-expected E]

Both logs are `kvsim hunt` text output (the "probes: ... reached in U runs" block). A probe is
"dropped" when the baseline reached it at least N times (default 100) and the mutant's hunt,
scaled by its share of the baseline's units, would be expected to reach it at least E times
(default 50), yet reached it 0 times. Probes are "sometimes" assertions (FoundationDB's
CODE_PROBE, Antithesis): a path the original takes hundreds of times a minute that the mutant
never takes is a behaviour change the hunt observed, even when no invariant broke (a prefetch
that never starts, a host eviction that never happens). With E = 50 the chance that an
unchanged path goes unseen by luck is negligible (e^-50 if hits were independent; hits come in
bursts per unit, which is why N and E are set high).

Prints the dropped probe with the largest baseline count ("NAME 0/N") and exits 1; exits 0 if
none dropped; 2 if a log has no probe block.
"""
import argparse
import re
import sys


def read(path):
    text = open(path, errors="replace").read()
    # The line may go on with a note in parentheses ("(rare code paths: ...)").
    m = re.search(r"^probes: \d+ of \d+ reached in (\d+) runs?\b.*$", text, re.M)
    if not m:
        print(f"probe_drop.py: {path}: no 'probes: ... reached in N runs' line", file=sys.stderr)
        sys.exit(2)
    units = int(m.group(1))
    counts = {}
    block = text[m.end():]
    section = None
    for line in block.split("\n"):
        s = line.strip()
        if s.startswith("reached:"):
            section, s = "reached", s[len("reached:"):]
        elif s.startswith("never reached:"):
            section, s = "never", s[len("never reached:"):]
        elif not line.startswith("    "):
            if section is not None and not s.startswith("("):
                break
            continue
        for tok in s.split():
            if section == "reached" and "=" in tok:
                name, _, n = tok.partition("=")
                counts[name] = int(n)
            elif section == "never":
                counts[tok.rstrip("*")] = 0
    return units, counts


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("baseline")
    ap.add_argument("mutant")
    ap.add_argument("--min-count", type=int, default=100)
    ap.add_argument("--min-expected", type=float, default=50)
    a = ap.parse_args(argv)
    base_units, base = read(a.baseline)
    mut_units, mut = read(a.mutant)
    if base_units == 0:
        return 0
    share = mut_units / base_units
    dropped = [(n, name) for name, n in base.items()
               if n >= a.min_count and n * share >= a.min_expected and mut.get(name, 0) == 0
               and name in mut]
    if not dropped:
        return 0
    n, name = max(dropped)
    print(f"{name} 0/{n}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
