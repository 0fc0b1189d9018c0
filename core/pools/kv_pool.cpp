#include "core/pools/kv_pool.h"

#include <string>

#include "core/common/assert.h"

namespace kvsim {

KVPool::KVPool(Backend& backend, MemoryKind kind, int64_t slot_count, int32_t layer_count,
               size_t item_bytes, KVLayout layout)
    : backend_(backend) {
  KV_ASSERT(item_bytes > 0, "KV pool item size must be positive");
  KV_ASSERT(item_bytes % 8 == 0, "KV pool item size must be a multiple of 8 bytes");
  KV_ASSERT(slot_count > 0, "KV pool needs slots");
  KV_ASSERT(layer_count > 0, "KV pool needs layers");
  view_ = KVPoolView{.block = {},
                     .layout = layout,
                     .slot_count = slot_count,
                     .layer_count = layer_count,
                     .item_bytes = item_bytes};
  const size_t bytes = view_.total_bytes();
  KV_ASSERT(
      bytes / item_bytes / static_cast<size_t>(layer_count) == static_cast<size_t>(slot_count),
      "KV pool size overflows");
  view_.block = backend_.allocate(kind, bytes, backend_.compute_stream(),
                                  kind == MemoryKind::kDevice ? "device kv pool" : "host kv pool");
  KV_ASSERT(view_.block.valid(), "not enough memory for the KV pool (" + std::to_string(bytes) +
                                     " bytes of " + std::string(to_string(residency_of(kind))) +
                                     " memory)");
  KV_ASSERT(view_.block.kind == kind, "KV pool block of the wrong memory kind");
}

KVPool::~KVPool() {
  backend_.free(view_.block);
}

size_t KVPool::checked_offset(int32_t layer, SlotIndex slot) const {
  KV_ASSERT(layer >= 0 && layer < view_.layer_count,
            "layer " + std::to_string(layer) + " outside the KV pool");
  KV_ASSERT(slot >= 0 && slot < view_.slot_count,
            "slot " + std::to_string(slot) + " outside the KV pool");
  return view_.offset(layer, slot);
}

void KVPool::write_item_async(StreamId stream, int32_t layer, SlotIndex slot,
                              std::span<const std::byte> bytes) {
  KV_ASSERT(bytes.size() == view_.item_bytes, "KV item write of the wrong size");
  backend_.upload_async(stream, view_.block, checked_offset(layer, slot), bytes, "write item");
}

std::vector<std::byte> KVPool::read_item_sync(int32_t layer, SlotIndex slot) {
  return backend_.read_sync(view_.block, checked_offset(layer, slot), view_.item_bytes);
}

}  // namespace kvsim
