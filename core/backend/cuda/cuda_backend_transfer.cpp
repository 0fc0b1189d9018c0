// CudaBackend: copy_async, upload_async and transfer_kv_async (kernel and direct paths), and
// the check of the transfer kernel's fault record.
#include <cstring>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cuda_copy.h"
#include "core/backend/cuda/transfer_direct.h"
#include "core/backend/cuda/transfer_kernels.cuh"

namespace kvsim {
namespace {

static_assert(static_cast<uint8_t>(KVLayout::kLayerFirst) == kKernelLayerFirst);
static_assert(static_cast<uint8_t>(KVLayout::kPageFirst) == kKernelPageFirst);

constexpr size_t kRecentLabels = 4096;

// A pool's total bytes, KV_ASSERTing the shape is sane and the product does not overflow.
size_t pool_bytes(const char* side, const KVPoolView& v) {
  KV_ASSERT(v.slot_count > 0 && v.layer_count > 0 && v.item_bytes > 0,
            std::string(side) + " pool has an empty shape");
  size_t total = 0;
  const bool overflow = __builtin_mul_overflow(static_cast<size_t>(v.slot_count),
                                               static_cast<size_t>(v.layer_count), &total) ||
                        __builtin_mul_overflow(total, v.item_bytes, &total);
  KV_ASSERT(!overflow, std::string(side) + " pool size overflows");
  return total;
}

CopyEnds ends_of(const Block& dst, const Block& src) {
  return CopyEnds{.dst_is_host = dst.kind == MemoryKind::kPinnedHost,
                  .src_is_host = src.kind == MemoryKind::kPinnedHost};
}

}  // namespace

void CudaBackend::copy_async(StreamId stream, const Block& dst, size_t dst_offset, const Block& src,
                             size_t src_offset, size_t bytes, std::string_view label) {
  (void)label;
  cudaStream_t s = streams_.get(stream);
  allocator_.check_range(dst, dst_offset, bytes, "copy_async destination");
  allocator_.check_range(src, src_offset, bytes, "copy_async source");
  enqueue_copy(dst.ptr + dst_offset, src.ptr + src_offset, bytes, ends_of(dst, src), max_blocks_,
               s);
}

void CudaBackend::upload_async(StreamId stream, const Block& dst, size_t dst_offset,
                               std::span<const std::byte> host_bytes, std::string_view label) {
  (void)label;
  cudaStream_t s = streams_.get(stream);
  allocator_.check_range(dst, dst_offset, host_bytes.size(), "upload_async");
  staging_.upload(dst.ptr + dst_offset, dst.kind == MemoryKind::kPinnedHost, host_bytes,
                  max_blocks_, s);
}

void CudaBackend::check_transfer(const KVTransfer& t) const {
  KV_ASSERT(t.src.item_bytes == t.dst.item_bytes, "transfer item sizes differ");
  KV_ASSERT(t.src.item_bytes % 8 == 0, "transfer item size is not a multiple of 8 bytes");
  allocator_.check_range(t.src.block, 0, pool_bytes("source", t.src), "transfer source pool");
  allocator_.check_range(t.dst.block, 0, pool_bytes("destination", t.dst),
                         "transfer destination pool");
  KV_ASSERT(0 <= t.layer_begin && t.layer_begin <= t.layer_end &&
                t.layer_end <= t.src.layer_count && t.layer_end <= t.dst.layer_count,
            "transfer layers [" + std::to_string(t.layer_begin) + ", " +
                std::to_string(t.layer_end) + ") outside the pools");
  if (t.count == 0) return;
  KV_ASSERT(t.count <= SIZE_MAX / sizeof(int64_t), "transfer count overflows");
  allocator_.check_range(t.src_indices, 0, t.count * sizeof(int64_t), "transfer source indices");
  allocator_.check_range(t.dst_indices, 0, t.count * sizeof(int64_t),
                         "transfer destination indices");
}

void CudaBackend::transfer_kv_async(StreamId stream, const KVTransfer& transfer) {
  (void)streams_.get(stream);  // KV_ASSERTs the stream exists
  check_transfer(transfer);
  if (transfer.count == 0 || transfer.layer_begin == transfer.layer_end) return;
  if (transfer_path_ == TransferPath::kKernel) {
    transfer_by_kernel(stream, transfer);
  } else {
    transfer_direct(stream, transfer);
  }
}

void CudaBackend::transfer_by_kernel(StreamId stream, const KVTransfer& t) {
  const uint64_t serial = next_serial_++;
  recent_labels_.emplace_back(serial, t.label);
  if (recent_labels_.size() > kRecentLabels) recent_labels_.pop_front();
  const KvTransferArgs args{
      .src_words = reinterpret_cast<const uint64_t*>(t.src.block.ptr),
      .dst_words = reinterpret_cast<uint64_t*>(t.dst.block.ptr),
      .src_indices = reinterpret_cast<const int64_t*>(t.src_indices.ptr),
      .dst_indices = reinterpret_cast<const int64_t*>(t.dst_indices.ptr),
      .src_slots = t.src.slot_count,
      .dst_slots = t.dst.slot_count,
      .src_layers = t.src.layer_count,
      .dst_layers = t.dst.layer_count,
      .src_layout = static_cast<uint8_t>(t.src.layout),
      .dst_layout = static_cast<uint8_t>(t.dst.layout),
      .words_per_item = t.src.item_bytes / 8,
      .count = t.count,
      .layer_begin = t.layer_begin,
      .layer_end = t.layer_end,
      .serial = serial,
  };
  KV_CUDA_CHECK(launch_kv_transfer(args, fault_, max_blocks_, streams_.get(stream)));
}

void CudaBackend::transfer_direct(StreamId stream, const KVTransfer& t) {
  cudaStream_t s = streams_.get(stream);
  // The indices are final once the stream has reached this point: whatever writes them is
  // ordered before it on this stream (directly or through a waited event).
  KV_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<int64_t> src = read_indices(t.src_indices, t.count, stream);
  const std::vector<int64_t> dst = read_indices(t.dst_indices, t.count, stream);
  std::vector<CopyRun> runs;
  const std::string problem = plan_direct_runs(t, src, dst, &runs);
  KV_ASSERT(problem.empty(), "transfer '" + t.label + "': " + problem);
  const CopyEnds ends = ends_of(t.dst.block, t.src.block);
  for (const CopyRun& r : runs) {
    enqueue_copy(t.dst.block.ptr + r.dst_offset, t.src.block.ptr + r.src_offset, r.bytes, ends,
                 max_blocks_, s);
  }
}

std::vector<int64_t> CudaBackend::read_indices(const Block& indices, size_t count,
                                               StreamId stream) {
  std::vector<int64_t> out(count);
  const size_t bytes = count * sizeof(int64_t);
  if (indices.kind == MemoryKind::kPinnedHost) {
    std::memcpy(out.data(), indices.ptr, bytes);
    return out;
  }
  cudaStream_t s = streams_.get(stream);
  KV_CUDA_CHECK(cudaMemcpyAsync(out.data(), indices.ptr, bytes, cudaMemcpyDeviceToHost, s));
  KV_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

void CudaBackend::check_kernel_faults() {
  KvTransferFault fault;
  KV_CUDA_CHECK(cudaMemcpy(&fault, fault_, sizeof(fault), cudaMemcpyDeviceToHost));
  if (fault.count == 0) return;
  KV_CUDA_CHECK(cudaMemset(fault_, 0, sizeof(KvTransferFault)));
  KV_CUDA_CHECK(cudaDeviceSynchronize());  // see the constructor: order it before later kernels
  KV_ASSERT(fault.count == 0, "transfer " + transfer_label(fault.serial) + ": " +
                                  (fault.side == 1 ? "source" : "destination") + " index " +
                                  std::to_string(fault.position) + " = " +
                                  std::to_string(fault.index) + " is outside its pool; " +
                                  std::to_string(fault.count) +
                                  " words were skipped (illegal_address)");
}

std::string CudaBackend::transfer_label(uint64_t serial) const {
  for (const auto& [s, label] : recent_labels_) {
    if (s == serial) return "#" + std::to_string(serial) + " '" + label + "'";
  }
  return "#" + std::to_string(serial);
}

}  // namespace kvsim
