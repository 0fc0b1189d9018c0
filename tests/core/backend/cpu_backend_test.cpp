// CpuBackend: stream order, events, caching-allocator reuse rules and violation reports.
#include "core/backend/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/common/assert.h"

namespace kvsim {
namespace {

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values)
    out.push_back(static_cast<std::byte>(v));
  return out;
}

Block upload_indices(CpuBackend& b, StreamId s, const std::vector<int64_t>& idx,
                     const char* label) {
  Block block = b.allocate(MemoryKind::kDevice, idx.size() * 8, s, label);
  b.upload_async(s, block, 0, std::as_bytes(std::span<const int64_t>(idx)), label);
  return block;
}

TEST(CpuBackend, OpsRunOnlyWhenTheirStreamIsStepped) {
  CpuBackend b;
  Block blk = b.allocate(MemoryKind::kDevice, 4, 0, "x");
  const StreamId other = b.create_stream("other");
  b.upload_async(other, blk, 0, bytes_of({1, 2, 3, 4}), "up");
  EXPECT_EQ(b.pending_ops(other), 1u);
  EXPECT_EQ(std::to_integer<int>(blk.ptr[0]), 0);  // nothing ran yet
  EXPECT_TRUE(b.step(other));
  EXPECT_EQ(std::to_integer<int>(blk.ptr[0]), 1);
  EXPECT_FALSE(b.step(other));
}

TEST(CpuBackend, StreamIsFifoAndStreamsAreIndependent) {
  CpuBackend b;
  Block blk = b.allocate(MemoryKind::kDevice, 1, 0, "x");
  const StreamId s1 = b.create_stream("s1");
  b.upload_async(s1, blk, 0, bytes_of({1}), "first");
  b.upload_async(s1, blk, 0, bytes_of({2}), "second");
  b.upload_async(0, blk, 0, bytes_of({9}), "compute");
  EXPECT_EQ(b.head_label(s1), "first");
  b.step(s1);
  b.step(0);  // the compute write lands between the two s1 writes
  EXPECT_EQ(std::to_integer<int>(blk.ptr[0]), 9);
  b.step(s1);
  EXPECT_EQ(std::to_integer<int>(blk.ptr[0]), 2);
}

TEST(CpuBackend, EventsAndWaitsOrderStreams) {
  CpuBackend b;
  const StreamId load = b.create_stream("load");
  Block blk = b.allocate(MemoryKind::kDevice, 1, 0, "x");
  b.upload_async(0, blk, 0, bytes_of({5}), "produce");
  const EventId e = b.record_event(0);
  EXPECT_FALSE(b.query_event(e));
  b.wait_event(load, e);
  b.upload_async(load, blk, 0, bytes_of({7}), "consume");
  EXPECT_FALSE(b.runnable(load));  // blocked on e
  EXPECT_FALSE(b.step(load));
  b.step(0);
  EXPECT_TRUE(b.query_event(e));
  EXPECT_TRUE(b.step(load));  // the wait
  EXPECT_TRUE(b.step(load));
  EXPECT_EQ(std::to_integer<int>(blk.ptr[0]), 7);
}

TEST(CpuBackend, CachedBlockIsReusedOnlyOnItsOwnStream) {
  CpuBackend b;
  const StreamId other = b.create_stream("other");
  Block a = b.allocate(MemoryKind::kDevice, 100, 0, "a");
  std::byte* ptr = a.ptr;
  b.free(a);
  Block c = b.allocate(MemoryKind::kDevice, 100, other, "c");
  EXPECT_NE(c.ptr, ptr);  // another stream's pool
  Block d = b.allocate(MemoryKind::kDevice, 100, 0, "d");
  EXPECT_EQ(d.ptr, ptr);  // same stream: reused
  EXPECT_NE(d.id, a.id);  // as a new handout
  b.drain();
  EXPECT_EQ(std::to_integer<int>(d.ptr[0]), 0xDB);  // poisoned in stream order
}

TEST(CpuBackend, RecordStreamDefersReuseUntilTheStreamPassesTheFreePoint) {
  CpuBackend b;
  const StreamId load = b.create_stream("load");
  Block a = b.allocate(MemoryKind::kDevice, 64, 0, "a");
  b.upload_async(load, a, 0, bytes_of({1}), "use on load");
  b.record_stream(a, load);
  b.free(a);
  Block other = b.allocate(MemoryKind::kDevice, 8, load, "other");
  b.upload_async(load, other, 0, bytes_of({2}), "later work");  // enqueued after the free
  Block c = b.allocate(MemoryKind::kDevice, 64, 0, "c");
  EXPECT_NE(c.ptr, a.ptr);  // still in use by load
  b.step(load);             // passes the free point; later work still pending
  Block d = b.allocate(MemoryKind::kDevice, 64, 0, "d");
  EXPECT_EQ(d.ptr, a.ptr);
  EXPECT_TRUE(b.violations().empty());
}

TEST(CpuBackend, RecordingTheAllocationStreamIsIgnored) {
  CpuBackend b;
  Block a = b.allocate(MemoryKind::kDevice, 64, 0, "a");
  b.upload_async(0, a, 0, bytes_of({1}), "pending");
  b.record_stream(a, 0);
  b.free(a);
  Block c = b.allocate(MemoryKind::kDevice, 64, 0, "c");
  EXPECT_EQ(c.ptr, a.ptr);  // same-stream order makes immediate reuse safe
}

class KvTransferTest : public ::testing::TestWithParam<KVLayout> {};

TEST_P(KvTransferTest, Seed000IndexBufferFreedWithoutRecordStreamIsCaught) {
  // Seed 000: an index buffer read by a copy on the load stream is dropped without
  // record_stream; the allocator hands it out again and the copy reads someone else's data.
  for (bool recorded : {false, true}) {
    CpuBackend b;
    const StreamId load = b.create_stream("load");
    KVPoolView src{.layout = GetParam(), .slot_count = 8, .layer_count = 2, .item_bytes = 8};
    KVPoolView dst{
        .layout = KVLayout::kLayerFirst, .slot_count = 8, .layer_count = 2, .item_bytes = 8};
    src.block = b.allocate(MemoryKind::kPinnedHost, src.total_bytes(), 0, "host pool");
    dst.block = b.allocate(MemoryKind::kDevice, dst.total_bytes(), 0, "device pool");
    for (int l = 0; l < 2; ++l) {
      for (int s = 0; s < 8; ++s)
        src.block.ptr[src.offset(l, s)] = static_cast<std::byte>(10 * l + s);
    }
    Block si = upload_indices(b, 0, {3, 4}, "src idx");
    Block di = upload_indices(b, 0, {5, 6}, "dst idx");
    b.wait_event(load, b.record_event(0));
    b.transfer_kv_async(load, KVTransfer{.src = src,
                                         .dst = dst,
                                         .src_indices = si,
                                         .dst_indices = di,
                                         .count = 2,
                                         .layer_begin = 0,
                                         .layer_end = 2,
                                         .label = "load op 1"});
    if (recorded) {
      b.record_stream(si, load);
      b.record_stream(di, load);
    }
    b.free(si);
    b.free(di);
    Block thief = upload_indices(b, 0, {0, 0}, "next batch idx");
    b.drain();
    if (recorded) {
      EXPECT_TRUE(b.violations().empty());
      EXPECT_NE(thief.ptr, si.ptr);
      EXPECT_EQ(std::to_integer<int>(dst.block.ptr[dst.offset(1, 5)]), 13);
      EXPECT_EQ(std::to_integer<int>(dst.block.ptr[dst.offset(0, 6)]), 4);
    } else {
      ASSERT_EQ(b.violations().size(), 1u);
      EXPECT_EQ(b.violations()[0].kind, "reuse_while_in_flight");
      EXPECT_NE(b.violations()[0].detail.find("load op 1"), std::string::npos);
      EXPECT_NE(b.violations()[0].detail.find("next batch idx"), std::string::npos);
      EXPECT_EQ(std::to_integer<int>(dst.block.ptr[dst.offset(1, 5)]), 0);  // untouched
      EXPECT_EQ(thief.ptr, si.ptr);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, KvTransferTest,
                         ::testing::Values(KVLayout::kLayerFirst, KVLayout::kPageFirst));

TEST(CpuBackend, OutOfRangeIndexIsAnIllegalAddressNotACrash) {
  CpuBackend b;
  KVPoolView pool{
      .layout = KVLayout::kLayerFirst, .slot_count = 4, .layer_count = 1, .item_bytes = 8};
  pool.block = b.allocate(MemoryKind::kDevice, pool.total_bytes(), 0, "pool");
  Block si = upload_indices(b, 0, {1}, "si");
  Block di = upload_indices(b, 0, {999}, "di");
  b.transfer_kv_async(0, KVTransfer{.src = pool,
                                    .dst = pool,
                                    .src_indices = si,
                                    .dst_indices = di,
                                    .count = 1,
                                    .layer_begin = 0,
                                    .layer_end = 1,
                                    .label = "bad"});
  b.drain();
  ASSERT_EQ(b.violations().size(), 1u);
  EXPECT_EQ(b.violations()[0].kind, "illegal_address");
}

TEST(CpuBackend, EnqueueOnFreedBlockIsUseAfterFree) {
  CpuBackend b;
  Block a = b.allocate(MemoryKind::kPinnedHost, 8, 0, "a");
  b.free(a);
  b.upload_async(0, a, 0, bytes_of({1}), "late");
  EXPECT_EQ(b.violations().at(0).kind, "use_after_free");
  b.drain();  // the op is skipped, no crash
}

TEST(CpuBackend, CapacityExhaustionReturnsANullBlock) {
  CpuBackend b(CpuBackendOptions{.device_bytes_max = 1024});
  EXPECT_FALSE(b.allocate(MemoryKind::kDevice, 4096, 0, "too big").valid());
  EXPECT_TRUE(b.allocate(MemoryKind::kDevice, 512, 0, "fits").valid());
}

TEST(CpuBackend, SynchronizeRunsDependentStreams) {
  CpuBackend b;
  const StreamId s = b.create_stream("s");
  Block blk = b.allocate(MemoryKind::kDevice, 1, 0, "x");
  b.upload_async(0, blk, 0, bytes_of({3}), "produce");
  b.wait_event(s, b.record_event(0));
  b.upload_async(s, blk, 0, bytes_of({4}), "consume");
  b.synchronize_stream(s);
  EXPECT_EQ(b.pending_ops(), 0u);
  EXPECT_EQ(b.read_sync(blk, 0, 1)[0], std::byte{4});
}

}  // namespace
}  // namespace kvsim
