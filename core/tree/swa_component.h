// SwaComponent: sliding-window attention KV (Gemma-style local layers) in its own pool.
//
// A token's SWA KV is only ever read by the next `window` tokens, so a node far enough above
// every live request may drop its SWA value while keeping its full-attention KV: a tombstone.
//
// Match: the prefix ending at node n is usable when the last `window` tokens before its end
//   (or all of them, if the path is shorter) have SWA values — on device for a device match,
//   on device or host for a host match. Tombstones further up do not matter.
// Lock: a window lock. From the anchor upward it locks nodes holding SWA device values until
//   `window` tokens are covered, and records how many tokens it locked. Release walks up from
//   the same start over exactly that many tokens, so a split in between (which copies the
//   lock to the new upper half) changes nothing, and nodes past the window are never touched.
// Split: values are sliced; the new upper half inherits the lock count.
//
// Invariants (sanity_check, names "tree.shape" and "residency"): a device or host value has one
// slot per token of the key, of the right tier, in host-resident index vectors. Lock counts
// and tombstone rules are checked for every aux component by RadixTree ("tree.aux").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tree/component.h"

namespace kvsim {

class SwaComponent final : public TreeComponent {
 public:
  explicit SwaComponent(int64_t window_tokens);
  ComponentType type() const override { return ComponentType::kSwa; }
  std::string_view name() const override { return "swa"; }
  int64_t window() const { return window_; }

  std::unique_ptr<MatchValidator> make_validator() const override;
  void acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) override;
  void release_lock(RadixTree& tree, const LockRecord& record) override;
  void on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) override;
  void sanity_check(const RadixTree& tree, SanityReport& report) const override;

  // Nodes whose SWA values a load-back anchored at `anchor` must provide: walking up from the
  // anchor until `window` tokens are covered (the window reset point), never past it (seed 002).
  std::vector<TreeNode*> window_nodes(TreeNode& anchor) const;
  // [tree.swa_lock_reach] "" unless a window lock that covers `locked` tokens from `anchor` up
  // reaches past its window: the nodes it locked, less the topmost, hold fewer tokens than the
  // window (it stops at the node that completes the window, a tombstone or the root), and it
  // ends on a node boundary. acquire_lock verifies it (KV_VERIFY).
  std::string check_lock_reach(const TreeNode& anchor, uint64_t locked) const;

 private:
  int64_t window_;
};

}  // namespace kvsim
