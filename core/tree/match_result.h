// Results of RadixTree::match_prefix and RadixTree::insert.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/pools/index_vector.h"
#include "core/tree/tree_node.h"

namespace kvsim {

struct MatchResult {
  // Device slots of the matched, device-resident prefix (root→leaf order).
  IndexVector device_indices{Tier::kDevice, {}};
  // Deepest matched node on device (root if none): the request's lock anchor.
  TreeNode* last_device_node = nullptr;
  // Deepest matched node backed up on host (root counts): the anchor for storage prefetch.
  TreeNode* last_host_node = nullptr;
  // Deepest matched node every component accepts, on device or host: the anchor for
  // load-back (seed 002: never last_host_node).
  TreeNode* best_match_node = nullptr;
  // Tokens between last_device_node and best_match_node, which live only on host.
  int64_t host_hit_length = 0;

  int64_t device_hit_length() const { return static_cast<int64_t>(device_indices.size()); }
};

// What a request hands to insert besides its full-attention slots (hybrid models).
struct AuxInsertValues {
  // SWA slots, one per token of the aligned key; slot 0 (the reserved padding slot) means the
  // request holds none for that position (it used the tree's, or dropped it).
  std::optional<IndexVector> swa;
  // A Mamba state slot holding the recurrent state after the last aligned token, or nullopt.
  std::optional<SlotIndex> mamba;
  // Positions from here on hold the request's own slots; before it, the tree's (its match).
  size_t owned_from = 0;
  // A middle chunk of a chunked prefill (SGLang's insert with chunked=True, from
  // cache_unfinished_req): no hit counts, so no write-through, until the prefill's last chunk.
  bool chunked = false;
};

struct InsertResult {
  // Tokens of the key that were already cached on device: the caller owns duplicate slots
  // for [protected_len, prefix_len) and must free them.
  int64_t prefix_len = 0;
  // The node holding the last page of the key.
  TreeNode* last_node = nullptr;
  // Nodes whose hit count this insert raised, root→leaf (for write-through policies).
  std::vector<TreeNode*> hit_nodes;
  // Auxiliary slots the tree adopted from AuxInsertValues; the caller frees the rest.
  std::vector<SlotIndex> swa_adopted;
  bool mamba_adopted = false;
};

struct HostInsertResult {
  int64_t present_len = 0;   // tokens already in the tree (their host slots are duplicates)
  int64_t inserted_len = 0;  // tokens added as new host-only nodes
  int64_t refused_len = 0;   // tokens refused: under a node with no host copy (invariant 5)
  TreeNode* last_node = nullptr;
};

}  // namespace kvsim
