// HostKVPool: the host KV cache in pinned host memory, layer_first or page_first
// ([slot][layer][item]: a token's KV for every layer is contiguous, as storage pages want it).
//
// Pinned memory is host-addressable (backend.h, rule 4), so besides the stream-ordered helpers
// of KVPool it offers direct, synchronous item access. Direct access does not wait for queued
// transfers: the caller must know that none touching the item is in flight.
//
// Invariants: those of KVPool (kv_pool.h); the block is a kPinnedHost block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/pools/kv_pool.h"

namespace kvsim {

class HostKVPool final : public KVPool {
 public:
  HostKVPool(Backend& backend, int64_t slot_count, int32_t layer_count, size_t item_bytes,
             KVLayout layout);
  ~HostKVPool() = default;

  // Direct memcpy into / out of pinned memory; no synchronization.
  void write_item(int32_t layer, SlotIndex slot, std::span<const std::byte> bytes);
  std::vector<std::byte> read_item(int32_t layer, SlotIndex slot) const;
};

}  // namespace kvsim
