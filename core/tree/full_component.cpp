#include "core/tree/full_component.h"

#include <string>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

class FullValidator final : public MatchValidator {
 public:
  MatchVerdict visit(const TreeNode& node) override {
    return {.device = !node.evicted(), .host = !node.evicted() || node.backed_up()};
  }
};

}  // namespace

std::unique_ptr<MatchValidator> FullComponent::make_validator() const {
  return std::make_unique<FullValidator>();
}

void FullComponent::acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) {
  TreeNode* node = &anchor;
  // Skip the evicted bottom segment: those nodes hold no device slots to protect.
  while (!node->is_root() && node->evicted())
    node = node->parent;
  KV_PROBE_IF(node != &anchor && !node->is_root(), full_lock_skips_evicted);
  if (node->is_root()) return;  // nothing on device below the root: nothing to lock
  record.start[static_cast<size_t>(type())] = node->id;
  for (TreeNode* n = node; !n->is_root(); n = n->parent) {
    KV_ASSERT(!n->evicted(), "FULL invariant broken: evicted ancestor " + std::to_string(n->id) +
                                 " above device-on segment");
    tree.inc_full_lock(*n);
  }
}

void FullComponent::release_lock(RadixTree& tree, const LockRecord& record) {
  const auto& start = record.start[static_cast<size_t>(type())];
  if (!start) return;
  TreeNode* node = tree.find(*start);
  KV_ASSERT(node != nullptr, "locked node " + std::to_string(*start) + " vanished");
  for (TreeNode* n = node; !n->is_root(); n = n->parent)
    tree.dec_full_lock(*n);
}

void FullComponent::on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) {
  ComponentData& from = suffix.full();
  ComponentData& to = prefix.full();
  if (from.value) {
    to.value = from.value->slice(0, prefix_tokens);
    from.value = from.value->slice(prefix_tokens, from.value->size());
  }
  if (from.host_value) {
    to.host_value = from.host_value->slice(0, prefix_tokens);
    from.host_value = from.host_value->slice(prefix_tokens, from.host_value->size());
  }
  // Every lock through the suffix also passes through the new prefix. Host protection stays
  // with the suffix: the prefix has a child, so it is no host leaf and cannot be host-evicted.
  to.lock_ref = from.lock_ref;
}

void FullComponent::sanity_check(const RadixTree& tree, SanityReport& report) const {
  tree.for_each_node([&](const TreeNode& n) {
    const ComponentData& d = n.full();
    if (d.lock_ref < 0 || d.host_lock_ref < 0) {
      report.add("tree.lock", "negative lock count", n.id);
    }
    if (n.is_root()) {
      if (d.lock_ref < 1) report.add("tree.lock", "root lost its permanent lock", n.id);
      return;
    }
    if (d.lock_ref > 0 && n.evicted()) {
      report.add("tree.lock", "locked node is not on device", n.id);
    }
    int64_t children_locks = 0;
    for (const auto& e : n.children)
      children_locks += e.node->full().lock_ref;
    if (d.lock_ref < children_locks) {
      report.add("tree.lock",
                 "path-lock law: lock_ref " + std::to_string(d.lock_ref) + " < children's " +
                     std::to_string(children_locks),
                 n.id);
    }
  });
}

}  // namespace kvsim
