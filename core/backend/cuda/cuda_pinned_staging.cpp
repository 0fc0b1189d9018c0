#include "core/backend/cuda/cuda_pinned_staging.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_copy.h"

namespace kvsim {

CudaPinnedStaging::~CudaPinnedStaging() {
  for (const InFlight& f : in_flight_) {
    events_.release(f.done);
    idle_.emplace(f.capacity, f.ptr);
  }
  for (const auto& [capacity, ptr] : idle_)
    (void)cudaFreeHost(ptr);
}

void CudaPinnedStaging::upload(std::byte* dst, bool dst_is_host, std::span<const std::byte> bytes,
                               unsigned int max_blocks, CUstream_st* stream) {
  KV_ASSERT(dst != nullptr, "upload to a null address");
  if (bytes.empty()) return;
  reclaim();
  const size_t capacity = std::bit_ceil(std::max(bytes.size(), kMinBytes));
  std::byte* buffer = take(capacity);
  std::memcpy(buffer, bytes.data(), bytes.size());  // captured now
  enqueue_copy(dst, buffer, bytes.size(), CopyEnds{.dst_is_host = dst_is_host, .src_is_host = true},
               max_blocks, stream);
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
  KV_CUDA_CHECK(cudaHostAlloc(&ptr, capacity, cudaHostAllocPortable | cudaHostAllocMapped));
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
