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
//  2. a device-resident vector has a valid device block holding exactly its slots as int64;
//  3. a page-granular vector (stride P > 1) stands for P consecutive slots per entry; its
//     contents (size, [], ==, slots()) are those slots, whatever the stride.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/assert.h"
#include "core/common/types.h"
#include "core/pools/page_slots.h"

namespace kvsim {

// Calls f(i, j) for each maximal run [i, j) of consecutive slots (slots[k + 1] == slots[k] + 1)
// in `slots`, in order. Whole blocks of 32 slots continuing a run are checked by one
// OR-reduction, which vectorises: allocators hand out long runs.
template <typename F>
void for_each_consecutive_run(std::span<const SlotIndex> slots, F&& f) {
  constexpr size_t kBlock = 32;
  const size_t n = slots.size();
  const SlotIndex* v = slots.data();
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j + kBlock <= n) {
      uint64_t off = 0;
      for (size_t k = 0; k < kBlock; ++k)
        off |= static_cast<uint64_t>(v[j + k] - v[j + k - 1] - 1);
      if (off != 0) break;
      j += kBlock;
    }
    while (j < n && v[j] == v[j - 1] + 1)
      ++j;
    f(i, j);
    i = j;
  }
}

class IndexVector {
 public:
  IndexVector() = default;
  IndexVector(Tier tier, std::vector<SlotIndex> slots)
      : tier_(tier), residency_(Residency::kHost), entries_(std::move(slots)) {}
  // Copies never carry the expansion cache (slots() rebuilds it on demand).
  IndexVector(const IndexVector& o)
      : tier_(o.tier_),
        residency_(o.residency_),
        stride_(o.stride_),
        entries_(o.entries_),
        block_(o.block_) {}
  IndexVector& operator=(const IndexVector& o) {
    if (this != &o) *this = IndexVector(o);
    return *this;
  }
  IndexVector(IndexVector&&) noexcept = default;
  IndexVector& operator=(IndexVector&&) noexcept = default;
  ~IndexVector() = default;

  // Whole pages: entry k stands for the `page_size` consecutive slots [first_slots[k],
  // first_slots[k] + page_size). Same contents as the per-token vector of those slots (==,
  // size, [] and slots() agree), P times smaller: the allocator hands these out and the tree
  // keeps them, so match, insert, split and free move one index per page, not per token.
  static IndexVector pages(Tier tier, int32_t page_size, std::vector<SlotIndex> first_slots) {
    KV_ASSERT(page_size > 0, "page-granular indices need a positive page size");
    IndexVector v(tier, std::move(first_slots));
    v.stride_ = page_size;
    return v;
  }

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

  size_t size() const { return entries_.size() * static_cast<size_t>(stride_); }
  bool empty() const { return entries_.empty(); }
  SlotIndex operator[](size_t i) const {
    if (stride_ == 1) return entries_[i];
    const auto s = static_cast<size_t>(stride_);
    return entries_[i / s] + static_cast<SlotIndex>(i % s);
  }
  // Tokens per stored entry: 1 (one slot per token) or the page size (one first slot per page).
  int32_t stride() const { return stride_; }
  // The stored entries: slots (stride 1) or first slots of pages (stride > 1).
  std::span<const SlotIndex> entries() const { return entries_; }
  // Where the entry covering token i is stored (for prefetching; no expansion).
  const SlotIndex* address_of(size_t i) const {
    return entries_.data() + i / static_cast<size_t>(stride_);
  }
  // One slot per token. A page-granular vector expands on the first call and keeps the
  // expansion (not thread-safe, like the rest of the core); hot paths use entries().
  const std::vector<SlotIndex>& slots() const {
    if (stride_ == 1) return entries_;
    if (!expanded_) expanded_ = std::make_unique<std::vector<SlotIndex>>(to_vector());
    return *expanded_;
  }
  std::span<const SlotIndex> span() const { return slots(); }
  // One slot per token, as a new vector (no expansion kept: for one-off users such as
  // transfers of values the tree goes on holding).
  std::vector<SlotIndex> to_vector() const {
    if (stride_ == 1) return entries_;
    std::vector<SlotIndex> out(size());
    copy_slots_to(out.data());
    return out;
  }

  // Writes one slot per token to out[0, size()) (page by page: no expansion kept, no division).
  void copy_slots_to(SlotIndex* out) const {
    if (stride_ == 1) {
      std::copy(entries_.begin(), entries_.end(), out);
      return;
    }
    expand_page_slots(entries_.data(), entries_.size(), stride_, out);
  }

  // Calls f(i, j) for each maximal run [i, j) of consecutive slots within [from, to), in
  // order. Page-granular vectors are walked by entry: no per-token division.
  template <typename F>
  void for_each_run(size_t from, size_t to, F&& f) const {
    KV_ASSERT(from <= to && to <= size(), "run range out of range");
    const auto s = static_cast<size_t>(stride_);
    if (s == 1) {
      for_each_consecutive_run(std::span<const SlotIndex>(entries_).subspan(from, to - from),
                               [&](size_t i, size_t j) { f(from + i, from + j); });
      return;
    }
    size_t i = from;
    while (i < to) {
      // To the end of i's page, then whole pages while each starts where the last ended.
      size_t j = std::min((i / s + 1) * s, to);
      while (j < to && entries_[j / s] == entries_[j / s - 1] + static_cast<SlotIndex>(s))
        j = std::min(j + s, to);
      f(i, j);
      i = j;
    }
  }

  // A host-resident copy of [begin, end). Slicing never aliases: every node owns its indices.
  // Page-aligned slices of page-granular vectors stay page-granular.
  IndexVector slice(size_t begin, size_t end) const {
    KV_ASSERT(begin <= end && end <= size(), "slice out of range");
    const auto s = static_cast<size_t>(stride_);
    if (begin % s == 0 && end % s == 0) {
      IndexVector v(tier_,
                    std::vector<SlotIndex>(entries_.begin() + static_cast<ptrdiff_t>(begin / s),
                                           entries_.begin() + static_cast<ptrdiff_t>(end / s)));
      v.stride_ = stride_;
      return v;
    }
    std::vector<SlotIndex> out(end - begin);
    for (size_t i = begin; i < end; ++i)
      out[i - begin] = (*this)[i];
    return IndexVector(tier_, std::move(out));
  }

  // Appends a host-resident vector of the same tier. Equal strides (or an empty side) keep
  // the stride; otherwise the result is one slot per token.
  void append(const IndexVector& other) {
    KV_ASSERT(other.tier_ == tier_, "append across tiers");
    KV_ASSERT(residency_ == Residency::kHost && other.residency_ == Residency::kHost,
              "append of device-resident indices");
    if (other.empty()) return;
    expanded_.reset();
    if (entries_.empty()) stride_ = other.stride_;
    if (stride_ == other.stride_) {
      entries_.insert(entries_.end(), other.entries_.begin(), other.entries_.end());
      return;
    }
    std::vector<SlotIndex> out;
    out.reserve(size() + other.size());
    for (size_t i = 0; i < size(); ++i)
      out.push_back((*this)[i]);
    for (size_t i = 0; i < other.size(); ++i)
      out.push_back(other[i]);
    entries_ = std::move(out);
    stride_ = 1;
  }

  friend bool operator==(const IndexVector& a, const IndexVector& b) {
    if (a.tier_ != b.tier_ || a.size() != b.size()) return false;
    if (a.stride_ == b.stride_) return a.entries_ == b.entries_;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

 private:
  Tier tier_ = Tier::kDevice;
  Residency residency_ = Residency::kHost;
  int32_t stride_ = 1;
  std::vector<SlotIndex> entries_;
  // slots() of a page-granular vector, built on first use (null until then: 8 bytes per
  // vector, which the tree holds several of per node).
  mutable std::unique_ptr<std::vector<SlotIndex>> expanded_;
  Block block_;  // valid only when residency_ == kDevice
};

}  // namespace kvsim
