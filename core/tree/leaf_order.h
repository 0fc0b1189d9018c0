// LeafOrder: the evictable-leaf set of a RadixTree, ordered by EvictionKey (smallest first),
// in O(1) for the common case of an LRU policy.
//
// Two parts: an intrusive doubly-linked list of nodes filed in increasing key order (a node is
// appended when its key is larger than the list's tail, which is what a touch under LRU gives:
// the access clock only grows), and an ordered map for the nodes filed out of order (a parent
// that becomes a leaf when its last child goes, a node unlocked after others were touched, or
// any key of a policy whose keys do not grow, LFU). front() is the smaller of the two fronts,
// so the order is exactly the map's order of old, for every policy.
//
// Invariants (check()): the list is sorted strictly by key and its links agree; every listed
// node is marked listed and holds its key; the map maps each key to a node filed under it
// and not listed; size() is the list length plus the map size.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "core/tree/tree_node.h"

namespace kvsim {

class LeafOrder {
 public:
  // `link` and `key` are the node's members this order uses.
  LeafOrder(LeafLink TreeNode::*link, std::optional<EvictionKey> TreeNode::*key)
      : link_(link), key_(key) {}
  LeafOrder(const LeafOrder&) = delete;
  LeafOrder& operator=(const LeafOrder&) = delete;

  // Files `node` (not filed) under `key`; the caller has stored `key` in node.*key.
  void insert(TreeNode& node, const EvictionKey& key);
  // Unfiles `node`, filed under node.*key (the caller resets it afterwards).
  void erase(TreeNode& node);
  TreeNode* front() const;
  size_t size() const { return list_size_ + map_.size(); }
  bool empty() const { return size() == 0; }
  // True when `node` is filed here under `key`.
  bool holds(const TreeNode& node, const EvictionKey& key) const;
  // "" when consistent, else the first problem (O(size)).
  std::string check() const;

 private:
  const EvictionKey& key_of(const TreeNode& n) const { return *(n.*key_); }

  LeafLink TreeNode::*link_;
  std::optional<EvictionKey> TreeNode::*key_;
  TreeNode* head_ = nullptr;
  TreeNode* tail_ = nullptr;
  size_t list_size_ = 0;
  std::map<EvictionKey, TreeNode*> map_;
};

}  // namespace kvsim
