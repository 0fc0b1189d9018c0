// DeviceKVPool: the device KV cache, layer_first ([layer][slot][item]) in device memory.
//
// Host code never dereferences its block (backend.h, rule 4): items are written with
// write_item_async (an upload on a stream) and read with read_item_sync (after synchronize).
//
// Invariants: those of KVPool (kv_pool.h); the layout is always kLayerFirst and the block is
// a kDevice block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/pools/kv_pool.h"

namespace kvsim {

class DeviceKVPool final : public KVPool {
 public:
  DeviceKVPool(Backend& backend, int64_t slot_count, int32_t layer_count, size_t item_bytes);
  ~DeviceKVPool() = default;
};

}  // namespace kvsim
