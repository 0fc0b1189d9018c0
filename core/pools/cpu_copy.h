// Retract-resume CPU copy: SGLang's get_cpu_copy / load_cpu_copy for every device pool a
// request's state lives in, with ONE return type.
//
// When decode runs out of memory under PD disaggregation, a retracted request's device state
// is copied to host memory, its slots are freed (and soon reused by other requests), and on
// resume the copy is written into freshly allocated — usually different — slots. The state is
// not only K/V: a sparse-attention model keeps indexer keys per page (SparseIndexBuffer) and a
// Mamba hybrid keeps a recurrent state slot (MambaStatePool). Seed 003 restored K/V but not the
// indexer pages, so the resumed request attended with another request's indexer data. Here the
// copy takes every side buffer present in CpuCopyPools; there is deliberately no switch to
// leave one out, and load refuses a copy whose segments do not match the pools it is given.
//
// A CpuCopy is a flat list of segments in a fixed order: pool (kv, sparse_index, mamba_state),
// then layer, then chunk. KV chunks hold up to chunk_tokens tokens; sparse-index chunks hold
// max(1, chunk_tokens / page_size) pages; a Mamba segment holds the request's one state slot.
// Device bytes are read with Backend::read_sync and written with upload_async on the compute
// stream, one call per run of adjacent items (host code never dereferences a device block).
//
// Invariants:
//  1. get_cpu_copy and load_cpu_copy walk the same segment order for the same pools, token
//     count and chunk size; load checks every segment's (pool, layer, chunk, items, bytes)
//     before it writes anything, so a mismatch (KV_ASSERT naming pool, layer and chunk) leaves
//     the device pools untouched;
//  2. get_cpu_copy returns owned host bytes taken after Backend::synchronize(); later writes
//     to the old slots never change it. load_cpu_copy returns after Backend::synchronize(), so
//     the new slots hold the copied bytes when it returns;
//  3. token slots are host-resident device-tier indices inside the KV pool; with a sparse
//     buffer they are whole aligned pages of its page size; a Mamba state slot is given iff
//     the pools have a Mamba pool, and it is allocated there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/common/types.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/index_vector.h"
#include "core/pools/mamba_state_pool.h"
#include "core/pools/sparse_index_buffer.h"

namespace kvsim {

// SGLang's KVCache.cpu_offloading_chunk_size.
inline constexpr int64_t kCpuOffloadingChunkTokens = 8192;

// Which pool a segment came from. Do not renumber: the order is the copy's segment order.
enum class CpuCopyPool : uint8_t { kKV = 0, kSparseIndex = 1, kMambaState = 2 };

constexpr std::string_view to_string(CpuCopyPool pool) {
  switch (pool) {
    case CpuCopyPool::kKV:
      return "kv";
    case CpuCopyPool::kSparseIndex:
      return "sparse_index";
    case CpuCopyPool::kMambaState:
      return "mamba_state";
  }
  return "unknown";
}

// One chunk of one layer of one pool: `items` items (tokens, pages or states), in order.
struct CpuCopySegment {
  CpuCopyPool pool = CpuCopyPool::kKV;
  int32_t layer = 0;
  int64_t chunk = 0;  // index of the chunk within (pool, layer)
  int64_t items = 0;
  std::vector<std::byte> bytes;  // items × the pool's item bytes
};

struct CpuCopy {
  int64_t chunk_tokens = kCpuOffloadingChunkTokens;  // the chunk size it was taken with
  std::vector<CpuCopySegment> segments;              // by pool, then layer, then chunk

  size_t total_bytes() const;
  size_t segment_count(CpuCopyPool pool) const;
};

// The device slots a request's state occupies (before retract, or after resume).
struct RetractedRequestSlots {
  IndexVector token_slots;                    // device tier, host-resident
  std::optional<SlotIndex> mamba_state_slot;  // set iff the model has a Mamba state pool
};

// Every device pool of the model that holds per-request state. Side pools are optional only
// because a model may not have them; when one exists it must be named here.
struct CpuCopyPools {
  DeviceKVPool& kv;
  SparseIndexBuffer* sparse_index = nullptr;
  MambaStatePool* mamba_state = nullptr;
};

// Synchronizes, then copies the request's items of every pool, per layer and per chunk.
CpuCopy get_cpu_copy(Backend& backend, const RetractedRequestSlots& slots,
                     const CpuCopyPools& pools, int64_t chunk_tokens = kCpuOffloadingChunkTokens);

// Writes `copy` into `new_slots` (same token count; any slots), with copy.chunk_tokens, then
// synchronizes. KV_ASSERT if any segment's shape differs from what new_slots and pools need.
void load_cpu_copy(Backend& backend, const CpuCopy& copy, const RetractedRequestSlots& new_slots,
                   const CpuCopyPools& pools);

}  // namespace kvsim
