#include "core/backend/backend.h"

#include <string>

namespace kvsim {

std::string_view to_string(KVLayout layout) {
  return layout == KVLayout::kLayerFirst ? "layer_first" : "page_first";
}

void MemoryCensus::check_sums(size_t pool_entries) {
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
