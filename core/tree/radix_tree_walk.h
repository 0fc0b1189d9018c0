// RadixTree's walk helpers, shared by matching and insertion (templates over Token and wide
// int64 ids, so both translation units see their definitions). Private to core/tree.
#pragma once

#include <algorithm>
#include <type_traits>

#include "core/common/assert.h"
#include "core/common/probe.h"
#include "core/tree/radix_tree.h"
#include "core/tree/tree_probes.h"
#include "core/tree/wide_ids.h"

namespace kvsim {

template <typename T>
inline size_t RadixTree::common_prefix(std::span<const Token> key,
                                       std::span<const T> tokens) const {
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

template <typename T>
inline TreeNode* RadixTree::descend(TreeNode& node, Namespace ns, std::span<const T> rest,
                                    size_t* matched, bool touch_child) {
  TreeNode* child = find_child(node, ns, rest);
  if (child == nullptr) return nullptr;
  // The back half of a split keeps this stamp (SGLang parity, docs/sglang-parity.md).
  if (touch_child) touch(*child);
  *matched = common_prefix(child->key, rest);
  if (*matched < child->key.size()) child = split(*child, *matched);
  return child;
}

}  // namespace kvsim
