// SparseIndexBuffer: page-addressed device side buffer of sparse attention (DSA/NSA indexer).
#include "core/pools/sparse_index_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

namespace kvsim {
namespace {

// Distinct, deterministic bytes for (layer, page, tag).
std::vector<std::byte> page_bytes(int32_t layer, int64_t page, uint8_t tag, size_t bytes) {
  std::vector<std::byte> out(bytes);
  for (size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<std::byte>((tag * 131 + layer * 31 + page * 7 + i) & 0xFF);
  return out;
}

// Goal: every (layer, page) is its own item; writes land where reads find them and nowhere else.
TEST(SparseIndexBuffer, PagesRoundTripPerLayer) {
  CpuBackend b;
  SparseIndexBuffer buf(b, 6, 3, 24, 4);
  EXPECT_EQ(buf.page_count(), 6);
  EXPECT_EQ(buf.layer_count(), 3);
  EXPECT_EQ(buf.bytes_per_page(), 24u);
  EXPECT_EQ(buf.slot_count(), 24);
  EXPECT_EQ(buf.view().slot_count, 6);
  EXPECT_EQ(buf.view().layout, KVLayout::kLayerFirst);
  EXPECT_EQ(buf.block().kind, MemoryKind::kDevice);
  for (int32_t l = 0; l < 3; ++l) {
    for (int64_t p = 0; p < 6; ++p)
      buf.write_page_async(b.compute_stream(), l, p, page_bytes(l, p, 1, 24));
  }
  EXPECT_GT(b.pending_ops(), 0u);  // nothing ran yet: the CPU backend runs ops only when driven
  for (int32_t l = 0; l < 3; ++l) {
    for (int64_t p = 0; p < 6; ++p)
      EXPECT_EQ(buf.read_page_sync(l, p), page_bytes(l, p, 1, 24)) << l << "/" << p;
  }
  buf.write_page_async(b.compute_stream(), 1, 4, page_bytes(9, 9, 9, 24));
  EXPECT_EQ(buf.read_page_sync(1, 4), page_bytes(9, 9, 9, 24));
  EXPECT_EQ(buf.read_page_sync(0, 4), page_bytes(0, 4, 1, 24));
  EXPECT_EQ(buf.read_page_sync(2, 4), page_bytes(2, 4, 1, 24));
  EXPECT_EQ(buf.read_page_sync(1, 3), page_bytes(1, 3, 1, 24));
  EXPECT_TRUE(b.violations().empty());
}

// Goal: view() is a KVPoolView the backend's gather/scatter moves by page, in any layer range.
TEST(SparseIndexBuffer, ViewLetsTransferKvMovePages) {
  CpuBackend b;
  SparseIndexBuffer src(b, 5, 2, 16, 2);
  SparseIndexBuffer dst(b, 5, 2, 16, 2);
  for (int32_t l = 0; l < 2; ++l) {
    for (int64_t p = 0; p < 5; ++p) {
      src.write_page_async(0, l, p, page_bytes(l, p, 1, 16));
      dst.write_page_async(0, l, p, page_bytes(l, p, 2, 16));
    }
  }
  std::vector<int64_t> si{1, 2}, di{4, 3};
  Block sb = b.allocate(MemoryKind::kDevice, 16, 0, "si");
  Block db = b.allocate(MemoryKind::kDevice, 16, 0, "di");
  b.upload_async(0, sb, 0, std::as_bytes(std::span<const int64_t>(si)), "si");
  b.upload_async(0, db, 0, std::as_bytes(std::span<const int64_t>(di)), "di");
  b.transfer_kv_async(0, KVTransfer{.src = src.view(),
                                    .dst = dst.view(),
                                    .src_indices = sb,
                                    .dst_indices = db,
                                    .count = 2,
                                    .layer_begin = 1,
                                    .layer_end = 2,
                                    .label = "pages"});
  EXPECT_EQ(dst.read_page_sync(1, 4), page_bytes(1, 1, 1, 16));
  EXPECT_EQ(dst.read_page_sync(1, 3), page_bytes(1, 2, 1, 16));
  EXPECT_EQ(dst.read_page_sync(0, 4), page_bytes(0, 4, 2, 16));  // layer 0 not in the range
  EXPECT_EQ(dst.read_page_sync(1, 1), page_bytes(1, 1, 2, 16));
  b.free(sb);
  b.free(db);
  EXPECT_TRUE(b.violations().empty());
}

// Goal: token slots map to the page of every page_size-th slot, in request order.
TEST(SparseIndexBuffer, PagesOfMapsWholePagesInOrder) {
  CpuBackend b;
  SparseIndexBuffer buf(b, 5, 1, 8, 4);
  EXPECT_EQ(buf.pages_of(IndexVector(Tier::kDevice, {12, 13, 14, 15, 4, 5, 6, 7})),
            (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(buf.pages_of(IndexVector(Tier::kDevice, {})), std::vector<int64_t>{});
  SparseIndexBuffer unit(b, 5, 1, 8, 1);
  EXPECT_EQ(unit.pages_of(IndexVector(Tier::kDevice, {4, 2, 3})), (std::vector<int64_t>{4, 2, 3}));
}

// Goal: anything but whole, aligned, in-range, host-resident device pages is refused.
TEST(SparseIndexBuffer, PagesOfRejectsPartialMisalignedForeignAndOutOfRange) {
  ScopedThrowingAsserts asserts;
  CpuBackend b;
  SparseIndexBuffer buf(b, 5, 1, 8, 4);
  EXPECT_THROW(buf.pages_of(IndexVector(Tier::kDevice, {4, 5, 6})), AssertionFailure);
  EXPECT_THROW(buf.pages_of(IndexVector(Tier::kDevice, {5, 6, 7, 8})), AssertionFailure);
  EXPECT_THROW(buf.pages_of(IndexVector(Tier::kDevice, {4, 5, 7, 6})), AssertionFailure);
  EXPECT_THROW(buf.pages_of(IndexVector(Tier::kDevice, {20, 21, 22, 23})), AssertionFailure);
  EXPECT_THROW(buf.pages_of(IndexVector(Tier::kHost, {4, 5, 6, 7})), AssertionFailure);
  Block idx = b.allocate(MemoryKind::kDevice, 32, 0, "idx");
  try {
    buf.pages_of(IndexVector::on_device(Tier::kDevice, {4, 5, 6, 7}, idx));
    ADD_FAILURE() << "device-resident indices accepted";
  } catch (const AssertionFailure& e) {
    EXPECT_NE(std::string(e.what()).find("residency"), std::string::npos);
  }
  b.free(idx);
}

// Goal: bounds and shape errors are programmer errors, caught before any byte moves.
TEST(SparseIndexBuffer, BoundsAndShapeAsserts) {
  ScopedThrowingAsserts asserts;
  CpuBackend b;
  SparseIndexBuffer buf(b, 4, 2, 16, 2);
  const std::vector<std::byte> ok(16, std::byte{1});
  EXPECT_THROW(buf.write_page_async(0, 2, 1, ok), AssertionFailure);
  EXPECT_THROW(buf.write_page_async(0, -1, 1, ok), AssertionFailure);
  EXPECT_THROW(buf.write_page_async(0, 0, 4, ok), AssertionFailure);
  EXPECT_THROW(buf.write_page_async(0, 0, -1, ok), AssertionFailure);
  EXPECT_THROW(buf.write_page_async(0, 0, 1, std::vector<std::byte>(8)), AssertionFailure);
  EXPECT_THROW(buf.read_page_sync(0, 4), AssertionFailure);
  EXPECT_THROW(buf.read_page_sync(2, 0), AssertionFailure);
  EXPECT_EQ(b.pending_ops(), 0u);  // nothing was enqueued by the refused writes
  EXPECT_THROW(SparseIndexBuffer(b, 4, 2, 12, 2), AssertionFailure);  // not a multiple of 8
  EXPECT_THROW(SparseIndexBuffer(b, 4, 2, 16, 0), AssertionFailure);
  EXPECT_THROW(SparseIndexBuffer(b, 0, 2, 16, 2), AssertionFailure);
  EXPECT_TRUE(b.violations().empty());
}

}  // namespace
}  // namespace kvsim
