// KV_CUDA_CHECK: a CUDA runtime call that must succeed, else a KV_ASSERT failure naming the
// call and CUDA's error name and text. For host .cpp files of the CUDA backend only.
//
// A failing runtime call in the backend is a programmer error or a dead device (a sticky
// error after an illegal access); neither can be handled further up, so it asserts. Calls that
// may fail in normal operation (cudaMalloc running out of memory, cudaEventQuery not ready)
// are checked by hand at their call sites instead.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "core/common/assert.h"

namespace kvsim {

// "cudaErrorInvalidValue: invalid argument"
inline std::string cuda_error_text(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

}  // namespace kvsim

#define KV_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    const cudaError_t kv_cuda_error_ = (call);                                              \
    KV_ASSERT(kv_cuda_error_ == cudaSuccess,                                                \
              std::string(#call) + " failed: " + ::kvsim::cuda_error_text(kv_cuda_error_)); \
  } while (0)
