#include "core/backend/cuda/cuda_pinned_staging.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/backend/cuda/cuda_check.h"

namespace kvsim {

CudaPinnedStaging::~CudaPinnedStaging() {
  for (const InFlight& f : in_flight_) {
    events_.release(f.done);
    idle_.emplace(f.capacity, f.ptr);
  }
  for (const auto& [capacity, ptr] : idle_)
    (void)cudaFreeHost(ptr);
}

void CudaPinnedStaging::upload(std::byte* dst, std::span<const std::byte> bytes,
                               CUstream_st* stream) {
  KV_ASSERT(dst != nullptr, "upload to a null address");
  if (bytes.empty()) return;
  reclaim();
  const size_t capacity = std::bit_ceil(std::max(bytes.size(), kMinBytes));
  std::byte* buffer = take(capacity);
  std::memcpy(buffer, bytes.data(), bytes.size());  // captured now
  KV_CUDA_CHECK(cudaMemcpyAsync(dst, buffer, bytes.size(), cudaMemcpyDefault, stream));
  CUevent_st* done = events_.acquire();
  KV_CUDA_CHECK(cudaEventRecord(done, stream));
  in_flight_.push_back(InFlight{.ptr = buffer, .capacity = capacity, .done = done});
}

std::byte* CudaPinnedStaging::take(size_t capacity) {
  auto it = idle_.find(capacity);
  if (it != idle_.end()) {
    std::byte* buffer = it->second;
    idle_.erase(it);
    return buffer;
  }
  void* ptr = nullptr;
  KV_CUDA_CHECK(cudaHostAlloc(&ptr, capacity, cudaHostAllocPortable));
  KV_ASSERT(ptr != nullptr, "cudaHostAlloc returned null");
  bytes_reserved_ += capacity;
  return static_cast<std::byte*>(ptr);
}

void CudaPinnedStaging::reclaim() {
  while (!in_flight_.empty()) {
    const InFlight f = in_flight_.front();
    const cudaError_t status = cudaEventQuery(f.done);
    if (status == cudaErrorNotReady) return;
    KV_CUDA_CHECK(status);
    in_flight_.pop_front();
    events_.release(f.done);
    idle_.emplace(f.capacity, f.ptr);
  }
}

}  // namespace kvsim
