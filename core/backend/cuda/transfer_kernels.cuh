// The KV transfer kernel's launcher: host-callable with no CUDA C++ in its signature, so the
// backend's .cpp files (built by the C++ compiler) can call it; the kernel lives in
// transfer_kernels.cu (built by nvcc).
//
// One launch moves every word of a KVTransfer, all layers at once, each 8-byte word read and
// written exactly once (transfer_addressing.h gives the addresses). Pools and index buffers
// may be device memory or mapped pinned host memory. An index outside its pool is skipped
// and counted in the device-side KvTransferFault, which the backend checks when it
// synchronizes: the kernel never addresses outside a pool.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/backend/cuda/transfer_addressing.h"

namespace kvsim {

struct KvTransferFault {
  unsigned long long count = 0;   // words skipped because of a bad index
  unsigned long long serial = 0;  // the first faulting transfer's serial
  long long index = 0;
  long long side = 0;  // 1 source, 2 destination
  unsigned long long position = 0;
};

// Enqueues the transfer on `stream`; no launch when it moves nothing. `max_blocks` bounds the
// grid (the kernel strides over the rest).
cudaError_t launch_kv_transfer(const KvTransferArgs& args, KvTransferFault* fault,
                               unsigned int max_blocks, cudaStream_t stream);

}  // namespace kvsim
