// RadixTree over wide (int64) token ids: a match stops before an id outside Token's range, an
// insert refuses one (TokenOutOfRange) or a throwing value source with the tree unchanged, and
// the value source is asked only for the ranges the tree stores.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/tree/radix_tree.h"
#include "core/tree/token_run.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::host;
using testing::seq;
using Calls = std::vector<std::pair<size_t, size_t>>;

constexpr int64_t kWideTwo32 = int64_t{1} << 32;

std::vector<int64_t> wide(const std::vector<Token>& t) {
  return std::vector<int64_t>(t.begin(), t.end());
}
std::vector<Token> cat(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class WideInsertTest : public testing::CheckedTreeTest {
 protected:
  MatchResult match(Namespace ns, const std::vector<int64_t>& ids) {
    return tree_.match_prefix(ns, std::span<const int64_t>(ids));
  }
  // Inserts through the Token or the wide value-source overload; slot of position i is 500 + i.
  InsertResult insert(bool use_wide, const std::vector<Token>& key, Calls* calls) {
    auto source = [calls](size_t b, size_t e) {
      calls->emplace_back(b, e);
      return dev(500 + static_cast<SlotIndex>(b), e - b);
    };
    if (use_wide) return tree_.insert(0, std::span<const int64_t>(wide(key)), source);
    return tree_.insert(0, std::span<const Token>(key), source);
  }
  void expect_unchanged(const TreeSnapshot& before) {
    EXPECT_TRUE(tree_.snapshot() == before);
    EXPECT_EQ(tree_.node_count(), before.nodes.size() + 1);
  }
  // seq(1, 4) on device and backed up; seq(5, 8) below it backed up and demoted.
  void tree_with_evicted_tail() {
    TreeNode* top = tree_.insert(0, seq(1, 4), dev(100, 4)).last_node;
    TreeNode* bottom = tree_.insert(0, seq(1, 12), dev(100, 12)).last_node;
    tree_.set_host_value(*top, host(10, 4));
    tree_.set_host_value(*bottom, host(14, 8));
    tree_.demote(*bottom);
    ASSERT_TRUE(bottom->evicted());
  }
  void check_source_calls(bool use_wide);
};

TEST_F(WideInsertTest, InRangeWideIdsMatchLikeTokens) {
  const std::vector<Token> key = {std::numeric_limits<Token>::min(), -1, 0, 7,
                                  std::numeric_limits<Token>::max(), -2, 3, 4};
  tree_.insert(0, key, dev(100, 8));
  MatchResult m = match(0, wide(key));
  EXPECT_EQ(m.device_hit_length(), 8);
  EXPECT_EQ(m.device_indices.slots(), dev(100, 8).slots());
}

TEST_F(WideInsertTest, MatchStopsBeforeAnIdOutsideTokenRangeInTheSecondPage) {
  const std::vector<int64_t> bads = {kWideTwo32 + 6, int64_t{1} << 31, -(int64_t{1} << 31) - 1,
                                     -kWideTwo32 + 6, std::numeric_limits<int64_t>::max()};
  for (size_t i = 0; i < bads.size(); ++i) {
    const Namespace ns = i + 1;
    // The stored key holds, at position 5, what the bad id would truncate to.
    std::vector<Token> key = seq(1, 12);
    key[5] = static_cast<Token>(bads[i]);
    tree_.insert(ns, key, dev(100, 12));
    std::vector<int64_t> ids = wide(key);
    ids[5] = bads[i];
    MatchResult m = match(ns, ids);
    EXPECT_EQ(m.device_hit_length(), 4) << bads[i];
    EXPECT_EQ(m.device_indices.slots(), dev(100, 4).slots()) << bads[i];
    EXPECT_EQ(m.last_device_node->token_count(), 4) << bads[i];  // split where the match ends
    ids[1] = bads[i];                                            // in the first page: nothing
    EXPECT_EQ(match(ns, ids).device_hit_length(), 0) << bads[i];
  }
}

TEST(WideMatch, PageSizeOneStopsRightBeforeTheBadId) {
  ScopedThrowingAsserts asserts;
  RadixTree tree(RadixTreeOptions{.page_size = 1});
  std::vector<Token> key = seq(1, 10);
  tree.insert(0, key, dev(100, 10));
  std::vector<int64_t> ids = wide(key);
  ids[5] = ids[5] + kWideTwo32;
  EXPECT_EQ(tree.match_prefix(0, std::span<const int64_t>(ids)).device_hit_length(), 5);
}

TEST_F(WideInsertTest, BadIdInTheUnalignedTailIsIgnored) {
  std::vector<int64_t> ids = wide(seq(1, 14));
  ids[13] = kWideTwo32;
  Calls calls;
  InsertResult r = tree_.insert(0, std::span<const int64_t>(ids), [&](size_t b, size_t e) {
    calls.emplace_back(b, e);
    return dev(100 + static_cast<SlotIndex>(b), e - b);
  });
  EXPECT_EQ(r.last_node->token_count(), 12);
  EXPECT_EQ(calls, (Calls{{0, 12}}));
  EXPECT_EQ(match(0, ids).device_hit_length(), 12);
}

TEST_F(WideInsertTest, OutOfRangeInsertThrowsWithTheTreeUnchanged) {
  tree_.insert(0, seq(1, 12), dev(100, 12));
  struct Case {
    std::vector<int64_t> ids;
    size_t bad;
  };
  std::vector<Case> cases;
  // Partial match of the 12-token node (it would be split at 4): first difference in range.
  cases.push_back({wide(seq(1, 12)), 6});
  cases.back().ids[5] = 99;
  cases.back().ids[6] = kWideTwo32 + 7;
  // The bad id is itself the first difference (it truncates to the stored 7).
  cases.push_back({wide(seq(1, 12)), 6});
  cases.back().ids[6] = kWideTwo32 + 7;
  // Two pages later than the split point.
  cases.push_back({wide(seq(1, 16)), 10});
  cases.back().ids[5] = 99;
  cases.back().ids[10] = -kWideTwo32;
  // Below the whole node: a new leaf only.
  cases.push_back({wide(seq(1, 20)), 17});
  cases.back().ids[17] = std::numeric_limits<int64_t>::min();
  // An empty namespace.
  cases.push_back({wide(seq(1, 8)), 0});
  cases.back().ids[0] = int64_t{1} << 31;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Namespace ns = i + 1 == cases.size() ? 9 : 0;
    const TreeSnapshot before = tree_.snapshot();
    const int64_t evictable = tree_.evictable_size();
    try {
      tree_.insert(ns, std::span<const int64_t>(cases[i].ids),
                   [](size_t b, size_t e) { return dev(900 + static_cast<SlotIndex>(b), e - b); });
      ADD_FAILURE() << "case " << i << " did not throw";
    } catch (const TokenOutOfRange& e) {
      EXPECT_EQ(e.index(), cases[i].bad) << "case " << i;
      EXPECT_TRUE(dynamic_cast<const std::invalid_argument*>(&e) != nullptr);
    }
    expect_unchanged(before);
    EXPECT_EQ(tree_.evictable_size(), evictable);
    EXPECT_EQ(tree_.protected_size(), 0);
    SanityReport report;
    tree_.sanity_check(report);
    EXPECT_TRUE(report.ok()) << "case " << i << ": " << report.summary();
  }
  EXPECT_EQ(tree_.node_count(), 2u);
}

TEST_F(WideInsertTest, ThrowingValueSourceLeavesTheTreeUnchanged) {
  tree_.insert(0, seq(1, 12), dev(100, 12));
  const std::vector<Token> key = cat(seq(1, 4), seq(50, 8));  // would split the node at 4
  for (bool use_wide : {false, true}) {
    const TreeSnapshot before = tree_.snapshot();
    auto source = [](size_t, size_t) -> IndexVector { throw std::runtime_error("no slots"); };
    if (use_wide) {
      EXPECT_THROW(tree_.insert(0, std::span<const int64_t>(wide(key)), source),
                   std::runtime_error);
    } else {
      EXPECT_THROW(tree_.insert(0, std::span<const Token>(key), source), std::runtime_error);
    }
    expect_unchanged(before);
  }
}

TEST_F(WideInsertTest, SourceThrowingAfterARefillLeavesTheTreeUnchanged) {
  tree_with_evicted_tail();
  const std::vector<Token> key = seq(1, 20);  // refills [4, 12), then a new leaf [12, 20)
  for (bool use_wide : {false, true}) {
    const TreeSnapshot before = tree_.snapshot();
    Calls calls;
    auto source = [&calls](size_t b, size_t e) {
      calls.emplace_back(b, e);
      if (calls.size() == 2) throw std::runtime_error("no slots for the leaf");
      return dev(500 + static_cast<SlotIndex>(b), e - b);
    };
    if (use_wide) {
      EXPECT_THROW(tree_.insert(0, std::span<const int64_t>(wide(key)), source),
                   std::runtime_error);
    } else {
      EXPECT_THROW(tree_.insert(0, std::span<const Token>(key), source), std::runtime_error);
    }
    EXPECT_EQ(calls, (Calls{{4, 12}, {12, 20}}));
    expect_unchanged(before);
  }
}

// The source is asked for the refilled nodes and the new leaf only, never for the part matched
// on device nor the unaligned tail.
void WideInsertTest::check_source_calls(bool use_wide) {
  tree_with_evicted_tail();
  Calls calls;
  InsertResult r = insert(use_wide, cat(seq(1, 20), {70, 71}), &calls);
  EXPECT_EQ(calls, (Calls{{4, 12}, {12, 20}}));
  EXPECT_EQ(r.prefix_len, 4);
  std::vector<SlotIndex> expected = dev(100, 4).slots();
  for (SlotIndex s = 504; s < 520; ++s)
    expected.push_back(s);
  EXPECT_EQ(tree_.match_prefix(0, seq(1, 20)).device_indices.slots(), expected);

  calls.clear();
  r = insert(use_wide, seq(1, 20), &calls);  // all cached on device: nothing asked
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(r.prefix_len, 20);

  calls.clear();
  r = insert(use_wide, cat(seq(1, 8), seq(60, 8)), &calls);  // splits [4, 12) at 8
  EXPECT_EQ(calls, (Calls{{8, 16}}));
  EXPECT_EQ(r.prefix_len, 8);
  EXPECT_EQ(tree_.match_prefix(0, cat(seq(1, 8), seq(60, 8))).device_indices.slots()[8], 508);
}

TEST_F(WideInsertTest, TokenSourceIsAskedOnlyForWhatTheTreeStores) {
  check_source_calls(false);
}

TEST_F(WideInsertTest, WideSourceIsAskedOnlyForWhatTheTreeStores) {
  check_source_calls(true);
}

}  // namespace
}  // namespace kvsim
