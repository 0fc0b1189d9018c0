// FullComponent: full-attention KV, the component every tree has.
//
// Match: a prefix is usable from device when its node has a device value, and from device or
// host when it also may have only a host copy. Lock: a request anchored at node A protects
// every node from the first device-resident node at or above A up to the root; the evicted
// bottom segment below it is skipped (seed 002), and release starts from the same node, so it
// decrements exactly what acquire incremented even if a skipped node was loaded back since.
#pragma once

#include "core/tree/component.h"

namespace kvsim {

class FullComponent final : public TreeComponent {
 public:
  ComponentType type() const override { return ComponentType::kFull; }
  std::string_view name() const override { return "full"; }
  std::unique_ptr<MatchValidator> make_validator() const override;
  void acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) override;
  void release_lock(RadixTree& tree, const LockRecord& record) override;
  void on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) override;
  void sanity_check(const RadixTree& tree, SanityReport& report) const override;
};

}  // namespace kvsim
