// CudaCachingAllocator: cudaMalloc'ed device memory behind a caching allocator with PyTorch's
// record_stream rules, and cudaHostAlloc'ed pinned host memory (shared/reference/
// testing-anchors.md §5.2; the same rules as the CPU backend's caching_allocator.h).
//
// Device blocks:
//  - sizes are rounded up to 512 bytes; no splitting or merging: one cudaMalloc per block;
//  - a freed block returns to the pool of its allocation (home) stream, keyed by
//    (home, capacity), and is handed only to a later allocation on that stream: the smallest
//    cached block >= the request, provided it is at most twice the request (bounded waste);
//  - record_stream(b, s) is ignored for s == home; otherwise s joins b's stream uses;
//  - free(b) with no stream uses caches b at once (the home stream's order makes reuse there
//    safe); otherwise it records one cudaEvent on each used stream now, at free time, and b
//    is cached only when all of them have completed. Pending frees are processed lazily at
//    the start of every allocate, per stream in FIFO order, stopping at the first incomplete
//    event (PyTorch's process_events);
//  - when a request would pass device_bytes_max, or cudaMalloc runs out of memory, every
//    cached block is released (cudaFree, after a device synchronize) and the request retried
//    once; if it still does not fit, allocate returns a null Block.
// Pinned host blocks are never cached. free(b) records an event on b's home stream and on
// every recorded stream and releases the memory (cudaFreeHost) once all have completed, so a
// copy queued before the free never reads or writes released host memory.
//
// Invariants:
//  1. every handout has a fresh id (1, 2, ...); a physical block has at most one live handout;
//  2. a physical block is in exactly one state: live, pending (events_pending > 0), cached
//     (in exactly one pool entry) or released (its slot may be recycled);
//  3. reserved device bytes (live + pending + cached) and pinned bytes (live + pending) never
//     exceed their limits (0 = unlimited).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_event_pool.h"
#include "core/backend/cuda/cuda_streams.h"

namespace kvsim {

struct CudaAllocatorLimits {
  size_t device_bytes_max = 0;  // 0 = unlimited
  size_t host_bytes_max = 0;    // 0 = unlimited
};

class CudaCachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;

  CudaCachingAllocator(CudaStreams& streams, CudaEventPool& events, CudaAllocatorLimits limits);
  ~CudaCachingAllocator();  // frees everything: the device must be idle (the backend syncs)
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  // `label` names the handout in memory_census (its owner's name for it).
  Block allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label = {});
  void record_stream(const Block& block, StreamId stream);
  void free(const Block& block);

  bool is_live(const Block& block) const;
  // KV_ASSERTs that `block` is a live handout and [offset, offset + bytes) lies inside it.
  void check_range(const Block& block, size_t offset, size_t bytes, const char* what) const;

  void process_events();
  size_t release_cached();  // empty_cache: frees every cached device block; returns bytes

  size_t device_bytes_reserved() const { return device_bytes_; }
  size_t host_bytes_in_use() const { return host_bytes_; }
  size_t cached_blocks() const { return pool_.size(); }
  size_t pending_frees() const;
  // Every live handout and the bytes and blocks in each state, against the counters
  // (backend.h MemoryCensus). Bookkeeping only: no CUDA call, nothing synchronized. O(blocks).
  MemoryCensus census() const;

 private:
  enum class State : uint8_t { kLive, kPending, kCached, kReleased };
  struct Physical {
    std::byte* ptr = nullptr;
    size_t capacity = 0;
    MemoryKind kind = MemoryKind::kDevice;
    StreamId home = 0;
    State state = State::kReleased;
    uint64_t live_id = 0;
    size_t live_bytes = 0;
    std::set<StreamId> stream_uses;
    uint32_t events_pending = 0;
    std::string label;  // the live (or latest) handout's
  };
  struct PendingFree {
    CUevent_st* event = nullptr;
    uint32_t index = 0;
  };

  Physical& live_block(const Block& block, const char* what);
  bool take_cached(StreamId stream, size_t rounded, uint32_t* index);
  bool create(MemoryKind kind, size_t rounded, StreamId stream, uint32_t* index);
  bool fits(MemoryKind kind, size_t rounded) const;
  std::byte* raw_allocate(MemoryKind kind, size_t rounded);
  void raw_release(Physical& p);
  void finish_free(uint32_t index);

  CudaStreams& streams_;
  CudaEventPool& events_;
  CudaAllocatorLimits limits_;
  std::vector<Physical> blocks_;
  std::vector<uint32_t> unused_slots_;                     // released entries of blocks_
  std::unordered_map<uint64_t, uint32_t> live_;            // handout id -> physical index
  std::set<std::tuple<StreamId, size_t, uint32_t>> pool_;  // (home, capacity, index)
  std::map<StreamId, std::deque<PendingFree>> pending_;    // per used stream, FIFO
  uint64_t next_id_ = 1;
  size_t device_bytes_ = 0;
  size_t host_bytes_ = 0;
};

}  // namespace kvsim
