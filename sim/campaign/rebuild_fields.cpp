// The field-by-field comparisons of the hunt's rebuild check (rebuild_check.h): a rebuilt
// tree's nodes against the original's, and a snapshot against the nodes it was taken from, each
// read off the nodes themselves so that a field snapshot() drops cannot drop out of both sides.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/tree/radix_tree.h"
#include "sim/campaign/rebuild_check.h"

namespace kvsim::sim {

size_t walked_nodes(const RadixTree& t) {
  size_t n = 0;
  t.for_each_node([&](const TreeNode&) { ++n; });
  return n;
}

namespace {

std::string slots_text(const std::optional<IndexVector>& v) {
  return v ? std::to_string(v->size()) + " slots" : std::string("none");
}

}  // namespace

std::string node_fields_problem(const RadixTree& a, const RadixTree& b) {
  if (walked_nodes(a) != walked_nodes(b) || a.node_count() != b.node_count()) {
    return "node counts (walked, indexed): original " + std::to_string(walked_nodes(a)) + ", " +
           std::to_string(a.node_count()) + "; rebuilt " + std::to_string(walked_nodes(b)) + ", " +
           std::to_string(b.node_count());
  }
  std::string problem;
  a.for_each_node([&](const TreeNode& n) {
    if (!problem.empty() || &n == a.root()) return;
    const TreeNode* m = b.find(n.id);
    const std::string node = "node " + std::to_string(n.id) + ": ";
    if (m == nullptr || m == b.root()) {
      problem = node + "missing from the rebuilt tree";
      return;
    }
    const ComponentData& x = n.full();
    const ComponentData& y = m->full();
    auto differs = [&](const char* field, const std::string& was, const std::string& is) {
      problem = node + field + ": original " + was + ", rebuilt " + is;
    };
    auto num = [](auto v) { return std::to_string(v); };
    if (m->parent->id != n.parent->id) {
      differs("parent", num(n.parent->id), num(m->parent->id));
    } else if (m->ns != n.ns) {
      differs("ns", num(n.ns), num(m->ns));
    } else if (!std::equal(n.key.begin(), n.key.end(), m->key.begin(), m->key.end())) {
      differs("key", num(n.key.size()) + " tokens", num(m->key.size()) + " tokens");
    } else if (x.value != y.value) {
      differs("value", slots_text(x.value), slots_text(y.value));
    } else if (x.host_value != y.host_value) {
      differs("host_value", slots_text(x.host_value), slots_text(y.host_value));
    } else if (x.lock_ref != y.lock_ref) {
      differs("lock_ref", num(x.lock_ref), num(y.lock_ref));
    } else if (x.host_lock_ref != y.host_lock_ref) {
      differs("host_lock_ref", num(x.host_lock_ref), num(y.host_lock_ref));
    } else if (m->last_access != n.last_access) {
      differs("last_access", num(n.last_access), num(m->last_access));
    } else if (m->creation != n.creation) {
      differs("creation", num(n.creation), num(m->creation));
    } else if (m->hit_count != n.hit_count) {
      differs("hit_count", num(n.hit_count), num(m->hit_count));
    } else if (m->hash_value != n.hash_value) {
      differs("hash_value", num(n.hash_value.size()) + " digests",
              num(m->hash_value.size()) + " digests");
    } else if (m->backup_tried != n.backup_tried) {
      differs("backup_tried", num(n.backup_tried), num(m->backup_tried));
    } else if (m->write_through_pending != n.write_through_pending) {
      differs("write_through_pending", num(n.write_through_pending.value_or(0)),
              num(m->write_through_pending.value_or(0)));
    } else if (m->device_children != n.device_children) {
      differs("device_children", num(n.device_children), num(m->device_children));
    } else if (m->device_leaf_key != n.device_leaf_key || m->host_leaf_key != n.host_leaf_key) {
      problem = node + "filed under a different eviction key";
    }
  });
  return problem;
}

std::string snapshot_fields_problem(const RadixTree& tree, const TreeSnapshot& s) {
  if (s.page_size != tree.page_size() || s.eviction_policy != tree.options().eviction_policy) {
    return "snapshot: page size or eviction policy differs from the tree's options";
  }
  std::vector<ComponentType> components;
  for (const auto& c : tree.components()) {
    if (c->type() != ComponentType::kFull) components.push_back(c->type());
  }
  if (s.aux_components != components) return "snapshot: aux_components differ from the tree's";
  if (s.nodes.size() + 1 != tree.node_count()) {
    return "snapshot: " + std::to_string(s.nodes.size()) + " nodes for a tree of " +
           std::to_string(tree.node_count() - 1) + " (root aside)";
  }
  auto stored = [](const std::optional<IndexVector>& v) -> std::optional<SnapshotValue> {
    if (!v) return std::nullopt;
    return SnapshotValue{v->stride(), {v->entries().begin(), v->entries().end()}};
  };
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeSnapshot& o = s.nodes[i];
    const TreeNode* n = tree.find(o.id);
    const std::string node = "snapshot of node " + std::to_string(o.id) + ": ";
    if (n == nullptr || n == tree.root()) return node + "no such node in the tree";
    if (i > 0 && s.nodes[i - 1].id >= o.id) return node + "not in increasing id order";
    const ComponentData& d = n->full();
    std::vector<ComponentType> with_data;
    for (const auto& c : tree.components()) {
      if (c->type() == ComponentType::kFull) continue;
      const ComponentData& a = n->component(c->type());
      if (a.value || a.host_value || a.lock_ref != 0 || a.host_lock_ref != 0) {
        with_data.push_back(c->type());
      }
    }
    std::sort(with_data.begin(), with_data.end());  // by type, whatever order they were added
    const std::pair<bool, const char*> fields[] = {
        {o.parent != n->parent->id, "parent"},
        {o.ns != n->ns, "ns"},
        {!std::equal(o.key.begin(), o.key.end(), n->key.begin(), n->key.end()), "key"},
        {o.value != stored(d.value), "value"},
        {o.host_value != stored(d.host_value), "host_value"},
        {o.lock_ref != d.lock_ref || o.host_lock_ref != d.host_lock_ref, "locks"},
        {o.last_access != n->last_access, "last_access"},
        {o.creation != n->creation, "creation"},
        {o.hit_count != n->hit_count, "hit_count"},
        {o.hash_value != n->hash_value, "hash_value"},
        {o.backup_tried != n->backup_tried, "backup_tried"},
        {o.write_through_pending != n->write_through_pending, "write_through_pending"},
        {o.aux_data != with_data, "aux_data"},
    };
    for (const auto& [differs, field] : fields) {
      if (differs) return node + field + " differs from the node's own";
    }
  }
  return "";
}

}  // namespace kvsim::sim
