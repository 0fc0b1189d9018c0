// RequestSlots: which slots of one pool are held by running requests (rather than by the tree
// or by nobody), kept per page — requests take and return whole pages — so holding, releasing
// and checking cost O(pages), not O(tokens) or a tree-set insert per token.
//
// Invariants: a page is held at most once; hold/release take host-resident vectors of whole,
// aligned pages (KV_ASSERT otherwise, naming the pool and slot); held_pages() equals the pages
// marked held (check(), run by HiCache::sanity_check as "slots.request_count").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/pools/index_vector.h"

namespace kvsim {

class RequestSlots {
 public:
  RequestSlots(std::string pool, int64_t page_count, int32_t page_size)
      : pool_(std::move(pool)), page_(page_size), held_(static_cast<size_t>(page_count) + 1, 0) {}

  void hold(const IndexVector& slots) {
    for_each_page(slots, [&](size_t p, SlotIndex s) {
      KV_ASSERT(held_[p] == 0, pool_ + " slot " + std::to_string(s) + " held twice");
      held_[p] = 1;
      ++count_;
    });
  }
  void release(const IndexVector& slots) {
    for_each_page(slots, [&](size_t p, SlotIndex s) {
      KV_ASSERT(held_[p] == 1, pool_ + " slot " + std::to_string(s) + " is not held by a request");
      held_[p] = 0;
      --count_;
    });
  }
  int64_t held_pages() const { return count_; }
  // The held-page count recomputed from the per-page marks ("" when they agree).
  std::string check() const {
    int64_t marked = 0;
    for (size_t p = 0; p < held_.size(); ++p) {
      if (held_[p] > 1 || (p == 0 && held_[p] != 0)) return pool_ + ": page mark corrupt";
      marked += held_[p];
    }
    if (marked == count_) return "";
    return pool_ + ": held-page count " + std::to_string(count_) + " != " + std::to_string(marked) +
           " pages marked held";
  }
  // Every held slot, ascending (for ownership checks).
  IndexVector held() const {
    std::vector<SlotIndex> out;
    out.reserve(static_cast<size_t>(count_ * page_));
    for (size_t p = 1; p < held_.size(); ++p) {
      if (held_[p] == 0) continue;
      for (SlotIndex i = 0; i < page_; ++i)
        out.push_back(static_cast<SlotIndex>(p) * page_ + i);
    }
    return IndexVector(Tier::kDevice, std::move(out));
  }

 private:
  friend struct RequestSlotsTestPeer;  // tests corrupt the count to exercise check()
  template <typename F>
  void for_each_page(const IndexVector& slots, F&& f) {
    KV_ASSERT(slots.residency() == Residency::kHost, pool_ + ": device-resident slot list");
    KV_ASSERT(
        slots.size() % static_cast<size_t>(page_) == 0,
        pool_ + ": " + std::to_string(slots.size()) + " slots is not a whole number of pages");
    for (size_t i = 0; i < slots.size(); i += static_cast<size_t>(page_)) {
      const SlotIndex s = slots[i];
      KV_ASSERT(s > 0 && s % page_ == 0 && static_cast<size_t>(s / page_) < held_.size(),
                pool_ + " slot " + std::to_string(s) + " does not start a page of the pool");
      f(static_cast<size_t>(s / page_), s);
    }
  }

  std::string pool_;
  SlotIndex page_;
  std::vector<uint8_t> held_;  // per page; page 0 is reserved
  int64_t count_ = 0;
};

}  // namespace kvsim
