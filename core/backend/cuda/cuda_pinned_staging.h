// CudaPinnedStaging: the pinned host buffers behind upload_async, which must capture the
// caller's bytes when it is called (backend.h rule 5) although the copy runs later.
//
// upload() copies the bytes into an idle pinned buffer on the host at once, enqueues the copy
// from that buffer to the destination on the stream (cuda_copy.h: cudaMemcpyAsync, or a copy
// kernel when the destination is pinned host memory too), and records an event after it; the buffer
// becomes idle again when that event has completed. Buffers are sized in powers of two from 4 KiB
// and kept for reuse until the backend is destroyed, so their total is bounded by the largest burst
// of uploads in flight at once.
//
// Invariants:
//  1. a buffer is either idle or in flight, never both; an in-flight buffer is never written;
//  2. in_flight_ is in enqueue order and reclaim() only pops completed entries from its front.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <span>

#include "core/backend/cuda/cuda_event_pool.h"

struct CUstream_st;

namespace kvsim {

class CudaPinnedStaging {
 public:
  static constexpr size_t kMinBytes = 4096;

  explicit CudaPinnedStaging(CudaEventPool& events) : events_(events) {}
  ~CudaPinnedStaging();  // the device must be idle (the backend synchronizes first)
  CudaPinnedStaging(const CudaPinnedStaging&) = delete;
  CudaPinnedStaging& operator=(const CudaPinnedStaging&) = delete;

  // `dst_is_host`: the destination is pinned host memory. `max_blocks` bounds a copy kernel.
  void upload(std::byte* dst, bool dst_is_host, std::span<const std::byte> bytes,
              unsigned int max_blocks, CUstream_st* stream);
  void reclaim();  // makes buffers whose copies completed idle again

  size_t bytes_reserved() const { return bytes_reserved_; }
  size_t in_flight() const { return in_flight_.size(); }

 private:
  struct InFlight {
    std::byte* ptr = nullptr;
    size_t capacity = 0;
    CUevent_st* done = nullptr;
  };

  std::byte* take(size_t capacity);

  CudaEventPool& events_;
  std::multimap<size_t, std::byte*> idle_;  // capacity -> buffer
  std::deque<InFlight> in_flight_;
  size_t bytes_reserved_ = 0;
};

}  // namespace kvsim
