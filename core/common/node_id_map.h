// NodeIdMap<V>: node id -> V in one open-addressing table (linear probing, power-of-two size,
// at most half full, deletion by backward shift): no allocation per entry, one probe run per
// lookup. The tree's id index (RadixTree::find, a lookup per unlock) and the recorder's
// "which recorded call last returned this node" (python/src/recorder.h) both use it.
//
// Iteration (for_each) is in table order: deterministic for a given sequence of calls, but
// not id order, so a caller whose result can be seen sorts what it collects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/common/types.h"

namespace kvsim {

template <typename V>
class NodeIdMap {
 public:
  // The value stored for `node`, or nullptr. Valid until the next set, erase or clear.
  const V* find(NodeId node) const {
    if (size_ == 0) return nullptr;
    for (size_t i = slot_of(node);; i = (i + 1) & mask_) {
      if (slots_[i].key == node) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }
  void set(NodeId node, V value) {
    KV_ASSERT(node != kEmpty, "node id " + std::to_string(node) + " is the table's empty mark");
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = slot_of(node);
    for (; slots_[i].key != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == node) {
        slots_[i].value = value;
        return;
      }
    }
    slots_[i] = Slot{node, value};
    ++size_;
  }
  // Removes `node`; false when it is not there.
  bool erase(NodeId node) {
    if (size_ == 0) return false;
    size_t i = slot_of(node);
    for (; slots_[i].key != node; i = (i + 1) & mask_)
      if (slots_[i].key == kEmpty) return false;
    // Backward shift: move each later entry of the run into the hole when its home slot does
    // not lie (cyclically) between the hole and it, so no lookup meets a gap before its key.
    for (size_t j = (i + 1) & mask_; slots_[j].key != kEmpty; j = (j + 1) & mask_) {
      const size_t home = slot_of(slots_[j].key);
      const bool stays = ((j - home) & mask_) < ((j - i) & mask_);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].key = kEmpty;
    --size_;
    return true;
  }
  void clear() {
    for (Slot& s : slots_)
      s.key = kEmpty;
    size_ = 0;
  }
  size_t size() const { return size_; }

  // Calls f(id, value) for every entry, in table order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.key != kEmpty) f(s.key, s.value);
  }

 private:
  static constexpr NodeId kEmpty = ~NodeId{0};

  struct Slot {
    NodeId key = kEmpty;
    V value{};
  };

  // Fibonacci hashing: the high bits of id * 2^64/phi index the table. (The low bits alone
  // would keep ids made together side by side, but a run of sequential ids then fills one long
  // probe run: measured, 1,000x slower lookups at 10^5 nodes.)
  size_t slot_of(NodeId node) const {
    return static_cast<size_t>((node * 0x9E3779B97F4A7C15ULL) >> (64 - bits_)) & mask_;
  }
  void grow() {
    const size_t cap = slots_.empty() ? 64 : 2 * slots_.size();
    std::vector<Slot> old(cap);
    old.swap(slots_);
    mask_ = cap - 1;
    bits_ = static_cast<unsigned>(__builtin_ctzll(cap));
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) set(s.key, s.value);
  }

  std::vector<Slot> slots_;  // key and value side by side: one cache line per probe
  size_t mask_ = 0;
  unsigned bits_ = 0;
  size_t size_ = 0;
};

}  // namespace kvsim
