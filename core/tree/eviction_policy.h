// EvictionPolicy: the order in which unlocked device leaves (and host-only leaves) are
// evicted. A policy maps a node to a priority key; the smallest key is evicted first. Keys end
// with the node id, so the order is total and deterministic.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/tree/tree_node.h"

namespace kvsim {

// Do not renumber: embedded in traces and scenario files.
enum class EvictionPolicy : uint8_t { kLru = 0, kLfu = 1 };

std::string_view to_string(EvictionPolicy policy);
bool parse_eviction_policy(std::string_view text, EvictionPolicy* out);

// (primary, secondary, id): LRU = (last_access, 0, id); LFU = (hit_count, last_access, id).

EvictionKey eviction_key(EvictionPolicy policy, const TreeNode& node);

}  // namespace kvsim
