// Executor: the model's reads (checked against the content oracle) and end-of-run quiescence.
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "sim/model/content_oracle.h"
#include "sim/model/executor.h"

namespace kvsim::sim {

Block& Executor::scratch(size_t bytes) {
  if (scratch_.valid() && scratch_.bytes >= bytes) return scratch_;
  if (scratch_.valid()) backend_.free(scratch_);
  scratch_ = backend_.allocate(MemoryKind::kPinnedHost, std::max<size_t>(bytes, 4096),
                               backend_.compute_stream(), "model read scratch");
  KV_ASSERT(scratch_.valid(), "no host memory for the model-read scratch buffer");
  return scratch_;
}

bool Executor::read_pool_range(const KVPoolView& view, std::span<const SlotIndex> slots,
                               std::span<const size_t> positions, const SimRequest& r, int kind,
                               const char* what) {
  if (slots.empty()) return true;
  const int32_t layers = view.layer_count;
  const size_t per_layer = slots.size() * view.item_bytes;
  Block& out = scratch(per_layer * static_cast<size_t>(layers));
  const StreamId compute = backend_.compute_stream();
  // Copies in compute-stream order: after every wait the forward would have made.
  for (int32_t layer = 0; layer < layers; ++layer) {
    for_each_consecutive_run(slots, [&](size_t i, size_t j) {
      backend_.copy_async(compute, out,
                          static_cast<size_t>(layer) * per_layer + i * view.item_bytes, view.block,
                          view.offset(layer, slots[i]), (j - i) * view.item_bytes, "model read");
    });
  }
  drive_compute();
  ++stats_.content_checks;
  // Without positions, item i is position i: the hashes of positions 0..n-1.
  const std::span<const uint64_t> hashes =
      positions.empty() ? std::span<const uint64_t>(r.prefix_hash).first(slots.size())
                        : std::span<const uint64_t>(r.prefix_hash);
  for (int32_t layer = 0; layer < layers; ++layer) {
    const std::byte* got = out.ptr + static_cast<size_t>(layer) * per_layer;
    const size_t i = first_wrong_item(hashes, positions, layer, static_cast<ContentKind>(kind),
                                      view.item_bytes, got, expected_scratch_);
    if (i < slots.size()) {
      fail("content", std::string(what) + ": request " + std::to_string(r.rid) + " position " +
                          std::to_string(positions.empty() ? i : positions[i]) + " layer " +
                          std::to_string(layer) + " (slot " + std::to_string(slots[i]) +
                          ") holds bytes of another prefix");
      return false;
    }
  }
  return true;
}

bool Executor::read_prefix(SimRequest& r) {
  const size_t n = r.computed;
  if (n == 0) return true;
  // Positions 0..n-1: the slot list is read in place.
  if (!read_pool_range(cache_->device_pool().view(), r.kv->kv().span().first(n), {}, r,
                       static_cast<int>(ContentKind::kFull), "full KV")) {
    return false;
  }
  if (sparse_) {  // the indexer keys of every complete page of the prefix
    const auto page = static_cast<size_t>(scenario_.cache.page_size);
    std::vector<SlotIndex> pages;
    std::vector<size_t> last;
    for (size_t q = 0; (q + 1) * page <= n; ++q) {
      pages.push_back(r.kv->kv()[q * page] / static_cast<SlotIndex>(page));
      last.push_back((q + 1) * page - 1);
    }
    if (!read_pool_range(sparse_->view(), pages, last, r, static_cast<int>(ContentKind::kIndexer),
                         "sparse index")) {
      return false;
    }
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    const auto window = static_cast<size_t>(scenario_.cache.swa_window_tokens);
    std::vector<SlotIndex> wslots;
    std::vector<size_t> wpos;
    for (size_t i = n > window ? n - window : 0; i < n; ++i) {
      const SlotIndex s = (*r.kv->swa())[i];
      if (s == 0) {
        fail("content", "SWA window position " + std::to_string(i) + " of request " +
                            std::to_string(r.rid) + " has no slot");
        return false;
      }
      wslots.push_back(s);
      wpos.push_back(i);
    }
    if (!read_pool_range(swa->device_pool().view(), wslots, wpos, r,
                         static_cast<int>(ContentKind::kSwa), "SWA window")) {
      return false;
    }
  }
  if (SidePool* mamba = cache_->side_pool(ComponentType::kMamba)) {
    const SlotIndex state[1] = {*r.kv->mamba_state()};
    const size_t last[1] = {n - 1};
    if (!read_pool_range(mamba->device_pool().view(), state, last, r,
                         static_cast<int>(ContentKind::kMamba), "Mamba state")) {
      return false;
    }
  }
  return true;
}

void Executor::check_quiescent() {
  if (violation_) return;
  auto quiet = [&](bool ok, const std::string& what) {
    if (!ok) fail("quiescence", what);
  };
  for (const auto& [rid, r] : requests_) {
    quiet(r.state == RequestState::kDone, "request " + std::to_string(rid) + " never finished");
  }
  const RadixTree& tree = cache_->tree();
  quiet(tree.protected_size() == 0,
        "tree still protects " + std::to_string(tree.protected_size()) + " tokens");
  for (ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
    quiet(tree.aux_protected_size(t) == 0, std::string(to_string(t)) + " values still locked: " +
                                               std::to_string(tree.aux_protected_size(t)));
  }
  quiet(cache_->controller().pending_writes() == 0 && cache_->controller().pending_loads() == 0,
        "transfers still pending");
  quiet(cache_->prefetches().empty(), "prefetches still live");
  quiet(backend_.pending_ops() == 0, "backend ops still queued");
  // Every host protection was given back (host_protection.owned checks the owners as it goes).
  tree.for_each_node([&](const TreeNode& n) {
    quiet(n.full().host_lock_ref == 0, "node " + std::to_string(n.id) + " still host-protected (" +
                                           std::to_string(n.full().host_lock_ref) + ")");
  });
  SanityReport report;
  cache_->sanity_check(report);
  if (!report.ok()) fail(report.first()->invariant, describe(*report.first()));
}

}  // namespace kvsim::sim
