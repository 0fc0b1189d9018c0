// Node keys share their storage (core/tree/token_run.h): a split moves no token, an insert of a
// TokenRun views the caller's storage, and the tree keeps that storage alive on its own.
#include <gtest/gtest.h>

#include <numeric>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::seq;

class TokenRunTreeTest : public testing::CheckedTreeTest {};

TEST(TokenRun, SlicesViewTheSameStorage) {
  ScopedThrowingAsserts asserts;
  const TokenRun run = TokenRun::copy_of(seq(10, 8));
  const TokenRun back = run.drop_front(4);
  EXPECT_EQ(back.data(), run.data() + 4);
  EXPECT_EQ(back, seq(14, 4));
  EXPECT_EQ(run.first(4), seq(10, 4));
  EXPECT_TRUE(run.slice(8, 0).empty());
  EXPECT_THROW((void)run.slice(5, 4), AssertionFailure);
}

TEST(TokenRun, CopyOfDoesNotAliasItsSource) {
  std::vector<Token> src = seq(0, 4);
  const TokenRun run = TokenRun::copy_of(src);
  src[0] = 99;
  EXPECT_EQ(run, seq(0, 4));
}

TEST_F(TokenRunTreeTest, ASplitLeavesBothHalvesOnTheOriginalStorage) {
  tree_.insert(0, seq(100, 12), dev(4, 12));
  const Token* stored = tree_.match_prefix(0, seq(100, 12)).last_device_node->key.data();
  // A match of the first page splits the node in two.
  const MatchResult m = tree_.match_prefix(0, seq(100, 4));
  ASSERT_EQ(m.device_hit_length(), 4);
  const TreeNode& front = *m.last_device_node;
  ASSERT_EQ(front.children.size(), 1u);
  const TreeNode& back = *front.children.begin()->node;
  EXPECT_EQ(front.key.data(), stored);
  EXPECT_EQ(back.key.data(), stored + 4) << "the back half was copied, not viewed";
  EXPECT_EQ(back.key, seq(104, 8));
}

TEST_F(TokenRunTreeTest, ASharedInsertViewsTheCallersStorageAndKeepsItAlive) {
  const Token* base = nullptr;
  {
    const TokenRun prompt = TokenRun::adopt(seq(200, 10));  // 2 whole pages + 2 tokens
    base = prompt.data();
    const InsertResult r = tree_.insert(0, prompt, dev(8, 10));
    ASSERT_EQ(r.prefix_len, 0);
    EXPECT_EQ(r.last_node->key.data(), base) << "the new leaf copied the shared prompt";
    EXPECT_EQ(r.last_node->key.size(), 8u);
  }
  // The caller's run is gone; the tree's key still holds the storage and its tokens.
  const MatchResult m = tree_.match_prefix(0, seq(200, 8));
  EXPECT_EQ(m.device_hit_length(), 8);
  EXPECT_EQ(m.last_device_node->key.data(), base);
}

TEST_F(TokenRunTreeTest, ASharedInsertBelowACachedPrefixViewsOnlyItsNewPart) {
  tree_.insert(0, seq(300, 4), dev(4, 4));
  std::vector<Token> tokens = seq(300, 4);
  const std::vector<Token> tail = seq(900, 8);
  tokens.insert(tokens.end(), tail.begin(), tail.end());
  const TokenRun prompt = TokenRun::adopt(tokens);
  IndexVector value = dev(4, 4);
  value.append(dev(16, 8));
  const InsertResult r = tree_.insert(0, prompt, value);
  EXPECT_EQ(r.prefix_len, 4);
  EXPECT_EQ(r.last_node->key.data(), prompt.data() + 4);
  EXPECT_EQ(r.last_node->key, tail);
}

}  // namespace
}  // namespace kvsim
