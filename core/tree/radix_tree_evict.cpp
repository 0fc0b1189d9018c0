// RadixTree: eviction: the device and host leaf sets (what is a leaf, filing it under its
// eviction key), the next victims, and demoting or removing a leaf.
#include <string>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/radix_tree_results.h"

namespace kvsim {

TreeNode* RadixTree::next_device_victim() const {
  return device_leaves_.front();
}

TreeNode* RadixTree::next_host_victim() const {
  return host_leaves_.front();
}

ReleasedSlots RadixTree::demote(TreeNode& node) {
  KV_ASSERT(is_device_leaf(node), "demote of a node that is not an evictable device leaf");
  KV_ASSERT(node.backed_up(), "demote of a node without a host copy");
  const NodeSlotsBefore before = check_node_slots(*this, node);
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/false);
  out.device[0] = std::move(*node.full().value);
  node.full().value.reset();
  --node.parent->device_children;
  evictable_size_ -= node.token_count();
  refresh_leaf_and_parent(node);
  KV_VERIFY(check_released(*this, before, out, true, false, false).empty(),
            check_released(*this, before, out, true, false, false));
  return out;
}

ReleasedSlots RadixTree::remove_device_leaf(TreeNode& node) {
  KV_ASSERT(is_device_leaf(node), "non-leaf, node " + std::to_string(node.id));
  KV_ASSERT(node.children.empty(), "non-leaf, node " + std::to_string(node.id));
  KV_ASSERT(!node.backed_up(), "remove of a backed-up node would leak its host slots");
  const NodeSlotsBefore before = check_node_slots(*this, node);
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/true);
  out.device[0] = std::move(*node.full().value);
  node.full().value.reset();
  --node.parent->device_children;
  evictable_size_ -= node.token_count();
  detach(node);
  KV_VERIFY(check_released(*this, before, out, true, true, true).empty(),
            check_released(*this, before, out, true, true, true));
  return out;
}

ReleasedSlots RadixTree::remove_host_leaf(TreeNode& node) {
  KV_ASSERT(is_host_leaf(node), "node " + std::to_string(node.id) + " is not an H-leaf");
  const NodeSlotsBefore before = check_node_slots(*this, node);
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/true);
  out.host[0] = std::move(*node.full().host_value);
  detach(node);
  KV_VERIFY(check_released(*this, before, out, true, true, true).empty(),
            check_released(*this, before, out, true, true, true));
  return out;
}

bool RadixTree::is_device_leaf(const TreeNode& node) const {
  return !node.is_root() && !node.evicted() && node.full().lock_ref == 0 &&
         node.device_children == 0;
}

bool RadixTree::is_host_leaf(const TreeNode& node) const {
  return !node.is_root() && node.evicted() && node.backed_up() && node.children.empty() &&
         node.full().lock_ref == 0 && node.full().host_lock_ref == 0;
}

void RadixTree::file_device_leaf(TreeNode& node, bool member) {
  if (!member) {
    if (node.device_leaf_key) device_leaves_.erase(node);
    node.device_leaf_key.reset();
    return;
  }
  const EvictionKey key = eviction_key(options_.eviction_policy, node);
  if (node.device_leaf_key == key) return;  // filed already, same place
  if (node.device_leaf_key) device_leaves_.erase(node);
  node.device_leaf_key = key;
  device_leaves_.insert(node, key);
}

void RadixTree::file_host_leaf(TreeNode& node, bool member) {
  if (!member) {
    if (node.host_leaf_key) host_leaves_.erase(node);
    node.host_leaf_key.reset();
    return;
  }
  const EvictionKey key = eviction_key(EvictionPolicy::kLru, node);
  if (node.host_leaf_key == key) return;
  if (node.host_leaf_key) host_leaves_.erase(node);
  node.host_leaf_key = key;
  host_leaves_.insert(node, key);
}

void RadixTree::refresh_leaf(TreeNode& node) {
  file_device_leaf(node, is_device_leaf(node));
  file_host_leaf(node, is_host_leaf(node));
  file_aux(node);
}

void RadixTree::refresh_leaf_and_parent(TreeNode& node) {
  refresh_leaf(node);
  if (node.parent != nullptr) refresh_leaf(*node.parent);
}

}  // namespace kvsim
