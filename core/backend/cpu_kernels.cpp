#include "core/backend/cpu_kernels.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace kvsim {
namespace {

bool in_bounds(ByteRegion region, size_t offset, size_t bytes) {
  return offset <= region.bytes && bytes <= region.bytes - offset;
}

std::string range(size_t offset, size_t bytes, ByteRegion region) {
  return "[" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") of a " +
         std::to_string(region.bytes) + "-byte block";
}

// The pool's total bytes, or "" problem; guards every product against overflow.
std::string pool_fits(const char* side, const KVPoolView& view, ByteRegion region) {
  if (view.slot_count <= 0 || view.layer_count <= 0 || view.item_bytes == 0) {
    return std::string(side) + " pool has an empty shape";
  }
  size_t total = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(view.slot_count),
                             static_cast<size_t>(view.layer_count), &total) ||
      __builtin_mul_overflow(total, view.item_bytes, &total) || total > region.bytes) {
    return std::string(side) + " pool shape (" + std::to_string(view.layer_count) + " layers x " +
           std::to_string(view.slot_count) + " slots x " + std::to_string(view.item_bytes) +
           " bytes) exceeds its " + std::to_string(region.bytes) + "-byte block";
  }
  return "";
}

// Reads `count` int64 indices and checks each lies in [0, slot_count).
std::string read_indices(const char* side, ByteRegion region, size_t count, int64_t slot_count,
                         std::vector<int64_t>& out) {
  if (count > region.bytes / sizeof(int64_t)) {
    return std::string(side) + " index buffer holds " +
           std::to_string(region.bytes / sizeof(int64_t)) + " indices, transfer reads " +
           std::to_string(count);
  }
  out.resize(count);
  if (count > 0) std::memcpy(out.data(), region.data, count * sizeof(int64_t));
  for (size_t i = 0; i < count; ++i) {
    if (out[i] < 0 || out[i] >= slot_count) {
      return std::string(side) + " index " + std::to_string(i) + " = " + std::to_string(out[i]) +
             " is outside the pool's " + std::to_string(slot_count) + " slots";
    }
  }
  return "";
}

std::string check_shapes(const KVTransfer& t, const KVTransferRegions& r) {
  if (t.src.item_bytes != t.dst.item_bytes) {
    return "item sizes differ (" + std::to_string(t.src.item_bytes) + " vs " +
           std::to_string(t.dst.item_bytes) + ")";
  }
  if (std::string p = pool_fits("source", t.src, r.src_pool); !p.empty()) return p;
  if (std::string p = pool_fits("destination", t.dst, r.dst_pool); !p.empty()) return p;
  if (t.layer_begin < 0 || t.layer_begin > t.layer_end || t.layer_end > t.src.layer_count ||
      t.layer_end > t.dst.layer_count) {
    return "layers [" + std::to_string(t.layer_begin) + ", " + std::to_string(t.layer_end) +
           ") outside the pools";
  }
  return "";
}

}  // namespace

std::string copy_bytes(ByteRegion dst, size_t dst_offset, ByteRegion src, size_t src_offset,
                       size_t bytes) {
  if (!in_bounds(dst, dst_offset, bytes)) return "copy writes " + range(dst_offset, bytes, dst);
  if (!in_bounds(src, src_offset, bytes)) return "copy reads " + range(src_offset, bytes, src);
  if (bytes > 0) std::memmove(dst.data + dst_offset, src.data + src_offset, bytes);
  return "";
}

std::string upload_bytes(ByteRegion dst, size_t dst_offset, std::span<const std::byte> bytes) {
  if (!in_bounds(dst, dst_offset, bytes.size())) {
    return "upload writes " + range(dst_offset, bytes.size(), dst);
  }
  if (!bytes.empty()) std::memcpy(dst.data + dst_offset, bytes.data(), bytes.size());
  return "";
}

std::string transfer_kv(const KVTransfer& t, const KVTransferRegions& r) {
  if (std::string p = check_shapes(t, r); !p.empty()) return p;
  std::vector<int64_t> src_idx;
  std::vector<int64_t> dst_idx;
  if (std::string p = read_indices("source", r.src_indices, t.count, t.src.slot_count, src_idx);
      !p.empty()) {
    return p;
  }
  if (std::string p =
          read_indices("destination", r.dst_indices, t.count, t.dst.slot_count, dst_idx);
      !p.empty()) {
    return p;
  }
  const size_t item = t.src.item_bytes;
  for (int32_t layer = t.layer_begin; layer < t.layer_end; ++layer) {
    for (size_t i = 0; i < t.count; ++i) {
      std::memmove(r.dst_pool.data + t.dst.offset(layer, dst_idx[i]),
                   r.src_pool.data + t.src.offset(layer, src_idx[i]), item);
    }
  }
  return "";
}

}  // namespace kvsim
