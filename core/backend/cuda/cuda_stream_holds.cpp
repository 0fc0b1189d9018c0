#include "core/backend/cuda/cuda_stream_holds.h"

#include <atomic>
#include <string>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/stream_hold_kernel.cuh"

namespace kvsim {

CudaStreamHolds::CudaStreamHolds(CudaEventPool& events) : events_(events), slots_(kSlots) {
  void* host = nullptr;
  KV_CUDA_CHECK(cudaHostAlloc(&host, 2 * kSlots * sizeof(uint32_t),
                              cudaHostAllocMapped | cudaHostAllocPortable));
  flags_ = static_cast<uint32_t*>(host);
  for (uint32_t i = 0; i < 2 * kSlots; ++i)
    flags_[i] = 0;
  void* device = nullptr;
  KV_CUDA_CHECK(cudaHostGetDevicePointer(&device, host, 0));
  device_flags_ = static_cast<uint32_t*>(device);
  KV_ASSERT(device_flags_ != nullptr, "mapped flags have no device address");
}

CudaStreamHolds::~CudaStreamHolds() {
  release_all();
  for (Slot& s : slots_) {
    if (s.done == nullptr) continue;
    (void)cudaEventSynchronize(s.done);
    events_.release(s.done);
    s.done = nullptr;
  }
  (void)cudaFreeHost(flags_);
}

bool CudaStreamHolds::reusable(Slot& slot) {
  if (slot.held) return false;
  if (slot.done == nullptr) return true;
  const cudaError_t status = cudaEventQuery(slot.done);
  if (status == cudaErrorNotReady) return false;
  KV_CUDA_CHECK(status);
  events_.release(slot.done);
  slot.done = nullptr;
  return true;
}

uint32_t CudaStreamHolds::hold(CUstream_st* stream, uint64_t timeout_ns) {
  KV_ASSERT(timeout_ns > 0, "a hold needs a timeout");
  for (uint32_t i = 0; i < kSlots; ++i) {
    if (!reusable(slots_[i])) continue;
    std::atomic_ref<uint32_t>(flags_[i]).store(0, std::memory_order_seq_cst);
    std::atomic_ref<uint32_t>(flags_[kSlots + i]).store(0, std::memory_order_seq_cst);
    KV_CUDA_CHECK(
        launch_stream_hold(device_flags_ + i, device_flags_ + kSlots + i, timeout_ns, stream));
    slots_[i].held = true;
    slots_[i].done = events_.acquire();
    KV_CUDA_CHECK(cudaEventRecord(slots_[i].done, stream));
    return i;
  }
  KV_ASSERT(false, "more than " + std::to_string(kSlots) + " stream holds at once");
  return kSlots;
}

void CudaStreamHolds::release(uint32_t hold) {
  KV_ASSERT(hold < kSlots && slots_[hold].held, "release of an unknown hold");
  std::atomic_ref<uint32_t>(flags_[hold]).store(1, std::memory_order_seq_cst);
  slots_[hold].held = false;
}

void CudaStreamHolds::release_all() {
  for (uint32_t i = 0; i < kSlots; ++i) {
    if (slots_[i].held) release(i);
  }
}

bool CudaStreamHolds::timed_out(uint32_t hold) const {
  KV_ASSERT(hold < kSlots, "unknown hold");
  return std::atomic_ref<uint32_t>(flags_[kSlots + hold]).load(std::memory_order_seq_cst) != 0;
}

bool CudaStreamHolds::work_queues_behind_a_hold(CUstream_st* stream) {
  void* scratch = nullptr;
  KV_CUDA_CHECK(cudaMalloc(&scratch, 16));
  KV_CUDA_CHECK(cudaMemset(scratch, 0, 16));  // initcheck: the copies read written bytes only
  auto* bytes = static_cast<char*>(scratch);
  const uint32_t h = hold(stream, 2'000'000'000);
  KV_CUDA_CHECK(cudaMemcpyAsync(bytes + 8, bytes, 8, cudaMemcpyDeviceToDevice, stream));
  KV_CUDA_CHECK(cudaMemcpyAsync(bytes, flags_, 8, cudaMemcpyHostToDevice, stream));
  const bool queued = !timed_out(h);
  release(h);
  KV_CUDA_CHECK(cudaStreamSynchronize(stream));
  KV_CUDA_CHECK(cudaFree(scratch));
  return queued;
}

uint32_t CudaStreamHolds::active() const {
  uint32_t n = 0;
  for (const Slot& s : slots_)
    n += s.held ? 1 : 0;
  return n;
}

}  // namespace kvsim
