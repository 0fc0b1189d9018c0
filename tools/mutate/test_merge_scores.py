#!/usr/bin/env python3
"""Tests of tools/mutate/merge_scores.py (tools/mutation_score.sh --merge): two shards' results
merge into one table and score; mismatched or missing shards and duplicated mutants are refused
with a clear error (ctest: tools.mutate_merge)."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MERGE = os.path.join(ROOT, "tools", "mutate", "merge_scores.py")
FILES = "core/tiers/page_hash.cpp"


def results(shard, rows, seed=1, budget=60):
    head = (f"# kvsim mutation score results: seed {seed} sample 5 sampled 5 budget {budget} "
            f"shard {shard} total_sites 40\n# files {FILES}\n")
    return head + "".join("\t".join(r) + "\n" for r in rows)


class MergeTest(unittest.TestCase):
    def run_merge(self, *contents):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, c in enumerate(contents):
                paths.append(os.path.join(d, f"r{i}.tsv"))
                with open(paths[-1], "w") as f:
                    f.write(c)
            return subprocess.run([sys.executable, MERGE, "--root", ROOT] + paths,
                                  capture_output=True, text=True, check=False)

    def test_two_shards_give_one_table_and_score(self):
        s0 = results("0/2", [["0", "core/tiers/page_hash.cpp:11 const_shift", "killed", "-", "3"],
                             ["4", "core/tiers/page_hash.cpp:14 eq_flip", "stillborn", "-", "1"]])
        s1 = results("1/2", [["1", "core/tiers/page_hash.cpp:12 const_shift", "survived", "-", "60"],
                             ["3", "core/tiers/page_hash.cpp:13 rel_boundary", "killed (hang)", "-", "9"],
                             ["5", "core/tiers/page_hash.cpp:15 eq_flip", "killed (probe st_query_revoked)", "-", "61"]])
        r = self.run_merge(s1, s0)
        self.assertEqual(r.returncode, 0, r.stderr)
        table = [l for l in r.stdout.splitlines() if l.startswith("| ") and l[2].isdigit()]
        self.assertEqual([l.split(" | ")[0] for l in table], ["| 0", "| 1", "| 3", "| 4", "| 5"])
        self.assertIn("mutation score: 3 killed of 4 counted = 75.0 %", r.stdout)
        self.assertIn("merged 2 shards: 5 of 40 mutants", r.stdout)
        self.assertIn("1 of the killed by a probe no longer reached", r.stdout)
        self.assertIn("--- mutant 1: core/tiers/page_hash.cpp:12", r.stdout)  # the survivor's diff

    def test_refuses_mixed_budgets_missing_shards_and_duplicates(self):
        row = [["0", "core/tiers/page_hash.cpp:11 const_shift", "killed", "-", "3"]]
        r = self.run_merge(results("0/2", row), results("1/2", [], budget=20))
        self.assertEqual(r.returncode, 2)
        self.assertIn("field budget: 20 differs", r.stderr)
        r = self.run_merge(results("0/2", row))
        self.assertEqual(r.returncode, 2)
        self.assertIn("need each of 0/2 1/2 once", r.stderr)
        r = self.run_merge(results("0/2", row), results("1/2", row))
        self.assertEqual(r.returncode, 2)
        self.assertIn("mutant 0 is also in", r.stderr)
        r = self.run_merge("not a results file\n")
        self.assertEqual(r.returncode, 2)
        self.assertIn(":1: not a mutation_score.sh results file", r.stderr)


if __name__ == "__main__":
    unittest.main()
