// The content oracle (DESIGN.md invariant 6): the bytes a model forward writes for one token
// in one layer are a pure function of (namespace, token prefix, position, layer). Whatever
// the cache did since — split, evict, back up, load back, prefetch — a read of that slot must
// return exactly these bytes.
//
// The prefix enters through a running 64-bit hash (PrefixHash), so a driver that extends a
// sequence token by token pays O(1) per token; expected_item() is the direct form for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/common/types.h"

namespace kvsim::sim {

// Which pool an item belongs to: the same token has different bytes in each.
enum class ContentKind : uint32_t { kFull = 0, kSwa = 1, kMamba = 2, kIndexer = 3 };

// FNV-1a over the namespace and the tokens so far.
class PrefixHash {
 public:
  explicit PrefixHash(Namespace ns) : h_(1469598103934665603ull ^ ns) {}
  void add(Token t) { h_ = step(h_, t); }
  static uint64_t step(uint64_t h, Token t) {
    return (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_;
};

// The item of the token at `position`, whose prefix hash (tokens[0..position]) is `h`.
void fill_item(uint64_t h, size_t position, int32_t layer, ContentKind kind,
               std::span<std::byte> out);

// fill_item for the items of positions [first, first + count), written back to back to `out`
// (count * item_bytes bytes); prefix_hash[p] is the prefix hash of position p.
void fill_items(std::span<const uint64_t> prefix_hash, size_t first, size_t count, int32_t layer,
                ContentKind kind, size_t item_bytes, std::byte* out);

// The index of the first of positions.size() items, read back to back from `got`, whose bytes
// differ from fill_item's, or positions.size() when every item is right. Empty `positions`
// means positions 0..prefix_hash.size()-1. `scratch` is reused.
size_t first_wrong_item(std::span<const uint64_t> prefix_hash, std::span<const size_t> positions,
                        int32_t layer, ContentKind kind, size_t item_bytes, const std::byte* got,
                        std::vector<std::byte>& scratch);

// fill_item one LCG step at a time, as first written: fill_item must give the same bytes
// (tests compare them; pools written by older builds hold these bytes).
void fill_item_reference(uint64_t h, size_t position, int32_t layer, ContentKind kind,
                         std::span<std::byte> out);

std::vector<std::byte> expected_item(Namespace ns, std::span<const Token> tokens, size_t position,
                                     int32_t layer, size_t item_bytes);

// The SWA pool's item for one token: a different function of the same inputs, so a slot
// of the wrong pool never passes for the right one.
std::vector<std::byte> expected_swa_item(Namespace ns, std::span<const Token> tokens,
                                         size_t position, int32_t layer, size_t item_bytes);

// A Mamba layer's recurrent state after tokens[0, end): a function of the whole prefix
// (all zero for the empty prefix).
std::vector<std::byte> expected_mamba_state(Namespace ns, std::span<const Token> tokens, size_t end,
                                            int32_t layer, size_t state_bytes);

}  // namespace kvsim::sim
