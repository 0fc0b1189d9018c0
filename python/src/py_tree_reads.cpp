// PyTree's reads (py_tree.h): sizes, nodes, keys and values, the sanity check and the call
// statistics. Each reads under the tree's mutex (read()): another thread's call may change or
// free what it reads; what is handed out is a copy.
#include <vector>

#include "core/common/sanity.h"
#include "python/src/py_tree.h"
#include "python/src/slot_arrays.h"

namespace py = pybind11;

namespace kvsim::python {

int64_t PyTree::evictable_size() {
  return read([&] { return tree_->evictable_size(); });
}

int64_t PyTree::protected_size() {
  return read([&] { return tree_->protected_size(); });
}

int64_t PyTree::total_size() {
  return read([&] { return tree_->evictable_size() + tree_->protected_size(); });
}

size_t PyTree::node_count() {
  return read([&] { return tree_->node_count(); });
}

NodeId PyTree::root_id() {
  return read([&] { return tree_->root()->id; });
}

bool PyTree::contains(NodeId id) {
  return read([&] { return tree_->find(id) != nullptr; });
}

std::vector<NodeId> PyTree::node_ids() {
  return read([&] {
    std::vector<NodeId> ids;
    tree_->for_each_node([&](const TreeNode& n) { ids.push_back(n.id); });
    return ids;
  });
}

py::dict PyTree::node_info(NodeId id) {
  py::dict d;
  read([&] {
    const TreeNode& n = node_or_throw(id);
    d["id"] = n.id;
    d["parent"] = n.parent != nullptr ? py::cast(n.parent->id) : py::none();
    d["namespace"] = n.ns;
    d["tokens"] = n.token_count();
    d["lock_ref"] = n.full().lock_ref;
    d["evicted"] = n.evicted();
    d["last_access"] = n.last_access;
    d["hit_count"] = n.hit_count;
    py::list children;
    for (const TreeNode* child : n.children.sorted())
      children.append(child->id);
    d["children"] = children;
    return 0;
  });
  return d;
}

py::array_t<int32_t> PyTree::node_key(NodeId id) {
  std::vector<Token> key = read([&] {
    const TokenRun& k = node_or_throw(id).key;
    return std::vector<Token>(k.begin(), k.end());
  });
  return py::array_t<int32_t>(static_cast<py::ssize_t>(key.size()), key.data());
}

py::array_t<int64_t> PyTree::node_value(NodeId id) {
  std::vector<SlotIndex> v = read([&] {
    const TreeNode& n = node_or_throw(id);
    return n.evicted() ? std::vector<SlotIndex>{} : n.full().value->slots();
  });
  return to_numpy(std::move(v));
}

py::array_t<int32_t> PyTree::path_tokens(NodeId id) {
  std::vector<Token> p = read([&] { return RadixTree::prefix_tokens(node_or_throw(id)); });
  return py::array_t<int32_t>(static_cast<py::ssize_t>(p.size()), p.data());
}

py::list PyTree::sanity_check() {
  SanityReport report;
  read([&] {
    tree_->sanity_check(report);
    return 0;
  });
  py::list out;
  for (const Violation& v : report.violations()) {
    out.append(py::make_tuple(v.invariant, v.detail, v.node ? py::cast(*v.node) : py::none(),
                              v.slot ? py::cast(*v.slot) : py::none()));
  }
  return out;
}

py::dict PyTree::stats() {
  const CallStats s = read([&] { return stats_; });  // written by calls without the GIL
  py::dict d;
  d["match_calls"] = s.match_calls;
  d["match_tokens"] = s.match_tokens;
  d["hit_tokens"] = s.hit_tokens;
  d["insert_calls"] = s.insert_calls;
  d["insert_tokens"] = s.insert_tokens;
  d["new_tokens"] = s.new_tokens;
  d["evict_calls"] = s.evict_calls;
  d["evict_requested"] = s.evict_requested;
  d["evicted_tokens"] = s.evicted_tokens;
  d["evicted_nodes"] = s.evicted_nodes;
  d["lock_calls"] = s.lock_calls;
  d["unlock_calls"] = s.unlock_calls;
  return d;
}

}  // namespace kvsim::python
