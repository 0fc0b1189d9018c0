// KvsimCoreCache: the model's reads, checked against the content oracle (content_oracle.h).
// At admission (read_prefix) the prefix a request found in the cache is read on the compute
// stream, after every wait a forward would make: a load-back that has not landed, or slots
// another copy still writes, show as bytes of another prefix. At finish (read_final) the last
// forward's read covers the request's whole computed sequence, its SWA window, Mamba state and
// index pages: a slot of a running request that anything else wrote (freed while in use, handed
// out twice, a load into the wrong slot) shows there, in every run that finishes a request,
// whether or not it ever hits the cache. That read is made in place, without a stream op, so a
// run's ops, schedule and event hash are the same with it as without.
#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "sim/model/content_oracle.h"
#include "sim/model/core_cache.h"

namespace kvsim::sim {

Block& KvsimCoreCache::scratch(size_t bytes) {
  if (scratch_.valid() && scratch_.bytes >= bytes) return scratch_;
  if (scratch_.valid()) backend_.free(scratch_);
  scratch_ = backend_.allocate(MemoryKind::kPinnedHost, std::max<size_t>(bytes, 4096),
                               backend_.compute_stream(), "model read scratch");
  KV_ASSERT(scratch_.valid(), "no host memory for the model-read scratch buffer");
  return scratch_;
}

const std::byte* KvsimCoreCache::gather(const KVPoolView& view, std::span<const SlotIndex> slots,
                                        ReadPath path) {
  const size_t per_layer = slots.size() * view.item_bytes;
  const size_t bytes = per_layer * static_cast<size_t>(view.layer_count);
  // copy(destination offset, offset in the pool's block, bytes) for each run of consecutive
  // slots of each layer: item i of layer l lands at l * per_layer + i * item_bytes.
  auto each_run = [&](auto&& copy) {
    for (int32_t layer = 0; layer < view.layer_count; ++layer) {
      for_each_consecutive_run(slots, [&](size_t i, size_t j) {
        copy(static_cast<size_t>(layer) * per_layer + i * view.item_bytes,
             view.offset(layer, slots[i]), (j - i) * view.item_bytes);
      });
    }
  };
  if (path == ReadPath::kInPlace) {
    in_place_scratch_.resize(bytes);
    each_run([&](size_t to, size_t from, size_t n) {
      std::memcpy(in_place_scratch_.data() + to, view.block.ptr + from, n);
    });
    return in_place_scratch_.data();
  }
  Block& out = scratch(bytes);
  const StreamId compute = backend_.compute_stream();
  // Copies in compute-stream order: after every wait the forward would have made.
  each_run([&](size_t to, size_t from, size_t n) {
    backend_.copy_async(compute, out, to, view.block, from, n, "model read");
  });
  drive_compute();
  return out.ptr;
}

bool KvsimCoreCache::read_pool_range(const KVPoolView& view, std::span<const SlotIndex> slots,
                                     std::span<const size_t> positions, const SimRequest& r,
                                     int kind, const ModelRead& read) {
  if (slots.empty()) return true;
  const std::byte* data = gather(view, slots, read.path);
  ++ctx_.stats.content_checks;
  const size_t per_layer = slots.size() * view.item_bytes;
  // Without positions, item i is position i: the hashes of positions 0..n-1.
  const std::span<const uint64_t> hashes =
      positions.empty() ? std::span<const uint64_t>(r.prefix_hash).first(slots.size())
                        : std::span<const uint64_t>(r.prefix_hash);
  for (int32_t layer = 0; layer < view.layer_count; ++layer) {
    const std::byte* got = data + static_cast<size_t>(layer) * per_layer;
    const size_t i = first_wrong_item(hashes, positions, layer, static_cast<ContentKind>(kind),
                                      view.item_bytes, got, expected_scratch_);
    if (i < slots.size()) {
      fail("content", std::string(read.what) + ": request " + std::to_string(r.rid) + " position " +
                          std::to_string(positions.empty() ? i : positions[i]) + " layer " +
                          std::to_string(layer) + " (slot " + std::to_string(slots[i]) +
                          ") holds bytes of another prefix" + read.when);
      return false;
    }
  }
  return true;
}

bool KvsimCoreCache::read_prefix(SimRequest& r) {
  return read_sequence(r, r.computed, ReadPath::kComputeStream);
}

void KvsimCoreCache::read_final(const SimRequest& r) {
  if (!scenario_.check.content) return;
  // In place, so only where a read on the compute stream would run now: with nothing queued
  // there (a batch's wait on a load-back may be), no stream has a turn to take before it.
  if (backend_.pending_ops(backend_.compute_stream()) > 0) return;
  // The state slot holds the checkpoint at the last page boundary (forward(); none before the
  // first page).
  const auto page = static_cast<size_t>(scenario_.cache.page_size);
  read_sequence(r, r.computed / page * page, ReadPath::kInPlace);
}

bool KvsimCoreCache::read_sequence(const SimRequest& r, size_t state_at, ReadPath path) {
  const size_t n = r.computed;
  if (n == 0) return true;
  const char* when = path == ReadPath::kInPlace ? " (the last forward's read, at finish)" : "";
  auto read = [&](const char* what) { return ModelRead{.path = path, .what = what, .when = when}; };
  const RequestKV& kv = *state(r).kv;
  // Positions 0..n-1: the slot list is read in place.
  if (!read_pool_range(cache_->device_pool().view(), kv.kv().span().first(n), {}, r,
                       static_cast<int>(ContentKind::kFull), read("full KV"))) {
    return false;
  }
  if (sparse_) {  // the indexer keys of every complete page of the prefix
    const auto page = static_cast<size_t>(scenario_.cache.page_size);
    std::vector<SlotIndex> pages;
    std::vector<size_t> last;
    for (size_t q = 0; (q + 1) * page <= n; ++q) {
      pages.push_back(kv.kv()[q * page] / static_cast<SlotIndex>(page));
      last.push_back((q + 1) * page - 1);
    }
    if (!read_pool_range(sparse_->view(), pages, last, r, static_cast<int>(ContentKind::kIndexer),
                         read("sparse index"))) {
      return false;
    }
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    const auto window = static_cast<size_t>(scenario_.cache.swa_window_tokens);
    std::vector<SlotIndex> wslots;
    std::vector<size_t> wpos;
    for (size_t i = n > window ? n - window : 0; i < n; ++i) {
      const SlotIndex s = (*kv.swa())[i];
      if (s == 0) {
        fail("content", "SWA window position " + std::to_string(i) + " of request " +
                            std::to_string(r.rid) + " has no slot" + when);
        return false;
      }
      wslots.push_back(s);
      wpos.push_back(i);
    }
    if (!read_pool_range(swa->device_pool().view(), wslots, wpos, r,
                         static_cast<int>(ContentKind::kSwa), read("SWA window"))) {
      return false;
    }
  }
  SidePool* mamba = cache_->side_pool(ComponentType::kMamba);
  if (mamba != nullptr && state_at > 0) {
    const SlotIndex state_slot[1] = {*kv.mamba_state()};
    const size_t last[1] = {state_at - 1};
    if (!read_pool_range(mamba->device_pool().view(), state_slot, last, r,
                         static_cast<int>(ContentKind::kMamba), read("Mamba state"))) {
      return false;
    }
  }
  return true;
}

}  // namespace kvsim::sim
