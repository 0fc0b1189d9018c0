// The hunt's rebuild check (sim/campaign/rebuild_check.h): a tree rebuilt from its snapshot is
// indistinguishable from the original, a derived value left stale in the original is caught,
// a hybrid tree is refused by name, and during a unit the check runs and finds nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "core/tree/radix_tree.h"
#include "core/tree/swa_component.h"
#include "core/tree/wide_ids.h"
#include "sim/campaign/rebuild_check.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/swarm.h"

namespace kvsim::sim {
namespace {

IndexVector device_slots(SlotIndex first, size_t n) {
  std::vector<SlotIndex> v(n);
  for (size_t k = 0; k < n; ++k)
    v[k] = first + static_cast<SlotIndex>(k);
  return IndexVector(Tier::kDevice, std::move(v));
}

// Three leaves under one shared page, inserted in order a, b, c; a locked; one evicted.
struct ThreeLeaves {
  ThreeLeaves() {
    tree.insert(0, std::vector<Token>{1, 1, 2, 2}, device_slots(10, 4));
    tree.insert(0, std::vector<Token>{1, 1, 3, 3}, device_slots(20, 4));
    tree.insert(0, std::vector<Token>{1, 1, 4, 4}, device_slots(30, 4));
    tree.insert(5, std::vector<Token>{9, 9}, device_slots(40, 2));
    // The leaves' ids after the splits, found without a match (which would touch them).
    tree.for_each_node([&](const TreeNode& n) {
      if (&n == tree.root() || !n.children.empty() || n.ns != 0) return;
      const Token last = RadixTree::prefix_tokens(n).back();
      (last == 2 ? a : last == 3 ? b : c) = n.id;
    });
  }
  RadixTree tree{RadixTreeOptions{.page_size = 2}};
  NodeId a = 0, b = 0, c = 0;
};

TEST(RebuildCheck, ARebuiltTreeIsIndistinguishable) {
  ThreeLeaves t;
  EXPECT_EQ(rebuild_problem(t.tree), "");
  const LockRecord held = t.tree.lock(*t.tree.find(t.c));
  t.tree.remove_device_leaf(*t.tree.next_device_victim());
  EXPECT_EQ(rebuild_problem(t.tree), "");
  t.tree.unlock(held);
  EXPECT_EQ(rebuild_problem(t.tree), "");
}

// A planted bug: the access time of a leaf changes without its eviction key (a derived value
// left stale). The original still evicts by the stale key; the rebuilt tree files the leaf by
// its access time, so the next victims differ.
TEST(RebuildCheck, CatchesAStaleEvictionKey) {
  ThreeLeaves t;
  ASSERT_EQ(t.tree.next_device_victim()->id, t.a);
  t.tree.find(t.a)->last_access = t.tree.find(t.c)->last_access;
  const std::string p = rebuild_problem(t.tree);
  EXPECT_NE(p.find("next device victim: original node " + std::to_string(t.a)), std::string::npos)
      << p;
}

// Planted: a field snapshot() would drop (here: written into the rebuilt tree after the fact,
// as a restore that skipped it would leave it) is caught by comparing the nodes themselves.
TEST(RebuildCheck, ComparesEveryNodeFieldDirectly) {
  ThreeLeaves t;
  RadixTree rebuilt(t.tree.options());
  rebuilt.restore(t.tree.snapshot());
  EXPECT_EQ(node_fields_problem(t.tree, rebuilt), "");
  rebuilt.find(t.b)->creation = 0;
  EXPECT_NE(node_fields_problem(t.tree, rebuilt).find("node " + std::to_string(t.b) + ": creation"),
            std::string::npos)
      << node_fields_problem(t.tree, rebuilt);
  rebuilt.find(t.b)->creation = t.tree.find(t.b)->creation;
  rebuilt.find(t.c)->hit_count += 1;
  EXPECT_NE(node_fields_problem(t.tree, rebuilt).find("hit_count"), std::string::npos);
}

// A refused restore must leave a new tree. Planted: leftovers a discard that forgot a field
// would leave (a root child, a clock) are named; the real failure path leaves none.
TEST(RebuildCheck, ARefusedRestoreLeavesANewTree) {
  ThreeLeaves t;
  EXPECT_EQ(refused_restore_problem(t.tree.options(), t.tree.snapshot()), "");
  EXPECT_EQ(new_tree_problem(RadixTree(t.tree.options())), "");
  RadixTree used(t.tree.options());
  used.insert(0, std::vector<Token>{7, 7}, device_slots(50, 2));
  EXPECT_NE(new_tree_problem(used).find("not the root alone"), std::string::npos)
      << new_tree_problem(used);
  RadixTree touched(t.tree.options());
  TreeSnapshot empty = touched.snapshot();
  empty.clock = 5;  // no node, a clock that ran
  touched.restore(empty);
  const std::string p = new_tree_problem(touched);
  EXPECT_NE(p.find("clock"), std::string::npos) << p;
}

// What refused_restore_problem's sanity-stage part relies on: a snapshot whose plain leaves
// lost both copies is refused after linking, naming tree.dead_node and counting the rest
// (seed 30's 1860 and 1914, seed 31's 1916 and 1924 survived while the check refused only at
// link time).
TEST(RebuildCheck, ARestoreRefusedAtTheSanityStageCountsItsViolations) {
  ThreeLeaves t;
  const TreeSnapshot s = t.tree.snapshot();
  for (const size_t dead : {size_t{1}, size_t{2}}) {
    TreeSnapshot bad = s;
    size_t killed = 0;
    for (NodeSnapshot& n : bad.nodes) {
      if (killed < dead && (n.id == t.a || n.id == t.b)) {
        n.value.reset();
        ++killed;
      }
    }
    ASSERT_EQ(killed, dead);
    RadixTree fresh(t.tree.options());
    try {
      fresh.restore(bad);
      ADD_FAILURE() << dead << " dead leaf(s) accepted";
    } catch (const SnapshotError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("sanity_check after restore: tree.dead_node"), std::string::npos) << what;
      EXPECT_EQ(what.find(" more)") != std::string::npos, dead == 2) << what;
      if (dead == 2) {
        EXPECT_NE(what.find("(and 1 more)"), std::string::npos) << what;
      }
    }
    EXPECT_EQ(new_tree_problem(fresh), "");
    fresh.restore(s);
    EXPECT_TRUE(fresh.snapshot() == s);
  }
}

// Planted wrong wide-id helpers, each a mutant the hunt once missed: a fit test shifted one bit
// too far (accepts 2^31), a chunk compare that never records a difference, and one that reads
// the key backwards.
bool fit_shifted(const int64_t* ids, size_t n) {
  uint64_t high = 0;
  for (size_t i = 0; i < n; ++i)
    high |= static_cast<uint64_t>(ids[i]) + 0x80000000ull;
  return (high >> 33) == 0;
}
size_t chunks_never_differ(const Token*, const int64_t*, size_t limit) {
  return limit / 64 * 64;
}
size_t chunks_reversed(const Token* key, const int64_t* ids, size_t limit) {
  size_t n = 0;
  while (n + 64 <= limit) {
    uint64_t diff = 0;
    for (size_t k = 0; k < 64; ++k)
      diff |= static_cast<uint64_t>(static_cast<int64_t>(key[n + 63 - k]) ^ ids[n + k]);
    if (diff != 0) break;
    n += 64;
  }
  return n;
}

TEST(RebuildCheck, WideHelpersAgainstPlainReferences) {
  std::vector<Token> key(200);
  for (size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<Token>(i * 7 % 50);
  std::vector<int64_t> ids(key.begin(), key.end());
  EXPECT_EQ(wide_helpers_problem(key, ids, all_wide_ids_fit, equal_wide_chunks), "");
  EXPECT_NE(wide_helpers_problem(key, ids, all_wide_ids_fit, chunks_reversed), "");
  ids[100] += 1;  // the key leaves the ids in the second chunk
  EXPECT_EQ(wide_helpers_problem(key, ids, all_wide_ids_fit, equal_wide_chunks), "");
  EXPECT_NE(wide_helpers_problem(key, ids, all_wide_ids_fit, chunks_never_differ)
                .find("equal_wide_chunks counts 192"),
            std::string::npos);
  ids[100] -= 1;
  ids.back() = int64_t{1} << 31;  // one past Token's range
  EXPECT_EQ(wide_helpers_problem(key, ids, all_wide_ids_fit, equal_wide_chunks), "");
  EXPECT_NE(wide_helpers_problem(key, ids, fit_shifted, equal_wide_chunks).find("all_wide_ids_fit"),
            std::string::npos);
}

TEST(RebuildCheck, AHybridTreeIsRefusedByName) {
  RadixTree hybrid(RadixTreeOptions{.page_size = 2});
  hybrid.add_component(std::make_unique<SwaComponent>(4));
  EXPECT_EQ(rebuild_problem(hybrid), "");  // refused with field aux_components: as it should
}

// A hybrid tree's snapshot is never restored, so its fields are read against the nodes.
// Planted: a snapshot that drops a node's SWA data, or reports a field another node holds.
TEST(RebuildCheck, AHybridSnapshotIsReadAgainstItsNodes) {
  RadixTree hybrid(RadixTreeOptions{.page_size = 2});
  hybrid.add_component(std::make_unique<SwaComponent>(4));
  const InsertResult r = hybrid.insert(
      0, std::vector<Token>{1, 1, 2, 2}, device_slots(10, 4),
      AuxInsertValues{.swa = IndexVector(Tier::kDevice, {50, 51, 52, 53}), .owned_from = 0});
  ASSERT_EQ(r.swa_adopted.size(), 4u);
  hybrid.insert(0, std::vector<Token>{1, 1, 3, 3}, device_slots(20, 4));  // split, no SWA
  TreeSnapshot s = hybrid.snapshot();
  EXPECT_EQ(snapshot_fields_problem(hybrid, s), "");
  auto with_swa = std::find_if(s.nodes.begin(), s.nodes.end(),
                               [](const NodeSnapshot& n) { return !n.aux_data.empty(); });
  ASSERT_NE(with_swa, s.nodes.end());
  with_swa->aux_data.clear();  // a snapshot that forgot the aux loop
  EXPECT_NE(snapshot_fields_problem(hybrid, s).find("aux_data"), std::string::npos);
  s = hybrid.snapshot();
  s.nodes.back().creation = 0;
  EXPECT_NE(snapshot_fields_problem(hybrid, s).find("creation"), std::string::npos);
  s = hybrid.snapshot();
  s.nodes.pop_back();
  EXPECT_NE(snapshot_fields_problem(hybrid, s).find("nodes for a tree of"), std::string::npos);
  EXPECT_EQ(rebuild_problem(hybrid), "");
}

TEST(RebuildCheck, RunsDuringAUnitAndFindsNothing) {
  int64_t checked = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Scenario s = draw_scenario(seed);
    RebuildCheck check;
    const RunResult r = run_scenario(
        RunRequest{.scenario = &s, .seed = seed, .setup = [&](Executor& e) { check.attach(e); }});
    ASSERT_FALSE(r.violation) << "seed " << seed << ": " << r.violation->detail;
    EXPECT_FALSE(check.problem()) << "seed " << seed << ": " << *check.problem();
    checked += check.checks();
  }
  EXPECT_GE(checked, 4);  // at least the end-of-run check of each
}

// An observer the unit's setup installed before the check (a test's planted loop, a crash
// recorder) still sees every op, fault and the executor's end: the check chains to it.
struct CountingObserver final : ExecutorObserver {
  void before_op(size_t, const Op&) override { ++before; }
  void after_op(size_t, const Op&, const OpOutcome&) override { ++after; }
  void on_fault(std::string_view) override { ++faults; }
  void on_executor_gone() override { ++gone; }
  int64_t before = 0, after = 0, faults = 0, gone = 0;
};

TEST(RebuildCheck, AnObserverSetBeforeItKeepsEveryCall) {
  const Scenario s = draw_scenario(3);
  CountingObserver alone, chained;
  const RunResult plain = run_scenario(
      RunRequest{.scenario = &s, .seed = 3, .setup = [&](Executor& e) { e.set_observer(&alone); }});
  RebuildCheck check;
  const RunResult watched =
      run_scenario(RunRequest{.scenario = &s, .seed = 3, .setup = [&](Executor& e) {
                                e.set_observer(&chained);
                                check.attach(e);
                              }});
  ASSERT_FALSE(plain.violation);
  EXPECT_GT(alone.before, 0);
  EXPECT_EQ(chained.before, alone.before);
  EXPECT_EQ(chained.after, alone.after);
  EXPECT_EQ(chained.faults, alone.faults);
  EXPECT_EQ(chained.gone, 1);
  EXPECT_EQ(watched.event_hash, plain.event_hash);
  EXPECT_GE(check.checks(), 1);
}

}  // namespace
}  // namespace kvsim::sim
