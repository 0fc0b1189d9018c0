#include "core/backend/cuda/stream_hold_kernel.cuh"

namespace kvsim {
namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stream_hold_kernel(const volatile uint32_t* flag, volatile uint32_t* timed_out,
                                   uint64_t timeout_ns) {
  const uint64_t start = global_timer_ns();
  while (*flag == 0) {
    if (global_timer_ns() - start > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(20000);
  }
}

}  // namespace

cudaError_t launch_stream_hold(const volatile uint32_t* flag, volatile uint32_t* timed_out,
                               uint64_t timeout_ns, cudaStream_t stream) {
  stream_hold_kernel<<<1, 1, 0, stream>>>(flag, timed_out, timeout_ns);
  return cudaGetLastError();
}

}  // namespace kvsim
