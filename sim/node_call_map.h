// NodeCallMap: node id -> call index, the recorder's "which recorded call last returned this
// node" (python/src/recorder.h). An open-addressing table (linear probing, power-of-two size,
// at most half full, deletion by backward shift): a lookup per match, an insertion per match
// and insert, an erasure per evicted node, with no allocation per entry and no division. It is
// looked up and erased, never iterated, so its layout cannot leak into a recording.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/common/types.h"

namespace kvsim::sim {

class NodeCallMap {
 public:
  std::optional<int64_t> find(NodeId node) const {
    if (size_ == 0) return std::nullopt;
    for (size_t i = slot_of(node);; i = (i + 1) & mask_) {
      if (keys_[i] == node) return values_[i];
      if (keys_[i] == kEmpty) return std::nullopt;
    }
  }
  void set(NodeId node, int64_t call) {
    KV_ASSERT(node != kEmpty, "node id " + std::to_string(node) + " is the table's empty mark");
    if (2 * (size_ + 1) > keys_.size()) grow();
    size_t i = slot_of(node);
    for (; keys_[i] != kEmpty; i = (i + 1) & mask_) {
      if (keys_[i] == node) {
        values_[i] = call;
        return;
      }
    }
    keys_[i] = node;
    values_[i] = call;
    ++size_;
  }
  void erase(NodeId node) {
    if (size_ == 0) return;
    size_t i = slot_of(node);
    for (; keys_[i] != node; i = (i + 1) & mask_)
      if (keys_[i] == kEmpty) return;
    // Backward shift: move each later entry of the run into the hole when its home slot does
    // not lie (cyclically) between the hole and it, so no lookup meets a gap before its key.
    for (size_t j = (i + 1) & mask_; keys_[j] != kEmpty; j = (j + 1) & mask_) {
      const size_t home = slot_of(keys_[j]);
      const bool stays = ((j - home) & mask_) < ((j - i) & mask_);
      if (stays) continue;
      keys_[i] = keys_[j];
      values_[i] = values_[j];
      i = j;
    }
    keys_[i] = kEmpty;
    --size_;
  }
  void clear() {
    keys_.assign(keys_.size(), kEmpty);
    size_ = 0;
  }
  size_t size() const { return size_; }

 private:
  static constexpr NodeId kEmpty = ~NodeId{0};

  // Fibonacci hashing: the high bits of id * 2^64/phi index the table.
  size_t slot_of(NodeId node) const {
    return static_cast<size_t>((node * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }
  void grow() {
    const size_t cap = keys_.empty() ? 64 : 2 * keys_.size();
    std::vector<NodeId> keys(cap, kEmpty);
    std::vector<int64_t> values(cap);
    keys.swap(keys_);
    values.swap(values_);
    mask_ = cap - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(cap));
    size_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != kEmpty) set(keys[i], values[i]);
  }

  std::vector<NodeId> keys_;
  std::vector<int64_t> values_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace kvsim::sim
