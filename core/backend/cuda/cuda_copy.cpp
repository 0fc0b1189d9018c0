#include "core/backend/cuda/cuda_copy.h"

#include "core/backend/cuda/copy_kernel.cuh"
#include "core/backend/cuda/cuda_check.h"

namespace kvsim {

void enqueue_copy(std::byte* dst, const std::byte* src, size_t bytes, CopyEnds ends,
                  unsigned int max_blocks, CUstream_st* stream) {
  KV_ASSERT(dst != nullptr && src != nullptr, "copy with a null address");
  KV_ASSERT(max_blocks > 0, "copy with an empty grid bound");
  if (bytes == 0) return;
  if (ends.dst_is_host && ends.src_is_host) {
    KV_CUDA_CHECK(launch_copy_bytes(dst, src, bytes, max_blocks, stream));
    return;
  }
  KV_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
}

}  // namespace kvsim
