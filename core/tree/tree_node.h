// TreeNode: one node of the radix tree — a page-aligned run of tokens and, per component,
// where that run's KV lives (device slots, host slots, both, or neither for aux components).
//
// Invariants (checked by RadixTree::sanity_check):
//  1. key is a positive multiple of page_size tokens (root: empty); every present value and
//     host value has exactly key.size() host-resident slots of the right tier;
//  2. hash_value, when present, has key.size() / page_size digests;
//  3. children (core/tree/child_list.h) hold each child at its slot_in_parent under its own
//     namespace and first token, and no two share namespace and first page; child->parent ==
//     this; device_children counts the children with a device value; child_index, when
//     present, indexes exactly the children;
//  4. full lock_ref >= 0, host_lock_ref >= 0; full lock_ref > 0 implies a device value.
// The root has an empty key, empty device and host values (so it is neither evicted nor
// missing a backup) and a permanent lock_ref of 1.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/common/types.h"
#include "core/pools/index_vector.h"
#include "core/tree/child_index.h"
#include "core/tree/child_list.h"
#include "core/tree/token_run.h"

namespace kvsim {

// Components a node can carry data for. Do not renumber: embedded in traces.
enum class ComponentType : uint8_t { kFull = 0, kSwa = 1, kMamba = 2 };
inline constexpr size_t kComponentTypesMax = 3;
constexpr size_t index_of(ComponentType t) {
  return static_cast<size_t>(t);
}
std::string_view to_string(ComponentType t);

// One component's data on one node. Full and SWA values hold one slot per token of the key;
// a Mamba value holds one state slot (the recurrent state after the node's last token).
struct ComponentData {
  std::optional<IndexVector> value;       // device slots; nullopt = evicted (tombstone)
  std::optional<IndexVector> host_value;  // host slots; set = backed up on host
  int32_t lock_ref = 0;                   // device protection count
  int32_t host_lock_ref = 0;              // host protection count (protect_host; full only)
};

// Slots a residency change took off a node, per component, for the caller to free.
struct ReleasedSlots {
  std::array<std::optional<IndexVector>, kComponentTypesMax> device;
  std::array<std::optional<IndexVector>, kComponentTypesMax> host;

  const IndexVector& full_device() const { return *device[0]; }
  const IndexVector& full_host() const { return *host[0]; }
};

// Children are found by namespace + first page, which keeps tenants disjoint. A ChildKey is a
// view into tokens stored elsewhere (a child's own key or the caller's tokens): no allocation
// per tree step. Ordered by namespace, then lexicographically by page (the order of
// ChildList::sorted).
struct ChildKey {
  Namespace ns = 0;
  std::span<const Token> page;

  friend bool operator==(const ChildKey& a, const ChildKey& b) {
    return a.ns == b.ns && std::equal(a.page.begin(), a.page.end(), b.page.begin(), b.page.end());
  }
};

struct ChildKeyLess {
  bool operator()(const ChildKey& a, const ChildKey& b) const {
    if (a.ns != b.ns) return a.ns < b.ns;
    const size_t n = std::min(a.page.size(), b.page.size());
    for (size_t i = 0; i < n; ++i) {
      if (a.page[i] != b.page[i]) return a.page[i] < b.page[i];
    }
    return a.page.size() < b.page.size();
  }
};

// Priority of a node in an eviction order: smallest first, node id last (total order).
using EvictionKey = std::array<uint64_t, 3>;

struct TreeNode;
// Intrusive links of a node in one LeafOrder (core/tree/leaf_order.h).
struct LeafLink {
  TreeNode* prev = nullptr;
  TreeNode* next = nullptr;
  bool listed = false;  // in the ordered list (else, when filed, in the out-of-order map)
};

struct TreeNode {
  NodeId id = 0;
  TreeNode* parent = nullptr;
  Namespace ns = 0;
  TokenRun key;  // shared, read-only storage: a split or a shared insert copies no token
  ChildList children;
  // Where this node sits in its parent's ChildList (kept by ChildList).
  uint32_t slot_in_parent = 0;
  // Hash index over `children` for lookups, kept by RadixTree once the node has
  // ChildIndex::kMinChildren children (null below that); children stays the owner.
  std::unique_ptr<ChildIndex> child_index;
  // ChildIndex::hash of (ns, first page of key), once computed (the parent's index files this
  // node under it); reset when a split changes the first page.
  std::optional<uint64_t> first_page_hash;
  // Children holding a full device value (is_device_leaf in O(1)); kept by RadixTree.
  int32_t device_children = 0;
  ComponentData full_data;  // full attention: every node has it
  // The auxiliary components' data (SWA, Mamba) and their evictable-set keys, out of line: a
  // tree of full attention only never allocates it, and its nodes stay half the size.
  struct Aux {
    std::array<ComponentData, kComponentTypesMax - 1> data;  // [t - 1] for aux type t
    // Per auxiliary component: the key under which this node is filed in that component's
    // evictable set (device value present, component lock_ref == 0).
    std::array<std::optional<EvictionKey>, kComponentTypesMax - 1> key;
  };
  std::unique_ptr<Aux> aux;            // null until an auxiliary component's data is written
  std::vector<PageDigest> hash_value;  // per-page storage keys; empty until computed
  uint64_t last_access = 0;            // logical clock, never wall time
  uint64_t creation = 0;
  uint64_t hit_count = 0;
  // A write-through backup of this node was tried (HiCache::write_backup), whatever came of
  // it: what lets the cache assert at eviction that its write policy was applied.
  bool backup_tried = false;
  // The node whose in-flight device→host write covers this one (itself, or the node it was
  // split from); cleared when that write's ack is consumed.
  std::optional<NodeId> write_through_pending;

  // Leaf-set bookkeeping, owned by RadixTree: the key under which this node is filed in the
  // device / host evictable-leaf set, if it is in that set.
  std::optional<EvictionKey> device_leaf_key;
  std::optional<EvictionKey> host_leaf_key;
  LeafLink device_link;
  LeafLink host_link;

  ComponentData& full() { return full_data; }
  const ComponentData& full() const { return full_data; }
  // Writable data of component t (an auxiliary one's storage is made on first use).
  ComponentData& component(ComponentType t) {
    return t == ComponentType::kFull ? full_data : aux_storage().data[index_of(t) - 1];
  }
  // Data of component t: an auxiliary component's is empty on a node that never had any.
  const ComponentData& component(ComponentType t) const {
    if (t == ComponentType::kFull) return full_data;
    return aux ? aux->data[index_of(t) - 1] : kNoComponentData;
  }
  ComponentData& component(size_t t) { return component(static_cast<ComponentType>(t)); }
  const ComponentData& component(size_t t) const {
    return component(static_cast<ComponentType>(t));
  }
  // The evictable-set key of auxiliary component t (1 <= t < kComponentTypesMax).
  std::optional<EvictionKey>& aux_key(size_t t) { return aux_storage().key[t - 1]; }
  const std::optional<EvictionKey>& aux_key(size_t t) const {
    return aux ? aux->key[t - 1] : kNoEvictionKey;
  }

  bool has_device(ComponentType t) const { return component(t).value.has_value(); }
  bool has_host(ComponentType t) const { return component(t).host_value.has_value(); }
  bool is_root() const { return parent == nullptr; }
  bool evicted() const { return !full().value.has_value(); }
  bool backed_up() const { return full().host_value.has_value(); }
  int64_t token_count() const { return static_cast<int64_t>(key.size()); }

 private:
  static inline const ComponentData kNoComponentData{};
  static inline const std::optional<EvictionKey> kNoEvictionKey{};
  Aux& aux_storage() {
    if (!aux) aux = std::make_unique<Aux>();
    return *aux;
  }
};

}  // namespace kvsim
