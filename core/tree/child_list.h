// ChildList: the children of a radix-tree node, owned, in a flat array.
//
// Why not an ordered map: a node with a handful of children (most of them) paid a heap
// allocation per child and a pointer chase per comparison, and each comparison read the
// child's key from its own storage: at 10^6 nodes every one of those was a cache miss. Here a
// lookup scans an array of {namespace, first token, child} entries and reads a child's key
// only to confirm a candidate; a node with many children also keeps a ChildIndex (kept by
// RadixTree) and never scans.
//
// Order: the array is in insertion order, with a removal moving the last entry into the hole
// (each child knows its own position, so a removal is O(1)). That order depends only on the
// calls made, but it is not the key order that walks, dumps and frees have always used; they
// ask for sorted(), which gives key order (namespace, then page) as the ordered map did, so
// every walk's output is unchanged.
//
// Invariants (RadixTree::check_shape, [tree.shape]):
//  1. entry i holds a child whose slot_in_parent is i, whose namespace is the entry's and whose
//     key starts with the entry's first token;
//  2. no two children share namespace and first page.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/common/types.h"

namespace kvsim {

struct TreeNode;

class ChildList {
 public:
  struct Entry {
    Namespace ns = 0;
    Token first = 0;
    std::unique_ptr<TreeNode> node;
  };

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Entries in list order: for checks and sums that do not depend on order.
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

  // The child in `ns` whose key starts with `page` (one page of tokens), or nullptr. O(size):
  // for nodes without a ChildIndex.
  TreeNode* scan(Namespace ns, std::span<const Token> page) const;

  // Takes ownership of `child` (namespace and key already set) and returns it.
  TreeNode* add(std::unique_ptr<TreeNode> child);
  // Gives up `child`, which must be one of these children. O(1).
  std::unique_ptr<TreeNode> take(TreeNode& child);
  // Puts `by` in the place of `old` (a split: both start with the same page), returning `old`.
  std::unique_ptr<TreeNode> replace(TreeNode& old, std::unique_ptr<TreeNode> by);
  void clear() {
    entries_.clear();
    namespaces_.clear();
  }

  // The children in key order (namespace, then page lexicographically): what every walk whose
  // result can be seen (a dump, a free order, a report) iterates. O(size log size).
  std::vector<TreeNode*> sorted() const;
  // Appends the children to `out` last key first: what a depth-first walk in key order pushes
  // on its stack. The walks of a full sanity check call this at every node, so it allocates
  // nothing of its own (sorted() did, at every node of every walk: a tenth of a check's time).
  void append_in_reverse_key_order(std::vector<const TreeNode*>& out) const;

  // The namespaces the children are in, ascending, each with its number of children.
  const std::vector<std::pair<Namespace, uint32_t>>& namespaces() const { return namespaces_; }

 private:
  void count_namespace(Namespace ns, int delta);

  std::vector<Entry> entries_;
  std::vector<std::pair<Namespace, uint32_t>> namespaces_;  // few: tenants, not requests
};

}  // namespace kvsim
