// RadixTree: prefix matching (the walk down, which splits where a match ends inside a node
// and refreshes access times, and the result read off the matched path).
#include <memory>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/radix_tree_results.h"
#include "core/tree/radix_tree_walk.h"

namespace kvsim {
namespace {

// [tree.access_order] A match uses every node it walks: their access stamps come after the
// clock the walk started from and grow root→leaf, so LRU (and LFU's tie-break, and the side
// components' eviction) sees the path as the most recently used. "" when they do.
std::string check_walk_recency(const std::vector<TreeNode*>& path, uint64_t clock_before) {
  uint64_t prev = clock_before;
  for (const TreeNode* n : path) {
    if (n->last_access <= prev) {
      return "tree.access_order: node " + std::to_string(n->id) +
             " walked by a match carries access stamp " + std::to_string(n->last_access) +
             ", not after " + std::to_string(prev);
    }
    prev = n->last_access;
  }
  return "";
}

}  // namespace

MatchResult RadixTree::match_prefix(Namespace ns, std::span<const Token> tokens) {
  walk_match(ns, tokens);
  MatchResult result = result_of_match_path();
  const TreeNode& walk_end = match_path_.empty() ? *root_ : *match_path_.back();
  KV_VERIFY(check_match_result(*this, walk_end, ns, tokens, result).empty(),
            check_match_result(*this, walk_end, ns, tokens, result));
  return result;
}

MatchResult RadixTree::match_prefix(Namespace ns, std::span<const int64_t> tokens) {
  walk_match(ns, tokens);
  MatchResult result = result_of_match_path();
  const TreeNode& walk_end = match_path_.empty() ? *root_ : *match_path_.back();
  KV_VERIFY(check_match_result(*this, walk_end, ns, tokens, result).empty(),
            check_match_result(*this, walk_end, ns, tokens, result));
  return result;
}

template <typename T>
void RadixTree::walk_match(Namespace ns, std::span<const T> tokens) {
  const auto page = static_cast<size_t>(options_.page_size);
  std::span<const T> rest = tokens.first(tokens.size() / page * page);
  std::vector<TreeNode*>& path = match_path_;
  path.clear();
  const uint64_t clock_before = clock_;
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
  KV_VERIFY(check_walk_recency(path, clock_before).empty(), check_walk_recency(path, clock_before));
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

}  // namespace kvsim
