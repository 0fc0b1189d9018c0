// RadixTree: residency changes that give a node a value (device or host), access stamps and
// hit counts (which move a leaf in its eviction order), and the host size.
#include "core/common/assert.h"
#include "core/tree/radix_tree.h"

namespace kvsim {

void RadixTree::set_device_value(TreeNode& node, IndexVector value) {
  KV_ASSERT(!node.is_root() && node.evicted(), "device value set on a node already on device");
  KV_ASSERT(node.parent->is_root() || !node.parent->evicted(),
            "device value under an evicted parent breaks root-closed residency");
  KV_ASSERT(value.size() == node.key.size() && value.tier() == Tier::kDevice, "device value shape");
  KV_ASSERT(value.residency() == Residency::kHost, "tree stores host-resident indices only");
  node.full().value = std::move(value);
  ++node.parent->device_children;
  evictable_size_ += node.token_count();  // evicted nodes are never locked
  refresh_leaf_and_parent(node);
}

void RadixTree::set_host_value(TreeNode& node, IndexVector host_value) {
  KV_ASSERT(!node.is_root() && !node.backed_up(), "host value set twice");
  KV_ASSERT(host_value.size() == node.key.size() && host_value.tier() == Tier::kHost,
            "host value shape");
  KV_ASSERT(host_value.residency() == Residency::kHost, "tree stores host-resident indices only");
  node.full().host_value = std::move(host_value);
  refresh_leaf(node);
}

void RadixTree::touch(TreeNode& node) {
  node.last_access = ++clock_;
  refresh_leaf(node);
}

void RadixTree::bump_hit_count(TreeNode& node) {
  ++node.hit_count;
  refresh_leaf(node);
}

int64_t RadixTree::host_size() const {
  int64_t total = 0;
  for_each_node([&](const TreeNode& n) {
    if (!n.is_root() && n.backed_up()) total += n.token_count();
  });
  return total;
}

}  // namespace kvsim
