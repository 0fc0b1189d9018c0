#!/usr/bin/env python3
"""Tests of tools/mutate/reach.py on tests/data/mutate_fixture.cpp with a hand-made llvm-cov
export: code that never ran, a condition never true (cond_false inert), one never false
(cond_true inert), a condition that went one way only, and one that went both ways. Run from
the repo root (ctest: tools.mutate_reach)."""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "mutate"))
import mutate  # noqa: E402
import reach  # noqa: E402

FIXTURE = "tests/data/mutate_fixture.cpp"

# Segments [line, col, count, has_count, is_region_entry, is_gap] and branches [line1, col1,
# line2, col2, true, false, file, expanded file, kind] as llvm-cov export writes them.
EXPORT = {"data": [{"files": [{
    "filename": "/somewhere/build/../" + FIXTURE,
    "segments": [[4, 24, 5, True, True, False],   # pick() entered 5 times
                 [5, 14, 0, True, True, False],   # `return a;`: never
                 [5, 23, 5, True, False, False],
                 [7, 5, 8, True, True, False],    # the loop body
                 [8, 3, 0, True, True, False],    # never reached (as if the loop never ended)
                 [11, 2, 0, False, False, False]],
    "branches": [[5, 7, 5, 12, 0, 5, 0, 0, 4],    # a < b: never true
                 [6, 10, 6, 16, 8, 5, 0, 0, 4],   # a >= 0: both ways
                 [6, 20, 6, 26, 8, 0, 0, 0, 4]],  # b != 1: never false
}]}]}


class Reach(unittest.TestCase):
    def setUp(self):
        os.chdir(ROOT)
        self.tmp = tempfile.TemporaryDirectory()
        self.export = os.path.join(self.tmp.name, "export.json")
        with open(self.export, "w") as f:
            json.dump(EXPORT, f)
        cov = reach.load_export(self.export, [FIXTURE])
        self.fc = cov[FIXTURE]
        self.by = {}
        for s in mutate.all_sites([FIXTURE]):
            self.by[(s["line"], s["op"], s["before"])] = reach.classify(s, self.fc)

    def tearDown(self):
        self.tmp.cleanup()

    def test_condition_never_true(self):
        self.assertEqual(self.by[(5, "cond_false", "a < b")], "never_true")
        # cond_true and a flip do change a condition that was always false.
        self.assertEqual(self.by[(5, "cond_true", "a < b")], "one_way")
        self.assertEqual(self.by[(5, "negate_cond", "a < b")], "one_way")
        self.assertEqual(self.by[(5, "rel_boundary", "<")], "one_way")

    def test_condition_both_ways(self):
        self.assertEqual(self.by[(6, "negate_cond", "a >= 0 && b != 1")], "run")
        self.assertEqual(self.by[(6, "rel_boundary", ">=")], "run")
        self.assertEqual(self.by[(6, "logic_flip", "&&")], "run")
        # b != 1 alone never went false: flipping == there is a one-way condition.
        self.assertEqual(self.by[(6, "eq_flip", "!=")], "one_way")

    def test_code_never_run(self):
        self.assertEqual(self.by[(8, "delete_stmt", "use(a, b);")], "not_run")
        self.assertEqual(self.by[(8, "swap_args", "a, b")], "not_run")
        self.assertEqual(self.by[(10, "return_flip", "2")], "not_run")
        self.assertEqual(self.by[(7, "delete_stmt", "a = a - 1;")], "run")

    def test_report_and_tsv(self):
        tsv = os.path.join(self.tmp.name, "reach.tsv")
        out = io.StringIO()
        with redirect_stdout(out):
            rc = reach.main([self.export, FIXTURE, "--tsv", tsv])
        self.assertEqual(rc, 0)
        self.assertIn("inert under this hunt:", out.getvalue())
        with open(tsv) as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        self.assertEqual(len(rows), len(mutate.all_sites([FIXTURE])))
        self.assertIn(["14", FIXTURE + ":8", "swap_args", "pick", "not_run"],
                      [r for r in rows if r[2] == "swap_args"])

    def test_bad_export_is_an_error(self):
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        with redirect_stdout(io.StringIO()):
            self.assertEqual(reach.main([bad, FIXTURE]), 2)
        with open(bad, "w") as f:
            json.dump({"data": [{"files": []}]}, f)
        with redirect_stdout(io.StringIO()):
            self.assertEqual(reach.main([bad, FIXTURE]), 2)


if __name__ == "__main__":
    unittest.main()
