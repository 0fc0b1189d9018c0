#include "core/tree/radix_tree.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/full_component.h"
#include "core/tree/tree_probes.h"
#include "core/tree/wide_ids.h"

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

RadixTree::RadixTree(RadixTreeOptions options) : options_(options) {
  KV_ASSERT(options_.page_size > 0, "page_size must be positive");
  root_ = std::make_unique<TreeNode>();
  root_->id = 0;
  root_->full().value = IndexVector(Tier::kDevice, {});
  root_->full().host_value = IndexVector(Tier::kHost, {});
  root_->full().lock_ref = 1;
  nodes_.set(0, root_.get());
  add_component(std::make_unique<FullComponent>());
}

RadixTree::~RadixTree() = default;

void RadixTree::add_component(std::unique_ptr<TreeComponent> component) {
  for (const auto& c : components_) {
    KV_ASSERT(c->type() != component->type(), "component added twice");
  }
  components_.push_back(std::move(component));
}

TreeNode* RadixTree::find(NodeId id) const {
  TreeNode* const* node = nodes_.find(id);
  return node != nullptr ? *node : nullptr;
}

ChildKey RadixTree::child_key(Namespace ns, std::span<const Token> tokens) const {
  const auto page = static_cast<size_t>(options_.page_size);
  KV_ASSERT(tokens.size() >= page, "child key needs a whole page");
  return ChildKey{ns, tokens.first(page)};  // a view: no copy
}

TreeNode* RadixTree::find_child(const TreeNode& node, Namespace ns,
                                std::span<const Token> rest) const {
  const ChildKey key = child_key(ns, rest);
  if (node.child_index) return find_indexed(node, key, ChildIndex::hash(ns, key.page));
  return node.children.scan(ns, key.page);
}

TreeNode* RadixTree::find_indexed(const TreeNode& node, const ChildKey& key, uint64_t hash) const {
  return node.child_index->find(hash, [&](const TreeNode* c) {
    return c->ns == key.ns &&
           std::memcmp(c->key.data(), key.page.data(), key.page.size() * sizeof(Token)) == 0;
  });
}

TreeNode* RadixTree::find_child(const TreeNode& node, Namespace ns, std::span<const int64_t> rest) {
  const auto page = static_cast<size_t>(options_.page_size);
  KV_ASSERT(rest.size() >= page, "child key needs a whole page");
  wide_page_.resize(page);
  // No stored key holds an id outside Token's range.
  if (!narrow_wide_ids(rest.data(), page, wide_page_.data())) return nullptr;
  return find_child(node, ns, std::span<const Token>(wide_page_));
}

uint64_t RadixTree::first_page_hash(TreeNode& node) const {
  if (!node.first_page_hash) {
    node.first_page_hash = ChildIndex::hash(node.ns, child_key(node.ns, node.key).page);
  }
  return *node.first_page_hash;
}

void RadixTree::index_child(TreeNode& node, TreeNode* child) {
  if (!node.child_index) {
    if (node.children.size() < ChildIndex::kMinChildren) return;
    node.child_index = std::make_unique<ChildIndex>();
    for (const auto& e : node.children)
      node.child_index->insert(first_page_hash(*e.node), e.node.get());
    return;
  }
  node.child_index->insert(first_page_hash(*child), child);
}

void RadixTree::unindex_child(TreeNode& node, TreeNode* child) {
  if (!node.child_index) return;
  const bool erased = node.child_index->erase(first_page_hash(*child), child);
  KV_ASSERT(erased, "child index lacks child " + std::to_string(child->id));
}

template <typename T>
size_t RadixTree::common_prefix(std::span<const Token> key, std::span<const T> tokens) const {
  const size_t limit = std::min(key.size(), tokens.size());
  size_t n = 0;
  if constexpr (std::is_same_v<T, Token>) {
    n = common_token_prefix(key.data(), tokens.data(), limit);
  } else {
    n = common_wide_prefix(key.data(), tokens.data(), limit);
  }
  KV_PROBE_IF(n < limit && n % static_cast<size_t>(options_.page_size) != 0,
              tree_divergence_mid_page);
  return n / static_cast<size_t>(options_.page_size) * static_cast<size_t>(options_.page_size);
}

TreeNode* RadixTree::new_node(TreeNode* parent, Namespace ns, TokenRun key) {
  KV_ASSERT(!key.empty() && key.size() % static_cast<size_t>(options_.page_size) == 0,
            "Key should be page-aligned");
  auto node = std::make_unique<TreeNode>();
  node->id = next_id_++;
  node->parent = parent;
  node->ns = ns;
  node->key = std::move(key);
  node->creation = ++clock_;
  node->last_access = node->creation;
  TreeNode* raw = node.get();
  KV_PROBE_IF(parent->is_root() &&
                  probe_other_namespace_holds(*parent, ns, raw->key,
                                              static_cast<size_t>(options_.page_size),
                                              [&](Namespace other, std::span<const Token> page) {
                                                return find_child(*parent, other, page);
                                              }),
              tree_ns_shared_tokens);
  // The lookup under an index uses the node's own first-page hash, which index_child then
  // files it under (one hash of the page, cached on the node).
  const ChildKey own = child_key(ns, raw->key);
  const TreeNode* twin = parent->child_index ? find_indexed(*parent, own, first_page_hash(*raw))
                                             : parent->children.scan(ns, own.page);
  KV_ASSERT(twin == nullptr, "child key already present");
  parent->children.add(std::move(node));
  index_child(*parent, raw);
  nodes_.set(raw->id, raw);
  return raw;
}

TreeNode* RadixTree::split(TreeNode& node, size_t prefix_tokens) {
  KV_ASSERT(prefix_tokens > 0 && prefix_tokens < node.key.size(), "Invalid prefix size for split");
  KV_ASSERT(prefix_tokens % static_cast<size_t>(options_.page_size) == 0, "unaligned split");
  TreeNode* parent = node.parent;
  probe_split(node);
  // Out of the parent's index before the node's first page (which the index hashed) changes.
  unindex_child(*parent, &node);

  auto prefix = std::make_unique<TreeNode>();
  prefix->id = next_id_++;
  prefix->parent = parent;
  prefix->ns = node.ns;
  // Both halves view the node's key storage: no token moves.
  prefix->key = node.key.first(prefix_tokens);
  node.key = node.key.drop_front(prefix_tokens);
  for (const auto& c : components_)
    c->on_split(*prefix, node, prefix_tokens);
  prefix->hit_count = node.hit_count;
  prefix->backup_tried = node.backup_tried;
  prefix->last_access = node.last_access;
  prefix->creation = node.creation;
  prefix->write_through_pending = node.write_through_pending;
  prefix->first_page_hash = node.first_page_hash;  // same namespace and first page
  node.first_page_hash.reset();
  if (!node.hash_value.empty()) {
    const size_t pages = prefix_tokens / static_cast<size_t>(options_.page_size);
    prefix->hash_value.assign(node.hash_value.begin(),
                              node.hash_value.begin() + static_cast<ptrdiff_t>(pages));
    node.hash_value.erase(node.hash_value.begin(),
                          node.hash_value.begin() + static_cast<ptrdiff_t>(pages));
  }

  // Re-hang: the prefix (same first page) takes node's place in the parent; it holds node.
  TreeNode* raw = prefix.get();
  std::unique_ptr<TreeNode> suffix = parent->children.replace(node, std::move(prefix));
  index_child(*parent, raw);
  suffix->parent = raw;
  raw->device_children = suffix->evicted() ? 0 : 1;
  raw->children.add(std::move(suffix));
  nodes_.set(raw->id, raw);
  refresh_leaf(node);
  refresh_leaf(*raw);
  return raw;
}

template <typename T>
TreeNode* RadixTree::descend(TreeNode& node, Namespace ns, std::span<const T> rest, size_t* matched,
                             bool touch_child) {
  TreeNode* child = find_child(node, ns, rest);
  if (child == nullptr) return nullptr;
  // The back half of a split keeps this stamp (SGLang parity, docs/sglang-parity.md).
  if (touch_child) touch(*child);
  *matched = common_prefix(child->key, rest);
  if (*matched < child->key.size()) child = split(*child, *matched);
  return child;
}

MatchResult RadixTree::match_prefix(Namespace ns, std::span<const Token> tokens) {
  walk_match(ns, tokens);
  return result_of_match_path();
}

MatchResult RadixTree::match_prefix(Namespace ns, std::span<const int64_t> tokens) {
  walk_match(ns, tokens);
  return result_of_match_path();
}

template <typename T>
void RadixTree::walk_match(Namespace ns, std::span<const T> tokens) {
  const auto page = static_cast<size_t>(options_.page_size);
  std::span<const T> rest = tokens.first(tokens.size() / page * page);
  std::vector<TreeNode*>& path = match_path_;
  path.clear();
  TreeNode* node = root_.get();
  while (!rest.empty()) {
    // After a partial match the walk ends by itself: the split node's only child starts
    // with a page that differs from the rest of the key. descend refreshes each node's access
    // time on the way down (root→leaf: deeper nodes are more recent).
    size_t n = 0;
    TreeNode* child = descend(*node, ns, rest, &n, /*touch_child=*/true);
    if (child == nullptr) break;
    path.push_back(child);
    rest = rest.subspan(n);
    node = child;
  }
}

MatchResult RadixTree::result_of_match_path() {
  const std::vector<TreeNode*>& path = match_path_;
  MatchResult result;
  result.last_device_node = root_.get();
  result.last_host_node = root_.get();
  result.best_match_node = root_.get();
  // The full-attention verdict is computed inline; only auxiliary components (hybrid models)
  // need validator objects.
  std::vector<std::unique_ptr<MatchValidator>> validators;
  if (components_.size() > 1 && !path.empty()) {
    for (size_t c = 1; c < components_.size(); ++c)
      validators.push_back(components_[c]->make_validator());
  }
  size_t device_depth = 0;  // path entries up to last_device_node
  size_t best_depth = 0;
  size_t device_tokens = 0;
  for (size_t i = 0; i < path.size(); ++i) {
    TreeNode* n = path[i];
    bool device = !n->evicted();  // FullComponent's validator
    bool host = device || n->backed_up();
    for (auto& v : validators) {
      const MatchVerdict verdict = v->visit(*n);
      device = device && verdict.device;
      host = host && verdict.host;
    }
    if (device) {
      result.last_device_node = n;
      device_depth = i + 1;
    }
    if (host) {
      result.best_match_node = n;
      best_depth = i + 1;
    }
    if (n->backed_up()) result.last_host_node = n;
  }
  for (size_t i = 0; i < device_depth; ++i)
    device_tokens += path[i]->key.size();
  // Page-granular values (what the allocator hands out) concatenate one entry per page; a
  // path with any other stride falls back to one slot per token.
  int32_t stride = device_depth > 0 ? path[0]->full().value->stride() : 1;
  for (size_t i = 0; i < device_depth; ++i) {
    KV_ASSERT(!path[i]->evicted(), "device match through an evicted node");
    if (path[i]->full().value->stride() != stride) stride = 1;
  }
  std::vector<SlotIndex> entries;
  if (stride > 1) {
    entries.reserve(device_tokens / static_cast<size_t>(stride));
    for (size_t i = 0; i < device_depth; ++i) {
      const std::span<const SlotIndex> v = path[i]->full().value->entries();
      entries.insert(entries.end(), v.begin(), v.end());
    }
    result.device_indices = IndexVector::pages(Tier::kDevice, stride, std::move(entries));
  } else {
    entries.reserve(device_tokens);
    for (size_t i = 0; i < device_depth; ++i) {
      const IndexVector& v = *path[i]->full().value;
      for (size_t t = 0; t < v.size(); ++t)
        entries.push_back(v[t]);
    }
    result.device_indices = IndexVector(Tier::kDevice, std::move(entries));
  }
  for (size_t i = device_depth; i < best_depth; ++i) {
    result.host_hit_length += path[i]->token_count();
  }
  return result;
}

namespace {

// insert()'s value source for a caller that passes every slot up front.
RadixTree::InsertValueSource slices_of(const IndexVector& value, size_t aligned) {
  KV_ASSERT(value.tier() == Tier::kDevice, "insert needs device slots");
  KV_ASSERT(value.size() >= aligned, "insert value shorter than its key");
  return [&value](size_t begin, size_t end) { return value.slice(begin, end); };
}

size_t aligned_size(size_t n, int32_t page_size) {
  return n / static_cast<size_t>(page_size) * static_cast<size_t>(page_size);
}

}  // namespace

InsertResult RadixTree::insert(Namespace ns, std::span<const Token> tokens,
                               const IndexVector& value, const AuxInsertValues& aux) {
  return insert_tokens(ns, tokens, nullptr,
                       slices_of(value, aligned_size(tokens.size(), options_.page_size)), aux);
}

InsertResult RadixTree::insert(Namespace ns, const TokenRun& tokens, const IndexVector& value,
                               const AuxInsertValues& aux) {
  return insert_tokens(ns, tokens.span(), &tokens,
                       slices_of(value, aligned_size(tokens.size(), options_.page_size)), aux);
}

InsertResult RadixTree::insert(Namespace ns, std::span<const Token> tokens,
                               const InsertValueSource& value_of, const AuxInsertValues& aux) {
  return insert_tokens(ns, tokens, nullptr, value_of, aux);
}

InsertResult RadixTree::insert(Namespace ns, std::span<const int64_t> tokens,
                               const InsertValueSource& value_of, const AuxInsertValues& aux) {
  return insert_tokens(ns, tokens, nullptr, value_of, aux);
}

// Two phases, so that a refusal (a wide id out of range, a value source that throws) leaves the
// tree as it was: a read-only walk finds where each matched node ends and where the new part
// starts, the values to store are gathered, and only then does the tree change, in the order
// one descend-per-step walk would have changed it (touch before split: SGLang parity).
template <typename T>
InsertResult RadixTree::insert_tokens(Namespace ns, std::span<const T> tokens,
                                      const TokenRun* shared, const InsertValueSource& value_of,
                                      const AuxInsertValues& aux) {
  const size_t aligned = aligned_size(tokens.size(), options_.page_size);
  KV_ASSERT(!aux.swa || (has_component(ComponentType::kSwa) && aux.swa->size() >= aligned),
            "SWA insert values need the SWA component and one slot per token");
  KV_ASSERT(!aux.mamba || has_component(ComponentType::kMamba), "Mamba value without component");
  // Phase 1: the walk. After a partial match it ends by itself (the rest differs within the
  // next page), as the one-pass walk's next lookup under the split node would.
  std::vector<InsertStep>& steps = insert_steps_;
  steps.clear();
  const TreeNode* at = root_.get();
  size_t pos = 0;
  while (pos < aligned) {
    const std::span<const T> rest = tokens.subspan(pos, aligned - pos);
    TreeNode* child = find_child(*at, ns, rest);
    if (child == nullptr) break;
    const size_t n = common_prefix(child->key, rest);
    steps.push_back(InsertStep{child, pos, n});
    pos += n;
    if (n < child->key.size()) break;
    at = child;
  }
  const size_t new_from = pos;
  // The new leaf's key: a view of the caller's shared storage when it has some, else a copy.
  // Matched wide ids equal stored Tokens; only the new part can hold one that does not fit.
  const std::span<const T> fresh = tokens.subspan(new_from, aligned - new_from);
  TokenRun leaf_key;
  if constexpr (std::is_same_v<T, Token>) {
    leaf_key = shared != nullptr ? shared->slice(new_from, fresh.size()) : TokenRun::copy_of(fresh);
  } else {
    std::optional<TokenRun> narrowed = TokenRun::try_narrowed_copy_of(fresh);
    if (!narrowed) {
      const size_t bad = first_wide_token_out_of_range(fresh);
      throw TokenOutOfRange(new_from + bad, fresh[bad]);
    }
    leaf_key = std::move(*narrowed);
  }
  // The values to store, before anything changes.
  auto checked = [&](size_t begin, size_t end) {
    IndexVector v = value_of(begin, end);
    KV_ASSERT(v.tier() == Tier::kDevice && v.size() == end - begin,
              "insert value source gave the wrong slots");
    return v;
  };
  std::vector<IndexVector> refills;
  for (const InsertStep& s : steps) {
    if (s.node->evicted()) refills.push_back(checked(s.pos, s.pos + s.matched));
  }
  std::optional<IndexVector> leaf_value;
  if (new_from < aligned) leaf_value = checked(new_from, aligned);

  // Phase 2.
  InsertResult result;
  // The request's SWA slots for [p, p + n) become the node's value when it owns them all.
  auto adopt_swa = [&](TreeNode& node, size_t p, size_t n) {
    if (!aux.swa || node.has_device(ComponentType::kSwa) || node.evicted() || p < aux.owned_from)
      return;
    IndexVector slots = aux.swa->slice(p, p + n);
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == 0) return;  // the request dropped part of this node's window
    }
    for (size_t i = 0; i < slots.size(); ++i)
      result.swa_adopted.push_back(slots[i]);
    set_aux_value(node, ComponentType::kSwa, std::move(slots));
  };
  TreeNode* node = root_.get();
  size_t next_refill = 0;
  for (const InsertStep& s : steps) {
    TreeNode* child = s.node;
    // The back half of a split keeps this stamp (SGLang parity, docs/sglang-parity.md).
    touch(*child);
    if (s.matched < child->key.size()) child = split(*child, s.matched);
    if (child->evicted()) {
      // KV recomputed after eviction: the request's slots become the node's value again.
      KV_ASSERT(s.pos >= aux.owned_from, "request matched a node that is evicted now");
      KV_PROBE(tree_insert_recompute_evicted);
      set_device_value(*child, std::move(refills[next_refill++]));
    } else {
      result.prefix_len += static_cast<int64_t>(s.matched);
      bump_hit_count(*child);
      result.hit_nodes.push_back(child);
    }
    adopt_swa(*child, s.pos, s.matched);  // touched above
    node = child;
  }
  if (new_from < aligned) {
    TreeNode* leaf = new_node(node, ns, std::move(leaf_key));
    set_device_value(*leaf, std::move(*leaf_value));
    adopt_swa(*leaf, new_from, fresh.size());
    bump_hit_count(*leaf);
    result.hit_nodes.push_back(leaf);
    node = leaf;
  }
  if (aux.mamba && !node->is_root() && !node->has_device(ComponentType::kMamba)) {
    set_aux_value(*node, ComponentType::kMamba, IndexVector(Tier::kDevice, {*aux.mamba}));
    result.mamba_adopted = true;
  }
  result.last_node = node;
  return result;
}

HostInsertResult RadixTree::insert_host(Namespace ns, TreeNode& anchor,
                                        std::span<const Token> tokens,
                                        const IndexVector& host_value,
                                        std::span<const PageDigest> hashes) {
  const auto page = static_cast<size_t>(options_.page_size);
  const size_t aligned = tokens.size() / page * page;
  KV_ASSERT(anchor.backed_up(), "host insert under a node without a host copy");
  KV_ASSERT(host_value.tier() == Tier::kHost && host_value.size() >= aligned,
            "host insert needs host slots for every token");
  KV_ASSERT(hashes.empty() || hashes.size() >= aligned / page, "one hash per page");
  HostInsertResult result;
  TreeNode* node = &anchor;
  KV_ASSERT(anchor.is_root() || anchor.ns == ns, "host insert across namespaces");
  size_t pos = 0;
  while (pos < aligned) {
    std::span<const Token> rest = tokens.subspan(pos, aligned - pos);
    size_t n = 0;
    TreeNode* child = descend(*node, ns, rest, &n, /*touch_child=*/false);
    if (child == nullptr) break;
    if (!child->backed_up()) {
      // A host-only node here would hang under a node with no host copy (invariant 7).
      KV_PROBE(tree_insert_host_refused);
      result.refused_len = static_cast<int64_t>(aligned - pos);
      result.last_node = node;
      check_host_insert_result(anchor, aligned, result);
      return result;
    }
    result.present_len += static_cast<int64_t>(n);
    pos += n;
    node = child;
  }
  if (pos < aligned) {
    TreeNode* leaf = new_node(node, ns, TokenRun::copy_of(tokens.subspan(pos, aligned - pos)));
    leaf->full().host_value = host_value.slice(pos, aligned);
    if (!hashes.empty()) {
      leaf->hash_value.assign(hashes.begin() + static_cast<ptrdiff_t>(pos / page),
                              hashes.begin() + static_cast<ptrdiff_t>(aligned / page));
    }
    refresh_leaf_and_parent(*leaf);
    result.inserted_len = static_cast<int64_t>(aligned - pos);
    node = leaf;
  }
  result.last_node = node;
  check_host_insert_result(anchor, aligned, result);
  return result;
}

void RadixTree::check_host_insert_result(const TreeNode& anchor, size_t aligned,
                                         const HostInsertResult& result) const {
  // Every aligned token is accounted for once, and last_node ends the present + inserted part.
  KV_ASSERT(result.present_len + result.inserted_len + result.refused_len ==
                static_cast<int64_t>(aligned),
            "insert_host: present " + std::to_string(result.present_len) + " + inserted " +
                std::to_string(result.inserted_len) + " + refused " +
                std::to_string(result.refused_len) + " != " + std::to_string(aligned));
  int64_t below_anchor = 0;
  const TreeNode* n = result.last_node;
  for (; n != nullptr && n != &anchor; n = n->parent)
    below_anchor += n->token_count();
  KV_ASSERT(n == &anchor && below_anchor == result.present_len + result.inserted_len,
            "insert_host: last_node does not end the present and inserted tokens");
}

LockRecord RadixTree::lock(TreeNode& anchor) {
  LockRecord record;
  record.anchor = anchor.id;
  for (const auto& c : components_)
    c->acquire_lock(*this, anchor, record);
  return record;
}

void RadixTree::unlock(const LockRecord& record) {
  for (const auto& c : components_)
    c->release_lock(*this, record);
}

void RadixTree::protect_host(TreeNode& node) {
  ++node.full().host_lock_ref;
  refresh_leaf(node);
}

void RadixTree::release_host(TreeNode& node) {
  KV_ASSERT(node.full().host_lock_ref > 0, "Host reference counter is already zero.");
  --node.full().host_lock_ref;
  refresh_leaf(node);
}

void RadixTree::inc_full_lock(TreeNode& node) {
  KV_ASSERT(!node.evicted(), "Cannot lock reference on an evicted node");
  if (node.is_root()) return;
  if (node.full().lock_ref == 0) {
    evictable_size_ -= node.token_count();
    protected_size_ += node.token_count();
  }
  ++node.full().lock_ref;
  refresh_leaf(node);
}

void RadixTree::dec_full_lock(TreeNode& node) {
  if (node.is_root()) return;
  KV_ASSERT(node.full().lock_ref > 0, "Cannot decrement reference count = zero");
  --node.full().lock_ref;
  if (node.full().lock_ref == 0) {
    evictable_size_ += node.token_count();
    protected_size_ -= node.token_count();
  }
  refresh_leaf(node);
}

TreeNode* RadixTree::next_device_victim() const {
  return device_leaves_.front();
}

TreeNode* RadixTree::next_host_victim() const {
  return host_leaves_.front();
}

ReleasedSlots RadixTree::demote(TreeNode& node) {
  KV_ASSERT(is_device_leaf(node), "demote of a node that is not an evictable device leaf");
  KV_ASSERT(node.backed_up(), "demote of a node without a host copy");
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/false);
  out.device[0] = std::move(*node.full().value);
  node.full().value.reset();
  --node.parent->device_children;
  evictable_size_ -= node.token_count();
  refresh_leaf_and_parent(node);
  return out;
}

ReleasedSlots RadixTree::remove_device_leaf(TreeNode& node) {
  KV_ASSERT(is_device_leaf(node), "non-leaf, node " + std::to_string(node.id));
  KV_ASSERT(node.children.empty(), "non-leaf, node " + std::to_string(node.id));
  KV_ASSERT(!node.backed_up(), "remove of a backed-up node would leak its host slots");
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/true);
  out.device[0] = std::move(*node.full().value);
  node.full().value.reset();
  --node.parent->device_children;
  evictable_size_ -= node.token_count();
  detach(node);
  return out;
}

ReleasedSlots RadixTree::remove_host_leaf(TreeNode& node) {
  KV_ASSERT(is_host_leaf(node), "node " + std::to_string(node.id) + " is not an H-leaf");
  ReleasedSlots out;
  release_aux(node, out, /*device=*/true, /*host=*/true);
  out.host[0] = std::move(*node.full().host_value);
  detach(node);
  return out;
}

void RadixTree::set_device_value(TreeNode& node, IndexVector value) {
  KV_ASSERT(!node.is_root() && node.evicted(), "device value set on a node already on device");
  KV_ASSERT(node.parent->is_root() || !node.parent->evicted(),
            "device value under an evicted parent breaks root-closed residency");
  KV_ASSERT(value.size() == node.key.size() && value.tier() == Tier::kDevice, "device value shape");
  KV_ASSERT(value.residency() == Residency::kHost, "tree stores host-resident indices only");
  node.full().value = std::move(value);
  ++node.parent->device_children;
  evictable_size_ += node.token_count();  // evicted nodes are never locked
  refresh_leaf_and_parent(node);
}

void RadixTree::set_host_value(TreeNode& node, IndexVector host_value) {
  KV_ASSERT(!node.is_root() && !node.backed_up(), "host value set twice");
  KV_ASSERT(host_value.size() == node.key.size() && host_value.tier() == Tier::kHost,
            "host value shape");
  KV_ASSERT(host_value.residency() == Residency::kHost, "tree stores host-resident indices only");
  node.full().host_value = std::move(host_value);
  refresh_leaf(node);
}

void RadixTree::touch(TreeNode& node) {
  node.last_access = ++clock_;
  refresh_leaf(node);
}

void RadixTree::bump_hit_count(TreeNode& node) {
  ++node.hit_count;
  refresh_leaf(node);
}

int64_t RadixTree::host_size() const {
  int64_t total = 0;
  for_each_node([&](const TreeNode& n) {
    if (!n.is_root() && n.backed_up()) total += n.token_count();
  });
  return total;
}

bool RadixTree::is_device_leaf(const TreeNode& node) const {
  return !node.is_root() && !node.evicted() && node.full().lock_ref == 0 &&
         node.device_children == 0;
}

bool RadixTree::is_host_leaf(const TreeNode& node) const {
  return !node.is_root() && node.evicted() && node.backed_up() && node.children.empty() &&
         node.full().lock_ref == 0 && node.full().host_lock_ref == 0;
}

void RadixTree::file_device_leaf(TreeNode& node, bool member) {
  if (!member) {
    if (node.device_leaf_key) device_leaves_.erase(node);
    node.device_leaf_key.reset();
    return;
  }
  const EvictionKey key = eviction_key(options_.eviction_policy, node);
  if (node.device_leaf_key == key) return;  // filed already, same place
  if (node.device_leaf_key) device_leaves_.erase(node);
  node.device_leaf_key = key;
  device_leaves_.insert(node, key);
}

void RadixTree::file_host_leaf(TreeNode& node, bool member) {
  if (!member) {
    if (node.host_leaf_key) host_leaves_.erase(node);
    node.host_leaf_key.reset();
    return;
  }
  const EvictionKey key = eviction_key(EvictionPolicy::kLru, node);
  if (node.host_leaf_key == key) return;
  if (node.host_leaf_key) host_leaves_.erase(node);
  node.host_leaf_key = key;
  host_leaves_.insert(node, key);
}

void RadixTree::refresh_leaf(TreeNode& node) {
  file_device_leaf(node, is_device_leaf(node));
  file_host_leaf(node, is_host_leaf(node));
  file_aux(node);
}

void RadixTree::refresh_leaf_and_parent(TreeNode& node) {
  refresh_leaf(node);
  if (node.parent != nullptr) refresh_leaf(*node.parent);
}

void RadixTree::detach(TreeNode& node) {
  KV_ASSERT(!node.is_root() && node.children.empty(), "detach of a non-leaf");
  file_device_leaf(node, false);
  file_host_leaf(node, false);
  const TreeNode& n = node;  // reads only: no auxiliary storage is made
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    KV_ASSERT(!n.component(t).value && !n.component(t).host_value,
              "detach of a node with aux slots");
    if (n.aux_key(t)) aux_victims_[t].erase(*n.aux_key(t));
  }
  TreeNode* parent = node.parent;
  const bool indexed = nodes_.erase(node.id);
  KV_ASSERT(indexed, "node index lacks node " + std::to_string(node.id));
  unindex_child(*parent, &node);
  parent->children.take(node);  // destroys node
  refresh_leaf(*parent);
}

std::vector<TreeNode*> RadixTree::path_to(TreeNode& node) {
  std::vector<TreeNode*> path;
  for (TreeNode* n = &node; !n->is_root(); n = n->parent)
    path.push_back(n);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<Token> RadixTree::prefix_tokens(const TreeNode& node) {
  std::vector<const TreeNode*> chain;
  for (const TreeNode* n = &node; !n->is_root(); n = n->parent)
    chain.push_back(n);
  std::vector<Token> tokens;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    tokens.insert(tokens.end(), (*it)->key.begin(), (*it)->key.end());
  }
  return tokens;
}

void RadixTree::sanity_check(SanityReport& report) const {
  check_shape(report);
  check_accounting(report);
  check_aux(report);
  for (const auto& c : components_)
    c->sanity_check(*this, report);
}

void RadixTree::check_shape(SanityReport& report) const {
  const auto page = static_cast<size_t>(options_.page_size);
  size_t visited = 0;
  for_each_node([&](const TreeNode& n) {
    ++visited;
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

void RadixTree::check_accounting(SanityReport& report) const {
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
  });
  if (device_leaves != device_leaves_.size() || host_leaves != host_leaves_.size()) {
    report.add("tree.leaf_set", "leaf sets hold stale nodes");
  }
  for (const LeafOrder* order : {&device_leaves_, &host_leaves_}) {
    const std::string problem = order->check();
    if (!problem.empty()) report.add("tree.leaf_set", problem);
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

}  // namespace kvsim
