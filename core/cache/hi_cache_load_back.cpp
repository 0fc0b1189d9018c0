// HiCache load-back: bring the evicted bottom segment of a matched path back to the device.
#include <algorithm>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"

namespace kvsim {

LoadBackResult HiCache::init_load_back(TreeNode& best_match_node,
                                       std::optional<int64_t> mem_quota) {
  // The evicted chain from the anchor up to the first node still on device. The anchor is
  // best_match_node, the deepest node every component accepts (seed 002).
  std::vector<TreeNode*> chain;
  TreeNode* ancestor = &best_match_node;
  while (!ancestor->is_root() && ancestor->evicted()) {
    KV_ASSERT(ancestor->backed_up(), "No backup available on evicted nodes, should not happen");
    chain.push_back(ancestor);
    ancestor = ancestor->parent;
  }
  LoadBackResult result;
  result.last_node = ancestor;
  if (chain.empty()) {
    result.last_node = &best_match_node;
    return result;
  }
  std::reverse(chain.begin(), chain.end());  // root→leaf
  IndexVector host_indices(Tier::kHost, {});
  for (TreeNode* n : chain)
    host_indices.append(*n->full().host_value);
  const auto tokens = static_cast<int64_t>(host_indices.size());
  if (tokens < options_.load_back_threshold_tokens) return result;
  if (mem_quota && tokens > *mem_quota) return result;

  // Keep the device ancestors from being evicted while we make room, and the host copies
  // from being host-evicted until the load's ack.
  const LockRecord ancestor_lock = tree_->lock(*ancestor);
  for (TreeNode* n : chain)
    tree_->protect_host(*n);
  std::optional<IndexVector> device = controller_->load(host_indices, best_match_node.id);
  if (!device) {
    evict(tokens - device_slots_->available_size());
    device = controller_->load(host_indices, best_match_node.id);
  }
  tree_->unlock(ancestor_lock);
  if (!device) {
    for (TreeNode* n : chain)
      tree_->release_host(*n);
    return result;
  }

  size_t offset = 0;
  PendingLoad pending;
  for (TreeNode* n : chain) {
    const size_t len = n->key.size();
    tree_->set_device_value(*n, device->slice(offset, offset + len));
    offset += len;
    pending.protected_nodes.push_back(n->id);
  }
  // The new device slots are written by the pending copy: no eviction until its ack.
  pending.lock = tree_->lock(best_match_node);
  KV_ASSERT(pending_loads_.count(best_match_node.id) == 0, "two loads for one node");
  pending_loads_.emplace(best_match_node.id, std::move(pending));
  stats_.load_back_tokens += tokens;
  result.device_indices = std::move(*device);
  result.last_node = &best_match_node;
  return result;
}

}  // namespace kvsim
