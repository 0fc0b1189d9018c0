#include "core/tree/leaf_order.h"

#include "core/common/assert.h"

namespace kvsim {

void LeafOrder::insert(TreeNode& node, const EvictionKey& key) {
  LeafLink& l = node.*link_;
  KV_ASSERT(!l.listed && l.prev == nullptr && l.next == nullptr, "leaf filed twice");
  if (tail_ == nullptr || key_of(*tail_) < key) {
    l.prev = tail_;
    l.next = nullptr;
    l.listed = true;
    if (tail_ != nullptr) {
      (tail_->*link_).next = &node;
    } else {
      head_ = &node;
    }
    tail_ = &node;
    ++list_size_;
    return;
  }
  const bool inserted = map_.emplace(key, &node).second;
  KV_ASSERT(inserted, "two leaves filed under one eviction key");
}

void LeafOrder::erase(TreeNode& node) {
  LeafLink& l = node.*link_;
  if (!l.listed) {
    const size_t erased = map_.erase(key_of(node));
    KV_ASSERT(erased == 1, "unfiling a leaf that is not filed");
    return;
  }
  (l.prev != nullptr ? (l.prev->*link_).next : head_) = l.next;
  (l.next != nullptr ? (l.next->*link_).prev : tail_) = l.prev;
  l = LeafLink{};
  --list_size_;
}

TreeNode* LeafOrder::front() const {
  if (map_.empty()) return head_;
  if (head_ == nullptr) return map_.begin()->second;
  return key_of(*head_) < map_.begin()->first ? head_ : map_.begin()->second;
}

bool LeafOrder::holds(const TreeNode& node, const EvictionKey& key) const {
  if (!(node.*key_) || *(node.*key_) != key) return false;
  if ((node.*link_).listed) return true;  // list membership is checked by check()
  auto it = map_.find(key);
  return it != map_.end() && it->second == &node;
}

std::string LeafOrder::check() const {
  size_t n = 0;
  const TreeNode* prev = nullptr;
  for (const TreeNode* x = head_; x != nullptr; x = (x->*link_).next) {
    const LeafLink& l = x->*link_;
    if (!l.listed || l.prev != prev || !(x->*key_)) return "leaf list links are broken";
    if (prev != nullptr && !(key_of(*prev) < key_of(*x))) return "leaf list is out of order";
    prev = x;
    if (++n > list_size_) return "leaf list is longer than its count";
  }
  if (prev != tail_ || n != list_size_) return "leaf list tail or count is wrong";
  for (const auto& [key, node] : map_) {
    if ((node->*link_).listed || !(node->*key_) || *(node->*key_) != key) {
      return "leaf map holds a node under a key it is not filed with";
    }
  }
  return "";
}

}  // namespace kvsim
