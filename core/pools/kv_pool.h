// KVPool: the bytes of a KV cache — layers × slots × item bytes — in one backend block.
//
// The common part of DeviceKVPool (device_kv_pool.h) and HostKVPool (host_kv_pool.h). A pool
// only stores bytes: its slots are handed out by a PagedSlotAllocator of the same slot count
// (reserved page 0 included), never by the pool itself.
//
// Invariants:
//  1. item_bytes is a positive multiple of 8 (copy kernels move 8-byte words); slot_count and
//     layer_count are positive;
//  2. the block is allocated at construction, on the compute stream, and freed at destruction;
//     it is never resized, so view() stays valid for the pool's whole life;
//  3. every item access is bounds-checked (KV_ASSERT): layer in [0, layer_count), slot in
//     [0, slot_count), exactly item_bytes bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/types.h"

namespace kvsim {

class KVPool {
 public:
  KVPool(const KVPool&) = delete;
  KVPool& operator=(const KVPool&) = delete;

  const KVPoolView& view() const { return view_; }
  const Block& block() const { return view_.block; }
  KVLayout layout() const { return view_.layout; }
  int64_t slot_count() const { return view_.slot_count; }
  int32_t layer_count() const { return view_.layer_count; }
  size_t item_bytes() const { return view_.item_bytes; }

  // Enqueues a write of one item on `stream` (what a forward pass does for a new token).
  void write_item_async(StreamId stream, int32_t layer, SlotIndex slot,
                        std::span<const std::byte> bytes);
  // Reads one item after Backend::synchronize() (checks, tests and the content oracle only).
  std::vector<std::byte> read_item_sync(int32_t layer, SlotIndex slot);

 protected:
  KVPool(Backend& backend, MemoryKind kind, int64_t slot_count, int32_t layer_count,
         size_t item_bytes, KVLayout layout);
  ~KVPool();

  // Byte offset of one item; KV_ASSERTs that it is inside the pool.
  size_t checked_offset(int32_t layer, SlotIndex slot) const;

 private:
  Backend& backend_;
  KVPoolView view_;
};

}  // namespace kvsim
