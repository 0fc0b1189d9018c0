#!/usr/bin/env python3
"""Tests of the mutation engine (tools/mutate/mutate.py) on tests/data/mutate_fixture.cpp:
each operator yields exactly the expected sites and diff, enumeration and sampling are
deterministic, and no mutant of the core changes a file's line count. Run from the repo root
(ctest: tools.mutate_engine)."""
import os
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "mutate"))
import mutate  # noqa: E402

FIXTURE = "tests/data/mutate_fixture.cpp"

EXPECTED = [
    (5, "cond_false", "a < b", "false"),
    (5, "cond_true", "a < b", "true"),
    (5, "negate_cond", "a < b", "!(a < b)"),
    (5, "rel_boundary", "<", "<="),
    (6, "negate_cond", "a >= 0 && b != 1", "!(a >= 0 && b != 1)"),
    (6, "rel_boundary", ">=", ">"),
    (6, "const_shift", "0", "1"),
    (6, "logic_flip", "&&", "||"),
    (6, "eq_flip", "!=", "=="),
    (6, "const_shift", "1", "0"),
    (7, "delete_stmt", "a = a - 1;", ";"),
    (7, "arith_flip", "-", "+"),
    (7, "const_shift", "1", "0"),
    (8, "delete_stmt", "use(a, b);", ";"),
    (8, "swap_args", "a, b", "b, a"),
    (10, "const_shift", "2", "3"),
    (10, "return_flip", "2", "0"),
]


class MutateEngine(unittest.TestCase):
    def setUp(self):
        os.chdir(ROOT)

    def test_each_operator_yields_the_expected_sites(self):
        got = [(s["line"], s["op"], s["before"], s["after"]) for s in mutate.all_sites([FIXTURE])]
        self.assertEqual(got, EXPECTED)

    def test_assertions_comments_strings_and_checking_functions_are_not_mutated(self):
        lines = {s["line"] for s in mutate.all_sites([FIXTURE])}
        self.assertNotIn(9, lines)   # KV_ASSERT
        self.assertNotIn(14, lines)  # check_range()
        self.assertNotIn(15, lines)
        self.assertNotIn(20, lines)  # the second line of a KV_ASSERT
        self.assertNotIn(21, lines)
        for s in mutate.all_sites([FIXTURE]):
            self.assertNotIn("strings", s["before"])

    def test_diff_of_one_mutant(self):
        site = [s for s in mutate.all_sites([FIXTURE]) if s["op"] == "swap_args"][0]
        self.assertEqual(mutate.unified(site).splitlines()[3:],
                         ["     a = a - 1;", "-  use(a, b);", "+  use(b, a);", "   KV_ASSERT(a == b, \"assertions are never mutated\");"])

    def test_apply_writes_the_mutant_into_a_copy(self):
        site = [s for s in mutate.all_sites([FIXTURE]) if s["op"] == "negate_cond"][0]
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "tests", "data"))
            rc = mutate.main(["apply", "--id", str(site["id"]), "--root", d, FIXTURE])
            self.assertEqual(rc, 0)
            with open(os.path.join(d, FIXTURE)) as f:
                text = f.read().split("\n")
        self.assertEqual(text[4], "  if (!(a < b)) return a;")
        with open(FIXTURE) as f:
            self.assertEqual(len(f.read().split("\n")), len(text))

    def test_enumeration_and_sampling_are_deterministic(self):
        files = ["core/cache/hi_cache.cpp", "core/tree/radix_tree.cpp"]
        a = mutate.all_sites(files)
        b = mutate.all_sites(list(reversed(files)))
        self.assertEqual(a, b)
        self.assertEqual(mutate.pick(a, 10, 7), mutate.pick(b, 10, 7))
        self.assertNotEqual(mutate.pick(a, 10, 7), mutate.pick(a, 10, 8))
        self.assertEqual(len(set(mutate.pick(a, 10, 7))), 10)

    def test_no_mutant_of_the_core_changes_the_line_count(self):
        # From the repository root, whatever the working folder (ctest runs in the build tree).
        dirs = [os.path.join(ROOT, d) for d in ("core/tree", "core/cache", "core/tiers")]
        files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d) if f.endswith(".cpp"))
        sites = mutate.all_sites(files)
        self.assertGreater(len(sites), 500)
        counts = {}
        for f in files:
            with open(f) as fh:
                counts[f] = len(fh.read().split("\n"))
        for s in sites:
            self.assertEqual(len(mutate.mutated_text(s).split("\n")), counts[s["file"]], s)

    def test_probes_near_a_site_are_those_of_its_function(self):
        sites = [s for s in mutate.all_sites(["core/cache/hi_cache.cpp"])
                 if s["function"] == "evict_host"]
        self.assertTrue(sites)
        probes = mutate.probes_near(sites[0])
        self.assertEqual(sorted(probes), ["cache_host_evict_short", "cache_host_evict_while_protected"])


# One line per case of the operators for the kinds of bug issue 28 names (a cached value left
# stale, a rollback skipped, a policy key swapped); written to a temporary file by the test.
KINDS_FIXTURE = """namespace demo {
void touch(Node& node) {
  node.last_access = ++clock_;
  refresh_leaf(node);
  evictable_size_ += node.size();
  use(node);
}
bool extend(Cache& c) {
  if (!swa) { c.free_device(*kv); return false; }
  c.release_host(*n);
  return true;
}
Key key_of(const Node& n) {
  return {n.hit_count, n.last_access, n.id};
}
long fit(long a, long b) {
  return std::min(a, b);
}
void store(Cache& c) {
  check_stored(c, n + 1);
  c.sanity_check(report);
  use(c);
}
}  // namespace demo
"""


class KindOperators(unittest.TestCase):
    def sites(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kinds.cpp")
            with open(path, "w") as f:
                f.write(KINDS_FIXTURE)
            return [(s["line"], s["op"], s["before"], s["after"]) for s in mutate.all_sites([path])
                    if s["op"] in ("stale_cache", "skip_rollback", "policy_swap", "delete_stmt")]

    def test_a_cache_update_is_stale_cache_and_a_plain_statement_stays_delete_stmt(self):
        got = self.sites()
        self.assertIn((3, "stale_cache", "node.last_access = ++clock_;", ";"), got)
        self.assertIn((4, "stale_cache", "refresh_leaf(node);", ";"), got)
        self.assertIn((5, "stale_cache", "evictable_size_ += node.size();", ";"), got)
        self.assertIn((6, "delete_stmt", "use(node);", ";"), got)
        # Each statement is deleted by one operator only: no mutant twice.
        self.assertEqual(len({(l, b) for l, _, b, _ in got}), len(got))

    def test_a_call_of_a_checking_function_is_not_mutated(self):
        got = self.sites()
        self.assertIn((22, "delete_stmt", "use(c);", ";"), got)
        self.assertFalse([g for g in got if g[0] in (20, 21)], got)

    def test_a_give_back_before_a_return_is_skip_rollback(self):
        got = self.sites()
        self.assertIn((9, "skip_rollback", "c.free_device(*kv);", ";"), got)
        self.assertIn((10, "skip_rollback", "c.release_host(*n);", ";"), got)

    def test_a_returned_key_and_min_max_are_policy_swap(self):
        got = self.sites()
        self.assertIn((14, "policy_swap", "n.hit_count, n.last_access", "n.last_access, n.hit_count"),
                      got)
        self.assertIn((17, "policy_swap", "min", "max"), got)

    def test_the_kinds_are_in_the_core_sample_space(self):
        dirs = [os.path.join(ROOT, d) for d in ("core/tree", "core/cache", "core/tiers")]
        files = sorted(os.path.join(d, f) for d in dirs for f in os.listdir(d) if f.endswith(".cpp"))
        ops = {s["op"] for s in mutate.all_sites(files)}
        for op in ("stale_cache", "skip_rollback", "policy_swap"):
            self.assertIn(op, ops)


if __name__ == "__main__":
    unittest.main()
