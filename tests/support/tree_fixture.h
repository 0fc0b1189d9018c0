// Shared by the RadixTree unit tests: runs of tokens and slots, and a fixture whose tree (page
// size 4) must pass sanity_check at the end of every test.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"

namespace kvsim::testing {

inline std::vector<Token> seq(Token first, size_t n) {
  std::vector<Token> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline std::vector<SlotIndex> slot_seq(SlotIndex first, size_t n) {
  std::vector<SlotIndex> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

inline IndexVector slots(Tier tier, SlotIndex first, size_t n) {
  return IndexVector(tier, slot_seq(first, n));
}
inline IndexVector dev(SlotIndex first, size_t n) {
  return slots(Tier::kDevice, first, n);
}
inline IndexVector host(SlotIndex first, size_t n) {
  return slots(Tier::kHost, first, n);
}

class CheckedTreeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SanityReport report;
    tree_.sanity_check(report);
    EXPECT_TRUE(report.ok()) << report.summary();
  }

  ScopedThrowingAsserts asserts_;
  RadixTree tree_{RadixTreeOptions{.page_size = 4}};
};

}  // namespace kvsim::testing
