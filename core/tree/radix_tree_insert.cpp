// RadixTree: insertion of device values (two phases, so a refusal leaves the tree as it was),
// insertion of host-only values (load from storage), and the split both use.
#include <string>
#include <type_traits>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/radix_tree.h"
#include "core/tree/radix_tree_results.h"
#include "core/tree/radix_tree_walk.h"
#include "core/tree/tree_probes.h"
#include "core/tree/wide_ids.h"

namespace kvsim {

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
  const TreeResultBaseline before = check_baseline(*this, clock_);
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
    KV_PROBE_IF(n < child->key.size() && n < rest.size() &&
                    find_child(*child, ns, rest.subspan(n)) != nullptr,
                tree_insert_diverge_at_grandchild);
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
    // The source is asked only for ranges the tree stores (radix_tree.h): never an empty one.
    KV_ASSERT(begin < end, "insert asked its value source for the empty range [" +
                               std::to_string(begin) + ", " + std::to_string(end) + ")");
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
      if (!aux.chunked) bump_hit_count(*child);
      result.hit_nodes.push_back(child);
    }
    adopt_swa(*child, s.pos, s.matched);  // touched above
    KV_VERIFY(check_swa_adopted(*child, aux, s.pos, s.matched).empty(),
              check_swa_adopted(*child, aux, s.pos, s.matched));
    node = child;
  }
  if (new_from < aligned) {
    TreeNode* leaf = new_node(node, ns, std::move(leaf_key));
    set_device_value(*leaf, std::move(*leaf_value));
    adopt_swa(*leaf, new_from, fresh.size());
    KV_VERIFY(check_swa_adopted(*leaf, aux, new_from, fresh.size()).empty(),
              check_swa_adopted(*leaf, aux, new_from, fresh.size()));
    if (!aux.chunked) bump_hit_count(*leaf);
    result.hit_nodes.push_back(leaf);
    node = leaf;
  }
  if (aux.mamba && !node->is_root() && !node->has_device(ComponentType::kMamba)) {
    set_aux_value(*node, ComponentType::kMamba, IndexVector(Tier::kDevice, {*aux.mamba}));
    result.mamba_adopted = true;
  }
  result.last_node = node;
  KV_VERIFY(check_insert_result(*this, ns, tokens, aux, result, before).empty(),
            check_insert_result(*this, ns, tokens, aux, result, before));
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
      KV_VERIFY(check_host_insert_leaf(*this, aligned, result, host_value, hashes).empty(),
                check_host_insert_leaf(*this, aligned, result, host_value, hashes));
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
  KV_VERIFY(check_host_insert_leaf(*this, aligned, result, host_value, hashes).empty(),
            check_host_insert_leaf(*this, aligned, result, host_value, hashes));
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

}  // namespace kvsim
