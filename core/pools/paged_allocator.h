// PagedSlotAllocator: hands out the token slots of one pool (device or host) in whole pages.
//
// Pages are numbered 1..page_count; page 0 (slots [0, page_size)) is reserved as the padding
// page and never handed out, so the pool it indexes has (page_count + 1) * page_size slots.
// alloc() returns page-granular indices (one first slot per page, IndexVector::pages); freed
// pages go to the front of the free list,
// so the most recently freed page is reused first (SGLang's LIFO). alloc and free are O(1) per
// page: a free stack plus one state byte per page.
//
// Caller contract (documented no-ops and error values, never an abort):
//  - a size that is not a page multiple is rounded down to whole pages, as SGLang's paged
//    allocator does (size // page_size pages); a size below one page gives an allocator with no
//    pages, whose alloc() of anything but 0 returns nullopt;
//  - alloc(0) returns an empty vector and free() of an empty vector does nothing.
//
// Invariants (check() reports the first broken one):
//  1. every page in 1..page_count is either free (exactly once in the free list) or allocated,
//     never both; page 0 is neither;
//  2. free pages + allocated pages == page_count, and available_size() == free pages × page_size;
//  3. free() accepts only host-resident vectors of this allocator's tier made of whole, aligned,
//     allocated pages; anything else (residency, foreign, misaligned, out-of-range or double
//     free) is a programmer error: KV_ASSERT, and the allocator is left unchanged. So is
//     alloc() of a negative or non-page-multiple count (the tree and HiCache never ask one;
//     HiCache::alloc_device turns it into an error value at the API edge).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/common/types.h"
#include "core/pools/index_vector.h"

namespace kvsim {

class PagedSlotAllocator {
 public:
  // floor(size_tokens / page_size) usable pages, plus the reserved page. page_size > 0.
  PagedSlotAllocator(Tier tier, int64_t size_tokens, int32_t page_size);

  // `tokens` must be a non-negative multiple of page_size (0: an empty vector); nullopt when
  // not enough pages are free.
  std::optional<IndexVector> alloc(int64_t tokens);
  void free(const IndexVector& slots);

  Tier tier() const { return tier_; }
  int32_t page_size() const { return page_size_; }
  int64_t page_count() const { return page_count_; }              // usable pages
  int64_t capacity() const { return page_count_ * page_size_; }   // usable tokens
  int64_t slot_count() const { return capacity() + page_size_; }  // pool slots, page 0 included
  int64_t available_size() const { return static_cast<int64_t>(free_pages_.size()) * page_size_; }
  bool is_allocated(SlotIndex slot) const;
  // The same by page number (1..page_count), inline: sanity walks ask once per owned page.
  bool page_is_allocated(int64_t page) const {
    return page >= 1 && page <= page_count_ && state_[static_cast<size_t>(page)] == kAllocated;
  }
  // "" when consistent, else a description of the first problem (O(pages)).
  std::string check() const;

 private:
  // Frees whole pages given by their first slots; false (nothing changed) on any bad page.
  bool free_pages(std::span<const SlotIndex> firsts);
  friend struct PagedSlotAllocatorTestPeer;  // tests corrupt the state to exercise check()

  enum PageState : uint8_t { kFree = 0, kAllocated = 1, kFreeing = 2 };

  // Marks the page that starts at slots[i] kFreeing; false (nothing marked) if that page
  // cannot be freed.
  bool claim_page_for_free(const IndexVector& slots, size_t i);
  // Why the page that starts at slots[i] cannot be freed (called only after a failed claim).
  std::string free_problem(const IndexVector& slots, size_t i) const;

  Tier tier_;
  int32_t page_size_;
  int64_t page_count_;
  std::vector<int64_t> free_pages_;  // a stack: back() is the front of the free list
  std::vector<uint8_t> state_;       // PageState per page; index 0 is the reserved page
};

}  // namespace kvsim
