// IndexVector: a list of token slot indices that knows which pool it indexes (Tier) and where
// the list itself lives (Residency).
//
// The radix tree, the pools and every operation record hold host-resident index vectors: the
// core keeps its metadata in CPU memory. A device-resident copy exists only while a transfer
// kernel needs its indices on the device; it is made by CacheController::move_indices, owns a
// backend block, and is never stored in shared state (seed 001). Storing one in the tree or
// freeing one to a pool is a residency violation that sanity_check and the pools report.
//
// Invariants:
//  1. tier and residency never change after construction (moving to the device makes a new
//     object);
//  2. a device-resident vector has a valid device block holding exactly its slots as int64.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/assert.h"
#include "core/common/types.h"

namespace kvsim {

class IndexVector {
 public:
  IndexVector() = default;
  IndexVector(Tier tier, std::vector<SlotIndex> slots)
      : tier_(tier), residency_(Residency::kHost), slots_(std::move(slots)) {}

  // A device-resident copy: `block` holds `slots` as int64 on the device.
  static IndexVector on_device(Tier tier, std::vector<SlotIndex> slots, Block block) {
    KV_ASSERT(block.valid() && block.kind == MemoryKind::kDevice,
              "device index needs a device block");
    IndexVector v(tier, std::move(slots));
    v.residency_ = Residency::kDevice;
    v.block_ = block;
    return v;
  }

  Tier tier() const { return tier_; }
  Residency residency() const { return residency_; }
  const Block& device_block() const { return block_; }

  size_t size() const { return slots_.size(); }
  bool empty() const { return slots_.empty(); }
  SlotIndex operator[](size_t i) const { return slots_[i]; }
  const std::vector<SlotIndex>& slots() const { return slots_; }
  std::span<const SlotIndex> span() const { return slots_; }

  // A host-resident copy of [begin, end). Slicing never aliases: every node owns its indices.
  IndexVector slice(size_t begin, size_t end) const {
    KV_ASSERT(begin <= end && end <= slots_.size(), "slice out of range");
    return IndexVector(tier_, std::vector<SlotIndex>(slots_.begin() + static_cast<ptrdiff_t>(begin),
                                                     slots_.begin() + static_cast<ptrdiff_t>(end)));
  }

  // Appends a host-resident vector of the same tier.
  void append(const IndexVector& other) {
    KV_ASSERT(other.tier_ == tier_, "append across tiers");
    KV_ASSERT(residency_ == Residency::kHost && other.residency_ == Residency::kHost,
              "append of device-resident indices");
    slots_.insert(slots_.end(), other.slots_.begin(), other.slots_.end());
  }

  friend bool operator==(const IndexVector& a, const IndexVector& b) {
    return a.tier_ == b.tier_ && a.slots_ == b.slots_;
  }

 private:
  Tier tier_ = Tier::kDevice;
  Residency residency_ = Residency::kHost;
  std::vector<SlotIndex> slots_;
  Block block_;  // valid only when residency_ == kDevice
};

}  // namespace kvsim
