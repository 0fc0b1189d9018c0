// enqueue_copy: the one way the CUDA backend enqueues a plain byte copy on a stream.
//
// Any copy touching device memory is a cudaMemcpyAsync (cudaMemcpyDefault: unified addressing
// tells the direction). A copy between two pinned host buffers is a kernel on mapped memory
// (copy_kernel.cuh), because host-to-host cudaMemcpyAsync is synchronous with the host.
// Either way the copy runs in stream order and the call returns without waiting for it.
#pragma once

#include <cstddef>

struct CUstream_st;

namespace kvsim {

struct CopyEnds {
  bool dst_is_host = false;  // pinned host memory, as opposed to device memory
  bool src_is_host = false;
};

void enqueue_copy(std::byte* dst, const std::byte* src, size_t bytes, CopyEnds ends,
                  unsigned int max_blocks, CUstream_st* stream);

}  // namespace kvsim
