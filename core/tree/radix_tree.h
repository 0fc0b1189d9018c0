// RadixTree: a page-aligned radix tree over token sequences, with namespaces, per-component
// data on every node, path locks, evictable-leaf sets and size accounting.
//
// The tree is mechanism only: it never allocates or frees slots and never copies bytes. The
// operations that change residency (demote, remove_device_leaf, set_device_value, ...) hand
// slot indices back to the caller (HiCache), which owns the pools and the controller.
//
// Invariants (sanity_check reports each by the stable name in brackets):
//  1. [tree.shape] parent/child links agree; children are keyed by (ns, first page); keys are
//     positive page multiples; values and host values match key length, tier and residency;
//  2. [tree.residency_root_closed] a node on device has a parent on device (or the root), so
//     evicted nodes form a bottom segment of every path;
//  3. [tree.dead_node] every evicted node has a host copy;
//  4. [tree.lock] lock_ref >= 0, host_lock_ref >= 0, lock_ref > 0 only on device nodes, and
//     lock_ref(n) >= lock_ref(child) for every child (path-lock law);
//  5. [tree.size_accounting] evictable_size and protected_size equal their recomputed sums;
//  6. [tree.leaf_set] device and host leaf sets equal their definitions and are disjoint;
//  7. [tree.backup_contiguity] (write-through modes) a backed-up node has a backed-up parent;
//  8. [tree.hash_shape] hash_value is empty or has one digest per page;
//  9. [tree.aux] an auxiliary device value implies a full device value and an auxiliary host
//     value a full host value; aux lock_ref > 0 only with a device value; aux evictable and
//     protected sizes and victim sets equal their definitions. Components add their own.
// 10. [tree.cached_value] every value a node caches equals its recomputation: the first-page
//     hash, the id index entry, the eviction key a leaf is filed under, and stamps not ahead
//     of the tree's clock and id counter.
//
// Thread-safety: none; one scheduler thread calls it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "core/common/node_id_map.h"
#include "core/common/sanity.h"
#include "core/tree/component.h"
#include "core/tree/eviction_policy.h"
#include "core/tree/leaf_order.h"
#include "core/tree/match_result.h"
#include "core/tree/tree_node.h"
#include "core/tree/tree_snapshot.h"

namespace kvsim {

struct RadixTreeOptions {
  int32_t page_size = 1;
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
  bool check_backup_contiguity = true;  // false for write_back, where it need not hold
};

class RadixTree {
 public:
  explicit RadixTree(RadixTreeOptions options);
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Adds a component (the full-attention component is added by the constructor).
  void add_component(std::unique_ptr<TreeComponent> component);
  const std::vector<std::unique_ptr<TreeComponent>>& components() const { return components_; }

  const RadixTreeOptions& options() const { return options_; }
  int32_t page_size() const { return options_.page_size; }
  TreeNode* root() { return root_.get(); }
  const TreeNode* root() const { return root_.get(); }
  // nullptr when the node no longer exists (removed by eviction).
  TreeNode* find(NodeId id) const;
  size_t node_count() const { return nodes_.size(); }

  // --- Lookup and insertion ---
  // Longest page-aligned cached prefix of `tokens` in namespace `ns`. Splits a node where
  // the match ends inside it and refreshes access times, so it mutates the tree.
  MatchResult match_prefix(Namespace ns, std::span<const Token> tokens);
  // The same for wide token ids (int64, as SGLang passes them), read in place: no narrowed
  // copy of the tokens a match only reads. A token outside Token's range matches nothing.
  MatchResult match_prefix(Namespace ns, std::span<const int64_t> tokens);
  // Inserts the page-aligned prefix of `tokens` with device slots `value` (same length).
  // Evicted nodes on the path get their device value back from `value`.
  // Hybrid models pass `aux`: SWA tombstones on nodes the request computed itself are revived
  // with its SWA slots, and the last node takes its Mamba state if it has none.
  InsertResult insert(Namespace ns, std::span<const Token> tokens, const IndexVector& value,
                      const AuxInsertValues& aux = {});
  // The same, but new nodes view `tokens`' shared storage instead of copying it (prompts kept
  // in shared storage are then stored once, whatever the number of trees or requests).
  InsertResult insert(Namespace ns, const TokenRun& tokens, const IndexVector& value,
                      const AuxInsertValues& aux = {});
  // The slots of [begin, end) of an insert's key, asked only for the ranges the tree stores
  // (a new leaf, evicted nodes it refills) and before the tree changes: a source that throws
  // refuses the insert and leaves the tree as it was. What a binding passes when validating
  // or converting a caller's slots costs per slot (the matched part's are never read).
  using InsertValueSource = std::function<IndexVector(size_t begin, size_t end)>;
  InsertResult insert(Namespace ns, std::span<const Token> tokens,
                      const InsertValueSource& value_of, const AuxInsertValues& aux = {});
  // The same for wide token ids (int64, as SGLang passes them), read in place; only the new
  // leaf's tokens are narrowed, into new storage. Throws TokenOutOfRange (token_run.h), with
  // the tree unchanged, when one of those does not fit a Token (matched ids always do).
  InsertResult insert(Namespace ns, std::span<const int64_t> tokens,
                      const InsertValueSource& value_of, const AuxInsertValues& aux = {});
  // Inserts host-only nodes for `tokens` (a continuation of `anchor`'s path) with host slots
  // `host_value`, as a storage prefetch does. Descends existing nodes; stops before a node
  // without a host copy. The caller frees host slots of present and refused tokens.
  HostInsertResult insert_host(Namespace ns, TreeNode& anchor, std::span<const Token> tokens,
                               const IndexVector& host_value, std::span<const PageDigest> hashes);
  // [tree.swa_window_adopted] "" unless an insert owned every SWA slot of `node`'s range
  // [p, p + n) (p >= owned_from, no slot 0) and `node`, on device, still has no SWA value: an
  // insert that owns its window caches it. insert verifies it (KV_VERIFY) for every node of its
  // path and its new leaf (radix_tree_sanity.cpp).
  std::string check_swa_adopted(const TreeNode& node, const AuxInsertValues& aux, size_t p,
                                size_t n) const;

  // [tree.lock_record] "" unless a lock record's component starts lie off its anchor's path to
  // the root (each start is the anchor or an ancestor of it, as lock() records them). unlock
  // verifies it (KV_VERIFY) while the anchor is still in the tree (radix_tree_sanity.cpp).
  std::string check_lock_record(const LockRecord& record) const;

  // --- Locks (all components) ---
  LockRecord lock(TreeNode& anchor);
  void unlock(const LockRecord& record);
  // Host protection of one node against evict_host.
  void protect_host(TreeNode& node);
  void release_host(TreeNode& node);

  // --- Residency changes; each returns the slots the caller must free ---
  TreeNode* next_device_victim() const;  // lowest-priority unlocked device leaf, or nullptr
  TreeNode* next_host_victim() const;    // lowest-priority host-only leaf, or nullptr
  // Each of these takes every component's slots of the kind it drops off the node.
  ReleasedSlots demote(TreeNode& node);                      // backed-up device leaf → host-only
  ReleasedSlots remove_device_leaf(TreeNode& node);          // not-backed-up device leaf removed
  ReleasedSlots remove_host_leaf(TreeNode& node);            // host-only leaf removed
  void set_device_value(TreeNode& node, IndexVector value);  // load-back target
  void set_host_value(TreeNode& node, IndexVector host_value);  // backup target
  void touch(TreeNode& node);  // refresh the access time (and leaf order)
  void bump_hit_count(TreeNode& node);

  // For components: full-attention lock counting with accounting and leaf upkeep.
  void inc_full_lock(TreeNode& node);
  void dec_full_lock(TreeNode& node);

  // --- Auxiliary components (SWA, Mamba): values that can be tombstoned on their own ---
  bool has_component(ComponentType type) const;
  void set_aux_value(TreeNode& node, ComponentType type, IndexVector value);  // revive
  IndexVector take_aux_value(TreeNode& node, ComponentType type);             // tombstone
  void set_aux_host_value(TreeNode& node, ComponentType type, IndexVector host_value);
  // Least recently used node holding an unlocked device value of `type`, or nullptr.
  TreeNode* next_aux_victim(ComponentType type) const;
  void inc_aux_lock(TreeNode& node, ComponentType type);
  void dec_aux_lock(TreeNode& node, ComponentType type);
  int64_t aux_evictable_size(ComponentType t) const { return aux_evictable_[index_of(t)]; }
  int64_t aux_protected_size(ComponentType t) const { return aux_protected_[index_of(t)]; }

  // --- Accounting ---
  int64_t evictable_size() const { return evictable_size_; }  // device tokens, unlocked
  int64_t protected_size() const { return protected_size_; }  // device tokens, locked
  int64_t host_size() const;                                  // tokens with a host copy (O(n))
  size_t device_leaf_count() const { return device_leaves_.size(); }
  size_t host_leaf_count() const { return host_leaves_.size(); }

  // Visits every node (root first, then children in key order): deterministic.
  template <typename F>
  void for_each_node(F&& f) const {
    std::vector<const TreeNode*> stack{root_.get()};
    while (!stack.empty()) {
      const TreeNode* n = stack.back();
      stack.pop_back();
      f(*n);
      n->children.append_in_reverse_key_order(stack);
    }
  }

  // Path of `node` from the root's child down to `node`.
  static std::vector<TreeNode*> path_to(TreeNode& node);
  // Tokens from the root to `node` (inclusive).
  static std::vector<Token> prefix_tokens(const TreeNode& node);

  void sanity_check(SanityReport& report) const;

  // --- Snapshot and restore (radix_tree_snapshot.cpp, core/tree/tree_snapshot.h) ---
  // The tree's whole state as plain data: O(nodes + tokens).
  TreeSnapshot snapshot() const;
  // Rebuilds `snapshot` in this tree, which must be new (only the root, nothing ever inserted)
  // and have the snapshot's page size and eviction policy and no auxiliary component. Node ids,
  // keys, values, lock counts, clocks and counters are set directly, so every later call
  // behaves as on the tree the snapshot was taken of (same ids, same eviction order). Checks
  // the snapshot first and sanity_check() after; throws SnapshotError naming the node and
  // field of the first problem, and then leaves this tree as new.
  void restore(const TreeSnapshot& snapshot);

 private:
  TreeNode* new_node(TreeNode* parent, Namespace ns, TokenRun key);
  // insert(): `shared`, when set, is the storage `tokens` views (new keys share it). T is
  // Token or int64_t (wide ids, read in place; see match_prefix).
  template <typename T>
  InsertResult insert_tokens(Namespace ns, std::span<const T> tokens, const TokenRun* shared,
                             const InsertValueSource& value_of, const AuxInsertValues& aux);
  // One matched node of insert()'s walk: its key matches [pos, pos + matched) of the key.
  struct InsertStep {
    TreeNode* node;
    size_t pos;
    size_t matched;
  };
  // match_prefix(): the nodes matched, root excluded, into match_path_; then the result.
  template <typename T>
  void walk_match(Namespace ns, std::span<const T> tokens);
  MatchResult result_of_match_path();
  TreeNode* split(TreeNode& node, size_t prefix_tokens);
  // The child of `node` matching the start of `rest`, split so that it ends where the match
  // does (*matched tokens); nullptr when no child starts with rest's first page. With
  // `touch_child`, the child's access time is refreshed BEFORE a split, as SGLang's
  // _match_prefix_helper and _insert_helper do: both halves then count as just used.
  template <typename T>
  TreeNode* descend(TreeNode& node, Namespace ns, std::span<const T> rest, size_t* matched,
                    bool touch_child);
  ChildKey child_key(Namespace ns, std::span<const Token> tokens) const;
  // The child of `node` whose key starts with rest's first page in namespace ns, or nullptr.
  TreeNode* find_child(const TreeNode& node, Namespace ns, std::span<const Token> rest) const;
  // Wide ids: the first page narrowed into a scratch buffer; nullptr when it does not fit.
  TreeNode* find_child(const TreeNode& node, Namespace ns, std::span<const int64_t> rest);
  // Keep node.child_index in step with node.children (call after adding / before removing).
  void index_child(TreeNode& node, TreeNode* child);
  void unindex_child(TreeNode& node, TreeNode* child);
  // node's ChildIndex hash, computed once and kept on the node.
  uint64_t first_page_hash(TreeNode& node) const;
  // The child of an indexed `node` stored under `hash` whose namespace and first page are key's.
  TreeNode* find_indexed(const TreeNode& node, const ChildKey& key, uint64_t hash) const;
  // Page-aligned length of the common prefix of a node's key and `tokens` (Token or int64_t).
  template <typename T>
  size_t common_prefix(std::span<const Token> key, std::span<const T> tokens) const;
  void refresh_leaf(TreeNode& node);
  void refresh_leaf_and_parent(TreeNode& node);
  void file_device_leaf(TreeNode& node, bool member);
  void file_host_leaf(TreeNode& node, bool member);
  bool is_device_leaf(const TreeNode& node) const;
  bool is_host_leaf(const TreeNode& node) const;
  void detach(TreeNode& node);
  void check_shape(SanityReport& report) const;
  void check_cached_values(const TreeNode& n, SanityReport& report) const;
  void check_accounting(SanityReport& report) const;
  void check_aux(SanityReport& report) const;
  void check_host_insert_result(const TreeNode& anchor, size_t aligned,
                                const HostInsertResult& result) const;
  void file_aux(TreeNode& node);
  // restore()'s steps (radix_tree_snapshot.cpp).
  void check_restorable(const TreeSnapshot& snapshot) const;
  void link_restored(const TreeSnapshot& snapshot);
  void discard_restored();
  void release_aux(TreeNode& node, ReleasedSlots& out, bool device, bool host);

  RadixTreeOptions options_;
  std::unique_ptr<TreeNode> root_;
  std::vector<std::unique_ptr<TreeComponent>> components_;
  NodeIdMap<TreeNode*> nodes_;  // every live node, root included (lookups only)
  LeafOrder device_leaves_{&TreeNode::device_link, &TreeNode::device_leaf_key};
  LeafOrder host_leaves_{&TreeNode::host_link, &TreeNode::host_leaf_key};
  std::vector<TreeNode*> match_path_;     // match_prefix's scratch (no allocation per call)
  std::vector<Token> wide_page_;          // find_child's narrowed first page (wide ids)
  std::vector<InsertStep> insert_steps_;  // insert's walk (no allocation per call)
  NodeId next_id_ = 1;
  uint64_t clock_ = 0;  // logical access clock
  int64_t evictable_size_ = 0;
  int64_t protected_size_ = 0;
  std::array<std::map<EvictionKey, TreeNode*>, kComponentTypesMax> aux_victims_;
  std::array<int64_t, kComponentTypesMax> aux_evictable_{};
  std::array<int64_t, kComponentTypesMax> aux_protected_{};
};

}  // namespace kvsim
