// PagedSlotAllocator: hands out token slots of one pool (device or host) in whole pages.
//
// Pages are numbered 1..page_count; page 0 (slots [0, page_size)) is reserved as the padding
// page and never handed out. alloc() returns page-expanded token indices; freed pages go to the
// front of the free list, so the most recently freed page is reused first (SGLang's LIFO).
//
// Invariants (check() reports the first broken one):
//  1. every page is either free (exactly once in the free list) or allocated, never both;
//  2. free pages + allocated pages == page_count; page 0 is never allocated or free-listed;
//  3. free() accepts only host-resident vectors of this pool's tier made of whole allocated
//     pages (double, foreign and misaligned frees are programmer errors: KV_ASSERT).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/pools/index_vector.h"

namespace kvsim {

class PagedSlotAllocator {
 public:
  // `size_tokens` usable slots (a positive multiple of page_size), plus the reserved page.
  PagedSlotAllocator(Tier tier, int64_t size_tokens, int32_t page_size);

  // `tokens` must be a positive multiple of page_size; nullopt when not enough pages are free.
  std::optional<IndexVector> alloc(int64_t tokens);
  void free(const IndexVector& slots);

  Tier tier() const { return tier_; }
  int32_t page_size() const { return page_size_; }
  int64_t capacity() const { return page_count_ * page_size_; }  // usable tokens
  int64_t available_size() const { return static_cast<int64_t>(free_pages_.size()) * page_size_; }
  bool is_allocated(SlotIndex slot) const;
  // "" when consistent, else a description of the first problem.
  std::string check() const;

 private:
  Tier tier_;
  int32_t page_size_;
  int64_t page_count_;
  std::deque<int64_t> free_pages_;
  std::vector<uint8_t> allocated_;  // per page, index 0 unused
};

}  // namespace kvsim
