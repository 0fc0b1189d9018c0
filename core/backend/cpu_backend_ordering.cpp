// CpuBackend, ordering side: the happens-before check of every op at enqueue
// (unordered_read, cpu_ordering.h).
#include <cstring>

#include "core/backend/cpu_backend.h"

namespace kvsim {
namespace {

constexpr size_t kShadowMaxBytes = size_t{1} << 20;  // index buffers, not pools

}  // namespace

std::vector<CpuOrdering::Range> CpuBackend::item_ranges(const KVPoolView& pool, uint64_t indices,
                                                        size_t count, int32_t layer_begin,
                                                        int32_t layer_end) const {
  std::vector<CpuOrdering::Range> ranges;
  auto it = index_shadow_.find(indices);
  if (it == index_shadow_.end() || it->second.size() < count) return ranges;  // unknown: skip
  ranges.reserve(count * static_cast<size_t>(std::max(0, layer_end - layer_begin)));
  for (int32_t layer = layer_begin; layer < layer_end; ++layer) {
    for (size_t i = 0; i < count; ++i) {
      const int64_t slot = it->second[i];
      if (slot < 0 || slot >= pool.slot_count) continue;  // illegal_address reports it
      const size_t b = pool.offset(layer, slot);
      ranges.push_back({b, b + pool.item_bytes});
    }
  }
  CpuOrdering::merge(ranges);
  return ranges;
}

void CpuBackend::check_ordering(const CpuOp& op) {
  const uint64_t position = streams_.enqueued(op.stream) + 1;  // pushed right after this
  const CpuOrdering::Clock clock = ordering_.enqueue(op.stream, position);
  if (op.skip || op.kind == CpuOpKind::kWait || op.kind == CpuOpKind::kPoison) return;
  struct Access {
    const Touch* touch;
    std::vector<CpuOrdering::Range> ranges;
  };
  std::vector<Access> reads;
  std::vector<Access> writes;
  switch (op.kind) {
    case CpuOpKind::kCopy:
      reads.push_back(
          {&op.touches[touch_role::kCopySrc], {{op.src_offset, op.src_offset + op.bytes}}});
      writes.push_back(
          {&op.touches[touch_role::kCopyDst], {{op.dst_offset, op.dst_offset + op.bytes}}});
      break;
    case CpuOpKind::kUpload: {
      const Touch& dst = op.touches[touch_role::kUploadDst];
      writes.push_back({&dst, {{op.dst_offset, op.dst_offset + op.payload.size()}}});
      if (dst.handout_id != 0 && op.dst_offset == 0 && op.payload.size() == dst.bytes &&
          dst.bytes % sizeof(int64_t) == 0 && dst.bytes <= kShadowMaxBytes) {
        std::vector<int64_t> v(dst.bytes / sizeof(int64_t));
        std::memcpy(v.data(), op.payload.data(), dst.bytes);
        index_shadow_[dst.handout_id] = std::move(v);
      }
      break;
    }
    case CpuOpKind::kTransfer: {
      const KVTransfer& t = op.transfer;
      const Touch& si = op.touches[touch_role::kTransferSrcIndices];
      const Touch& di = op.touches[touch_role::kTransferDstIndices];
      reads.push_back({&si, {{0, si.bytes}}});
      reads.push_back({&di, {{0, di.bytes}}});
      reads.push_back({&op.touches[touch_role::kTransferSrcPool],
                       item_ranges(t.src, si.handout_id, t.count, t.layer_begin, t.layer_end)});
      writes.push_back({&op.touches[touch_role::kTransferDstPool],
                        item_ranges(t.dst, di.handout_id, t.count, t.layer_begin, t.layer_end)});
      break;
    }
    case CpuOpKind::kWait:
    case CpuOpKind::kPoison:
      break;
  }
  for (const Access& a : reads) {
    if (a.touch->handout_id == 0 || a.ranges.empty()) continue;
    const std::optional<CpuOrdering::Conflict> c =
        ordering_.unordered(a.touch->physical, a.ranges, op.stream, clock);
    if (!c) continue;
    report("unordered_read",
           describe(op) + " reads bytes [" + std::to_string(c->begin) + ", " +
               std::to_string(c->end) + ") of block " + std::to_string(a.touch->handout_id) +
               " that op #" + std::to_string(c->writer.op) + " on stream '" +
               streams_.name(c->writer.stream) +
               "' writes, and no event orders that write before it (missing wait)");
    break;  // one report per op
  }
  for (const Access& a : writes) {
    if (a.touch->handout_id == 0 || a.ranges.empty()) continue;
    ordering_.write(a.touch->physical, a.ranges, op.stream, position, op.id);
  }
}

}  // namespace kvsim
