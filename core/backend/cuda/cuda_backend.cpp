// CudaBackend: construction, streams, events, memory, read_sync and stream holds.
// Copies, uploads and KV transfers are in cuda_backend_transfer.cpp.
#include "core/backend/cuda/cuda_backend.h"

#include <cmath>
#include <cstring>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/transfer_kernels.cuh"

namespace kvsim {
namespace {

int select_device(int device) {
  std::string why;
  KV_ASSERT(cuda_device_available(&why), "no CUDA device: " + why);
  int count = 0;
  KV_CUDA_CHECK(cudaGetDeviceCount(&count));
  KV_ASSERT(device >= 0 && device < count,
            "CUDA device " + std::to_string(device) + " of " + std::to_string(count));
  KV_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

}  // namespace

std::string_view to_string(TransferPath path) {
  return path == TransferPath::kKernel ? "kernel" : "direct";
}

CudaBackend::CudaBackend(CudaBackendOptions options)
    : device_(select_device(options.device)),
      transfer_path_(options.transfer_path),
      streams_(events_, options.compute_stream),
      allocator_(streams_, events_,
                 CudaAllocatorLimits{.device_bytes_max = options.device_bytes_max,
                                     .host_bytes_max = options.host_bytes_max}),
      staging_(events_),
      holds_(events_) {
  void* fault = nullptr;
  KV_CUDA_CHECK(cudaMalloc(&fault, sizeof(KvTransferFault)));
  KV_CUDA_CHECK(cudaMemset(fault, 0, sizeof(KvTransferFault)));
  // cudaMemset may run asynchronously on the legacy stream, which our non-blocking streams do
  // not wait for: finish it before any transfer kernel can touch the record.
  KV_CUDA_CHECK(cudaDeviceSynchronize());
  fault_ = static_cast<KvTransferFault*>(fault);
  int sms = 0;
  KV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
  KV_ASSERT(sms > 0, "device reports no multiprocessors");
  max_blocks_ = static_cast<unsigned int>(sms) * 8;  // enough to fill it; the kernel strides
}

CudaBackend::~CudaBackend() {
  holds_.release_all();
  for (size_t s = 0; s < streams_.count(); ++s)
    (void)cudaStreamSynchronize(streams_.get(static_cast<StreamId>(s)));
  (void)cudaFree(fault_);
  // Members go in reverse order: holds, staging and allocator free their memory on an idle
  // device, then the streams, then every event.
}

StreamId CudaBackend::create_stream(std::string_view name) {
  return streams_.create(name);
}

EventId CudaBackend::record_event(StreamId stream) {
  return streams_.record(stream);
}

void CudaBackend::wait_event(StreamId stream, EventId event) {
  streams_.wait(stream, event);
}

bool CudaBackend::query_event(EventId event) {
  return streams_.query(event);
}

void CudaBackend::synchronize_event(EventId event) {
  streams_.synchronize(event);
}

void CudaBackend::synchronize_stream(StreamId stream) {
  streams_.synchronize_stream(stream);
}

void CudaBackend::synchronize() {
  streams_.synchronize_all();
  allocator_.process_events();
  staging_.reclaim();
  check_kernel_faults();
}

Block CudaBackend::allocate(MemoryKind kind, size_t bytes, StreamId stream,
                            std::string_view label) {
  // The CUDA backend names nothing in violation reports (it makes none); the label names the
  // block in memory_census, where its owner recognises it.
  return allocator_.allocate(kind, bytes, stream, label);
}

void CudaBackend::record_stream(const Block& block, StreamId stream) {
  allocator_.record_stream(block, stream);
}

void CudaBackend::free(const Block& block) {
  allocator_.free(block);
}

std::vector<std::byte> CudaBackend::read_sync(const Block& block, size_t offset, size_t bytes) {
  synchronize();
  allocator_.check_range(block, offset, bytes, "read_sync");
  std::vector<std::byte> out(bytes);
  if (bytes == 0) return out;
  if (block.kind == MemoryKind::kPinnedHost) {
    std::memcpy(out.data(), block.ptr + offset, bytes);
  } else {
    KV_CUDA_CHECK(cudaMemcpy(out.data(), block.ptr + offset, bytes, cudaMemcpyDeviceToHost));
  }
  return out;
}

uint32_t CudaBackend::hold(StreamId stream, double timeout_s) {
  KV_ASSERT(timeout_s > 0 && timeout_s < 3600, "hold timeout out of range");
  const auto timeout_ns = static_cast<uint64_t>(std::ceil(timeout_s * 1e9));
  return holds_.hold(streams_.get(stream), timeout_ns);
}

void CudaBackend::release(uint32_t hold) {
  holds_.release(hold);
}

}  // namespace kvsim
