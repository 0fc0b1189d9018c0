// [tree.cached_value]: every value a node caches is recomputed by sanity_check. Each test plants
// the bug a careless change would make (a cached value left stale) and expects the named
// violation; restoring the value makes the tree sane again (CheckedTreeTest's TearDown).
#include <gtest/gtest.h>

#include "core/tree/eviction_policy.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::seq;

class CachedValuesTest : public testing::CheckedTreeTest {
 protected:
  bool reports(const std::string& name) {
    SanityReport report;
    tree_.sanity_check(report);
    return report.has(name);
  }
};

TEST_F(CachedValuesTest, CleanTreeReportsNothing) {
  tree_.insert(0, seq(1, 16), dev(100, 16));
  tree_.match_prefix(0, seq(1, 8));  // split: the back half's first-page hash is reset
  EXPECT_FALSE(reports("tree.cached_value"));
}

TEST_F(CachedValuesTest, StaleFirstPageHashIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 8), dev(100, 8)).last_node;
  const std::optional<uint64_t> saved = leaf->first_page_hash;
  // A first-page hash cached for another page (what a split that forgot the reset leaves).
  leaf->first_page_hash = ChildIndex::hash(0, std::vector<Token>{9, 9, 9, 9});
  EXPECT_TRUE(reports("tree.cached_value"));
  leaf->first_page_hash = saved;
}

TEST_F(CachedValuesTest, StaleEvictionKeyOfAListedLeafIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 8), dev(100, 8)).last_node;
  ASSERT_TRUE(leaf->device_leaf_key);
  // A touch that forgot refresh_leaf: the access time moved, the filed key did not.
  ++leaf->last_access;
  EXPECT_TRUE(reports("tree.cached_value"));
  --leaf->last_access;
}

TEST_F(CachedValuesTest, StaleHostLeafKeyIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 8), dev(100, 8)).last_node;
  tree_.set_host_value(*leaf, testing::host(500, 8));
  tree_.demote(*leaf);
  ASSERT_TRUE(leaf->host_leaf_key);
  (*leaf->host_leaf_key)[0] += 1;  // filed under a key the node no longer has
  EXPECT_TRUE(reports("tree.cached_value"));
  (*leaf->host_leaf_key)[0] -= 1;
  EXPECT_FALSE(reports("tree.cached_value"));
  tree_.remove_host_leaf(*leaf);
}

TEST_F(CachedValuesTest, StampAheadOfTheClockIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 8), dev(100, 8)).last_node;
  const LockRecord lock = tree_.lock(*leaf);  // off the leaf set: only the stamp check can see it
  const uint64_t saved = leaf->creation;
  leaf->creation = leaf->last_access + 1;
  EXPECT_TRUE(reports("tree.cached_value"));
  leaf->creation = saved;
  tree_.unlock(lock);
}

TEST_F(CachedValuesTest, SplitFrontHalfWithoutTheCreationStampIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 16), dev(100, 16)).last_node;
  tree_.match_prefix(0, seq(1, 8));  // split: the front half takes the leaf's stamp
  TreeNode* front = leaf->parent;
  ASSERT_FALSE(front->is_root());
  EXPECT_EQ(front->creation, leaf->creation);
  EXPECT_FALSE(reports("tree.cached_value"));
  const LockRecord lock = tree_.lock(*leaf);
  const uint64_t saved = front->creation;
  front->creation = 0;  // a split that forgot to copy the stamp
  EXPECT_TRUE(reports("tree.cached_value"));
  front->creation = leaf->creation + 1;  // made after the node that hangs under it
  EXPECT_TRUE(reports("tree.cached_value"));
  front->creation = saved;
  EXPECT_FALSE(reports("tree.cached_value"));
  tree_.unlock(lock);
}

TEST_F(CachedValuesTest, NodeIdThatTheIndexDoesNotLeadToIsReported) {
  TreeNode* leaf = tree_.insert(0, seq(1, 8), dev(100, 8)).last_node;
  const LockRecord lock = tree_.lock(*leaf);
  const NodeId saved = leaf->id;
  leaf->id = saved + 100;  // the id index still files the node under its old id
  EXPECT_TRUE(reports("tree.cached_value"));
  leaf->id = saved;
  tree_.unlock(lock);
}

}  // namespace
}  // namespace kvsim
