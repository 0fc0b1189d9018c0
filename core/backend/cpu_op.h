// CpuOp: one operation queued on a CpuBackend stream, as it was described at enqueue time.
//
// Invariants:
//  1. ids are unique and increase in enqueue order across all streams;
//  2. `touches` holds, in the fixed role order of its kind, the (physical block, handout id)
//     of every block the op addresses, taken when it was enqueued — never re-resolved later,
//     so a block handed to a new owner in between is detected rather than followed;
//  3. an op marked `skip` (a use_after_free was reported at enqueue) never touches memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/caching_allocator.h"

namespace kvsim {

enum class CpuOpKind : uint8_t { kCopy, kUpload, kTransfer, kWait, kPoison };

// The byte a kPoison op fills a block with when it is handed out again (a read of stale bytes
// then shows as this pattern, not as the previous owner's data).
inline constexpr std::byte kPoisonByte{0xDB};

// One block an op addresses. handout_id == 0: the role is unused (e.g. empty index lists).
struct Touch {
  PhysicalIndex physical = 0;
  uint64_t handout_id = 0;
  size_t bytes = 0;  // the bytes of that handout: the op's bounds
};

// Role order of `touches` per kind.
namespace touch_role {
constexpr size_t kCopyDst = 0;
constexpr size_t kCopySrc = 1;
constexpr size_t kUploadDst = 0;
constexpr size_t kPoisonDst = 0;
constexpr size_t kTransferSrcPool = 0;
constexpr size_t kTransferDstPool = 1;
constexpr size_t kTransferSrcIndices = 2;
constexpr size_t kTransferDstIndices = 3;
}  // namespace touch_role

struct CpuOp {
  OpId id = 0;
  CpuOpKind kind = CpuOpKind::kCopy;
  StreamId stream = 0;
  std::string label;
  std::vector<Touch> touches;
  bool skip = false;

  size_t dst_offset = 0;           // kCopy, kUpload
  size_t src_offset = 0;           // kCopy
  size_t bytes = 0;                // kCopy
  std::vector<std::byte> payload;  // kUpload: captured at enqueue
  KVTransfer transfer;             // kTransfer: shapes and indices count (blocks via touches)
  EventId event;                   // kWait
};

}  // namespace kvsim
