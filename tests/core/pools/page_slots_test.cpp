// expand_page_slots (core/pools/page_slots.h): the clone the machine picks writes every page's
// slots, for page sizes that do and do not fill whole vector registers, and nothing past them.
#include "core/pools/page_slots.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/pools/index_vector.h"

namespace kvsim {
namespace {

TEST(PageSlots, EveryPageIsExpandedInOrderAndNothingPastTheEnd) {
  for (const int32_t page : {1, 2, 3, 7, 8, 16, 33, 64, 512}) {
    const std::vector<SlotIndex> firsts = {int64_t{page} * 9, int64_t{page}, int64_t{page} * 4,
                                           (int64_t{1} << 40) + page};
    std::vector<SlotIndex> out(firsts.size() * static_cast<size_t>(page) + 3, -7);
    expand_page_slots(firsts.data(), firsts.size(), page, out.data());
    size_t i = 0;
    for (const SlotIndex first : firsts) {
      for (int32_t t = 0; t < page; ++t, ++i)
        ASSERT_EQ(out[i], first + t) << "page " << page << " at " << i;
    }
    for (; i < out.size(); ++i)
      EXPECT_EQ(out[i], -7) << "page " << page << ": wrote past the end";
  }
}

TEST(PageSlots, AnIndexVectorOfPagesCopiesTheSameSlotsItExpands) {
  const IndexVector v = IndexVector::pages(Tier::kDevice, 16, {32, 16, 160});
  std::vector<SlotIndex> out(v.size());
  v.copy_slots_to(out.data());
  EXPECT_EQ(out, v.to_vector());
  EXPECT_EQ(out.front(), 32);
  EXPECT_EQ(out[16], 16);
  EXPECT_EQ(out.back(), 175);
}

}  // namespace
}  // namespace kvsim
