// CudaBackend: the Backend interface (backend.h) on a real GPU — CUDA streams and events,
// cudaMalloc'ed device memory behind a caching allocator with PyTorch's record_stream rules
// (cuda_caching_allocator.h), cudaHostAlloc'ed pinned host memory, and KV transfers by one
// gather/scatter kernel launch (transfer_kernels.cuh) or by coalesced cudaMemcpyAsync runs
// (transfer_direct.h), chosen per call through transfer_path().
//
// Where it differs from CpuBackend, and why:
//  - work runs on its own; nothing needs driving. hold()/release() (not part of Backend) make
//    a stream stand still for tests, as an unstepped CPU stream does;
//  - violations() is always empty: compute-sanitizer is this backend's checker. API misuse
//    (an unknown stream or event, a block that is not live, a range outside its block, a bad
//    transfer shape) is a KV_ASSERT at enqueue. A transfer index outside its pool is never
//    addressed: the kernel skips it and the next synchronize() or read_sync() KV_ASSERTs,
//    naming the transfer; the direct path KV_ASSERTs at once, before any copy;
//  - upload_async copies the caller's bytes into backend-owned pinned staging memory at once
//    (cuda_pinned_staging.h); a copy between two pinned blocks is a copy kernel, not a
//    host-to-host cudaMemcpyAsync, which CUDA runs synchronously with the host (cuda_copy.h);
//  - fresh device memory is not zeroed (cudaMalloc), unlike the CPU emulation's;
//  - the direct transfer path needs the index values on the host: it waits for the stream to
//    reach the transfer (cudaStreamSynchronize), reads the indices, then enqueues the copies.
//    It is a host synchronization point; the kernel path is fully asynchronous.
//
// This header names no CUDA types beyond the opaque CUstream_st, so C++20 code that is not
// built against the CUDA headers can include it.
//
// Invariants:
//  1. stream 0 is the compute stream; ops on one stream run in enqueue order;
//  2. a device block is reused only as cuda_caching_allocator.h allows;
//  3. no kernel of this backend reads or writes outside the blocks its op names.
//
// Thread-safety: none, as Backend. The device is selected once, in the constructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_caching_allocator.h"
#include "core/backend/cuda/cuda_event_pool.h"
#include "core/backend/cuda/cuda_pinned_staging.h"
#include "core/backend/cuda/cuda_stream_holds.h"
#include "core/backend/cuda/cuda_streams.h"

namespace kvsim {

struct KvTransferFault;

enum class TransferPath : uint8_t {
  kKernel = 0,  // one gather/scatter kernel launch per transfer
  kDirect = 1,  // coalesced cudaMemcpyAsync runs, planned on the host
};

std::string_view to_string(TransferPath path);

struct CudaBackendOptions {
  int device = 0;
  TransferPath transfer_path = TransferPath::kKernel;
  size_t device_bytes_max = 0;            // 0 = unlimited; cached blocks count until released
  size_t host_bytes_max = 0;              // pinned bytes; 0 = unlimited
  CUstream_st* compute_stream = nullptr;  // adopt this stream as stream 0 (not destroyed)
};

// True when the CUDA runtime sees at least one device; otherwise false, with the reason
// (e.g. "cudaErrorInsufficientDriver: CUDA driver version is insufficient ...") in *why.
bool cuda_device_available(std::string* why = nullptr);

// A CudaBackend, or nullptr (with the reason in *why) when no usable device exists.
std::unique_ptr<Backend> make_cuda_backend(CudaBackendOptions options = {},
                                           std::string* why = nullptr);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaBackendOptions options = {});  // KV_ASSERT a usable device
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  StreamId compute_stream() const override { return 0; }
  StreamId create_stream(std::string_view name) override;
  EventId record_event(StreamId stream) override;
  void wait_event(StreamId stream, EventId event) override;
  bool query_event(EventId event) override;
  void synchronize_event(EventId event) override;
  void synchronize_stream(StreamId stream) override;
  void synchronize() override;

  Block allocate(MemoryKind kind, size_t bytes, StreamId stream, std::string_view label) override;
  void record_stream(const Block& block, StreamId stream) override;
  void free(const Block& block) override;
  MemoryCensus memory_census() const override { return allocator_.census(); }

  void copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                  size_t src_offset, size_t bytes, std::string_view label) override;
  void upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                    std::span<const std::byte> host_bytes, std::string_view label) override;
  void transfer_kv_async(StreamId stream, const KVTransfer& transfer) override;
  std::vector<std::byte> read_sync(const Block& block, size_t offset, size_t bytes) override;

  const std::vector<BackendViolation>& violations() const override { return violations_; }

  // --- Not part of Backend ---
  void set_transfer_path(TransferPath path) { transfer_path_ = path; }
  TransferPath transfer_path() const { return transfer_path_; }
  CUstream_st* cuda_stream(StreamId stream) const { return streams_.get(stream); }
  int device() const { return device_; }

  // Test driver: work enqueued on `stream` after hold() waits until release(hold). A hold
  // lets go by itself after `timeout_s`; hold_timed_out() then says it did not really hold.
  // Synchronizing a held stream (or synchronize(), read_sync) waits for that timeout.
  uint32_t hold(StreamId stream, double timeout_s = 10.0);
  void release(uint32_t hold);
  void release_all_holds() { holds_.release_all(); }
  bool hold_timed_out(uint32_t hold) const { return holds_.timed_out(hold); }
  // Whether work enqueued behind a hold really waits in this environment (see
  // CudaStreamHolds::work_queues_behind_a_hold); false under serializing tools.
  bool holds_queue_work(StreamId stream) {
    return holds_.work_queues_behind_a_hold(streams_.get(stream));
  }

  size_t device_bytes_reserved() const { return allocator_.device_bytes_reserved(); }
  size_t host_bytes_in_use() const { return allocator_.host_bytes_in_use(); }
  size_t cached_blocks() const { return allocator_.cached_blocks(); }
  size_t pending_frees() const { return allocator_.pending_frees(); }
  size_t live_events() const { return streams_.live_events(); }

 private:
  void check_transfer(const KVTransfer& t) const;
  void transfer_by_kernel(StreamId stream, const KVTransfer& t);
  void transfer_direct(StreamId stream, const KVTransfer& t);
  std::vector<int64_t> read_indices(const Block& indices, size_t count, StreamId stream);
  void check_kernel_faults();
  std::string transfer_label(uint64_t serial) const;

  int device_;  // first: selected before any member touches CUDA
  TransferPath transfer_path_;
  CudaEventPool events_;
  CudaStreams streams_;
  CudaCachingAllocator allocator_;
  CudaPinnedStaging staging_;
  CudaStreamHolds holds_;
  KvTransferFault* fault_ = nullptr;  // device memory, written by the transfer kernel
  unsigned int max_blocks_ = 0;       // grid bound for the transfer kernel
  uint64_t next_serial_ = 1;
  std::deque<std::pair<uint64_t, std::string>> recent_labels_;  // the last kernel transfers
  std::vector<BackendViolation> violations_;                    // always empty
};

}  // namespace kvsim
