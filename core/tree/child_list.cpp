#include "core/tree/child_list.h"

#include <string>

#include "core/tree/tree_node.h"

namespace kvsim {

TreeNode* ChildList::scan(Namespace ns, std::span<const Token> page) const {
  if (page.empty()) return nullptr;
  const Token first = page.front();
  for (const Entry& e : entries_) {
    if (e.first != first || e.ns != ns) continue;
    const TreeNode* c = e.node.get();
    if (c->key.size() >= page.size() &&
        std::memcmp(c->key.data(), page.data(), page.size() * sizeof(Token)) == 0) {
      return e.node.get();
    }
  }
  return nullptr;
}

TreeNode* ChildList::add(std::unique_ptr<TreeNode> child) {
  KV_ASSERT(child != nullptr && !child->key.empty(), "child list: a child needs a key");
  KV_ASSERT(entries_.size() < UINT32_MAX, "child list: too many children");
  TreeNode* raw = child.get();
  raw->slot_in_parent = static_cast<uint32_t>(entries_.size());
  entries_.push_back(Entry{raw->ns, raw->key[0], std::move(child)});
  count_namespace(raw->ns, +1);
  return raw;
}

std::unique_ptr<TreeNode> ChildList::take(TreeNode& child) {
  const size_t i = child.slot_in_parent;
  KV_ASSERT(i < entries_.size() && entries_[i].node.get() == &child,
            "child list lacks node " + std::to_string(child.id));
  std::unique_ptr<TreeNode> out = std::move(entries_[i].node);
  if (i + 1 != entries_.size()) {
    entries_[i] = std::move(entries_.back());
    entries_[i].node->slot_in_parent = static_cast<uint32_t>(i);
  }
  entries_.pop_back();
  count_namespace(out->ns, -1);
  return out;
}

void ChildList::count_namespace(Namespace ns, int delta) {
  auto it = std::lower_bound(namespaces_.begin(), namespaces_.end(), ns,
                             [](const auto& entry, Namespace n) { return entry.first < n; });
  if (delta > 0) {
    if (it == namespaces_.end() || it->first != ns) it = namespaces_.insert(it, {ns, 0});
    ++it->second;
    return;
  }
  KV_ASSERT(it != namespaces_.end() && it->first == ns && it->second > 0,
            "child list: namespace count out of step");
  if (--it->second == 0) namespaces_.erase(it);
}

std::unique_ptr<TreeNode> ChildList::replace(TreeNode& old, std::unique_ptr<TreeNode> by) {
  const size_t i = old.slot_in_parent;
  KV_ASSERT(i < entries_.size() && entries_[i].node.get() == &old,
            "child list lacks node " + std::to_string(old.id));
  KV_ASSERT(by != nullptr && by->ns == entries_[i].ns && !by->key.empty() &&
                by->key[0] == entries_[i].first,
            "child list: a replacement must start as the child it replaces");
  by->slot_in_parent = static_cast<uint32_t>(i);
  std::swap(entries_[i].node, by);
  return by;
}

namespace {

// Key order of siblings. Siblings never share namespace and first page, so comparing first
// pages orders them all (a key's first page is a prefix of it, so whole keys compare the same
// way).
bool key_less(const TreeNode* a, const TreeNode* b) {
  if (a->ns != b->ns) return a->ns < b->ns;
  return std::lexicographical_compare(a->key.begin(), a->key.end(), b->key.begin(), b->key.end());
}

}  // namespace

std::vector<TreeNode*> ChildList::sorted() const {
  std::vector<TreeNode*> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_)
    out.push_back(e.node.get());
  std::sort(out.begin(), out.end(), key_less);
  return out;
}

void ChildList::append_in_reverse_key_order(std::vector<const TreeNode*>& out) const {
  if (entries_.size() < 2) {
    if (!entries_.empty()) out.push_back(entries_.front().node.get());
    return;
  }
  // Sorted as entries: their namespace and first token decide nearly every comparison without
  // reading a child (a root with thousands of children was most of a walk's cache misses). A
  // per-thread scratch: the walk calls this at every node, and nothing here calls back out.
  thread_local std::vector<const Entry*> order;
  order.clear();
  for (const Entry& e : entries_)
    order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    if (a->ns != b->ns) return a->ns > b->ns;
    if (a->first != b->first) return a->first > b->first;
    return key_less(b->node.get(), a->node.get());
  });
  for (const Entry* e : order)
    out.push_back(e->node.get());
}

}  // namespace kvsim
