#include "core/pools/cpu_copy.h"

#include <algorithm>
#include <span>
#include <string>

#include "core/common/assert.h"

namespace kvsim {
namespace {

// One pool's part of a copy: its storage and the items (slots of `view`) the request owns.
struct PoolPlan {
  CpuCopyPool pool = CpuCopyPool::kKV;
  KVPoolView view;
  std::vector<SlotIndex> items;
  int64_t chunk_items = 1;  // items per chunk
};

// Where one segment's items are, before any bytes move.
struct SegmentRef {
  CpuCopyPool pool = CpuCopyPool::kKV;
  int32_t layer = 0;
  int64_t chunk = 0;
  const KVPoolView* view = nullptr;
  std::span<const SlotIndex> items;

  size_t bytes() const { return items.size() * view->item_bytes; }
};

std::string describe(CpuCopyPool pool, int32_t layer, int64_t chunk) {
  return "pool " + std::string(to_string(pool)) + ", layer " + std::to_string(layer) + ", chunk " +
         std::to_string(chunk);
}

void check_slots(const RetractedRequestSlots& slots, const CpuCopyPools& pools) {
  const IndexVector& tokens = slots.token_slots;
  KV_ASSERT(tokens.residency() == Residency::kHost,
            "residency: cpu copy of device-resident token indices");
  KV_ASSERT(tokens.tier() == Tier::kDevice, "cpu copy of host-tier token slots");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const SlotIndex s = tokens[i];
    KV_ASSERT(s >= 0 && s < pools.kv.slot_count(),
              "cpu copy token slot " + std::to_string(s) + " outside the KV pool");
  }
  if (pools.sparse_index != nullptr) {
    KV_ASSERT(pools.sparse_index->slot_count() == pools.kv.slot_count(),
              "sparse index buffer covers " + std::to_string(pools.sparse_index->slot_count()) +
                  " slots, the KV pool has " + std::to_string(pools.kv.slot_count()));
  }
  KV_ASSERT(slots.mamba_state_slot.has_value() == (pools.mamba_state != nullptr),
            pools.mamba_state != nullptr ? "cpu copy without the request's mamba state slot"
                                         : "cpu copy of a mamba state slot without a mamba pool");
  if (slots.mamba_state_slot) {
    KV_ASSERT(
        pools.mamba_state->is_allocated(*slots.mamba_state_slot),
        "cpu copy of unallocated mamba state slot " + std::to_string(*slots.mamba_state_slot));
  }
}

// Every pool the request has state in, in segment order.
std::vector<PoolPlan> plan_pools(const RetractedRequestSlots& slots, const CpuCopyPools& pools,
                                 int64_t chunk_tokens) {
  KV_ASSERT(chunk_tokens > 0, "cpu copy chunk size must be positive");
  check_slots(slots, pools);
  std::vector<PoolPlan> plans;
  plans.push_back({.pool = CpuCopyPool::kKV,
                   .view = pools.kv.view(),
                   .items = slots.token_slots.to_vector(),
                   .chunk_items = chunk_tokens});
  if (pools.sparse_index != nullptr) {
    const SparseIndexBuffer& sparse = *pools.sparse_index;
    plans.push_back({.pool = CpuCopyPool::kSparseIndex,
                     .view = sparse.view(),
                     .items = sparse.pages_of(slots.token_slots),
                     .chunk_items = std::max<int64_t>(1, chunk_tokens / sparse.page_size())});
  }
  if (pools.mamba_state != nullptr) {
    plans.push_back({.pool = CpuCopyPool::kMambaState,
                     .view = pools.mamba_state->pool().view(),
                     .items = {*slots.mamba_state_slot},
                     .chunk_items = 1});
  }
  return plans;
}

// The segments of `plans` in copy order: pool, layer, chunk.
std::vector<SegmentRef> segments_of(const std::vector<PoolPlan>& plans) {
  std::vector<SegmentRef> refs;
  for (const PoolPlan& plan : plans) {
    const std::span<const SlotIndex> items = plan.items;
    for (int32_t layer = 0; layer < plan.view.layer_count; ++layer) {
      int64_t chunk = 0;
      for (size_t begin = 0; begin < items.size(); begin += static_cast<size_t>(plan.chunk_items)) {
        const size_t count = std::min(static_cast<size_t>(plan.chunk_items), items.size() - begin);
        refs.push_back({.pool = plan.pool,
                        .layer = layer,
                        .chunk = chunk++,
                        .view = &plan.view,
                        .items = items.subspan(begin, count)});
      }
    }
  }
  return refs;
}

// Items i..end-1 whose bytes are adjacent in the pool (layer_first: consecutive slots).
size_t run_end(const KVPoolView& view, int32_t layer, std::span<const SlotIndex> items, size_t i) {
  size_t end = i + 1;
  while (end < items.size() &&
         view.offset(layer, items[end]) == view.offset(layer, items[end - 1]) + view.item_bytes) {
    ++end;
  }
  return end;
}

// Reads a segment's items, one read_sync per run of adjacent items.
std::vector<std::byte> read_segment(Backend& backend, const SegmentRef& ref) {
  std::vector<std::byte> bytes;
  bytes.reserve(ref.bytes());
  for (size_t i = 0; i < ref.items.size();) {
    const size_t end = run_end(*ref.view, ref.layer, ref.items, i);
    std::vector<std::byte> run =
        backend.read_sync(ref.view->block, ref.view->offset(ref.layer, ref.items[i]),
                          (end - i) * ref.view->item_bytes);
    bytes.insert(bytes.end(), run.begin(), run.end());
    i = end;
  }
  KV_ASSERT(bytes.size() == ref.bytes(), "cpu copy read the wrong number of bytes");
  return bytes;
}

// Enqueues a segment's bytes on the compute stream, one upload per run of adjacent items.
void write_segment_async(Backend& backend, const SegmentRef& ref,
                         std::span<const std::byte> bytes) {
  KV_ASSERT(bytes.size() == ref.bytes(), "cpu copy write of the wrong number of bytes");
  const std::string label = "load_cpu_copy " + describe(ref.pool, ref.layer, ref.chunk);
  for (size_t i = 0; i < ref.items.size();) {
    const size_t end = run_end(*ref.view, ref.layer, ref.items, i);
    const size_t item = ref.view->item_bytes;
    backend.upload_async(backend.compute_stream(), ref.view->block,
                         ref.view->offset(ref.layer, ref.items[i]),
                         bytes.subspan(i * item, (end - i) * item), label);
    i = end;
  }
}

// KV_ASSERTs that copy.segments match `refs` one for one.
void check_shapes(const CpuCopy& copy, const std::vector<SegmentRef>& refs) {
  const size_t common = std::min(copy.segments.size(), refs.size());
  for (size_t i = 0; i < common; ++i) {
    const CpuCopySegment& have = copy.segments[i];
    const SegmentRef& need = refs[i];
    KV_ASSERT(have.pool == need.pool && have.layer == need.layer && have.chunk == need.chunk &&
                  have.items == static_cast<int64_t>(need.items.size()) &&
                  have.bytes.size() == need.bytes(),
              "load_cpu_copy shape mismatch at segment " + std::to_string(i) + ": the copy holds " +
                  describe(have.pool, have.layer, have.chunk) + " (" + std::to_string(have.items) +
                  " items, " + std::to_string(have.bytes.size()) + " bytes); the new slots need " +
                  describe(need.pool, need.layer, need.chunk) + " (" +
                  std::to_string(need.items.size()) + " items, " + std::to_string(need.bytes()) +
                  " bytes)");
  }
  KV_ASSERT(copy.segments.size() >= refs.size(),
            "load_cpu_copy: the copy ends after " + std::to_string(copy.segments.size()) +
                " segments; the new slots also need " +
                describe(refs[common].pool, refs[common].layer, refs[common].chunk) +
                " (was the copy taken without this pool?)");
  KV_ASSERT(copy.segments.size() == refs.size(),
            "load_cpu_copy: the copy has " + std::to_string(copy.segments.size() - refs.size()) +
                " segments more than the new slots need, from " +
                describe(copy.segments[common].pool, copy.segments[common].layer,
                         copy.segments[common].chunk) +
                " (is a pool missing from CpuCopyPools?)");
}

}  // namespace

size_t CpuCopy::total_bytes() const {
  size_t total = 0;
  for (const CpuCopySegment& s : segments)
    total += s.bytes.size();
  return total;
}

size_t CpuCopy::segment_count(CpuCopyPool pool) const {
  return static_cast<size_t>(
      std::count_if(segments.begin(), segments.end(),
                    [pool](const CpuCopySegment& s) { return s.pool == pool; }));
}

CpuCopy get_cpu_copy(Backend& backend, const RetractedRequestSlots& slots,
                     const CpuCopyPools& pools, int64_t chunk_tokens) {
  const std::vector<PoolPlan> plans = plan_pools(slots, pools, chunk_tokens);
  const std::vector<SegmentRef> refs = segments_of(plans);
  backend.synchronize();  // every queued forward write lands before the snapshot
  CpuCopy copy;
  copy.chunk_tokens = chunk_tokens;
  copy.segments.reserve(refs.size());
  for (const SegmentRef& ref : refs) {
    copy.segments.push_back({.pool = ref.pool,
                             .layer = ref.layer,
                             .chunk = ref.chunk,
                             .items = static_cast<int64_t>(ref.items.size()),
                             .bytes = read_segment(backend, ref)});
  }
  backend.synchronize();
  return copy;
}

void load_cpu_copy(Backend& backend, const CpuCopy& copy, const RetractedRequestSlots& new_slots,
                   const CpuCopyPools& pools) {
  const std::vector<PoolPlan> plans = plan_pools(new_slots, pools, copy.chunk_tokens);
  const std::vector<SegmentRef> refs = segments_of(plans);
  check_shapes(copy, refs);  // all of it, before the first write
  backend.synchronize();
  for (size_t i = 0; i < refs.size(); ++i)
    write_segment_async(backend, refs[i], copy.segments[i].bytes);
  backend.synchronize();
}

}  // namespace kvsim
