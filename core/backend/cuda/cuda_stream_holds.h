// CudaStreamHolds: make a real CUDA stream stand still until the host lets it go (tests).
//
// hold(stream) enqueues a one-thread kernel (stream_hold_kernel.cuh) that spins on its own
// flag in mapped pinned memory; release(hold) sets the flag. Work enqueued on the stream
// after hold() therefore runs only after release(), as work on a CPU-backend stream runs only
// when the driver steps it. A hold not released within its timeout lets go by itself and
// timed_out(hold) says so; a test seeing that knows the stream was not actually held (for
// instance under serialized kernel launches) and must not trust its ordering checks.
//
// Invariants:
//  1. a slot is reused only after it was released and its kernel has finished;
//  2. the destructor releases every hold and waits for their kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend/cuda/cuda_event_pool.h"

struct CUstream_st;

namespace kvsim {

class CudaStreamHolds {
 public:
  static constexpr uint32_t kSlots = 64;

  explicit CudaStreamHolds(CudaEventPool& events);
  ~CudaStreamHolds();
  CudaStreamHolds(const CudaStreamHolds&) = delete;
  CudaStreamHolds& operator=(const CudaStreamHolds&) = delete;

  uint32_t hold(CUstream_st* stream, uint64_t timeout_ns);
  void release(uint32_t hold);
  void release_all();
  bool timed_out(uint32_t hold) const;
  uint32_t active() const;  // holds not yet released

  // Whether work really queues behind a hold here. Holds `stream` for at most 2 s and, behind
  // the hold, enqueues two raw async copies (device to device, pinned host to device): if
  // either enqueue returns only after the hold let go by itself, this environment serializes
  // the stream's work (CUDA_LAUNCH_BLOCKING=1, compute-sanitizer initcheck, ...) and a test
  // cannot hold a stream. Uses the CUDA API directly, so a backend bug that blocks cannot
  // pass for a serializing tool. Leaves the stream idle.
  bool work_queues_behind_a_hold(CUstream_st* stream);

 private:
  struct Slot {
    bool held = false;           // hold() called, release() not yet
    CUevent_st* done = nullptr;  // recorded after the kernel; null when idle
  };

  bool reusable(Slot& slot);

  CudaEventPool& events_;
  uint32_t* flags_ = nullptr;  // mapped pinned: kSlots release flags, then kSlots timed-out words
  uint32_t* device_flags_ = nullptr;
  std::vector<Slot> slots_;
};

}  // namespace kvsim
