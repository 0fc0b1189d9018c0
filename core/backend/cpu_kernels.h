// The byte movers behind CpuBackend's copy, upload and KV-transfer ops: what the CUDA kernels
// do, on host memory, with every address checked first.
//
// Each function returns "" after moving the bytes, or a description of the first illegal
// address it found; in that case it has written nothing (all checks precede all writes).
//
// Invariants:
//  1. no read or write ever leaves the regions passed in;
//  2. KV transfers read their int64 index buffers when they run, not when enqueued.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "core/backend/backend.h"

namespace kvsim {

// The memory of one live handout, as the kernel may address it.
struct ByteRegion {
  std::byte* data = nullptr;
  size_t bytes = 0;
};

std::string copy_bytes(ByteRegion dst, size_t dst_offset, ByteRegion src, size_t src_offset,
                       size_t bytes);
std::string upload_bytes(ByteRegion dst, size_t dst_offset, std::span<const std::byte> bytes);

struct KVTransferRegions {
  ByteRegion src_pool;
  ByteRegion dst_pool;
  ByteRegion src_indices;  // may be empty when transfer.count == 0
  ByteRegion dst_indices;
};
// Gathers/scatters as KVTransfer describes, in either layout on either side. Only the shapes
// of transfer.src/dst (layout, slot_count, layer_count, item_bytes) are used; memory comes from
// `regions`.
std::string transfer_kv(const KVTransfer& transfer, const KVTransferRegions& regions);

}  // namespace kvsim
