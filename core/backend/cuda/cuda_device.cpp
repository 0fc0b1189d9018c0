// cuda_device_available and make_cuda_backend: whether this process can use a GPU at all.
#include <cuda_runtime_api.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"

namespace kvsim {

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // leave no error behind for later checks
    if (why != nullptr) *why = cuda_error_text(status);
    return false;
  }
  if (count <= 0) {
    if (why != nullptr) *why = "the CUDA runtime reports no device";
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(CudaBackendOptions options, std::string* why) {
  if (!cuda_device_available(why)) return nullptr;
  int count = 0;
  KV_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (options.device < 0 || options.device >= count) {
    if (why != nullptr) {
      *why = "CUDA device " + std::to_string(options.device) + " requested, " +
             std::to_string(count) + " present";
    }
    return nullptr;
  }
  return std::make_unique<CudaBackend>(options);
}

}  // namespace kvsim
