#include "core/pools/paged_allocator.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/common/assert.h"

namespace kvsim {

PagedSlotAllocator::PagedSlotAllocator(Tier tier, int64_t size_tokens, int32_t page_size)
    : tier_(tier), page_size_(page_size), page_count_(0) {
  KV_ASSERT(page_size > 0, "page_size must be positive");
  page_count_ = std::max<int64_t>(size_tokens, 0) / page_size;  // whole pages, as SGLang
  state_.assign(static_cast<size_t>(page_count_ + 1), kFree);
  free_pages_.reserve(static_cast<size_t>(page_count_));
  for (int64_t p = page_count_; p >= 1; --p)
    free_pages_.push_back(p);  // page 1 on top: handed out first
}

std::optional<IndexVector> PagedSlotAllocator::alloc(int64_t tokens) {
  KV_ASSERT(tokens >= 0 && tokens % page_size_ == 0,
            "alloc of " + std::to_string(tokens) +
                " tokens: not a non-negative multiple of page size " + std::to_string(page_size_));
  const int64_t pages = tokens / page_size_;
  if (pages > static_cast<int64_t>(free_pages_.size())) return std::nullopt;
  // One entry per page (its first slot): the vector stands for the page's page_size slots.
  // The top `pages` entries of the free list, top first (the order pops would give).
  std::vector<SlotIndex> firsts(static_cast<size_t>(pages));
  // Members in locals, as in free_pages: the byte stores into the page states may alias them.
  const int64_t* const top = free_pages_.data() + free_pages_.size();
  uint8_t* const state = state_.data();
  const int64_t page_count = page_count_;
  const SlotIndex page_size = page_size_;
  SlotIndex* const out = firsts.data();
  for (size_t i = 0; i < firsts.size(); ++i) {
    const int64_t page = top[-1 - static_cast<ptrdiff_t>(i)];
    KV_ASSERT(page >= 1 && page <= page_count, "free list holds an invalid page");
    KV_ASSERT(state[page] == kFree,
              "double alloc: page " + std::to_string(page) + " is free-listed but allocated");
    state[page] = kAllocated;
    out[i] = page * page_size;
  }
  free_pages_.resize(free_pages_.size() - firsts.size());
  return IndexVector::pages(tier_, page_size_, std::move(firsts));
}

bool PagedSlotAllocator::claim_page_for_free(const IndexVector& slots, size_t i) {
  const SlotIndex first = slots[i];
  if (first < page_size_ || first % page_size_ != 0) return false;
  const int64_t page = first / page_size_;
  if (page > page_count_) return false;
  // A page-granular vector of this page size holds whole pages by construction.
  if (slots.stride() != page_size_) {
    for (int32_t t = 1; t < page_size_; ++t) {
      if (slots[i + static_cast<size_t>(t)] != first + t) return false;
    }
  }
  uint8_t& state = state_[static_cast<size_t>(page)];
  if (state != kAllocated) return false;
  state = kFreeing;
  return true;
}

std::string PagedSlotAllocator::free_problem(const IndexVector& slots, size_t i) const {
  const SlotIndex first = slots[i];
  if (first < 0 || first % page_size_ != 0) {
    return "free of slot " + std::to_string(first) + ": run does not start at a page boundary";
  }
  for (int32_t t = 1; t < page_size_; ++t) {
    if (slots[i + static_cast<size_t>(t)] != first + t) {
      return "free of a partial page at slot " + std::to_string(first);
    }
  }
  const int64_t page = first / page_size_;
  if (page < 1 || page > page_count_) {
    return "foreign free: slot " + std::to_string(first) + " is outside this " +
           std::string(to_string(tier_)) + " pool";
  }
  if (state_[static_cast<size_t>(page)] == kFreeing) {
    return "double free: page " + std::to_string(page) + " listed twice";
  }
  return "double free: slot " + std::to_string(first) + " is not allocated";
}

void PagedSlotAllocator::free(const IndexVector& slots) {
  KV_ASSERT(slots.residency() == Residency::kHost,
            "residency: free of device-resident indices (host indices moved to the device?)");
  KV_ASSERT(slots.tier() == tier_, "foreign free: " + std::string(to_string(slots.tier())) +
                                       " slots freed to the " + std::string(to_string(tier_)) +
                                       " pool");
  KV_ASSERT(slots.size() % static_cast<size_t>(page_size_) == 0,
            "free of " + std::to_string(slots.size()) + " slots: not whole pages");
  const size_t step = static_cast<size_t>(page_size_);
  if (slots.stride() == page_size_ && free_pages(slots.entries())) return;
  // Validate every page before changing anything, so a caught failure leaves no trace.
  size_t claimed = 0;
  while (claimed < slots.size() && claim_page_for_free(slots, claimed))
    claimed += step;
  if (claimed == slots.size()) {
    free_pages_.reserve(free_pages_.size() + slots.size() / step);
    for (size_t i = 0; i < claimed; i += step) {
      const int64_t page = slots[i] / page_size_;
      state_[static_cast<size_t>(page)] = kFree;
      free_pages_.push_back(page);
    }
    return;
  }
  const std::string problem = free_problem(slots, claimed);
  for (size_t i = 0; i < claimed; i += step)
    state_[static_cast<size_t>(slots[i] / page_size_)] = kAllocated;  // roll back the claims
  KV_ASSERT(false, problem);
}

bool PagedSlotAllocator::free_pages(std::span<const SlotIndex> firsts) {
  // The hot path (what alloc handed out, one entry per page). A power-of-two page size
  // divides by shifting (the common case: 1, 16, 64, 512).
  const bool pow2 = (page_size_ & (page_size_ - 1)) == 0;
  const int shift = std::countr_zero(static_cast<uint32_t>(page_size_));
  const SlotIndex mask = page_size_ - 1;
  // One pass: each page is freed as it is checked (a page listed twice fails its second check);
  // on a problem the pass is undone and the slot-by-slot path names it.
  // Members in locals: the byte stores into the page states may alias anything, so the
  // compiler would reload every member (and the free list's end) once per page otherwise.
  const size_t listed = free_pages_.size();
  free_pages_.resize(listed + firsts.size());
  int64_t* const out = free_pages_.data() + listed;
  uint8_t* const state = state_.data();
  const SlotIndex page_size = page_size_;
  const int64_t page_count = page_count_;
  size_t freed = 0;
  for (; freed < firsts.size(); ++freed) {
    const SlotIndex first = firsts[freed];
    if (first < page_size || (pow2 ? (first & mask) : first % page_size) != 0) break;
    const int64_t page = pow2 ? first >> shift : first / page_size;
    if (page > page_count || state[page] != kAllocated) break;
    state[page] = kFree;
    out[freed] = page;
  }
  if (freed < firsts.size()) {
    for (size_t i = 0; i < freed; ++i)
      state[out[i]] = kAllocated;
    free_pages_.resize(listed);
    return false;
  }
  return true;
}

bool PagedSlotAllocator::is_allocated(SlotIndex slot) const {
  if (slot < 0) return false;
  const int64_t page = slot / page_size_;
  return page >= 1 && page <= page_count_ && state_[static_cast<size_t>(page)] == kAllocated;
}

std::string PagedSlotAllocator::check() const {
  if (state_.size() != static_cast<size_t>(page_count_ + 1)) return "page table has the wrong size";
  if (state_[0] != kFree) return "reserved page 0 is allocated";
  std::vector<uint8_t> listed(state_.size(), 0);
  for (int64_t page : free_pages_) {
    if (page < 1 || page > page_count_) {
      return "free list holds page " + std::to_string(page) + " outside 1.." +
             std::to_string(page_count_);
    }
    if (listed[static_cast<size_t>(page)]++ != 0) {
      return "KV double free: page " + std::to_string(page) + " is free-listed twice";
    }
    if (state_[static_cast<size_t>(page)] != kFree) {
      return "KV page use-after-free: allocated page " + std::to_string(page) + " is free-listed";
    }
  }
  int64_t allocated = 0;
  for (size_t p = 1; p < state_.size(); ++p) {
    if (state_[p] == kAllocated) {
      ++allocated;
    } else if (state_[p] != kFree) {
      return "page " + std::to_string(p) + " is in an unknown state";
    } else if (listed[p] == 0) {
      return "page " + std::to_string(p) + " is neither allocated nor free-listed (leaked)";
    }
  }
  if (allocated + static_cast<int64_t>(free_pages_.size()) != page_count_) {
    return "pages lost: " + std::to_string(allocated) + " allocated + " +
           std::to_string(free_pages_.size()) + " free != " + std::to_string(page_count_);
  }
  return "";
}

}  // namespace kvsim
