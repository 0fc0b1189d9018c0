#include "core/pools/host_kv_pool.h"

#include <cstring>

#include "core/common/assert.h"

namespace kvsim {

HostKVPool::HostKVPool(Backend& backend, int64_t slot_count, int32_t layer_count, size_t item_bytes,
                       KVLayout layout)
    : KVPool(backend, MemoryKind::kPinnedHost, slot_count, layer_count, item_bytes, layout) {
  KV_ASSERT(block().ptr != nullptr, "pinned host pool without host-addressable memory");
}

void HostKVPool::write_item(int32_t layer, SlotIndex slot, std::span<const std::byte> bytes) {
  KV_ASSERT(bytes.size() == item_bytes(), "KV item write of the wrong size");
  std::memcpy(block().ptr + checked_offset(layer, slot), bytes.data(), bytes.size());
}

std::vector<std::byte> HostKVPool::read_item(int32_t layer, SlotIndex slot) const {
  const std::byte* p = block().ptr + checked_offset(layer, slot);
  return std::vector<std::byte>(p, p + item_bytes());
}

}  // namespace kvsim
