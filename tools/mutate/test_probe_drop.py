#!/usr/bin/env python3
"""Tests of tools/mutate/probe_drop.py: a probe the baseline hunt reaches often and the
mutant's never reaches is reported; rare probes, short mutant hunts and identical hunts are not
(ctest: tools.mutate_probe_drop)."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DROP = os.path.join(ROOT, "tools", "mutate", "probe_drop.py")


def hunt_log(units, reached, never):
    """The tail of `kvsim hunt` text output, wrapped as the command wraps it."""
    lines = [f"hunt from seed 1, 1 job(s): {units} units", "  no violation found",
             f"probes: {len(reached)} of {len(reached) + len(never)} reached in {units} runs"]
    toks = [f"{k}={v}" for k, v in reached.items()]
    lines.append("  reached: " + " ".join(toks[:3]))
    for i in range(3, len(toks), 3):
        lines.append("    " + " ".join(toks[i:i + 3]))
    if never:
        lines.append("  never reached: " + " ".join(never))
    lines.append("  (* expected unreached by the current harness: docs/probes.md)")
    return "\n".join(lines) + "\n"


class ProbeDropTest(unittest.TestCase):
    def run_drop(self, base, mut):
        with tempfile.TemporaryDirectory() as d:
            b, m = os.path.join(d, "b.log"), os.path.join(d, "m.log")
            open(b, "w").write(base)
            open(m, "w").write(mut)
            return subprocess.run([sys.executable, DROP, b, m], capture_output=True, text=True)

    BASE = {"a": 5000, "b": 300, "rare": 4, "c": 120, "d": 7, "e": 900, "f": 1}

    def test_the_count_line_may_end_in_a_note(self):
        # kvsim prints "probes: N of M reached in U runs (rare code paths: ...)"; a log that the
        # script cannot read is exit 2 (an error of the tool), which must not happen on it.
        note = " (rare code paths: what ran, not what failed; docs/probes.md)"
        mut = dict(self.BASE)
        del mut["b"]
        with_note = lambda log: log.replace(" runs\n", " runs" + note + "\n", 1)
        r = self.run_drop(with_note(hunt_log(600, self.BASE, [])),
                          with_note(hunt_log(550, mut, ["b"])))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout.strip(), "b 0/300")

    def test_a_frequent_probe_never_reached_is_reported(self):
        mut = dict(self.BASE)
        del mut["b"]
        r = self.run_drop(hunt_log(600, self.BASE, ["x*"]), hunt_log(550, mut, ["b", "x*"]))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout.strip(), "b 0/300")

    def test_the_largest_dropped_probe_is_named(self):
        mut = {k: v for k, v in self.BASE.items() if k not in ("a", "b")}
        r = self.run_drop(hunt_log(600, self.BASE, []), hunt_log(600, mut, ["a", "b"]))
        self.assertEqual(r.stdout.strip(), "a 0/5000")

    def test_rare_probes_short_hunts_and_same_hunts_are_not_drops(self):
        base = hunt_log(600, self.BASE, [])
        r = self.run_drop(base, base)
        self.assertEqual(r.returncode, 0)
        mut = {k: v for k, v in self.BASE.items() if k != "rare"}
        r = self.run_drop(base, hunt_log(600, mut, ["rare"]))  # 4 hits: too rare to miss
        self.assertEqual(r.returncode, 0, r.stdout)
        mut = {k: v for k, v in self.BASE.items() if k != "c"}
        r = self.run_drop(base, hunt_log(100, mut, ["c"]))  # 120 x 100/600 = 20 expected < 50
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_a_log_without_probes_is_an_error(self):
        r = self.run_drop("hunt from seed 1\n", hunt_log(10, {"a": 1}, []))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no 'probes: ... reached in N runs' line", r.stderr)


if __name__ == "__main__":
    unittest.main()
