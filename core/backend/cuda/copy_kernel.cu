#include <cstdint>

#include "core/backend/cuda/copy_kernel.cuh"

namespace kvsim {
namespace {

constexpr unsigned int kThreadsPerBlock = 256;

template <typename Word>
__global__ void copy_kernel(Word* dst, const Word* src, uint64_t words) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += stride)
    dst[i] = src[i];
}

unsigned int grid_for(uint64_t items, unsigned int max_blocks) {
  const uint64_t wanted = (items + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned int>(wanted < max_blocks ? wanted : max_blocks);
}

}  // namespace

cudaError_t launch_copy_bytes(void* dst, const void* src, size_t bytes, unsigned int max_blocks,
                              cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (d % 8 == 0 && s % 8 == 0 && bytes % 8 == 0) {
    copy_kernel<<<grid_for(bytes / 8, max_blocks), kThreadsPerBlock, 0, stream>>>(
        static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), bytes / 8);
  } else {
    copy_kernel<<<grid_for(bytes, max_blocks), kThreadsPerBlock, 0, stream>>>(
        static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
  }
  return cudaGetLastError();
}

}  // namespace kvsim
