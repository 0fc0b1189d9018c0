// PageChecksumComponent: the example TreeComponent of docs/new-component.md — small, real and
// self-contained. It is not part of the core: it lives with the conformance kit, which runs on
// it exactly as on the full, SWA and Mamba components.
//
// What it stores: one 64-bit checksum per page of a node, in a side pool of its own
// (ChecksumPool: device and host slots, one slot per page). The checksum of a page is a pure
// function of (namespace, every token from the root to the end of that page), so the value of
// the last page of a path vouches for the whole prefix (page_checksum() is the oracle).
//
// The three decisions a component makes (component.h):
//  - match: the prefix ending at node n is usable when n holds its checksums — on device for a
//    device match, on device or host for a host match. Nodes above may be tombstoned.
//  - lock:  a request anchored at A protects A's own checksums and nothing else. The record
//    keeps the anchor and A's length in tokens (LockRecord::aux); release walks up from the
//    anchor over exactly that many tokens, so a split of A between acquire and release (which
//    hands the upper pages, and a copy of the lock count, to a new parent) is released exactly.
//  - split: the checksums are sliced on the page boundary; the new upper half inherits the
//    lock count, like the SWA component and unlike Mamba (whose one state stays below).
//
// Component slot. The core has three component slots (ComponentType: kFull, kSwa, kMamba;
// kComponentTypesMax = 3) and no way to register a fourth without a core change. A third-party
// component therefore borrows an auxiliary slot its tree does not use (default: kMamba's); the
// tree's generic auxiliary machinery (set_aux_value, take_aux_value, inc/dec_aux_lock, the
// victim set and the "tree.aux" accounting checks) is keyed by that slot and works unchanged.
// HiCache builds its components from HiCacheOptions and hard-codes SWA and Mamba in insert and
// load-back, so it cannot host this component: ExampleCache (example_cache.h) is the host.
//
// Invariants (sanity_check, names "example.checksum_shape" and "residency"): a device or host
// value has exactly key.size() / page_size slots of the right tier, in host-resident vectors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/pools/paged_allocator.h"
#include "core/tree/component.h"

namespace kvsim::conformance {

// The slot the example borrows unless told otherwise (its trees have no Mamba component).
inline constexpr ComponentType kExampleSlot = ComponentType::kMamba;

// The oracle: the checksum of the page ending at `end` (exclusive) of `tokens` in `ns`.
uint64_t page_checksum(Namespace ns, std::span<const Token> tokens, size_t end);

class PageChecksumComponent final : public TreeComponent {
 public:
  PageChecksumComponent(int32_t page_size, ComponentType slot = kExampleSlot);

  ComponentType type() const override { return slot_; }
  std::string_view name() const override { return "page_checksum"; }
  std::unique_ptr<MatchValidator> make_validator() const override;
  void acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) override;
  void release_lock(RadixTree& tree, const LockRecord& record) override;
  void on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) override;
  void sanity_check(const RadixTree& tree, SanityReport& report) const override;

  int32_t page_size() const { return page_; }
  // Slots a value of `node` has: one per page.
  size_t slots_for(const TreeNode& node) const {
    return node.key.size() / static_cast<size_t>(page_);
  }

 private:
  int32_t page_;
  ComponentType slot_;
};

// The component's side pool: device and host slots of one checksum each, handed out one at a
// time (page size 1) by the core's PagedSlotAllocator, with the bytes in plain vectors (the
// example copies synchronously; it has no streams).
class ChecksumPool {
 public:
  ChecksumPool(int64_t device_slots, int64_t host_slots);
  PagedSlotAllocator& device_slots() { return device_slots_; }
  PagedSlotAllocator& host_slots() { return host_slots_; }
  const PagedSlotAllocator& device_slots() const { return device_slots_; }
  const PagedSlotAllocator& host_slots() const { return host_slots_; }
  uint64_t& device(SlotIndex slot) { return device_.at(static_cast<size_t>(slot)); }
  uint64_t& host(SlotIndex slot) { return host_.at(static_cast<size_t>(slot)); }

 private:
  PagedSlotAllocator device_slots_;
  PagedSlotAllocator host_slots_;
  std::vector<uint64_t> device_;
  std::vector<uint64_t> host_;
};

}  // namespace kvsim::conformance
