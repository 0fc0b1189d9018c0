#include "core/pools/kv_pool.h"

#include "core/common/assert.h"

namespace kvsim {

KVPool::KVPool(Backend& backend, MemoryKind kind, int64_t slot_count, int32_t layer_count,
               size_t item_bytes, KVLayout layout)
    : backend_(backend) {
  KV_ASSERT(item_bytes > 0 && item_bytes % 8 == 0, "Item byte size must be divisible by 8");
  KV_ASSERT(slot_count > 0 && layer_count > 0, "pool needs slots and layers");
  view_ = KVPoolView{.block = {},
                     .layout = layout,
                     .slot_count = slot_count,
                     .layer_count = layer_count,
                     .item_bytes = item_bytes};
  view_.block = backend_.allocate(kind, view_.total_bytes(), backend_.compute_stream(),
                                  kind == MemoryKind::kDevice ? "device kv pool" : "host kv pool");
  KV_ASSERT(view_.block.valid(), "Not enough memory for the KV pool");
}

KVPool::~KVPool() {
  backend_.free(view_.block);
}

void KVPool::write_item_async(StreamId stream, int32_t layer, SlotIndex slot,
                              std::span<const std::byte> bytes) {
  KV_ASSERT(bytes.size() == view_.item_bytes, "item size");
  KV_ASSERT(slot >= 0 && slot < view_.slot_count && layer >= 0 && layer < view_.layer_count,
            "item out of range");
  backend_.upload_async(stream, view_.block, view_.offset(layer, slot), bytes, "write item");
}

std::vector<std::byte> KVPool::read_item_sync(int32_t layer, SlotIndex slot) {
  KV_ASSERT(slot >= 0 && slot < view_.slot_count && layer >= 0 && layer < view_.layer_count,
            "item out of range");
  return backend_.read_sync(view_.block, view_.offset(layer, slot), view_.item_bytes);
}

}  // namespace kvsim
