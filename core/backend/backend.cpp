#include "core/backend/backend.h"

#include <algorithm>
#include <string>
#include <utility>

namespace kvsim {

std::string_view to_string(KVLayout layout) {
  return layout == KVLayout::kLayerFirst ? "layer_first" : "page_first";
}

void MemoryCensus::add_live(LiveBlock handout, size_t capacity) {
  const bool device = handout.block.kind == MemoryKind::kDevice;
  (device ? device_live_bytes : host_live_bytes) += capacity;
  ++(device ? device_live_blocks : host_live_blocks);
  live.push_back(std::move(handout));
}

void MemoryCensus::add_pending(MemoryKind kind, size_t capacity) {
  const bool device = kind == MemoryKind::kDevice;
  (device ? device_pending_bytes : host_pending_bytes) += capacity;
  ++(device ? device_pending_blocks : host_pending_blocks);
}

void MemoryCensus::add_cached(size_t capacity) {
  device_cached_bytes += capacity;
  ++device_cached_blocks;
}

void MemoryCensus::finish(size_t pool_entries) {
  std::sort(live.begin(), live.end(),
            [](const LiveBlock& a, const LiveBlock& b) { return a.block.id < b.block.id; });
  std::string wrong;
  if (device_live_bytes + device_pending_bytes + device_cached_bytes != device_reserved_bytes) {
    wrong = "device bytes: live " + std::to_string(device_live_bytes) + " + pending " +
            std::to_string(device_pending_bytes) + " + cached " +
            std::to_string(device_cached_bytes) + " != reserved " +
            std::to_string(device_reserved_bytes);
  } else if (host_live_bytes + host_pending_bytes != host_in_use_bytes) {
    wrong = "pinned host bytes: live " + std::to_string(host_live_bytes) + " + pending " +
            std::to_string(host_pending_bytes) + " != in use " + std::to_string(host_in_use_bytes);
  } else if (device_cached_blocks != pool_entries) {
    wrong = "cached blocks != pool entries";
  }
  if (problem.empty()) problem = wrong;
}

}  // namespace kvsim
