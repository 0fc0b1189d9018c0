// launch_stream_hold: enqueues one GPU thread that spins until the host sets a flag in mapped
// pinned memory, so everything enqueued on the stream after it waits: a test's way to make a
// real stream stand still, as the CPU backend's streams do until they are stepped.
//
// The spin gives up after `timeout_ns` (then it sets *timed_out), so a forgotten release or
// serialized kernel launches (CUDA_LAUNCH_BLOCKING, some sanitizer modes) cannot hang a run.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvsim {

cudaError_t launch_stream_hold(const volatile uint32_t* flag, volatile uint32_t* timed_out,
                               uint64_t timeout_ns, cudaStream_t stream);

}  // namespace kvsim
