// RadixTree: construction, node lookup by id and by child key, the per-node child index,
// new nodes and detaching them, and paths (see radix_tree.h for the invariants; the other
// radix_tree_*.cpp files hold matching, insertion, locks, eviction, residency and checks).
#include "core/tree/radix_tree.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/full_component.h"
#include "core/tree/tree_probes.h"
#include "core/tree/wide_ids.h"

namespace kvsim {

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

}  // namespace kvsim
