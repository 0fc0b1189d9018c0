// TreeComponent: the interface through which a kind of cached state (full attention KV, a
// sliding window, a recurrent Mamba state, ...) takes part in the radix tree.
//
// The tree owns structure (keys, children, ids, leaf sets, access times). A component owns
// its slot of ComponentData on every node and decides three things:
//  - match:  which prefixes it can serve (a MatchValidator sees the matched path root→leaf
//            and says, node by node, whether the prefix ending there is usable from device
//            only, or from device or host);
//  - lock:   which nodes a request anchored at some node protects, recorded in a LockRecord
//            so that release replays exactly what acquire did even if residency changed in
//            between (seed 002);
//  - split:  how its data divides when a node is split.
// It also checks its own invariants. The full-attention component is always present and is
// the one whose device value defines "evicted".
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string_view>

#include "core/common/sanity.h"
#include "core/tree/tree_node.h"

namespace kvsim {

class RadixTree;

struct MatchVerdict {
  bool device = false;  // the prefix ending at this node can be served from device alone
  bool host = false;    // ... from device and host together (after a load-back)
};

class MatchValidator {
 public:
  virtual ~MatchValidator() = default;
  // Called for each non-root node of the matched path, root→leaf.
  virtual MatchVerdict visit(const TreeNode& node) = 0;
};

// What one acquire did, per component: the node its walk started from (nullopt: nothing was
// locked). Release walks from the same start, so nodes added above it by splits are covered
// and nodes skipped below it are never touched.
struct LockRecord {
  NodeId anchor = 0;
  std::array<std::optional<NodeId>, kComponentTypesMax> start{};
  std::array<uint64_t, kComponentTypesMax> aux{};  // component-specific (e.g. a window bound)
};

class TreeComponent {
 public:
  virtual ~TreeComponent() = default;
  virtual ComponentType type() const = 0;
  virtual std::string_view name() const = 0;

  virtual std::unique_ptr<MatchValidator> make_validator() const = 0;
  virtual void acquire_lock(RadixTree& tree, TreeNode& anchor, LockRecord& record) = 0;
  virtual void release_lock(RadixTree& tree, const LockRecord& record) = 0;
  // `prefix` is the new parent holding the first `prefix_tokens` of what was `suffix`.
  virtual void on_split(TreeNode& prefix, TreeNode& suffix, size_t prefix_tokens) = 0;
  virtual void sanity_check(const RadixTree& tree, SanityReport& report) const = 0;
};

}  // namespace kvsim
