// Unit tests for RadixTree and FullComponent: match/split, insert, namespaces, locks,
// eviction order, residency changes and the tree's sanity checks.
#include "core/tree/radix_tree.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/common/assert.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::host;
using testing::seq;

class RadixTreeTest : public testing::CheckedTreeTest {};

TEST_F(RadixTreeTest, EmptyTreeMatchesNothingAtRoot) {
  MatchResult m = tree_.match_prefix(0, seq(1, 8));
  EXPECT_EQ(m.device_hit_length(), 0);
  EXPECT_EQ(m.last_device_node, tree_.root());
  EXPECT_EQ(m.best_match_node, tree_.root());
  EXPECT_EQ(m.last_host_node, tree_.root());
}

TEST_F(RadixTreeTest, InsertThenMatchIsPageAligned) {
  InsertResult ins = tree_.insert(0, seq(1, 10), dev(100, 10));  // 8 tokens kept
  EXPECT_EQ(ins.prefix_len, 0);
  EXPECT_EQ(ins.last_node->token_count(), 8);
  EXPECT_EQ(tree_.evictable_size(), 8);
  MatchResult m = tree_.match_prefix(0, seq(1, 7));  // aligned down to 4
  EXPECT_EQ(m.device_indices.slots(), dev(100, 4).slots());
  // The match ended inside the 8-token node, so it was split at 4.
  EXPECT_EQ(tree_.node_count(), 3u);
  EXPECT_EQ(m.last_device_node->token_count(), 4);
}

TEST_F(RadixTreeTest, SecondInsertReportsPrefixAndSplits) {
  tree_.insert(0, seq(1, 8), dev(100, 8));
  std::vector<Token> other = seq(1, 4);
  std::vector<Token> tail = seq(50, 4);
  other.insert(other.end(), tail.begin(), tail.end());
  InsertResult ins = tree_.insert(0, other, dev(200, 8));
  EXPECT_EQ(ins.prefix_len, 4);  // slots 200..203 are duplicates the caller frees
  MatchResult m = tree_.match_prefix(0, other);
  std::vector<SlotIndex> expected = {100, 101, 102, 103, 204, 205, 206, 207};
  EXPECT_EQ(m.device_indices.slots(), expected);
  EXPECT_EQ(tree_.evictable_size(), 12);
}

TEST_F(RadixTreeTest, NamespacesAreIsolated) {
  tree_.insert(1, seq(1, 8), dev(100, 8));
  EXPECT_EQ(tree_.match_prefix(2, seq(1, 8)).device_hit_length(), 0);
  EXPECT_EQ(tree_.match_prefix(1, seq(1, 8)).device_hit_length(), 8);
  InsertResult ins = tree_.insert(2, seq(1, 8), dev(200, 8));
  EXPECT_EQ(ins.prefix_len, 0);
  EXPECT_EQ(tree_.match_prefix(2, seq(1, 8)).device_indices.slots(), dev(200, 8).slots());
}

TEST_F(RadixTreeTest, LockMovesTokensToProtectedAndBack) {
  InsertResult ins = tree_.insert(0, seq(1, 8), dev(100, 8));
  LockRecord lock = tree_.lock(*ins.last_node);
  EXPECT_EQ(tree_.protected_size(), 8);
  EXPECT_EQ(tree_.evictable_size(), 0);
  EXPECT_EQ(tree_.next_device_victim(), nullptr);
  tree_.unlock(lock);
  EXPECT_EQ(tree_.protected_size(), 0);
  EXPECT_EQ(tree_.evictable_size(), 8);
}

TEST_F(RadixTreeTest, UnlockCoversNodesSplitAboveTheLockStart) {
  InsertResult ins = tree_.insert(0, seq(1, 8), dev(100, 8));
  LockRecord lock = tree_.lock(*ins.last_node);
  tree_.match_prefix(0, seq(1, 4));  // splits the locked node
  EXPECT_EQ(tree_.node_count(), 3u);
  EXPECT_EQ(tree_.protected_size(), 8);
  tree_.unlock(lock);
  EXPECT_EQ(tree_.protected_size(), 0);
}

TEST_F(RadixTreeTest, LockSkipsEvictedBottomSegmentAndReleaseReplaysIt) {
  // Seed 002: a lock anchored on an evicted node skips the evicted segment; if that node is
  // loaded back before release, release must not decrement it.
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));
  std::vector<Token> ab = seq(1, 8);
  InsertResult b = tree_.insert(0, ab, dev(100, 8));
  TreeNode* top = a.last_node;
  TreeNode* bottom = b.last_node;
  tree_.set_host_value(*top, host(10, 4));
  tree_.set_host_value(*bottom, host(14, 4));
  IndexVector freed = tree_.demote(*bottom).full_device();
  EXPECT_EQ(freed.slots(), dev(104, 4).slots());
  ASSERT_TRUE(bottom->evicted());

  LockRecord lock = tree_.lock(*bottom);
  EXPECT_EQ(bottom->full().lock_ref, 0);
  EXPECT_EQ(top->full().lock_ref, 1);
  tree_.set_device_value(*bottom, dev(300, 4));  // load-back revives the skipped node
  tree_.unlock(lock);
  EXPECT_EQ(bottom->full().lock_ref, 0);
  EXPECT_EQ(top->full().lock_ref, 0);
}

TEST_F(RadixTreeTest, MatchThroughEvictedNodesReportsHostHit) {
  tree_.insert(0, seq(1, 4), dev(100, 4));
  InsertResult b = tree_.insert(0, seq(1, 12), dev(100, 12));
  TreeNode* top = tree_.match_prefix(0, seq(1, 4)).last_device_node;
  tree_.set_host_value(*top, host(10, 4));
  tree_.set_host_value(*b.last_node, host(14, 8));
  tree_.demote(*b.last_node);
  MatchResult m = tree_.match_prefix(0, seq(1, 12));
  EXPECT_EQ(m.device_hit_length(), 4);
  EXPECT_EQ(m.last_device_node, top);
  EXPECT_EQ(m.best_match_node, b.last_node);
  EXPECT_EQ(m.last_host_node, b.last_node);
  EXPECT_EQ(m.host_hit_length, 8);
}

TEST_F(RadixTreeTest, LruEvictsLeastRecentlyUsedLeafFirst) {
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));
  InsertResult b = tree_.insert(0, seq(50, 4), dev(200, 4));
  tree_.match_prefix(0, seq(1, 4));  // a is now more recent than b
  EXPECT_EQ(tree_.next_device_victim(), b.last_node);
  IndexVector freed = tree_.remove_device_leaf(*b.last_node).full_device();
  EXPECT_EQ(freed.slots(), dev(200, 4).slots());
  EXPECT_EQ(tree_.next_device_victim(), a.last_node);
}

TEST(RadixTreeLfu, LfuEvictsLeastFrequentlyHitLeafFirst) {
  ScopedThrowingAsserts asserts;
  RadixTree tree(RadixTreeOptions{.page_size = 2, .eviction_policy = EvictionPolicy::kLfu});
  InsertResult a = tree.insert(0, seq(1, 2), dev(100, 2));
  InsertResult b = tree.insert(0, seq(9, 2), dev(200, 2));
  tree.insert(0, seq(1, 2), dev(300, 2));  // a hit twice
  tree.match_prefix(0, seq(9, 2));         // b most recent, but hit once
  EXPECT_EQ(tree.next_device_victim(), b.last_node);
  (void)a;
}

TEST_F(RadixTreeTest, ParentBecomesVictimAfterChildIsRemoved) {
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));
  InsertResult b = tree_.insert(0, seq(1, 8), dev(100, 8));
  EXPECT_EQ(tree_.next_device_victim(), b.last_node);
  tree_.remove_device_leaf(*b.last_node);
  EXPECT_EQ(tree_.next_device_victim(), a.last_node);
}

TEST_F(RadixTreeTest, EvictHostRemovesHostOnlyLeavesButNotProtectedOnes) {
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));
  tree_.set_host_value(*a.last_node, host(10, 4));
  tree_.demote(*a.last_node);
  EXPECT_EQ(tree_.next_host_victim(), a.last_node);
  tree_.protect_host(*a.last_node);
  EXPECT_EQ(tree_.next_host_victim(), nullptr);
  tree_.release_host(*a.last_node);
  IndexVector freed = tree_.remove_host_leaf(*a.last_node).full_host();
  EXPECT_EQ(freed.slots(), host(10, 4).slots());
  EXPECT_EQ(tree_.node_count(), 1u);
}

TEST_F(RadixTreeTest, InsertReattachesEvictedNodes) {
  InsertResult a = tree_.insert(0, seq(1, 8), dev(100, 8));
  tree_.set_host_value(*a.last_node, host(10, 8));
  tree_.demote(*a.last_node);
  EXPECT_EQ(tree_.evictable_size(), 0);
  InsertResult again = tree_.insert(0, seq(1, 8), dev(500, 8));
  EXPECT_EQ(again.prefix_len, 0);  // the request keeps its slots: they are the node's now
  EXPECT_EQ(tree_.evictable_size(), 8);
  EXPECT_EQ(tree_.match_prefix(0, seq(1, 8)).device_indices.slots(), dev(500, 8).slots());
}

TEST_F(RadixTreeTest, InsertHostStopsUnderNodeWithoutHostCopy) {
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));  // device only, no host copy
  HostInsertResult r = tree_.insert_host(0, *tree_.root(), seq(1, 12), host(20, 12), {});
  EXPECT_EQ(r.present_len, 0);
  EXPECT_EQ(r.refused_len, 12);
  tree_.set_host_value(*a.last_node, host(40, 4));
  r = tree_.insert_host(0, *tree_.root(), seq(1, 12), host(20, 12), {});
  EXPECT_EQ(r.present_len, 4);
  EXPECT_EQ(r.inserted_len, 8);
  EXPECT_TRUE(r.last_node->evicted());
  EXPECT_EQ(r.last_node->full().host_value->slots(), host(24, 8).slots());
  MatchResult m = tree_.match_prefix(0, seq(1, 12));
  EXPECT_EQ(m.host_hit_length, 8);
}

TEST_F(RadixTreeTest, ProgrammerErrorsAreCaught) {
  InsertResult a = tree_.insert(0, seq(1, 4), dev(100, 4));
  EXPECT_THROW(tree_.demote(*a.last_node), AssertionFailure);                      // no host copy
  EXPECT_THROW(tree_.set_host_value(*a.last_node, host(1, 3)), AssertionFailure);  // shape
  LockRecord lock = tree_.lock(*a.last_node);
  EXPECT_THROW(tree_.remove_device_leaf(*a.last_node), AssertionFailure);  // locked
  tree_.unlock(lock);
  EXPECT_THROW(tree_.release_host(*a.last_node), AssertionFailure);  // underflow
}

TEST(RadixTreeSanity, DetectsCorruptedState) {
  ScopedThrowingAsserts asserts;
  RadixTree tree(RadixTreeOptions{.page_size = 2});
  InsertResult a = tree.insert(0, seq(1, 4), dev(100, 4));
  SanityReport clean;
  tree.sanity_check(clean);
  ASSERT_TRUE(clean.ok()) << clean.summary();

  a.last_node->full().lock_ref = 1;  // a lock the accounting never saw
  SanityReport locked;
  tree.sanity_check(locked);
  EXPECT_TRUE(locked.has("tree.size_accounting"));
  EXPECT_TRUE(locked.has("tree.leaf_set"));
  a.last_node->full().lock_ref = 0;

  a.last_node->full().value.reset();  // neither device nor host copy
  SanityReport dead;
  tree.sanity_check(dead);
  EXPECT_TRUE(dead.has("tree.dead_node"));
  a.last_node->full().value = dev(100, 4);

  // Seed 001 shape: device-resident indices stored in the tree.
  a.last_node->full().host_value = IndexVector::on_device(
      Tier::kHost, {1, 2, 3, 4}, Block{.id = 9, .ptr = nullptr, .bytes = 32});
  SanityReport residency;
  tree.sanity_check(residency);
  EXPECT_TRUE(residency.has("residency"));
  a.last_node->full().host_value.reset();
}

// A tree of full attention only never makes a node's auxiliary storage: not on insert, split,
// lock, eviction or a read of an auxiliary component's (empty) data.
TEST_F(RadixTreeTest, AFullAttentionTreeMakesNoAuxiliaryStorage) {
  tree_.insert(0, seq(0, 16), dev(0, 16));
  tree_.insert(0, seq(0, 8), dev(100, 8));  // a prefix of the first node: splits it at 8
  std::vector<Token> other = seq(0, 4);
  const std::vector<Token> tail = seq(500, 8);
  other.insert(other.end(), tail.begin(), tail.end());
  tree_.insert(0, other, dev(200, 12));  // splits the first node at 4
  const MatchResult m = tree_.match_prefix(0, seq(0, 16));
  const LockRecord lock = tree_.lock(*m.last_device_node);
  tree_.unlock(lock);
  TreeNode* victim = tree_.next_device_victim();
  ASSERT_NE(victim, nullptr);
  (void)tree_.remove_device_leaf(*victim);
  size_t nodes = 0;
  tree_.for_each_node([&](const TreeNode& n) {
    ++nodes;
    EXPECT_EQ(n.aux, nullptr) << "node " << n.id;
    EXPECT_FALSE(n.component(ComponentType::kSwa).value.has_value());
    EXPECT_FALSE(n.aux_key(index_of(ComponentType::kMamba)).has_value());
    EXPECT_EQ(n.aux, nullptr) << "a const read made storage, node " << n.id;
  });
  EXPECT_GE(nodes, 4u);
}

}  // namespace
}  // namespace kvsim
