// Page-granular IndexVector (one first slot per page): same contents as the per-token vector
// of the same slots, whatever the stride, through size, [], slots(), slice, append and ==.
#include <gtest/gtest.h>

#include "core/common/assert.h"
#include "core/pools/index_vector.h"
#include "core/pools/paged_allocator.h"

namespace kvsim {
namespace {

std::vector<SlotIndex> expand(std::initializer_list<SlotIndex> firsts, int32_t page) {
  std::vector<SlotIndex> out;
  for (SlotIndex f : firsts) {
    for (int32_t t = 0; t < page; ++t)
      out.push_back(f + t);
  }
  return out;
}

TEST(IndexVectorPages, StandsForTheSlotsOfItsPages) {
  const IndexVector v = IndexVector::pages(Tier::kDevice, 4, {12, 4, 20});
  EXPECT_EQ(v.stride(), 4);
  EXPECT_EQ(v.size(), 12u);
  EXPECT_EQ(v.entries().size(), 3u);
  EXPECT_EQ(v[0], 12);
  EXPECT_EQ(v[5], 5);
  EXPECT_EQ(v[11], 23);
  EXPECT_EQ(v.slots(), expand({12, 4, 20}, 4));
  EXPECT_EQ(v, IndexVector(Tier::kDevice, expand({12, 4, 20}, 4)));
  EXPECT_FALSE(v == IndexVector(Tier::kDevice, expand({12, 4, 24}, 4)));
  EXPECT_FALSE(v == IndexVector::pages(Tier::kHost, 4, {12, 4, 20}));
}

TEST(IndexVectorPages, AlignedSlicesStayPagedOthersExpand) {
  const IndexVector v = IndexVector::pages(Tier::kDevice, 4, {12, 4, 20});
  const IndexVector mid = v.slice(4, 12);
  EXPECT_EQ(mid.stride(), 4);
  EXPECT_EQ(mid.slots(), expand({4, 20}, 4));
  const IndexVector odd = v.slice(2, 7);
  EXPECT_EQ(odd.stride(), 1);
  EXPECT_EQ(odd.slots(), (std::vector<SlotIndex>{14, 15, 4, 5, 6}));
  ScopedThrowingAsserts asserts;
  EXPECT_THROW((void)v.slice(4, 13), AssertionFailure);
}

TEST(IndexVectorPages, AppendKeepsEqualStridesAndExpandsMixedOnes) {
  IndexVector v = IndexVector::pages(Tier::kDevice, 4, {8});
  const std::vector<SlotIndex> before = v.slots();  // expansion cached, then invalidated
  v.append(IndexVector::pages(Tier::kDevice, 4, {16}));
  EXPECT_EQ(v.stride(), 4);
  EXPECT_EQ(v.slots(), expand({8, 16}, 4));
  v.append(IndexVector(Tier::kDevice, {40, 41}));
  EXPECT_EQ(v.stride(), 1);
  std::vector<SlotIndex> want = expand({8, 16}, 4);
  want.push_back(40);
  want.push_back(41);
  EXPECT_EQ(v.slots(), want);
  IndexVector empty(Tier::kDevice, {});
  empty.append(IndexVector::pages(Tier::kDevice, 4, {4}));
  EXPECT_EQ(empty.stride(), 4);
  EXPECT_EQ(empty.size(), 4u);
  EXPECT_EQ(before.size(), 4u);
}

TEST(IndexVectorPages, AllocatorHandsOutPagesAndTakesEitherFormBack) {
  PagedSlotAllocator a(Tier::kDevice, 32, 4);
  IndexVector v = *a.alloc(12);
  EXPECT_EQ(v.stride(), 4);
  EXPECT_EQ(v.slots(), expand({4, 8, 12}, 4));
  a.free(v.slice(0, 4));                                      // page-granular
  a.free(IndexVector(Tier::kDevice, v.slice(4, 8).slots()));  // the same pages, per token
  EXPECT_EQ(a.available_size(), 28);
  EXPECT_EQ(a.check(), "");
  ScopedThrowingAsserts asserts;
  EXPECT_THROW(a.free(v.slice(0, 4)), AssertionFailure);  // double free, page form
  EXPECT_THROW(a.free(IndexVector::pages(Tier::kDevice, 4, {6})), AssertionFailure);    // unaligned
  EXPECT_THROW(a.free(IndexVector::pages(Tier::kDevice, 4, {400})), AssertionFailure);  // foreign
  EXPECT_EQ(a.check(), "");
  a.free(v.slice(8, 12));
  EXPECT_EQ(a.available_size(), 32);
}

}  // namespace
}  // namespace kvsim
