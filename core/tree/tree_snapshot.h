// TreeSnapshot: the whole state of a RadixTree (full-attention component) as plain data, for
// RadixTree::snapshot() / RadixTree::restore() (core/tree/radix_tree_snapshot.cpp).
//
// What a restored tree needs to behave exactly as the original from then on: every node's id,
// parent, namespace, key, device and host values, lock counts, access clock fields (LRU and LFU
// keys), storage hashes and backup flags, plus the tree's next node id and access clock. The
// derived state (child lists and their hash indexes, device_children, leaf sets, evictable /
// protected sizes) is rebuilt by restore(), which then runs sanity_check().
//
// Scope: the full-attention component. A tree with auxiliary components (SWA, Mamba) snapshots
// which components it has and which nodes hold their data, so that restore() can refuse it by
// name instead of silently dropping that data.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/common/types.h"
#include "core/tree/eviction_policy.h"
#include "core/tree/tree_node.h"

namespace kvsim {

// An index vector as stored: `entries` are slots (stride 1) or first slots of pages of
// `stride` slots (IndexVector::pages).
struct SnapshotValue {
  int32_t stride = 1;
  std::vector<SlotIndex> entries;
  friend bool operator==(const SnapshotValue&, const SnapshotValue&) = default;
};

struct NodeSnapshot {
  NodeId id = 0;
  NodeId parent = 0;  // 0: the root
  Namespace ns = 0;
  std::vector<Token> key;
  std::optional<SnapshotValue> value;       // device slots; nullopt: evicted
  std::optional<SnapshotValue> host_value;  // host slots; set: backed up
  int32_t lock_ref = 0;
  int32_t host_lock_ref = 0;
  uint64_t last_access = 0;
  uint64_t creation = 0;
  uint64_t hit_count = 0;
  std::vector<PageDigest> hash_value;
  bool backup_tried = false;
  std::optional<NodeId> write_through_pending;
  // Auxiliary components holding data (a value, host value or lock) on this node.
  std::vector<ComponentType> aux_data;
  friend bool operator==(const NodeSnapshot&, const NodeSnapshot&) = default;
};

// A full-attention lock held at the snapshot (LockRecord's anchor and full-attention start;
// no start: the lock protected nothing). Its release decrements start → root.
struct HeldLock {
  NodeId anchor = 0;
  std::optional<NodeId> start;
  friend bool operator==(const HeldLock&, const HeldLock&) = default;
};

struct TreeSnapshot {
  int32_t page_size = 1;
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
  std::vector<ComponentType> aux_components;  // the tree's components besides full attention
  std::vector<NodeSnapshot> nodes;            // every node but the root, by increasing id
  NodeId next_id = 1;                         // the id the next new node gets
  uint64_t clock = 0;                         // the logical access clock
  // When known (the caller tracks its locks, as the Python module does): the locks held, which
  // restore() checks against the lock counts (each node's lock_ref is the number of held locks
  // whose start is the node or below it).
  std::optional<std::vector<HeldLock>> held_locks;
  friend bool operator==(const TreeSnapshot&, const TreeSnapshot&) = default;
};

// A snapshot restore() refuses; what() is "node N: field F: problem" (or "field F: problem"
// for the tree's own fields, or "sanity_check after restore: ...").
class SnapshotError : public std::runtime_error {
 public:
  SnapshotError(std::optional<NodeId> node, std::string field, const std::string& problem);
  const std::optional<NodeId>& node() const { return node_; }
  const std::string& field() const { return field_; }
  // The problem without the node and field prefix.
  const std::string& problem() const { return problem_; }

 private:
  std::optional<NodeId> node_;
  std::string field_;
  std::string problem_;
};

// "" when the snapshot's held locks (if it has any) agree with its lock counts, else the first
// disagreement as restore() would report it (a caller that released a lock twice, say).
std::string held_locks_problem(const TreeSnapshot& snapshot);

}  // namespace kvsim
