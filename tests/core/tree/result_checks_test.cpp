// Unit tests for the result checks of radix_tree_results.cpp: each returns "" for what the
// operation returned, and names the disagreement for a result doctored after the fact.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/tree/mamba_component.h"
#include "core/tree/radix_tree.h"
#include "core/tree/radix_tree_results.h"
#include "core/tree/swa_component.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::host;
using testing::seq;

class ResultChecksTest : public testing::CheckedTreeTest {};

// The tree's access clock: the latest stamp a node carries (each touch and new node moves it).
uint64_t clock_of(const RadixTree& tree) {
  uint64_t clock = 0;
  tree.for_each_node([&](const TreeNode& n) {
    clock = std::max({clock, n.last_access, n.creation});
  });
  return clock;
}

bool names(const std::string& problem, const std::string& what) {
  return problem.find(what) != std::string::npos;
}

TEST_F(ResultChecksTest, MatchResultFieldsAreRecomputed) {
  tree_.insert(0, seq(1, 4), dev(100, 4));
  InsertResult b = tree_.insert(0, seq(1, 12), dev(100, 12));
  TreeNode* top = tree_.match_prefix(0, seq(1, 4)).last_device_node;
  tree_.set_host_value(*top, host(10, 4));
  tree_.set_host_value(*b.last_node, host(14, 8));
  tree_.demote(*b.last_node);
  const std::vector<Token> q = seq(1, 12);
  const std::span<const Token> tokens(q);
  const MatchResult m = tree_.match_prefix(0, tokens);
  EXPECT_EQ(check_match_result(tree_, *b.last_node, 0, tokens, m), "");

  MatchResult bad = m;
  bad.host_hit_length = 4;
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, tokens, bad), "host hit"));
  bad = m;
  bad.last_host_node = top;
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, tokens, bad), "device/best/host"));
  bad = m;
  bad.best_match_node = top;
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, tokens, bad), "device/best/host"));
  bad = m;
  bad.device_indices = dev(101, 4);
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, tokens, bad), "device index 0"));
  bad = m;
  bad.device_indices = dev(100, 3);
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, tokens, bad), "device index 3"));
  // Another query than the walk's: its tokens differ from the path.
  const std::vector<Token> other = seq(2, 12);
  EXPECT_TRUE(names(check_match_result(tree_, *b.last_node, 0, std::span<const Token>(other), m),
                    "differs"));
}

TEST_F(ResultChecksTest, AShortMatchIsReported) {
  tree_.insert(0, seq(1, 8), dev(100, 8));
  const std::vector<Token> q = seq(1, 8);
  const MatchResult m = tree_.match_prefix(0, std::span<const Token>(q));
  EXPECT_EQ(check_match_result(tree_, *m.last_device_node, 0, std::span<const Token>(q), m), "");
  // A walk of the empty query leaves an empty path: checked against the full query, the
  // root's child continues it.
  const MatchResult none = tree_.match_prefix(0, std::span<const Token>());
  EXPECT_TRUE(names(check_match_result(tree_, *tree_.root(), 0, std::span<const Token>(q), none),
                    "continues"));
}

TEST_F(ResultChecksTest, InsertResultFieldsAreRecomputed) {
  tree_.insert(0, seq(1, 8), dev(100, 8));
  const std::vector<Token> q = seq(1, 16);
  const TreeResultBaseline before = check_baseline(tree_, clock_of(tree_));
  const InsertResult r = tree_.insert(0, q, dev(200, 16));
  const std::span<const Token> tokens(q);
  EXPECT_EQ(check_insert_result(tree_, 0, tokens, {}, r, before), "");
  ASSERT_EQ(r.hit_nodes.size(), 2u);

  InsertResult bad = r;
  bad.prefix_len = 0;
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "prefix_len"));
  bad = r;
  bad.last_node = r.hit_nodes[0];
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "ends 8 tokens"));
  bad = r;
  bad.hit_nodes.pop_back();
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "hit nodes"));
  bad = r;
  std::swap(bad.hit_nodes[0], bad.hit_nodes[1]);
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "hit nodes"));
  bad = r;
  bad.mamba_adopted = true;
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "Mamba"));
  bad = r;
  bad.swa_adopted = {7};
  EXPECT_TRUE(names(check_insert_result(tree_, 0, tokens, {}, bad, before), "SWA"));
}

TEST_F(ResultChecksTest, LockResultsAreRecomputed) {
  InsertResult a = tree_.insert(0, seq(1, 8), dev(100, 8));
  TreeResultBaseline before = check_baseline(tree_, clock_of(tree_));
  const LockRecord rec = tree_.lock(*a.last_node);
  EXPECT_EQ(check_lock_result(tree_, a.last_node, rec, before), "");
  LockRecord bad = rec;
  bad.start[0].reset();
  EXPECT_TRUE(names(check_lock_result(tree_, a.last_node, bad, before), "full lock starts"));
  bad = rec;
  bad.start[index_of(ComponentType::kMamba)] = a.last_node->id;
  EXPECT_TRUE(names(check_lock_result(tree_, a.last_node, bad, before), "mamba lock start"));
  // Counted from a baseline taken after the lock, nothing moved.
  EXPECT_TRUE(
      names(check_lock_result(tree_, a.last_node, rec, check_baseline(tree_, clock_of(tree_))),
            "moved by 0"));
  before = check_baseline(tree_, clock_of(tree_));
  tree_.unlock(rec);
  EXPECT_EQ(check_lock_result(tree_, nullptr, rec, before), "");
  EXPECT_TRUE(names(check_lock_result(tree_, nullptr, rec, check_baseline(tree_, clock_of(tree_))),
                    "moved by 0"));
}

TEST_F(ResultChecksTest, ReleasedSlotsAreRecomputed) {
  InsertResult a = tree_.insert(0, seq(1, 8), dev(100, 8));
  tree_.set_host_value(*a.last_node, host(10, 8));
  const NodeSlotsBefore before = check_node_slots(tree_, *a.last_node);
  ReleasedSlots out = tree_.demote(*a.last_node);
  EXPECT_EQ(check_released(tree_, before, out, true, false, false), "");
  ReleasedSlots bad;
  bad.device[0] = dev(100, 4);
  EXPECT_TRUE(names(check_released(tree_, before, bad, true, false, false), "full device"));
  bad.device[0] = dev(101, 8);
  EXPECT_TRUE(names(check_released(tree_, before, bad, true, false, false), "full device"));
  bad = ReleasedSlots{};
  bad.device[0] = out.device[0];
  bad.host[0] = host(10, 8);
  EXPECT_TRUE(names(check_released(tree_, before, bad, true, false, false), "full host"));
  EXPECT_TRUE(names(check_released(tree_, before, out, true, false, true), "not removed"));

  const NodeSlotsBefore leaf = check_node_slots(tree_, *a.last_node);
  out = tree_.remove_host_leaf(*a.last_node);
  EXPECT_EQ(check_released(tree_, leaf, out, true, true, true), "");
  bad = ReleasedSlots{};
  EXPECT_TRUE(names(check_released(tree_, leaf, bad, true, true, true), "full host"));
}

TEST(ResultChecksHybrid, SideSlotsOfInsertAndLockAreRecomputed) {
  ScopedThrowingAsserts throwing;
  RadixTree tree(RadixTreeOptions{.page_size = 4});
  tree.add_component(std::make_unique<SwaComponent>(4));
  tree.add_component(std::make_unique<MambaComponent>());
  const std::vector<Token> q = seq(1, 8);
  AuxInsertValues aux{.swa = dev(500, 8), .mamba = SlotIndex{900}};
  const TreeResultBaseline before = check_baseline(tree, clock_of(tree));
  const InsertResult r = tree.insert(0, q, dev(100, 8), aux);
  const std::span<const Token> tokens(q);
  EXPECT_EQ(check_insert_result(tree, 0, tokens, aux, r, before), "");
  EXPECT_EQ(r.swa_adopted.size(), 8u);
  EXPECT_TRUE(r.mamba_adopted);
  InsertResult bad = r;
  bad.swa_adopted.pop_back();
  EXPECT_TRUE(names(check_insert_result(tree, 0, tokens, aux, bad, before), "SWA"));
  bad = r;
  bad.swa_adopted[0] = 501;
  bad.swa_adopted[1] = 500;
  EXPECT_TRUE(names(check_insert_result(tree, 0, tokens, aux, bad, before), "request's own"));
  bad = r;
  bad.mamba_adopted = false;
  EXPECT_TRUE(names(check_insert_result(tree, 0, tokens, aux, bad, before), "Mamba"));

  const MatchResult m = tree.match_prefix(0, tokens);
  EXPECT_EQ(check_match_result(tree, *r.last_node, 0, tokens, m), "");
  EXPECT_EQ(m.last_device_node, r.last_node);
  // With the SWA value taken off the leaf, its window no longer holds: the match stops above.
  tree.take_aux_value(*r.last_node, ComponentType::kSwa);
  const MatchResult cut = tree.match_prefix(0, tokens);
  EXPECT_EQ(check_match_result(tree, *r.last_node, 0, tokens, cut), "");
  EXPECT_EQ(cut.last_device_node, tree.root());
  MatchResult wrong = cut;
  wrong.last_device_node = r.last_node;
  EXPECT_TRUE(names(check_match_result(tree, *r.last_node, 0, tokens, wrong), "device/best/host"));

  TreeResultBaseline lb = check_baseline(tree, clock_of(tree));
  const LockRecord rec = tree.lock(*r.last_node);
  EXPECT_EQ(check_lock_result(tree, r.last_node, rec, lb), "");
  EXPECT_TRUE(rec.start[index_of(ComponentType::kMamba)].has_value());
  EXPECT_FALSE(rec.start[index_of(ComponentType::kSwa)].has_value());
  lb = check_baseline(tree, clock_of(tree));
  tree.unlock(rec);
  EXPECT_EQ(check_lock_result(tree, nullptr, rec, lb), "");
}

}  // namespace
}  // namespace kvsim
