#include "core/pools/page_slots.h"

#include "core/common/simd_clones.h"

namespace kvsim {

KVSIM_SIMD_CLONES void expand_page_slots(const SlotIndex* firsts, size_t pages, int32_t page,
                                         SlotIndex* out) {
  const auto n = static_cast<size_t>(page);
  for (size_t k = 0; k < pages; ++k) {
    const SlotIndex first = firsts[k];
    SlotIndex* dst = out + k * n;
    for (size_t t = 0; t < n; ++t)
      dst[t] = first + static_cast<SlotIndex>(t);
  }
}

}  // namespace kvsim
