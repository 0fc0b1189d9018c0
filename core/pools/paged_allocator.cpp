#include "core/pools/paged_allocator.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {

PagedSlotAllocator::PagedSlotAllocator(Tier tier, int64_t size_tokens, int32_t page_size)
    : tier_(tier), page_size_(page_size), page_count_(0) {
  KV_ASSERT(page_size > 0, "page_size must be positive");
  KV_ASSERT(size_tokens > 0 && size_tokens % page_size == 0,
            "pool size must be a positive multiple of page_size");
  page_count_ = size_tokens / page_size;
  allocated_.assign(static_cast<size_t>(page_count_ + 1), 0);
  for (int64_t p = 1; p <= page_count_; ++p)
    free_pages_.push_back(p);
}

std::optional<IndexVector> PagedSlotAllocator::alloc(int64_t tokens) {
  KV_ASSERT(tokens > 0 && tokens % page_size_ == 0,
            "The requested size should be a multiple of the page size.");
  const int64_t pages = tokens / page_size_;
  if (pages > static_cast<int64_t>(free_pages_.size())) return std::nullopt;
  std::vector<SlotIndex> slots;
  slots.reserve(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < pages; ++i) {
    const int64_t page = free_pages_.front();
    free_pages_.pop_front();
    KV_ASSERT(allocated_[static_cast<size_t>(page)] == 0, "Double-alloc detected");
    allocated_[static_cast<size_t>(page)] = 1;
    for (int32_t t = 0; t < page_size_; ++t)
      slots.push_back(page * page_size_ + t);
  }
  return IndexVector(tier_, std::move(slots));
}

void PagedSlotAllocator::free(const IndexVector& slots) {
  KV_ASSERT(slots.residency() == Residency::kHost,
            "residency: free of device-resident indices (host indices moved to the device?)");
  KV_ASSERT(slots.tier() == tier_,
            std::string("foreign free: ") + std::string(to_string(slots.tier())) +
                " slots freed to the " + std::string(to_string(tier_)) + " pool");
  KV_ASSERT(slots.size() % static_cast<size_t>(page_size_) == 0,
            "The freed size should be a multiple of the page size.");
  for (size_t i = 0; i < slots.size(); i += static_cast<size_t>(page_size_)) {
    const SlotIndex first = slots[i];
    KV_ASSERT(first % page_size_ == 0, "free of a run not starting at a page boundary");
    for (int32_t t = 1; t < page_size_; ++t) {
      KV_ASSERT(slots[i + static_cast<size_t>(t)] == first + t, "free of a partial page");
    }
    const int64_t page = first / page_size_;
    KV_ASSERT(page >= 1 && page <= page_count_,
              "free of slot " + std::to_string(first) + " outside the pool (foreign free)");
    KV_ASSERT(allocated_[static_cast<size_t>(page)] == 1,
              "Double-free detected: slot " + std::to_string(first) + " is not allocated");
    allocated_[static_cast<size_t>(page)] = 0;
    free_pages_.push_front(page);
  }
}

bool PagedSlotAllocator::is_allocated(SlotIndex slot) const {
  const int64_t page = slot / page_size_;
  return slot >= 0 && page >= 1 && page <= page_count_ &&
         allocated_[static_cast<size_t>(page)] == 1;
}

std::string PagedSlotAllocator::check() const {
  std::vector<uint8_t> seen(allocated_.size(), 0);
  for (int64_t page : free_pages_) {
    if (page < 1 || page > page_count_) return "free list holds page " + std::to_string(page);
    if (seen[static_cast<size_t>(page)]++ != 0)
      return "KV double free: page " + std::to_string(page);
    if (allocated_[static_cast<size_t>(page)] != 0) {
      return "KV page use-after-free: allocated page " + std::to_string(page) + " is free-listed";
    }
  }
  int64_t allocated = 0;
  for (size_t p = 1; p < allocated_.size(); ++p)
    allocated += allocated_[p];
  if (allocated + static_cast<int64_t>(free_pages_.size()) != page_count_) {
    return "pages lost: " + std::to_string(allocated) + " allocated + " +
           std::to_string(free_pages_.size()) + " free != " + std::to_string(page_count_);
  }
  if (allocated_[0] != 0) return "reserved page 0 is allocated";
  return "";
}

}  // namespace kvsim
