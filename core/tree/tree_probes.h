// Code-probe conditions of the radix tree (core/common/probe.h), kept out of radix_tree.cpp
// so the tree's hot paths carry one line per probe. Read-only: nothing here changes the tree.
#pragma once

#include <cstddef>
#include <span>

#include "core/common/probe.h"
#include "core/tree/tree_node.h"

namespace kvsim {

// Whether a namespace other than `ns` has a child of `parent` whose first page equals the
// first page of `key`. O(namespaces) lookups through `find(ns, page)` (RadixTree::find_child).
template <typename FindChild>
bool probe_other_namespace_holds(const TreeNode& parent, Namespace ns, std::span<const Token> key,
                                 size_t page, FindChild&& find) {
  if (key.size() < page) return false;
  for (const auto& [other, count] : parent.children.namespaces()) {
    if (other != ns && find(other, key.first(page)) != nullptr) return true;
  }
  return false;
}

// The split probes: what the node being split carries.
inline void probe_split([[maybe_unused]] const TreeNode& node) {
  KV_PROBE_IF(node.full().lock_ref > 0, tree_split_locked);
  KV_PROBE_IF(node.write_through_pending.has_value(), tree_split_pending_write);
  KV_PROBE_IF(node.full().host_value.has_value(), tree_split_host_copy);
  KV_PROBE_IF(!node.full().value.has_value(), tree_split_evicted);
  KV_PROBE_IF(node.full().host_lock_ref > 0, tree_split_host_protected);
}

}  // namespace kvsim
