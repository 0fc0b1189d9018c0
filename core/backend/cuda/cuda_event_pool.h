// CudaEventPool: recycles cudaEvent_t objects (created with cudaEventDisableTiming) for the
// backend's own bookkeeping and for the EventIds it hands out.
//
// The pool owns every event it ever created and destroys them all in its destructor, so an
// event still held by a user of the pool at that point is not leaked. A released event may be
// recorded again at once: waits enqueued earlier captured its previous record (CUDA's
// cudaStreamWaitEvent semantics), so recycling never changes what they wait for.
//
// Invariants:
//  1. every event in free_ is also in all_, exactly once;
//  2. acquire() never returns an event that is in free_.
#pragma once

#include <cstddef>
#include <vector>

struct CUevent_st;  // cudaEvent_t is CUevent_st*

namespace kvsim {

class CudaEventPool {
 public:
  CudaEventPool() = default;
  ~CudaEventPool();
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;

  CUevent_st* acquire();
  void release(CUevent_st* event);

  size_t created() const { return all_.size(); }
  size_t idle() const { return free_.size(); }

 private:
  std::vector<CUevent_st*> all_;
  std::vector<CUevent_st*> free_;
};

}  // namespace kvsim
