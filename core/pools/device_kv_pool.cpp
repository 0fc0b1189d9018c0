#include "core/pools/device_kv_pool.h"

namespace kvsim {

DeviceKVPool::DeviceKVPool(Backend& backend, int64_t slot_count, int32_t layer_count,
                           size_t item_bytes)
    : KVPool(backend, MemoryKind::kDevice, slot_count, layer_count, item_bytes,
             KVLayout::kLayerFirst) {}

}  // namespace kvsim
