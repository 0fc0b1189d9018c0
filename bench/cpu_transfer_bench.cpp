// CpuBackend transfer_kv_async throughput: the cost of the emulation's byte mover (what the
// simulator pays per KV page it moves), by page count and item size. Wall time per transfer
// including synchronize(), which runs it. Pages are 64 tokens of 4 layers, both pools
// layer-first, pages scattered in random order on both sides.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "core/backend/cpu_backend.h"

namespace kvsim {
namespace {

constexpr int64_t kPageTokens = 64;
constexpr int32_t kLayers = 4;

// Slot indices of `pages` whole pages, in a random page order.
std::vector<int64_t> page_indices(int64_t pages, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(pages * kPageTokens));
  for (int64_t page : order) {
    for (int64_t t = 0; t < kPageTokens; ++t)
      out.push_back(page * kPageTokens + t);
  }
  return out;
}

Block upload_indices(CpuBackend& b, const std::vector<int64_t>& idx) {
  const Block block = b.allocate(MemoryKind::kDevice, idx.size() * sizeof(int64_t), 0, "idx");
  b.upload_async(0, block, 0, std::as_bytes(std::span<const int64_t>(idx)), "idx");
  return block;
}

void BM_CpuTransferKv(benchmark::State& state) {
  const int64_t pages = state.range(0);
  const auto item = static_cast<size_t>(state.range(1));
  CpuBackend b;
  KVTransfer t;
  t.src = KVPoolView{.layout = KVLayout::kLayerFirst,
                     .slot_count = pages * kPageTokens,
                     .layer_count = kLayers,
                     .item_bytes = item};
  t.dst = t.src;
  t.src.block = b.allocate(MemoryKind::kPinnedHost, t.src.total_bytes(), 0, "host pool");
  t.dst.block = b.allocate(MemoryKind::kDevice, t.dst.total_bytes(), 0, "device pool");
  t.src_indices = upload_indices(b, page_indices(pages, 1));
  t.dst_indices = upload_indices(b, page_indices(pages, 2));
  t.count = static_cast<size_t>(pages * kPageTokens);
  t.layer_end = kLayers;
  t.label = "bench";
  b.synchronize();
  for (auto _ : state) {
    b.transfer_kv_async(0, t);
    b.synchronize();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(t.count * item * kLayers));
  if (!b.violations().empty()) state.SkipWithError(b.violations().front().detail.c_str());
}

BENCHMARK(BM_CpuTransferKv)
    ->ArgNames({"pages", "item_bytes"})
    ->ArgsProduct({{1, 16, 64, 256}, {128, 512, 2048}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvsim
