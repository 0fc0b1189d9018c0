// MambaComponent: the recurrent state of Mamba (SSM) layers — one state slot per node, the
// state after the node's last token, in a state pool of its own.
//
// Match: the prefix ending at node n is usable only when n itself holds a state (on device
//   for a device match; device or host for a host match): a recurrent state cannot be rebuilt
//   from a prefix of it. Nodes above may be tombstoned freely.
// Lock: a single-node lock on the anchor's state, if it has one.
// Split: the state belongs to the end of the node, so it stays with the lower half; the new
//   upper half is a tombstone.
// Copy-on-write: a request that matches a state must not advance it in place (other requests
//   share it); the cache copies it into the request's own slot (HiCache::copy_mamba_state).
//
// Invariants (sanity_check): a value is exactly one slot, host-resident indices; lock_ref >= 0
// and only on a node with a device state.
#pragma once

#include "core/tree/component.h"

namespace kvsim {

class MambaComponent final : public TreeComponent {
 public:
  ComponentType type() const override { return ComponentType::kMamba; }
  std::string_view name() const override { return "mamba"; }

  std::unique_ptr<MatchValidator> make_validator() const override;
  void acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) override;
  void release_lock(RadixTree& tree, const LockRecord& record) override;
  void on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) override;
  void sanity_check(const RadixTree& tree, SanityReport& report) const override;
};

}  // namespace kvsim
