// DeviceKVPool and HostKVPool: the bytes of a KV cache, layers × slots × item bytes, in one
// block each. The device pool is layer_first in device memory; the host pool is pinned host
// memory in layer_first or page_first layout. Slots are handed out by a PagedSlotAllocator of
// the same size; a pool never allocates slots itself.
//
// Invariants: item_bytes is a positive multiple of 8 (the copy kernels move 8-byte words);
// the block is allocated at construction and released at destruction, never resized.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"

namespace kvsim {

class KVPool {
 public:
  KVPool(Backend& backend, MemoryKind kind, int64_t slot_count, int32_t layer_count,
         size_t item_bytes, KVLayout layout);
  ~KVPool();
  KVPool(const KVPool&) = delete;
  KVPool& operator=(const KVPool&) = delete;

  const KVPoolView& view() const { return view_; }
  int64_t slot_count() const { return view_.slot_count; }
  int32_t layer_count() const { return view_.layer_count; }
  size_t item_bytes() const { return view_.item_bytes; }

  // Enqueues a write of one item on `stream` (what a forward pass does for new tokens).
  void write_item_async(StreamId stream, int32_t layer, SlotIndex slot,
                        std::span<const std::byte> bytes);
  // Reads one item after synchronizing the backend (checks and tests only).
  std::vector<std::byte> read_item_sync(int32_t layer, SlotIndex slot);

 private:
  Backend& backend_;
  KVPoolView view_;
};

class DeviceKVPool : public KVPool {
 public:
  DeviceKVPool(Backend& backend, int64_t slot_count, int32_t layer_count, size_t item_bytes)
      : KVPool(backend, MemoryKind::kDevice, slot_count, layer_count, item_bytes,
               KVLayout::kLayerFirst) {}
};

class HostKVPool : public KVPool {
 public:
  HostKVPool(Backend& backend, int64_t slot_count, int32_t layer_count, size_t item_bytes,
             KVLayout layout)
      : KVPool(backend, MemoryKind::kPinnedHost, slot_count, layer_count, item_bytes, layout) {}
};

}  // namespace kvsim
