#include "core/backend/cuda/cuda_event_pool.h"

#include "core/backend/cuda/cuda_check.h"

namespace kvsim {

CudaEventPool::~CudaEventPool() {
  // Destroying an event whose record has not completed is legal: CUDA releases it once done.
  for (cudaEvent_t event : all_)
    (void)cudaEventDestroy(event);
}

CUevent_st* CudaEventPool::acquire() {
  if (!free_.empty()) {
    cudaEvent_t event = free_.back();
    free_.pop_back();
    return event;
  }
  cudaEvent_t event = nullptr;
  KV_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  KV_ASSERT(event != nullptr, "cudaEventCreateWithFlags returned a null event");
  all_.push_back(event);
  return event;
}

void CudaEventPool::release(CUevent_st* event) {
  KV_ASSERT(event != nullptr, "release of a null event");
  KV_ASSERT(free_.size() < all_.size(), "more events released than were created");
  free_.push_back(event);
}

}  // namespace kvsim
