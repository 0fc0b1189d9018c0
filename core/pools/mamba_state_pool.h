// MambaStatePool / HostMambaStatePool: recurrent-state slots of a Mamba (linear attention)
// hybrid model, on the device and in pinned host memory.
//
// A request (or a radix-tree node) owns one state slot; the slot holds one item per layer (the
// layer's conv + SSM state bytes). That is exactly a KV pool whose token slots are handed out
// one at a time, so each class is a thin bundle of a KV pool (DeviceKVPool / HostKVPool) and a
// PagedSlotAllocator with page_size 1: slot 0 is the reserved padding slot, alloc/free/double
// free checks are the allocator's. The only state-specific operation is copy_state_async, the
// copy-on-write a prefix match does before a request extends a shared state.
//
// Invariants:
//  1. pool().slot_count() == allocator().slot_count() == state_count + 1; allocator page size 1;
//  2. the allocator's invariants (paged_allocator.h): a slot is free or allocated, never both;
//  3. copy_state_async copies every layer of an allocated source slot into a different
//     allocated slot, on one stream, in layer order; the source is only read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/types.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"
#include "core/pools/paged_allocator.h"

namespace kvsim {

class MambaStatePool {
 public:
  // `state_count` usable slots; each holds `layer_count` items of `state_bytes` (multiple of 8).
  MambaStatePool(Backend& backend, int64_t state_count, int32_t layer_count, size_t state_bytes);

  std::optional<SlotIndex> alloc();  // nullopt when every slot is taken
  void free(SlotIndex slot);         // KV_ASSERT on a slot that is not allocated
  int64_t available_size() const { return allocator_.available_size(); }
  int64_t capacity() const { return allocator_.capacity(); }
  bool is_allocated(SlotIndex slot) const { return allocator_.is_allocated(slot); }

  // Enqueues a copy of every layer of `source` into `target` (both allocated, distinct).
  void copy_state_async(StreamId stream, SlotIndex source, SlotIndex target);
  void write_state_async(StreamId stream, int32_t layer, SlotIndex slot,
                         std::span<const std::byte> bytes);
  std::vector<std::byte> read_state_sync(int32_t layer, SlotIndex slot);

  DeviceKVPool& pool() { return pool_; }
  const DeviceKVPool& pool() const { return pool_; }
  const PagedSlotAllocator& allocator() const { return allocator_; }
  int32_t layer_count() const { return pool_.layer_count(); }
  size_t state_bytes() const { return pool_.item_bytes(); }
  std::string check() const { return allocator_.check(); }

 private:
  Backend& backend_;
  DeviceKVPool pool_;
  PagedSlotAllocator allocator_;
};

class HostMambaStatePool {
 public:
  HostMambaStatePool(Backend& backend, int64_t state_count, int32_t layer_count, size_t state_bytes,
                     KVLayout layout);

  std::optional<SlotIndex> alloc();
  void free(SlotIndex slot);
  int64_t available_size() const { return allocator_.available_size(); }
  int64_t capacity() const { return allocator_.capacity(); }
  bool is_allocated(SlotIndex slot) const { return allocator_.is_allocated(slot); }

  void copy_state_async(StreamId stream, SlotIndex source, SlotIndex target);
  // Direct pinned-memory access (HostKVPool); no synchronization.
  void write_state(int32_t layer, SlotIndex slot, std::span<const std::byte> bytes);
  std::vector<std::byte> read_state(int32_t layer, SlotIndex slot) const;

  HostKVPool& pool() { return pool_; }
  const HostKVPool& pool() const { return pool_; }
  const PagedSlotAllocator& allocator() const { return allocator_; }
  int32_t layer_count() const { return pool_.layer_count(); }
  size_t state_bytes() const { return pool_.item_bytes(); }
  std::string check() const { return allocator_.check(); }

 private:
  Backend& backend_;
  HostKVPool pool_;
  PagedSlotAllocator allocator_;
};

}  // namespace kvsim
