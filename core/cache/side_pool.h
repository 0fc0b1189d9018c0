// SidePool: one auxiliary pool of a hybrid model — SWA KV (one slot per token, paged like the
// main pool) or Mamba state (one slot per node, page size 1) — on device and on host, with
// the device slots currently held by requests.
//
// Invariants (HiCache::sanity_check, "slots.<pool>_device_ownership" / "_host_ownership"):
// every allocated slot is owned by exactly one tree node value or one request; free slots by
// none.
#pragma once

#include <memory>
#include <set>

#include "core/backend/backend.h"
#include "core/cache/request_slots.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"
#include "core/pools/paged_allocator.h"
#include "core/tiers/pool_transfer.h"
#include "core/tree/tree_node.h"

namespace kvsim {

struct SidePoolGeometry {
  int64_t device_slots = 0;  // usable slots (one reserved page is added)
  int64_t host_slots = 0;
  int32_t page_size = 1;
  int32_t layer_count = 1;
  size_t item_bytes = 8;
  KVLayout host_layout = KVLayout::kLayerFirst;
};

class SidePool {
 public:
  SidePool(Backend& backend, PoolName name, ComponentType component, SidePoolGeometry g);

  PoolName name() const { return name_; }
  ComponentType component() const { return component_; }
  PagedSlotAllocator& device_slots() { return device_slots_; }
  PagedSlotAllocator& host_slots() { return host_slots_; }
  const PagedSlotAllocator& device_slots() const { return device_slots_; }
  const PagedSlotAllocator& host_slots() const { return host_slots_; }
  DeviceKVPool& device_pool() { return device_pool_; }
  HostKVPool& host_pool() { return host_pool_; }

  // Request-held device slots: alloc hands them to a request, free takes them back, adopt
  // records that the tree took them over (whole pages in each case).
  std::optional<IndexVector> alloc_for_request(int64_t slots);
  void free_from_request(const IndexVector& slots);
  void adopt(const IndexVector& slots) { request_slots_.release(slots); }
  const RequestSlots& request_slots() const { return request_slots_; }

 private:
  PoolName name_;
  ComponentType component_;
  PagedSlotAllocator device_slots_;
  PagedSlotAllocator host_slots_;
  DeviceKVPool device_pool_;
  HostKVPool host_pool_;
  RequestSlots request_slots_;
};

}  // namespace kvsim
