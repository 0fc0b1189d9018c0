// get_cpu_copy / load_cpu_copy: retract-resume snapshots of every per-request device pool.
//
// The model here has all three pools: a KV pool (3 layers), a sparse-attention indexer buffer
// (3 layers, one item per page of 4 tokens) and a Mamba state pool (2 layers). Every byte a
// request writes is a function of (pool, request, layer, position), so a restored byte can be
// traced to the request that wrote it.
#include "core/pools/cpu_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"
#include "core/pools/paged_allocator.h"

namespace kvsim {
namespace {

constexpr int32_t kPageSize = 4;
constexpr int64_t kPages = 96;
constexpr int32_t kLayers = 3;
constexpr size_t kItemBytes = 16;
constexpr size_t kIndexBytes = 24;
constexpr int32_t kStateLayers = 2;
constexpr size_t kStateBytes = 32;

std::vector<std::byte> content(CpuCopyPool pool, uint64_t request, int32_t layer, int64_t position,
                               size_t bytes) {
  std::vector<std::byte> out(bytes);
  uint64_t x = (request * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(pool) << 56) ^
               (static_cast<uint64_t>(layer) << 40) ^ static_cast<uint64_t>(position);
  for (size_t i = 0; i < bytes; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<std::byte>(x >> 56);
  }
  return out;
}

struct Model {
  CpuBackend backend;
  DeviceKVPool kv{backend, (kPages + 1) * kPageSize, kLayers, kItemBytes};
  PagedSlotAllocator allocator{Tier::kDevice, kPages* kPageSize, kPageSize};
  SparseIndexBuffer sparse{backend, kPages + 1, kLayers, kIndexBytes, kPageSize};
  MambaStatePool mamba{backend, 4, kStateLayers, kStateBytes};

  CpuCopyPools pools() { return {.kv = kv, .sparse_index = &sparse, .mamba_state = &mamba}; }

  RetractedRequestSlots alloc(int64_t pages) {
    return {.token_slots = *allocator.alloc(pages * kPageSize), .mamba_state_slot = mamba.alloc()};
  }
  void release(const RetractedRequestSlots& slots) {
    allocator.free(slots.token_slots);
    mamba.free(*slots.mamba_state_slot);
  }

  // What a forward pass leaves behind for `request`: KV per token, indexer keys per page, state.
  // Queued on the compute stream, not run.
  void write(uint64_t request, const RetractedRequestSlots& slots) {
    const StreamId s = backend.compute_stream();
    const std::vector<SlotIndex>& tokens = slots.token_slots.slots();
    const std::vector<int64_t> pages = sparse.pages_of(slots.token_slots);
    for (int32_t l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        kv.write_item_async(s, l, tokens[i],
                            content(CpuCopyPool::kKV, request, l, int64_t(i), kItemBytes));
      }
      for (size_t j = 0; j < pages.size(); ++j) {
        sparse.write_page_async(
            s, l, pages[j],
            content(CpuCopyPool::kSparseIndex, request, l, int64_t(j), kIndexBytes));
      }
    }
    for (int32_t l = 0; l < kStateLayers; ++l) {
      mamba.write_state_async(s, l, *slots.mamba_state_slot,
                              content(CpuCopyPool::kMambaState, request, l, 0, kStateBytes));
    }
  }

  // "" when `slots` hold exactly what write(request, ...) wrote, else the first difference.
  std::string verify(uint64_t request, const RetractedRequestSlots& slots) {
    const std::vector<SlotIndex>& tokens = slots.token_slots.slots();
    const std::vector<int64_t> pages = sparse.pages_of(slots.token_slots);
    for (int32_t l = 0; l < kLayers; ++l) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (kv.read_item_sync(l, tokens[i]) !=
            content(CpuCopyPool::kKV, request, l, int64_t(i), kItemBytes)) {
          return "kv layer " + std::to_string(l) + " token " + std::to_string(i);
        }
      }
      for (size_t j = 0; j < pages.size(); ++j) {
        if (sparse.read_page_sync(l, pages[j]) !=
            content(CpuCopyPool::kSparseIndex, request, l, int64_t(j), kIndexBytes)) {
          return "sparse_index layer " + std::to_string(l) + " page " + std::to_string(j);
        }
      }
    }
    for (int32_t l = 0; l < kStateLayers; ++l) {
      if (mamba.read_state_sync(l, *slots.mamba_state_slot) !=
          content(CpuCopyPool::kMambaState, request, l, 0, kStateBytes)) {
        return "mamba_state layer " + std::to_string(l);
      }
    }
    return "";
  }
};

std::vector<SlotIndex> sorted(const IndexVector& v) {
  std::vector<SlotIndex> s = v.slots();
  std::sort(s.begin(), s.end());
  return s;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::string assert_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const AssertionFailure& e) {
    return e.what();
  }
  return "";
}

// Goal: with chunks smaller than the request (8 tokens = 2 pages, 37-page request), segments
// come in (pool, layer, chunk) order with the right item counts, and a round trip restores
// every pool after the slots were scribbled over.
TEST(CpuCopy, SmallChunksSegmentOrderAndRoundTrip) {
  Model m;
  const RetractedRequestSlots req = m.alloc(37);  // 148 tokens
  m.write(1, req);
  const CpuCopy copy = get_cpu_copy(m.backend, req, m.pools(), 8);
  EXPECT_EQ(copy.chunk_tokens, 8);
  EXPECT_EQ(copy.segment_count(CpuCopyPool::kKV), size_t(kLayers * ceil_div(148, 8)));
  EXPECT_EQ(copy.segment_count(CpuCopyPool::kSparseIndex), size_t(kLayers * ceil_div(37, 2)));
  EXPECT_EQ(copy.segment_count(CpuCopyPool::kMambaState), size_t(kStateLayers));
  EXPECT_EQ(copy.total_bytes(),
            kLayers * (148 * kItemBytes + 37 * kIndexBytes) + kStateLayers * kStateBytes);
  for (size_t i = 1; i < copy.segments.size(); ++i) {
    const CpuCopySegment& a = copy.segments[i - 1];
    const CpuCopySegment& b = copy.segments[i];
    EXPECT_LT(std::tie(a.pool, a.layer, a.chunk), std::tie(b.pool, b.layer, b.chunk)) << i;
  }
  EXPECT_EQ(copy.segments[18].items, 148 - 18 * 8);  // last KV chunk of layer 0 is partial
  EXPECT_EQ(copy.segments[19].layer, 1);
  EXPECT_EQ(copy.segments[19].chunk, 0);
  m.write(2, req);  // another owner's bytes in the same slots
  EXPECT_NE(m.verify(1, req), "");
  load_cpu_copy(m.backend, copy, req, m.pools());
  EXPECT_EQ(m.verify(1, req), "");
  EXPECT_TRUE(m.backend.violations().empty());
}

// Goal (seed 003): request A is retracted and its slots freed; B reuses them and writes its own
// KV, indexer keys and state; C writes into other slots and finishes; A resumes into C's old
// slots, which still hold C's indexer keys. A's restored KV, indexer pages and state equal A's
// originals — A reads neither B's nor C's indexer data — and B's data is untouched. Chunk sizes
// below, equal to and above the request all hold. Restoring K/V alone (the bug) would leave
// C's indexer keys under A's tokens: shown at the end.
TEST(CpuCopy, ResumeIntoDifferentSlotsAfterReuseRestoresEverySideBuffer) {
  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{148}, int64_t{8192}}) {
    SCOPED_TRACE("chunk_tokens " + std::to_string(chunk));
    Model m;
    const RetractedRequestSlots a = m.alloc(37);
    m.write(1, a);  // still queued: get_cpu_copy must synchronize first
    const CpuCopy copy = get_cpu_copy(m.backend, a, m.pools(), chunk);
    m.release(a);
    const RetractedRequestSlots b = m.alloc(37);
    EXPECT_EQ(sorted(b.token_slots), sorted(a.token_slots));  // LIFO: B gets A's pages
    EXPECT_EQ(b.mamba_state_slot, a.mamba_state_slot);
    m.write(2, b);
    const RetractedRequestSlots c = m.alloc(37);
    m.write(3, c);
    m.backend.synchronize();
    m.release(c);
    const RetractedRequestSlots resumed = m.alloc(37);
    ASSERT_EQ(sorted(resumed.token_slots), sorted(c.token_slots));  // in reverse page order
    for (SlotIndex s : resumed.token_slots.slots()) {
      ASSERT_EQ(std::count(a.token_slots.slots().begin(), a.token_slots.slots().end(), s), 0);
    }
    ASSERT_NE(resumed.mamba_state_slot, a.mamba_state_slot);
    load_cpu_copy(m.backend, copy, resumed, m.pools());
    EXPECT_EQ(m.verify(1, resumed), "");
    EXPECT_EQ(m.verify(2, b), "");
    EXPECT_TRUE(m.backend.violations().empty());
  }
  // The bug: a copy of K/V only, restored into C's old slots, leaves C's indexer keys there.
  Model m;
  const RetractedRequestSlots a = m.alloc(3);
  const RetractedRequestSlots kv_slots_a{.token_slots = a.token_slots};
  m.write(1, a);
  const CpuCopy kv_only = get_cpu_copy(m.backend, kv_slots_a, CpuCopyPools{.kv = m.kv});
  m.release(a);
  const RetractedRequestSlots c = m.alloc(3);
  m.write(3, c);
  m.release(c);
  const RetractedRequestSlots resumed = m.alloc(3);
  load_cpu_copy(m.backend, kv_only, RetractedRequestSlots{.token_slots = resumed.token_slots},
                CpuCopyPools{.kv = m.kv});
  EXPECT_EQ(m.verify(1, resumed), "sparse_index layer 0 page 0");
  const int64_t page = m.sparse.pages_of(resumed.token_slots)[0];
  const std::vector<int64_t> c_pages = m.sparse.pages_of(c.token_slots);
  const auto c_position = std::find(c_pages.begin(), c_pages.end(), page) - c_pages.begin();
  ASSERT_LT(c_position, 3);
  EXPECT_EQ(m.sparse.read_page_sync(0, page),
            content(CpuCopyPool::kSparseIndex, 3, 0, c_position, kIndexBytes));
}

// Goal: fragmented slots (no two pages adjacent, out of order) restore as well as contiguous
// ones; the adjacent-run batching must not bleed into neighbouring pages.
TEST(CpuCopy, FragmentedSlotsRoundTrip) {
  Model m;
  std::vector<IndexVector> pages;
  for (int i = 0; i < 12; ++i)
    pages.push_back(*m.allocator.alloc(kPageSize));
  IndexVector tokens(Tier::kDevice, {});
  for (int i : {9, 1, 5, 3, 10, 7})
    tokens.append(pages[size_t(i)]);
  IndexVector neighbours(Tier::kDevice, {});
  for (int i : {0, 2, 4, 6, 8, 11})
    neighbours.append(pages[size_t(i)]);
  const RetractedRequestSlots req{.token_slots = tokens, .mamba_state_slot = m.mamba.alloc()};
  const RetractedRequestSlots other{.token_slots = neighbours, .mamba_state_slot = m.mamba.alloc()};
  m.write(1, req);
  m.write(7, other);
  const CpuCopy copy = get_cpu_copy(m.backend, req, m.pools(), 6);
  m.write(3, req);
  load_cpu_copy(m.backend, copy, req, m.pools());
  EXPECT_EQ(m.verify(1, req), "");
  EXPECT_EQ(m.verify(7, other), "");
}

// Goal: a copy taken without the indexer buffer (seed 003's bug) cannot be loaded into a model
// that has one; nor can a copy with more pools than the model. Nothing is written.
TEST(CpuCopy, CopyMissingOrExtraSidePoolIsRefused) {
  ScopedThrowingAsserts asserts;
  Model m;
  const RetractedRequestSlots req = m.alloc(5);
  m.write(1, req);
  const CpuCopyPools kv_only{.kv = m.kv};
  const RetractedRequestSlots tokens_only{.token_slots = req.token_slots};
  const CpuCopy kv_copy = get_cpu_copy(m.backend, tokens_only, kv_only, 8);
  EXPECT_EQ(kv_copy.segment_count(CpuCopyPool::kSparseIndex), 0u);
  m.write(2, req);
  std::string msg = assert_message([&] { load_cpu_copy(m.backend, kv_copy, req, m.pools()); });
  EXPECT_NE(msg.find("sparse_index"), std::string::npos) << msg;
  EXPECT_NE(msg.find("layer 0, chunk 0"), std::string::npos) << msg;
  EXPECT_EQ(m.verify(2, req), "");  // untouched: shapes are checked before any write

  const CpuCopy full = get_cpu_copy(m.backend, req, m.pools(), 8);
  msg = assert_message([&] { load_cpu_copy(m.backend, full, tokens_only, kv_only); });
  EXPECT_NE(msg.find("more than"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sparse_index"), std::string::npos) << msg;
  EXPECT_EQ(m.verify(2, req), "");
}

// Goal: every chunk's shape is checked; the message names pool, layer and chunk.
TEST(CpuCopy, ChunkShapeMismatchNamesPoolLayerAndChunk) {
  ScopedThrowingAsserts asserts;
  Model m;
  const RetractedRequestSlots req = m.alloc(37);
  m.write(1, req);
  const CpuCopy copy = get_cpu_copy(m.backend, req, m.pools(), 8);
  m.write(2, req);

  CpuCopy short_bytes = copy;
  auto it = std::find_if(
      short_bytes.segments.begin(), short_bytes.segments.end(), [](const CpuCopySegment& s) {
        return s.pool == CpuCopyPool::kSparseIndex && s.layer == 2 && s.chunk == 5;
      });
  ASSERT_NE(it, short_bytes.segments.end());
  it->bytes.pop_back();
  std::string msg = assert_message([&] { load_cpu_copy(m.backend, short_bytes, req, m.pools()); });
  EXPECT_NE(msg.find("pool sparse_index, layer 2, chunk 5"), std::string::npos) << msg;

  CpuCopy dropped = copy;
  dropped.segments.erase(dropped.segments.begin() + 20);  // kv layer 1, chunk 1
  msg = assert_message([&] { load_cpu_copy(m.backend, dropped, req, m.pools()); });
  EXPECT_NE(msg.find("pool kv, layer 1, chunk 1"), std::string::npos) << msg;

  const RetractedRequestSlots shorter{.token_slots = req.token_slots.slice(0, 36 * kPageSize),
                                      .mamba_state_slot = req.mamba_state_slot};
  msg = assert_message([&] { load_cpu_copy(m.backend, copy, shorter, m.pools()); });
  EXPECT_NE(msg.find("pool kv, layer 0, chunk 18"), std::string::npos) << msg;

  CpuCopy other_chunking = copy;
  other_chunking.chunk_tokens = 16;
  msg = assert_message([&] { load_cpu_copy(m.backend, other_chunking, req, m.pools()); });
  EXPECT_NE(msg.find("pool kv, layer 0, chunk 0"), std::string::npos) << msg;

  EXPECT_EQ(m.verify(2, req), "");  // every refusal left the pools as they were
  load_cpu_copy(m.backend, copy, req, m.pools());
  EXPECT_EQ(m.verify(1, req), "");
}

// Goal: the inputs' contracts are enforced: Mamba slot iff Mamba pool, allocated state slot,
// whole pages with a sparse buffer, device-tier host-resident in-range token slots.
TEST(CpuCopy, SlotContractAsserts) {
  ScopedThrowingAsserts asserts;
  Model m;
  const RetractedRequestSlots req = m.alloc(2);
  const RetractedRequestSlots no_state{.token_slots = req.token_slots};
  EXPECT_THROW(get_cpu_copy(m.backend, no_state, m.pools()), AssertionFailure);
  EXPECT_THROW(get_cpu_copy(m.backend, req, CpuCopyPools{.kv = m.kv, .sparse_index = &m.sparse}),
               AssertionFailure);
  const RetractedRequestSlots freed_state{.token_slots = req.token_slots,
                                          .mamba_state_slot = SlotIndex{4}};
  EXPECT_THROW(get_cpu_copy(m.backend, freed_state, m.pools()), AssertionFailure);
  const RetractedRequestSlots partial{.token_slots = req.token_slots.slice(0, 6),
                                      .mamba_state_slot = req.mamba_state_slot};
  EXPECT_THROW(get_cpu_copy(m.backend, partial, m.pools()), AssertionFailure);
  const RetractedRequestSlots host{.token_slots = IndexVector(Tier::kHost, req.token_slots.slots()),
                                   .mamba_state_slot = req.mamba_state_slot};
  EXPECT_THROW(get_cpu_copy(m.backend, host, m.pools()), AssertionFailure);
  const RetractedRequestSlots outside{.token_slots = IndexVector(Tier::kDevice, {1000, 1001}),
                                      .mamba_state_slot = std::nullopt};
  EXPECT_THROW(get_cpu_copy(m.backend, outside, CpuCopyPools{.kv = m.kv}), AssertionFailure);
  EXPECT_THROW(get_cpu_copy(m.backend, req, m.pools(), 0), AssertionFailure);
  SparseIndexBuffer small(m.backend, 3, kLayers, kIndexBytes, kPageSize);
  EXPECT_THROW(get_cpu_copy(m.backend, no_state, CpuCopyPools{.kv = m.kv, .sparse_index = &small}),
               AssertionFailure);  // does not cover the KV pool's slots
}

}  // namespace
}  // namespace kvsim
