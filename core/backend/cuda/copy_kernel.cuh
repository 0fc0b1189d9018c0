// launch_copy_bytes: a stream-ordered, fully asynchronous byte copy by a kernel, for copies
// whose source and destination are both pinned host memory (mapped, so the GPU addresses it).
//
// Why not cudaMemcpyAsync: CUDA documents host-to-host cudaMemcpyAsync as fully synchronous
// with respect to the host, which would either stall the caller until the stream reaches the
// copy or break stream order; a kernel keeps both the ordering and the asynchrony.
// 8-byte words when both addresses and the size are multiples of 8, else bytes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace kvsim {

cudaError_t launch_copy_bytes(void* dst, const void* src, size_t bytes, unsigned int max_blocks,
                              cudaStream_t stream);

}  // namespace kvsim
