// Checks of the results RadixTree's public operations return (radix_tree_results.cpp). Each
// returns "" when the returned value equals its recomputation from other state (the path read
// up from the returned node through parent links, the caller's tokens, the accounting before
// and after), else the first disagreement, named by its invariant: [tree.match_result],
// [tree.insert_result], [tree.lock_result], [tree.released_slots], [tree.host_insert_leaf].
// The operations verify them (KV_VERIFY) where they return. They only read: no access stamp,
// counter or probe moves. Each costs O(the path or the result).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "core/tree/radix_tree.h"

namespace kvsim {

// The accounting an operation starts from (taken before it changes anything).
struct TreeResultBaseline {
  int64_t device_tokens = 0;  // evictable + protected
  int64_t protected_tokens = 0;
  std::array<int64_t, kComponentTypesMax> aux_evictable{};
  std::array<int64_t, kComponentTypesMax> aux_protected{};
  uint64_t clock = 0;  // the tree's access clock: nodes made later carry a later creation stamp
  size_t nodes = 0;
};

// What a node holds before a residency change: per component and side, the size (-1: none)
// and the first and last slot.
struct NodeSlotsBefore {
  struct Value {
    int64_t size = -1;
    SlotIndex first = 0;
    SlotIndex last = 0;
  };
  NodeId id = 0;
  TreeResultBaseline base;
  std::array<Value, kComponentTypesMax> device{};
  std::array<Value, kComponentTypesMax> host{};
};

TreeResultBaseline check_baseline(const RadixTree& tree, uint64_t clock);
NodeSlotsBefore check_node_slots(const RadixTree& tree, const TreeNode& node);

// [tree.match_result] the matched path (ending at `walk_end`) spells the query and is the
// longest; last_device_node, best_match_node and last_host_node are the deepest nodes of it the
// components' rules accept (recomputed from the nodes' data); device_indices are the device
// values down to the first, host_hit_length the tokens from it down to the second.
template <typename T>
std::string check_match_result(const RadixTree& tree, const TreeNode& walk_end, Namespace ns,
                               std::span<const T> tokens, const MatchResult& result);

// [tree.insert_result] last_node ends the key on device; prefix_len is the key's length less
// the device tokens the tree gained; hit_nodes are path nodes holding the prefix and the new
// leaf; adopted side slots are what the side values grew by, and the request's own.
template <typename T>
std::string check_insert_result(const RadixTree& tree, Namespace ns, std::span<const T> tokens,
                                const AuxInsertValues& aux, const InsertResult& result,
                                const TreeResultBaseline& before);

// [tree.lock_result] a lock's (anchor != nullptr) or an unlock's record: the starts lock()
// must record, and the protected counts moved by the nodes whose lock count crossed zero.
std::string check_lock_result(const RadixTree& tree, const TreeNode* anchor,
                              const LockRecord& record, const TreeResultBaseline& before);

// [tree.released_slots] demote / remove_*_leaf released exactly what the node held of the kinds
// they drop (device, host), the accounting dropped as much, and the node went (removed) or stayed.
std::string check_released(const RadixTree& tree, const NodeSlotsBefore& before,
                           const ReleasedSlots& out, bool device, bool host, bool removed);

// [tree.host_insert_leaf] insert_host's new leaf (when it made one) is host-only and holds the
// caller's last inserted_len host slots and their page keys.
std::string check_host_insert_leaf(const RadixTree& tree, size_t aligned,
                                   const HostInsertResult& result, const IndexVector& host_value,
                                   std::span<const PageDigest> hashes);

}  // namespace kvsim
