#include "core/tree/eviction_policy.h"

namespace kvsim {

std::string_view to_string(EvictionPolicy policy) {
  switch (policy) {
    case EvictionPolicy::kLru:
      return "lru";
    case EvictionPolicy::kLfu:
      return "lfu";
  }
  return "?";
}

bool parse_eviction_policy(std::string_view text, EvictionPolicy* out) {
  if (text == "lru") {
    *out = EvictionPolicy::kLru;
    return true;
  }
  if (text == "lfu") {
    *out = EvictionPolicy::kLfu;
    return true;
  }
  return false;
}

EvictionKey eviction_key(EvictionPolicy policy, const TreeNode& node) {
  switch (policy) {
    case EvictionPolicy::kLru:
      return {node.last_access, 0, node.id};
    case EvictionPolicy::kLfu:
      return {node.hit_count, node.last_access, node.id};
  }
  return {0, 0, node.id};
}

}  // namespace kvsim
