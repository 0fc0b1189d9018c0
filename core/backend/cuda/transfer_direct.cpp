#include "core/backend/cuda/transfer_direct.h"

#include "core/common/assert.h"

namespace kvsim {
namespace {

std::string check_indices(const char* side, std::span<const int64_t> indices, int64_t slot_count) {
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= slot_count) {
      return std::string(side) + " index " + std::to_string(i) + " = " +
             std::to_string(indices[i]) + " is outside the pool's " + std::to_string(slot_count) +
             " slots";
    }
  }
  return "";
}

void append(std::vector<CopyRun>* runs, uint64_t src_offset, uint64_t dst_offset, uint64_t bytes) {
  if (!runs->empty()) {
    CopyRun& last = runs->back();
    if (last.src_offset + last.bytes == src_offset && last.dst_offset + last.bytes == dst_offset) {
      last.bytes += bytes;
      return;
    }
  }
  runs->push_back(CopyRun{.src_offset = src_offset, .dst_offset = dst_offset, .bytes = bytes});
}

}  // namespace

std::string plan_direct_runs(const KVTransfer& t, std::span<const int64_t> src_indices,
                             std::span<const int64_t> dst_indices, std::vector<CopyRun>* runs) {
  KV_ASSERT(src_indices.size() == t.count && dst_indices.size() == t.count,
            "index spans do not match the transfer's count");
  KV_ASSERT(t.src.item_bytes == t.dst.item_bytes, "item sizes differ");
  runs->clear();
  if (std::string p = check_indices("source", src_indices, t.src.slot_count); !p.empty()) return p;
  if (std::string p = check_indices("destination", dst_indices, t.dst.slot_count); !p.empty()) {
    return p;
  }
  const uint64_t item = t.src.item_bytes;
  const bool layer_major =
      t.src.layout == KVLayout::kLayerFirst && t.dst.layout == KVLayout::kLayerFirst;
  if (layer_major) {
    for (int32_t layer = t.layer_begin; layer < t.layer_end; ++layer) {
      for (size_t i = 0; i < t.count; ++i)
        append(runs, t.src.offset(layer, src_indices[i]), t.dst.offset(layer, dst_indices[i]),
               item);
    }
  } else {
    for (size_t i = 0; i < t.count; ++i) {
      for (int32_t layer = t.layer_begin; layer < t.layer_end; ++layer)
        append(runs, t.src.offset(layer, src_indices[i]), t.dst.offset(layer, dst_indices[i]),
               item);
    }
  }
  return "";
}

}  // namespace kvsim
