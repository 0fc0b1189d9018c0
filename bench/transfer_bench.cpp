// CUDA backend page copies, host<->device: bytes/s of transfer_kv_async on the kernel path and
// on the direct path, against one plain cudaMemcpyAsync of the same total bytes.
//
// What is measured: GPU time between two timing events recorded on the transfer's stream
// around the call (UseManualTime), so the figures are GPU time, not host enqueue time. For the
// direct path that interval includes the host planning its runs and issuing one
// cudaMemcpyAsync per run, because the GPU idles while it does: that is the path's real cost.
//
// Shape: `pages` pages of page_tokens tokens (default 64; KVSIM_BENCH_PAGE_TOKENS), each token
// one item of `item_bytes` per layer, over `layers` layers (default 4; KVSIM_BENCH_LAYERS).
// The device pool is layer-first (backend.h); the host pool is layer-first or page-first
// (`host_layout` 0 or 1). Pages sit in a random order on both sides, so every page is one
// contiguous run of page_tokens slots and runs do not line up across pages. The kernel path
// reads device-resident index buffers, the direct path pinned ones (it plans on the host).
//
// Without a usable GPU every benchmark ends with SkipWithError naming CUDA's reason.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/backend/cuda/cuda_backend.h"

namespace kvsim {
namespace {

enum class Direction { kHostToDevice, kDeviceToHost };
enum class Method { kKernel, kDirect, kMemcpy };

int64_t env_or(const char* name, int64_t fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::max<int64_t>(1, std::atoll(value));
}

int64_t page_tokens() {
  static const int64_t tokens = env_or("KVSIM_BENCH_PAGE_TOKENS", 64);
  return tokens;
}

int32_t layers() {
  static const auto n = static_cast<int32_t>(env_or("KVSIM_BENCH_LAYERS", 4));
  return n;
}

// One backend for the whole run, and one host and one device buffer grown to the largest
// shape asked for so far; each benchmark views them with its own shape.
struct Bench {
  std::unique_ptr<CudaBackend> backend;
  StreamId stream = 0;
  Block host;
  Block device;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
};

std::unique_ptr<Bench> make_bench(std::string* why) {
  if (!cuda_device_available(why)) {  // also initialises the CUDA runtime
    *why = "no CUDA device: " + *why;
    return nullptr;
  }
  auto s = std::make_unique<Bench>();
  s->backend = std::make_unique<CudaBackend>();
  s->stream = s->backend->create_stream("transfer");
  if (cudaEventCreate(&s->start) != cudaSuccess || cudaEventCreate(&s->stop) != cudaSuccess) {
    *why = "cudaEventCreate failed";
    return nullptr;
  }
  return s;
}

Bench* bench(std::string* why) {
  static std::string failure;
  // Constructed after the CUDA runtime has initialised, so destroyed before it tears down.
  static const std::unique_ptr<Bench> instance = make_bench(&failure);
  *why = failure;
  return instance.get();
}

// Makes `block` at least `bytes` long (its contents are not kept).
bool ensure(Backend& b, Block& block, MemoryKind kind, size_t bytes) {
  if (block.valid() && block.bytes >= bytes) return true;
  if (block.valid()) b.free(block);
  block = b.allocate(kind, bytes, 0, "bench pool");
  return block.valid();
}

// Slot indices of every page of a pool of `pages` pages, pages in a random order.
std::vector<int64_t> page_indices(int64_t pages, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(pages * page_tokens()));
  for (int64_t page : order) {
    for (int64_t t = 0; t < page_tokens(); ++t)
      out.push_back(page * page_tokens() + t);
  }
  return out;
}

Block index_block(Backend& b, MemoryKind kind, const std::vector<int64_t>& idx) {
  const std::span<const std::byte> bytes = std::as_bytes(std::span<const int64_t>(idx));
  const Block block = b.allocate(kind, bytes.size(), 0, "bench indices");
  if (block.valid()) b.upload_async(0, block, 0, bytes, "bench indices");
  return block;
}

// The transfer of every page between the host and the device pool, in `direction`.
KVTransfer page_transfer(const Bench& s, Direction direction, int64_t pages, size_t item,
                         KVLayout host_layout) {
  const KVPoolView host{.block = s.host,
                        .layout = host_layout,
                        .slot_count = pages * page_tokens(),
                        .layer_count = layers(),
                        .item_bytes = item};
  KVPoolView device = host;
  device.block = s.device;
  device.layout = KVLayout::kLayerFirst;
  KVTransfer t;
  t.src = direction == Direction::kHostToDevice ? host : device;
  t.dst = direction == Direction::kHostToDevice ? device : host;
  t.count = static_cast<size_t>(pages * page_tokens());
  t.layer_begin = 0;
  t.layer_end = layers();
  t.label = "bench";
  return t;
}

// GPU seconds of one run of `enqueue` on the bench stream.
template <typename Fn>
double gpu_seconds(Bench& s, Fn enqueue) {
  cudaStream_t stream = s.backend->cuda_stream(s.stream);
  cudaEventRecord(s.start, stream);
  enqueue();
  cudaEventRecord(s.stop, stream);
  cudaEventSynchronize(s.stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, s.start, s.stop);
  return static_cast<double>(ms) / 1e3;
}

void BM_PageCopy(benchmark::State& state, Direction direction, Method method) {
  std::string why;
  Bench* s = bench(&why);
  if (s == nullptr) {
    state.SkipWithError(why.c_str());
    return;
  }
  CudaBackend& b = *s->backend;
  const int64_t pages = state.range(0);
  const auto item = static_cast<size_t>(state.range(1));
  const KVLayout host_layout = state.range(2) == 0 ? KVLayout::kLayerFirst : KVLayout::kPageFirst;
  const size_t bytes = static_cast<size_t>(pages * page_tokens() * layers()) * item;
  if (!ensure(b, s->host, MemoryKind::kPinnedHost, bytes) ||
      !ensure(b, s->device, MemoryKind::kDevice, bytes)) {
    state.SkipWithError("could not allocate the pools");
    return;
  }
  KVTransfer t = page_transfer(*s, direction, pages, item, host_layout);
  const MemoryKind index_kind =
      method == Method::kDirect ? MemoryKind::kPinnedHost : MemoryKind::kDevice;
  t.src_indices = index_block(b, index_kind, page_indices(pages, 1));
  t.dst_indices = index_block(b, index_kind, page_indices(pages, 2));
  b.set_transfer_path(method == Method::kDirect ? TransferPath::kDirect : TransferPath::kKernel);
  b.synchronize();

  for (auto _ : state) {
    const double seconds = gpu_seconds(*s, [&] {
      if (method == Method::kMemcpy) {
        cudaMemcpyAsync(t.dst.block.ptr, t.src.block.ptr, bytes, cudaMemcpyDefault,
                        b.cuda_stream(s->stream));
      } else {
        b.transfer_kv_async(s->stream, t);
      }
    });
    state.SetIterationTime(seconds);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  b.synchronize();
  b.free(t.src_indices);
  b.free(t.dst_indices);
  if (cudaGetLastError() != cudaSuccess) state.SkipWithError("a CUDA call failed");
}

// pages x item bytes x host layout (0 layer-first, 1 page-first).
void page_args(benchmark::internal::Benchmark* bm) {
  bm->ArgNames({"pages", "item_bytes", "host_layout"})
      ->ArgsProduct({{1, 16, 64, 256, 1024, 4096}, {128, 512, 2048}, {0, 1}})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

// The plain-copy baseline does not depend on the layout.
void memcpy_args(benchmark::internal::Benchmark* bm) {
  bm->ArgNames({"pages", "item_bytes", "host_layout"})
      ->ArgsProduct({{1, 16, 64, 256, 1024, 4096}, {128, 512, 2048}, {0}})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_PageCopy, h2d_kernel, Direction::kHostToDevice, Method::kKernel)
    ->Apply(page_args);
BENCHMARK_CAPTURE(BM_PageCopy, h2d_direct, Direction::kHostToDevice, Method::kDirect)
    ->Apply(page_args);
BENCHMARK_CAPTURE(BM_PageCopy, h2d_memcpy, Direction::kHostToDevice, Method::kMemcpy)
    ->Apply(memcpy_args);
BENCHMARK_CAPTURE(BM_PageCopy, d2h_kernel, Direction::kDeviceToHost, Method::kKernel)
    ->Apply(page_args);
BENCHMARK_CAPTURE(BM_PageCopy, d2h_direct, Direction::kDeviceToHost, Method::kDirect)
    ->Apply(page_args);
BENCHMARK_CAPTURE(BM_PageCopy, d2h_memcpy, Direction::kDeviceToHost, Method::kMemcpy)
    ->Apply(memcpy_args);

}  // namespace
}  // namespace kvsim
