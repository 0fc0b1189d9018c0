// RadixTree: path locks (per component), host protection, and the full component's lock
// counts with the evictable/protected size accounting they move.
#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/radix_tree_results.h"

namespace kvsim {

LockRecord RadixTree::lock(TreeNode& anchor) {
  const TreeResultBaseline before = check_baseline(*this, clock_);
  LockRecord record;
  record.anchor = anchor.id;
  for (const auto& c : components_)
    c->acquire_lock(*this, anchor, record);
  KV_VERIFY(check_lock_result(*this, &anchor, record, before).empty(),
            check_lock_result(*this, &anchor, record, before));
  return record;
}

void RadixTree::unlock(const LockRecord& record) {
  KV_VERIFY(check_lock_record(record).empty(), check_lock_record(record));
  const TreeResultBaseline before = check_baseline(*this, clock_);
  for (const auto& c : components_)
    c->release_lock(*this, record);
  KV_VERIFY(check_lock_result(*this, nullptr, record, before).empty(),
            check_lock_result(*this, nullptr, record, before));
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

}  // namespace kvsim
