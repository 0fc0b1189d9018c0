// ChildIndex: a hash index from (namespace, first page) to a child, kept next to a node's
// ChildList (core/tree/child_list.h) once the node has many children (the root of a large tree
// has hundreds of thousands). The list stays the owner and the only thing iterated (so every
// walk stays deterministic); the index only answers lookups, in O(1) expected time instead of
// a scan of the whole list.
//
// Open addressing with linear probing over a power-of-two table, at most half full; erase
// shifts the following run back (no tombstones). Every slot keeps its child's hash, so growth
// never rereads keys. A lookup hashes the whole first page (siblings may share all but the
// last token of it) and confirms a hit by comparing the page.
//
// Invariant (RadixTree::check_shape, [tree.shape]): the index holds exactly the node's
// children, each once, under the hash of its own (ns, first page).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "core/common/assert.h"
#include "core/common/types.h"

namespace kvsim {

struct TreeNode;

class ChildIndex {
 public:
  // Fan-out from which a node keeps an index (below it a scan of the list is as fast).
  static constexpr size_t kMinChildren = 16;

  // Four independent multiply-xorshift lanes over 64-bit words (the CPU overlaps them; one
  // dependent chain made hashing a 512-token page the cost of a lookup), folded at the end.
  static uint64_t hash(Namespace ns, std::span<const Token> page) {
    constexpr uint64_t kMul = 0xFF51AFD7ED558CCDull;
    auto mix = [](uint64_t h, uint64_t w) {
      h = (h ^ w) * kMul;
      return h ^ (h >> 29);
    };
    const uint64_t seed =
        0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(ns) * 0xC2B2AE3D27D4EB4Full);
    uint64_t a = seed, b = seed + 1, c = seed + 2, d = seed + 3;
    size_t i = 0;
    for (; i + 8 <= page.size(); i += 8) {
      uint64_t w[4];
      std::memcpy(w, page.data() + i, sizeof w);
      a = mix(a, w[0]);
      b = mix(b, w[1]);
      c = mix(c, w[2]);
      d = mix(d, w[3]);
    }
    for (; i < page.size(); ++i)
      a = mix(a, static_cast<uint32_t>(page[i]));
    uint64_t h = mix(mix(mix(mix(seed, a), b), c), d);
    h ^= h >> 32;
    return h;
  }

  size_t size() const { return size_; }

  // The child stored under `h` for which `same(child)` holds, or nullptr.
  template <typename Same>
  TreeNode* find(uint64_t h, Same&& same) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.node == nullptr) return nullptr;
      if (s.hash == h && same(s.node)) return s.node;
    }
  }

  void insert(uint64_t h, TreeNode* node) {
    KV_ASSERT(node != nullptr, "child index: null child");
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(h, node);
    ++size_;
  }

  // Removes `node`, stored under `h`; false when it is not there.
  bool erase(uint64_t h, const TreeNode* node) {
    if (slots_.empty()) return false;
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].node != node) {
      if (slots_[i].node == nullptr) return false;
      i = (i + 1) & mask;
    }
    // Backward shift: move later members of the run into the hole when their home allows.
    size_t hole = i;
    for (size_t j = (i + 1) & mask; slots_[j].node != nullptr; j = (j + 1) & mask) {
      const size_t home = slots_[j].hash & mask;
      // j may fill the hole when its home is not in (hole, j] (cyclically).
      const bool home_after_hole =
          hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!home_after_hole) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  // Calls f(hash, node) for every member (table order: for checks only, never for results).
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.node != nullptr) f(s.hash, s.node);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    TreeNode* node = nullptr;
  };

  void place(uint64_t h, TreeNode* node) {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].node != nullptr)
      i = (i + 1) & mask;
    slots_[i] = Slot{h, node};
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    for (const Slot& s : old) {
      if (s.node != nullptr) place(s.hash, s.node);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace kvsim
