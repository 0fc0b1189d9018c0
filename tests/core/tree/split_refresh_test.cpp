// The access time of a node split by a partial match or insert (SGLang parity): SGLang stamps
// the child BEFORE splitting it, so the unmatched back half counts as just used and outlives
// leaves that were used earlier (docs/sglang-parity.md, "split refresh").
#include <gtest/gtest.h>

#include <numeric>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::seq;

class SplitRefreshTest : public testing::CheckedTreeTest {};

TEST_F(SplitRefreshTest, PartialMatchKeepsTheBackHalfRecent) {
  const std::vector<Token> a = seq(100, 8);  // two pages
  const std::vector<Token> b = seq(500, 4);  // inserted after a: more recent than a
  tree_.insert(0, a, dev(4, 8));
  tree_.insert(0, b, dev(12, 4));
  // Matching a's first page splits a; both halves are now more recent than b.
  MatchResult m = tree_.match_prefix(0, std::span<const Token>(a).first(4));
  ASSERT_EQ(m.device_hit_length(), 4);
  TreeNode* victim = tree_.next_device_victim();
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->key, b) << "the back half of the split node was filed as least recent";
}

TEST_F(SplitRefreshTest, PartialInsertKeepsTheBackHalfRecent) {
  const std::vector<Token> a = seq(100, 8);
  const std::vector<Token> b = seq(500, 4);
  tree_.insert(0, a, dev(4, 8));
  tree_.insert(0, b, dev(12, 4));
  // An insert that diverges after a's first page splits a, and adds a new leaf.
  std::vector<Token> c = seq(100, 4);
  const std::vector<Token> tail = seq(900, 4);
  c.insert(c.end(), tail.begin(), tail.end());
  IndexVector value = dev(4, 4);
  value.append(dev(16, 4));
  const InsertResult r = tree_.insert(0, c, value);
  ASSERT_EQ(r.prefix_len, 4);
  TreeNode* victim = tree_.next_device_victim();
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->key, b);
}

}  // namespace
}  // namespace kvsim
