// RadixTree: the full sanity check (shape, residency, accounting, leaf sets; aux components
// and components add theirs), invariants listed in radix_tree.h.
#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>

#include "core/tree/radix_tree.h"

namespace kvsim {

namespace {

void check_value_shape(const TreeNode& n, const std::optional<IndexVector>& v, Tier tier,
                       const char* what, SanityReport& report) {
  if (!v) return;
  if (v->size() != n.key.size()) {
    report.add("tree.shape", std::string(what) + " length differs from key length", n.id);
  }
  if (v->tier() != tier) report.add("tree.shape", std::string(what) + " has the wrong tier", n.id);
  if (v->residency() != Residency::kHost) {
    report.add("residency", std::string(what) + " stored in the tree is device-resident", n.id);
  }
}

}  // namespace

void RadixTree::sanity_check(SanityReport& report) const {
  // [tree.components] has_component answers for exactly the components added.
  for (size_t t = 0; t < kComponentTypesMax; ++t) {
    const auto type = static_cast<ComponentType>(t);
    const bool added = std::any_of(components_.begin(), components_.end(),
                                   [&](const auto& c) { return c->type() == type; });
    if (has_component(type) != added) {
      report.add("tree.components", "has_component(" + std::string(to_string(type)) + ") answers " +
                                        (added ? "no" : "yes") + " for a component " +
                                        (added ? "added" : "never added"));
    }
  }
  check_shape(report);
  check_accounting(report);
  check_aux(report);
  for (const auto& c : components_)
    c->sanity_check(*this, report);
}

// [tree.cached_value] what a node caches, recomputed from its key and the tree: the hash of
// its first page (its parent's index files it under that), its entry in the id index, and its
// stamps (never ahead of the tree's clock and id counter, never before its parent's creation).
void RadixTree::check_cached_values(const TreeNode& n, SanityReport& report) const {
  const auto page = static_cast<size_t>(options_.page_size);
  if (!n.is_root() && n.key.size() >= page && n.first_page_hash &&
      *n.first_page_hash != ChildIndex::hash(n.ns, child_key(n.ns, n.key).page)) {
    report.add("tree.cached_value", "cached first-page hash differs from its recomputation", n.id);
  }
  TreeNode* const* filed = nodes_.find(n.id);
  if (filed == nullptr || *filed != &n) {
    report.add("tree.cached_value", "node id index does not lead to the node", n.id);
  }
  if (n.id >= next_id_ || n.creation > clock_ || n.last_access > clock_ ||
      n.creation > n.last_access) {
    report.add("tree.cached_value",
               "stamps ahead of the tree (id " + std::to_string(n.id) + " of next " +
                   std::to_string(next_id_) + ", creation " + std::to_string(n.creation) +
                   ", last access " + std::to_string(n.last_access) + ", clock " +
                   std::to_string(clock_) + ")",
               n.id);
  }
  // Every node but the root is stamped when made (new_node), never before the node it hangs
  // under: a child is made after its parent, and a split's front half keeps the stamp of the
  // node it was cut from, whose back half then hangs under it.
  if (!n.is_root() && (n.creation == 0 || n.creation < n.parent->creation)) {
    report.add("tree.cached_value",
               "creation stamp " + std::to_string(n.creation) + " before its parent's (" +
                   std::to_string(n.parent->creation) + ") or never set",
               n.id);
  }
}

void RadixTree::check_shape(SanityReport& report) const {
  const auto page = static_cast<size_t>(options_.page_size);
  // [tree.root] the root's fixed state (tree_node.h): an empty key and values, a permanent
  // lock_ref of 1 (no lock of a request counts on it).
  const ComponentData& r = root_->full();
  if (!root_->key.empty() || !r.value || !r.value->empty() || !r.host_value ||
      !r.host_value->empty() || r.lock_ref != 1 || root_->parent != nullptr) {
    report.add("tree.root", "root key, values or lock_ref " + std::to_string(r.lock_ref) +
                                " differ from the root's fixed state (empty, lock_ref 1)");
  }
  // [tree.sibling_order] for_each_node (and everything that walks the tree deterministically)
  // visits siblings by (namespace, first page): recomputed here from the walk itself, each
  // child against the sibling visited before it.
  std::unordered_map<const TreeNode*, const TreeNode*> previous_sibling;
  size_t visited = 0;
  for_each_node([&](const TreeNode& n) {
    ++visited;
    if (!n.is_root() && n.key.size() >= page) {
      const TreeNode*& before = previous_sibling[n.parent];
      if (before != nullptr &&
          !ChildKeyLess{}(child_key(before->ns, before->key), child_key(n.ns, n.key))) {
        report.add("tree.sibling_order",
                   "walked after sibling " + std::to_string(before->id) +
                       ", which does not come first by (namespace, first page)",
                   n.id);
      }
      before = &n;
    }
    size_t slot = 0;
    for (const auto& e : n.children) {
      const TreeNode* child = e.node.get();
      if (child->parent != &n) report.add("tree.shape", "child's parent link is wrong", child->id);
      if (child->key.size() < page || child->slot_in_parent != slot || e.ns != child->ns ||
          e.first != child->key[0]) {
        report.add("tree.shape", "child stored under the wrong key", child->id);
      } else if (find_child(n, child->ns, std::span<const Token>(child->key.data(), page)) !=
                 child) {
        // A lookup of the child's own first page finds the first sibling holding it.
        report.add("tree.shape", "child not found by its first page (a sibling shares it)",
                   child->id);
      }
      ++slot;
    }
    if (n.child_index) {
      bool indexed = n.child_index->size() == n.children.size();
      for (const auto& e : n.children) {
        const TreeNode* c = e.node.get();
        if (c->key.size() < page) continue;  // reported above
        const ChildKey key = child_key(c->ns, c->key);
        const uint64_t h = ChildIndex::hash(key.ns, key.page);
        if (c->first_page_hash && *c->first_page_hash != h) {
          report.add("tree.shape", "cached first-page hash is stale", c->id);
        }
        indexed = indexed && n.child_index->find(h, [&](const TreeNode* x) { return x == c; }) == c;
      }
      if (!indexed) report.add("tree.shape", "child index differs from the children", n.id);
    }
    int32_t on_device = 0;
    for (const auto& e : n.children)
      on_device += e.node->evicted() ? 0 : 1;
    if (on_device != n.device_children) {
      report.add("tree.shape",
                 "device_children " + std::to_string(n.device_children) +
                     " != children on device " + std::to_string(on_device),
                 n.id);
    }
    check_cached_values(n, report);
    if (n.is_root()) return;
    if (n.key.empty() || n.key.size() % page != 0) {
      report.add("tree.shape", "Misaligned key", n.id);
    }
    check_value_shape(n, n.full().value, Tier::kDevice, "device value", report);
    check_value_shape(n, n.full().host_value, Tier::kHost, "host value", report);
    if (!n.hash_value.empty() && n.hash_value.size() != n.key.size() / page) {
      report.add("tree.hash_shape", "hash_value is not one digest per page", n.id);
    }
    const TreeNode& p = *n.parent;
    if (!n.evicted() && !p.is_root() && p.evicted()) {
      report.add("tree.residency_root_closed",
                 "node on device but parent " + std::to_string(p.id) + " evicted", n.id);
    }
    if (n.evicted() && !n.backed_up()) report.add("tree.dead_node", "no device or host copy", n.id);
    if (options_.check_backup_contiguity && n.backed_up() && !p.is_root() && !p.backed_up()) {
      report.add("tree.backup_contiguity", "backed up but parent not backed up", n.id);
    }
  });
  if (visited != nodes_.size()) {
    report.add("tree.shape", "node index holds " + std::to_string(nodes_.size()) +
                                 " nodes, walk found " + std::to_string(visited));
  }
}

namespace {

// [tree.victim_order] the policies written out plainly, apart from eviction_key and LeafOrder:
// LRU evicts the least recently used (then the oldest id), LFU the least often hit (then LRU).
// Host leaves and the side components' values are always LRU.
bool evicted_before(EvictionPolicy policy, const TreeNode& a, const TreeNode& b) {
  if (policy == EvictionPolicy::kLfu && a.hit_count != b.hit_count) {
    return a.hit_count < b.hit_count;
  }
  if (a.last_access != b.last_access) return a.last_access < b.last_access;
  return a.id < b.id;
}

void keep_first(EvictionPolicy policy, const TreeNode& n, const TreeNode*& first) {
  if (first == nullptr || evicted_before(policy, n, *first)) first = &n;
}

std::string node_name(const TreeNode* n) {
  return n == nullptr ? "none" : "node " + std::to_string(n->id);
}

}  // namespace

void RadixTree::check_accounting(SanityReport& report) const {
  const TreeNode* first_device = nullptr;  // the reference's next victims
  const TreeNode* first_host = nullptr;
  std::array<const TreeNode*, kComponentTypesMax> first_aux{};
  int64_t evictable = 0;
  int64_t locked = 0;
  size_t device_leaves = 0;
  size_t host_leaves = 0;
  for_each_node([&](const TreeNode& n) {
    if (!n.is_root() && !n.evicted()) {
      (n.full().lock_ref > 0 ? locked : evictable) += n.token_count();
    }
    const bool device_leaf = is_device_leaf(n);
    const bool host_leaf = is_host_leaf(n);
    device_leaves += device_leaf ? 1 : 0;
    host_leaves += host_leaf ? 1 : 0;
    const bool filed_device = device_leaves_.holds(n, eviction_key(options_.eviction_policy, n));
    const bool filed_host = host_leaves_.holds(n, eviction_key(EvictionPolicy::kLru, n));
    if (device_leaf != filed_device) {
      report.add("tree.leaf_set", device_leaf ? "D-leaf missing" : "D-leaf extra", n.id);
    }
    if (host_leaf != filed_host) {
      report.add("tree.leaf_set", host_leaf ? "H-leaf missing" : "H-leaf extra", n.id);
    }
    if (device_leaf && host_leaf) report.add("tree.leaf_set", "node in both leaf sets", n.id);
    if (device_leaf) keep_first(options_.eviction_policy, n, first_device);
    if (host_leaf) keep_first(EvictionPolicy::kLru, n, first_host);
    for (size_t t = 1; t < kComponentTypesMax && !n.is_root(); ++t) {
      const ComponentData& d = n.component(t);
      if (d.value && d.lock_ref == 0) keep_first(EvictionPolicy::kLru, n, first_aux[t]);
    }
    // [tree.cached_value] the key a leaf is filed under is recomputed (a listed node is
    // "held" by its set whatever key it caches, so holds() alone misses a stale key).
    if (n.device_leaf_key && *n.device_leaf_key != eviction_key(options_.eviction_policy, n)) {
      report.add("tree.cached_value", "device leaf filed under a stale eviction key", n.id);
    }
    if (n.host_leaf_key && *n.host_leaf_key != eviction_key(EvictionPolicy::kLru, n)) {
      report.add("tree.cached_value", "host leaf filed under a stale eviction key", n.id);
    }
  });
  if (device_leaves != device_leaves_.size() || host_leaves != host_leaves_.size()) {
    report.add("tree.leaf_set", "leaf sets hold stale nodes");
  }
  for (const LeafOrder* order : {&device_leaves_, &host_leaves_}) {
    const std::string problem = order->check();
    if (!problem.empty()) report.add("tree.leaf_set", problem);
  }
  // [tree.victim_order] what eviction takes next is what the policy's reference takes.
  auto victim = [&](const char* set, const TreeNode* got, const TreeNode* want) {
    if (got != want) {
      report.add("tree.victim_order", std::string(set) + " next victim is " + node_name(got) +
                                          "; the policy's reference picks " + node_name(want));
    }
  };
  victim("device leaf set's", next_device_victim(), first_device);
  victim("host leaf set's", next_host_victim(), first_host);
  for (const auto& c : components_) {
    if (c->type() == ComponentType::kFull) continue;
    const std::string set = std::string(to_string(c->type())) + " values'";
    victim(set.c_str(), next_aux_victim(c->type()), first_aux[index_of(c->type())]);
  }
  if (evictable != evictable_size_) {
    report.add("tree.size_accounting", "evictable_size " + std::to_string(evictable_size_) +
                                           " != recomputed " + std::to_string(evictable));
  }
  if (locked != protected_size_) {
    report.add("tree.size_accounting", "protected_size " + std::to_string(protected_size_) +
                                           " != recomputed " + std::to_string(locked));
  }
}

std::string RadixTree::check_swa_adopted(const TreeNode& node, const AuxInsertValues& aux, size_t p,
                                         size_t n) const {
  // The request's slots of [p, p + n) are its own only from owned_from on, and all of them
  // only when none is 0 (it dropped part of the window); a node evicted after the insert's walk
  // has no device copy to attach a window to.
  if (!aux.swa || n == 0 || p < aux.owned_from || node.evicted() ||
      node.has_device(ComponentType::kSwa)) {
    return "";
  }
  for (size_t i = p; i < p + n; ++i) {
    if ((*aux.swa)[i] == 0) return "";
  }
  return "tree.swa_window_adopted: an insert owned every SWA slot of tokens [" + std::to_string(p) +
         ", " + std::to_string(p + n) + ") of node " + std::to_string(node.id) +
         " and left the node without an SWA value";
}

std::string RadixTree::check_lock_record(const LockRecord& record) const {
  const TreeNode* anchor = find(record.anchor);
  if (anchor == nullptr) return "";  // an evicted anchor, host-evicted since: no path to walk
  for (size_t t = 0; t < kComponentTypesMax; ++t) {
    if (!record.start[t]) continue;
    bool on_path = false;
    for (const TreeNode* n = anchor; !on_path; n = n->parent) {
      on_path = n->id == *record.start[t];
      if (n->is_root()) break;
    }
    if (!on_path) {
      return "lock record of node " + std::to_string(record.anchor) + ": its " +
             std::string(to_string(static_cast<ComponentType>(t))) + " lock starts at node " +
             std::to_string(*record.start[t]) + ", off the anchor's path to the root";
    }
  }
  return "";
}

}  // namespace kvsim
