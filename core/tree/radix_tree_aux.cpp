// RadixTree: values of the auxiliary components (SWA, Mamba), which can be tombstoned on a
// node whose full-attention KV stays, and their accounting.
#include <string>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

int64_t slot_count(const std::optional<IndexVector>& v) {
  return v ? static_cast<int64_t>(v->size()) : 0;
}

void check_aux_type(ComponentType type) {
  KV_ASSERT(type != ComponentType::kFull && index_of(type) < kComponentTypesMax,
            "not an auxiliary component");
}

}  // namespace

std::string_view to_string(ComponentType t) {
  switch (t) {
    case ComponentType::kFull:
      return "full";
    case ComponentType::kSwa:
      return "swa";
    case ComponentType::kMamba:
      return "mamba";
  }
  return "?";
}

bool RadixTree::has_component(ComponentType type) const {
  for (const auto& c : components_) {
    if (c->type() == type) return true;
  }
  return false;
}

void RadixTree::set_aux_value(TreeNode& node, ComponentType type, IndexVector value) {
  check_aux_type(type);
  ComponentData& d = node.component(type);
  KV_ASSERT(!node.is_root() && !d.value, "aux value set on a node that has one");
  KV_ASSERT(!node.evicted(), "aux device value on a node without full device value");
  KV_ASSERT(value.tier() == Tier::kDevice && value.residency() == Residency::kHost,
            "tree stores host-resident device indices");
  KV_ASSERT(d.lock_ref == 0, "tombstone with a lock");
  aux_evictable_[index_of(type)] += static_cast<int64_t>(value.size());
  d.value = std::move(value);
  file_aux(node);
}

IndexVector RadixTree::take_aux_value(TreeNode& node, ComponentType type) {
  check_aux_type(type);
  ComponentData& d = node.component(type);
  KV_ASSERT(d.value.has_value(), "tombstone of a node without an aux value");
  KV_ASSERT(d.lock_ref == 0, to_string(type).data() + std::string(" value of node ") +
                                 std::to_string(node.id) + " is locked");
  IndexVector slots = std::move(*d.value);
  d.value.reset();
  aux_evictable_[index_of(type)] -= static_cast<int64_t>(slots.size());
  file_aux(node);
  return slots;
}

void RadixTree::set_aux_host_value(TreeNode& node, ComponentType type, IndexVector host_value) {
  check_aux_type(type);
  ComponentData& d = node.component(type);
  KV_ASSERT(!node.is_root() && !d.host_value, "aux host value set twice");
  KV_ASSERT(node.backed_up(), "aux host value on a node without full host value");
  KV_ASSERT(host_value.tier() == Tier::kHost && host_value.residency() == Residency::kHost,
            "tree stores host-resident host indices");
  d.host_value = std::move(host_value);
}

TreeNode* RadixTree::next_aux_victim(ComponentType type) const {
  check_aux_type(type);
  const auto& set = aux_victims_[index_of(type)];
  return set.empty() ? nullptr : set.begin()->second;
}

void RadixTree::inc_aux_lock(TreeNode& node, ComponentType type) {
  check_aux_type(type);
  ComponentData& d = node.component(type);
  KV_ASSERT(d.value.has_value(), "Cannot lock reference on an evicted node");
  if (d.lock_ref == 0) {
    aux_evictable_[index_of(type)] -= slot_count(d.value);
    aux_protected_[index_of(type)] += slot_count(d.value);
  }
  ++d.lock_ref;
  file_aux(node);
}

void RadixTree::dec_aux_lock(TreeNode& node, ComponentType type) {
  check_aux_type(type);
  ComponentData& d = node.component(type);
  KV_ASSERT(d.lock_ref > 0, "Cannot decrement reference count = zero");
  --d.lock_ref;
  if (d.lock_ref == 0) {
    aux_evictable_[index_of(type)] += slot_count(d.value);
    aux_protected_[index_of(type)] -= slot_count(d.value);
  }
  file_aux(node);
}

void RadixTree::file_aux(TreeNode& node) {
  if (!node.aux) return;  // no auxiliary data ever: nothing filed, nothing to file
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    std::optional<EvictionKey>& filed = node.aux_key(t);
    if (filed) aux_victims_[t].erase(*filed);
    filed.reset();
    const ComponentData& d = node.component(t);
    if (node.is_root() || !d.value || d.lock_ref > 0) continue;
    const EvictionKey key{node.last_access, 0, node.id};
    aux_victims_[t].emplace(key, &node);
    filed = key;
  }
}

void RadixTree::release_aux(TreeNode& node, ReleasedSlots& out, bool device, bool host) {
  if (!node.aux) return;
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    ComponentData& d = node.component(t);
    if (device && d.value) {
      KV_ASSERT(d.lock_ref == 0, "aux value of node " + std::to_string(node.id) + " is locked");
      aux_evictable_[t] -= slot_count(d.value);
      out.device[t] = std::move(*d.value);
      d.value.reset();
    }
    if (host && d.host_value) {
      out.host[t] = std::move(*d.host_value);
      d.host_value.reset();
    }
  }
  file_aux(node);
}

void RadixTree::check_aux(SanityReport& report) const {
  std::array<int64_t, kComponentTypesMax> evictable{};
  std::array<int64_t, kComponentTypesMax> locked{};
  std::array<size_t, kComponentTypesMax> filed{};
  for_each_node([&](const TreeNode& n) {
    for (size_t t = 1; t < kComponentTypesMax; ++t) {
      const ComponentData& d = n.component(t);
      const std::string name(to_string(static_cast<ComponentType>(t)));
      if (n.is_root()) {
        if (d.value || d.host_value) report.add("tree.aux", name + " value on the root", n.id);
        continue;
      }
      if (d.value && n.evicted()) {
        report.add("tree.aux", name + " device value without full device value", n.id);
      }
      if (d.host_value && !n.backed_up()) {
        report.add("tree.aux", name + " host value without full host value", n.id);
      }
      if (d.lock_ref < 0 || (d.lock_ref > 0 && !d.value)) {
        report.add("tree.aux",
                   name + " lock_ref " + std::to_string(d.lock_ref) + " on a " +
                       (d.value ? "device value" : "tombstone"),
                   n.id);
      }
      if (d.value) (d.lock_ref > 0 ? locked : evictable)[t] += slot_count(d.value);
      const bool member = d.value && d.lock_ref == 0;
      const std::optional<EvictionKey>& key = n.aux_key(t);
      const bool is_filed = key && aux_victims_[t].count(*key) == 1 &&
                            aux_victims_[t].at(*key) == &n && (*key)[0] == n.last_access;
      if (member != is_filed) {
        report.add("tree.aux", name + (member ? " victim missing" : " victim extra"), n.id);
      } else if (key && !is_filed) {
        // A node's key says where it is filed: one kept after the node left the set says it
        // is filed when it is not.
        report.add("tree.aux", name + " evictable-set key kept after leaving the set", n.id);
      }
      filed[t] += member ? 1 : 0;
    }
  });
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    const std::string name(to_string(static_cast<ComponentType>(t)));
    if (filed[t] != aux_victims_[t].size()) {
      report.add("tree.aux", name + " victim set holds stale nodes");
    }
    if (evictable[t] != aux_evictable_[t] || locked[t] != aux_protected_[t]) {
      report.add("tree.aux", name + " evictable/protected " + std::to_string(aux_evictable_[t]) +
                                 "/" + std::to_string(aux_protected_[t]) + " != recomputed " +
                                 std::to_string(evictable[t]) + "/" + std::to_string(locked[t]));
    }
  }
}

}  // namespace kvsim
