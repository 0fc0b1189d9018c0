// RadixTree::snapshot() and RadixTree::restore(): the tree's state as plain data and back
// (core/tree/tree_snapshot.h). Used to replay a window of recorded calls (docs/sglang.md
// "Recording"): the window's file starts with a snapshot of the tree at its first call.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

// The one place where a snapshot's tokens become a node key.
TokenRun restored_key(const std::vector<Token>& tokens) {
  return TokenRun::copy_of(tokens);
}

SnapshotValue value_snapshot(const IndexVector& v) {
  const std::span<const SlotIndex> e = v.entries();
  return SnapshotValue{v.stride(), std::vector<SlotIndex>(e.begin(), e.end())};
}

IndexVector restored_value(Tier tier, const SnapshotValue& v) {
  if (v.stride == 1) return IndexVector(tier, v.entries);
  return IndexVector::pages(tier, v.stride, v.entries);
}

std::string str(uint64_t v) {
  return std::to_string(v);
}

void check_value(const NodeSnapshot& n, const std::optional<SnapshotValue>& v, const char* field) {
  if (!v) return;
  if (v->stride <= 0) {
    throw SnapshotError(n.id, field, "stride " + std::to_string(v->stride) + " is not positive");
  }
  const auto stride = static_cast<size_t>(v->stride);
  if (n.key.size() % stride != 0 || v->entries.size() != n.key.size() / stride) {
    throw SnapshotError(n.id, field,
                        str(v->entries.size()) + " entries of stride " + str(stride) +
                            " do not cover the key's " + str(n.key.size()) + " tokens");
  }
}

// Checks one node's own fields (not its links to others).
void check_node_fields(const NodeSnapshot& n, size_t page, uint64_t clock) {
  if (!n.aux_data.empty()) {
    throw SnapshotError(n.id, "aux_data",
                        std::string(to_string(n.aux_data.front())) +
                            " component data; restore supports the full-attention component only");
  }
  if (n.key.empty() || n.key.size() % page != 0) {
    throw SnapshotError(
        n.id, "key",
        str(n.key.size()) + " tokens is not a positive multiple of the page size " + str(page));
  }
  check_value(n, n.value, "value");
  check_value(n, n.host_value, "host_value");
  if (n.lock_ref < 0) {
    throw SnapshotError(n.id, "lock_ref", std::to_string(n.lock_ref) + " is negative");
  }
  if (n.host_lock_ref < 0) {
    throw SnapshotError(n.id, "host_lock_ref", std::to_string(n.host_lock_ref) + " is negative");
  }
  if (n.creation > n.last_access) {
    throw SnapshotError(n.id, "creation",
                        str(n.creation) + " is after last_access " + str(n.last_access));
  }
  if (n.last_access > clock) {
    throw SnapshotError(n.id, "last_access",
                        str(n.last_access) + " is after the tree's clock " + str(clock));
  }
}

// Every parent exists, in the same namespace unless it is the root, and every path reaches
// the root (no cycle).
void check_parents(const TreeSnapshot& s, const std::unordered_map<NodeId, size_t>& index) {
  enum : uint8_t { kNew, kOnWalk, kReachesRoot };
  std::vector<uint8_t> state(s.nodes.size(), kNew);
  std::vector<size_t> walk;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    walk.clear();
    for (size_t j = i; state[j] != kReachesRoot;) {
      const NodeSnapshot& n = s.nodes[j];
      if (state[j] == kOnWalk) {
        throw SnapshotError(n.id, "parent",
                            "a cycle of parents: node " + str(n.id) + " is its own ancestor");
      }
      state[j] = kOnWalk;
      walk.push_back(j);
      if (n.parent == 0) break;
      auto it = index.find(n.parent);
      if (it == index.end()) {
        throw SnapshotError(n.id, "parent", "no node " + str(n.parent) + " in the snapshot");
      }
      if (s.nodes[it->second].ns != n.ns) {
        throw SnapshotError(n.id, "ns",
                            "namespace " + str(n.ns) + " differs from parent " + str(n.parent) +
                                "'s " + str(s.nodes[it->second].ns));
      }
      j = it->second;
    }
    for (size_t j : walk)
      state[j] = kReachesRoot;
  }
}

// Each node's lock_ref is the number of held locks whose start is the node or below it.
void check_held_locks(const TreeSnapshot& s, const std::unordered_map<NodeId, size_t>& index) {
  std::vector<int64_t> expected(s.nodes.size(), 0);
  for (size_t k = 0; k < s.held_locks->size(); ++k) {
    const HeldLock& lock = (*s.held_locks)[k];
    if (!lock.start) continue;
    auto it = index.find(*lock.start);
    if (it == index.end()) {
      throw SnapshotError(
          std::nullopt, "held_locks",
          "lock " + str(k) + " starts at node " + str(*lock.start) + ", which the snapshot lacks");
    }
    for (size_t j = it->second;;) {
      ++expected[j];
      const NodeId parent = s.nodes[j].parent;
      if (parent == 0) break;
      j = index.at(parent);
    }
  }
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    if (s.nodes[i].lock_ref != expected[i]) {
      throw SnapshotError(s.nodes[i].id, "lock_ref",
                          std::to_string(s.nodes[i].lock_ref) + ", but the held locks cover it " +
                              std::to_string(expected[i]) + " time(s)");
    }
  }
}

std::unordered_map<NodeId, size_t> index_of_ids(const TreeSnapshot& s) {
  std::unordered_map<NodeId, size_t> index;
  index.reserve(s.nodes.size());
  for (size_t i = 0; i < s.nodes.size(); ++i)
    index.emplace(s.nodes[i].id, i);
  return index;
}

}  // namespace

std::string held_locks_problem(const TreeSnapshot& snapshot) {
  if (!snapshot.held_locks) return "";
  try {
    const std::unordered_map<NodeId, size_t> index = index_of_ids(snapshot);
    check_parents(snapshot, index);
    check_held_locks(snapshot, index);
  } catch (const SnapshotError& e) {
    return e.what();
  }
  return "";
}

SnapshotError::SnapshotError(std::optional<NodeId> node, std::string field,
                             const std::string& problem)
    : std::runtime_error((node ? "node " + std::to_string(*node) + ": " : std::string()) +
                         (field.empty() ? std::string() : "field " + field + ": ") + problem),
      node_(node),
      field_(std::move(field)),
      problem_(problem) {}

TreeSnapshot RadixTree::snapshot() const {
  TreeSnapshot s;
  s.page_size = options_.page_size;
  s.eviction_policy = options_.eviction_policy;
  for (const auto& c : components_) {
    if (c->type() != ComponentType::kFull) s.aux_components.push_back(c->type());
  }
  s.next_id = next_id_;
  s.clock = clock_;
  s.nodes.reserve(nodes_.size() - 1);
  nodes_.for_each([&](NodeId, const TreeNode* n) {
    if (n->is_root()) return;
    NodeSnapshot& o = s.nodes.emplace_back();
    o.id = n->id;
    o.parent = n->parent->id;
    o.ns = n->ns;
    o.key.assign(n->key.begin(), n->key.end());
    const ComponentData& d = n->full();
    if (d.value) o.value = value_snapshot(*d.value);
    if (d.host_value) o.host_value = value_snapshot(*d.host_value);
    o.lock_ref = d.lock_ref;
    o.host_lock_ref = d.host_lock_ref;
    o.last_access = n->last_access;
    o.creation = n->creation;
    o.hit_count = n->hit_count;
    o.hash_value = n->hash_value;
    o.backup_tried = n->backup_tried;
    o.write_through_pending = n->write_through_pending;
    for (size_t t = 1; t < kComponentTypesMax; ++t) {
      const ComponentData& a = n->component(t);
      if (a.value || a.host_value || a.lock_ref != 0 || a.host_lock_ref != 0)
        o.aux_data.push_back(static_cast<ComponentType>(t));
    }
  });
  std::sort(s.nodes.begin(), s.nodes.end(),
            [](const NodeSnapshot& a, const NodeSnapshot& b) { return a.id < b.id; });
  return s;
}

void RadixTree::restore(const TreeSnapshot& snapshot) {
  check_restorable(snapshot);
  try {
    link_restored(snapshot);
  } catch (...) {
    discard_restored();
    throw;
  }
  SanityReport report;
  sanity_check(report);
  if (!report.ok()) {
    const Violation& v = *report.first();
    discard_restored();
    throw SnapshotError(v.node, "",
                        "sanity_check after restore: " + v.invariant + ": " + v.detail +
                            (report.violations().size() > 1
                                 ? " (and " + str(report.violations().size() - 1) + " more)"
                                 : ""));
  }
}

void RadixTree::check_restorable(const TreeSnapshot& s) const {
  if (nodes_.size() != 1 || next_id_ != 1 || clock_ != 0) {
    throw SnapshotError(std::nullopt, "",
                        "restore needs a new tree; this one has " + str(nodes_.size()) +
                            " nodes (next id " + str(next_id_) + ", clock " + str(clock_) + ")");
  }
  for (const auto& c : components_) {
    if (c->type() != ComponentType::kFull) {
      throw SnapshotError(std::nullopt, "",
                          "restore supports the full-attention component only; this tree also "
                          "has " +
                              std::string(c->name()));
    }
  }
  if (!s.aux_components.empty()) {
    throw SnapshotError(std::nullopt, "aux_components",
                        "the snapshot's tree has a " +
                            std::string(to_string(s.aux_components.front())) +
                            " component; restore supports the full-attention component only");
  }
  if (s.page_size != options_.page_size) {
    throw SnapshotError(std::nullopt, "page_size",
                        std::to_string(s.page_size) + ", but this tree's page size is " +
                            std::to_string(options_.page_size));
  }
  if (s.eviction_policy != options_.eviction_policy) {
    throw SnapshotError(std::nullopt, "eviction_policy",
                        std::string(to_string(s.eviction_policy)) + ", but this tree's is " +
                            std::string(to_string(options_.eviction_policy)));
  }
  if (s.next_id == 0) throw SnapshotError(std::nullopt, "next_id", "0 is the root's id");
  std::unordered_map<NodeId, size_t> index;
  index.reserve(s.nodes.size());
  NodeId previous = 0;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeSnapshot& n = s.nodes[i];
    if (n.id == 0) throw SnapshotError(n.id, "id", "0 is the root's id");
    if (n.id <= previous) {
      throw SnapshotError(
          n.id, "id",
          "listed after node " + str(previous) + " (nodes are listed by increasing id, each once)");
    }
    if (n.id >= s.next_id) {
      throw SnapshotError(n.id, "id", "not below the snapshot's next_id " + str(s.next_id));
    }
    previous = n.id;
    index.emplace(n.id, i);
    check_node_fields(n, static_cast<size_t>(options_.page_size), s.clock);
  }
  check_parents(s, index);
  if (s.held_locks) check_held_locks(s, index);
}

void RadixTree::link_restored(const TreeSnapshot& s) {
  std::vector<std::unique_ptr<TreeNode>> made(s.nodes.size());
  NodeIdMap<TreeNode*> by_id;
  by_id.set(0, root_.get());
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeSnapshot& n = s.nodes[i];
    auto node = std::make_unique<TreeNode>();
    node->id = n.id;
    node->ns = n.ns;
    node->key = restored_key(n.key);
    ComponentData& d = node->full();
    if (n.value) d.value = restored_value(Tier::kDevice, *n.value);
    if (n.host_value) d.host_value = restored_value(Tier::kHost, *n.host_value);
    d.lock_ref = n.lock_ref;
    d.host_lock_ref = n.host_lock_ref;
    node->last_access = n.last_access;
    node->creation = n.creation;
    node->hit_count = n.hit_count;
    node->hash_value = n.hash_value;
    node->backup_tried = n.backup_tried;
    node->write_through_pending = n.write_through_pending;
    by_id.set(n.id, node.get());
    made[i] = std::move(node);
  }
  // Hang every node under its parent.
  std::vector<TreeNode*> order;
  order.reserve(s.nodes.size());
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    TreeNode* raw = made[i].get();
    TreeNode* const* found = by_id.find(s.nodes[i].parent);
    KV_ASSERT(found != nullptr, "restore: parent checked by check_parents is missing");
    TreeNode* parent = *found;
    raw->parent = parent;
    if (const TreeNode* sibling = find_child(*parent, raw->ns, child_key(raw->ns, raw->key).page)) {
      throw SnapshotError(raw->id, "key",
                          "starts with the same page, in the same namespace, as its sibling "
                          "node " +
                              str(sibling->id));
    }
    parent->children.add(std::move(made[i]));
    index_child(*parent, raw);
    if (!raw->evicted()) ++parent->device_children;
    if (!raw->evicted())
      (raw->full().lock_ref > 0 ? protected_size_ : evictable_size_) += raw->token_count();
    order.push_back(raw);
  }
  nodes_ = std::move(by_id);
  next_id_ = s.next_id;
  clock_ = s.clock;
  // File the leaves in eviction order, so the leaf orders keep them in their sorted lists.
  std::sort(order.begin(), order.end(), [&](const TreeNode* a, const TreeNode* b) {
    return eviction_key(options_.eviction_policy, *a) < eviction_key(options_.eviction_policy, *b);
  });
  for (TreeNode* n : order)
    refresh_leaf(*n);
}

void RadixTree::discard_restored() {
  nodes_.for_each([&](NodeId, TreeNode* n) {
    file_device_leaf(*n, false);
    file_host_leaf(*n, false);
  });
  root_->children.clear();
  root_->child_index.reset();
  root_->device_children = 0;
  nodes_.clear();
  nodes_.set(0, root_.get());
  next_id_ = 1;
  clock_ = 0;
  evictable_size_ = 0;
  protected_size_ = 0;
}

}  // namespace kvsim
