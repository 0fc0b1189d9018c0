// PagedSlotAllocator and KV pools.
#include "core/pools/paged_allocator.h"

#include <gtest/gtest.h>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"

namespace kvsim {
namespace {

TEST(PagedSlotAllocator, AllocatesWholePagesAndNeverSlotZero) {
  PagedSlotAllocator a(Tier::kDevice, 16, 4);
  EXPECT_EQ(a.capacity(), 16);
  std::optional<IndexVector> v = a.alloc(8);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->slots(), (std::vector<SlotIndex>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(a.available_size(), 8);
  EXPECT_TRUE(a.is_allocated(5));
  EXPECT_FALSE(a.is_allocated(0));
  EXPECT_FALSE(a.alloc(12));  // only 8 left
  EXPECT_EQ(a.check(), "");
}

TEST(PagedSlotAllocator, FreedPagesAreReusedFirst) {
  PagedSlotAllocator a(Tier::kHost, 16, 4);
  IndexVector first = *a.alloc(4);
  a.alloc(4);
  a.free(first);
  EXPECT_EQ(a.alloc(4)->slots(), first.slots());
  EXPECT_EQ(a.check(), "");
}

TEST(PagedSlotAllocator, ProgrammerErrorsAreCaught) {
  ScopedThrowingAsserts asserts;
  PagedSlotAllocator a(Tier::kDevice, 16, 4);
  IndexVector v = *a.alloc(4);
  EXPECT_THROW(a.alloc(3), AssertionFailure);  // not a page multiple
  a.free(v);
  EXPECT_THROW(a.free(v), AssertionFailure);  // double free
  IndexVector w = *a.alloc(4);
  EXPECT_THROW(a.free(IndexVector(Tier::kHost, w.slots())), AssertionFailure);  // foreign tier
  EXPECT_THROW(a.free(w.slice(0, 2)), AssertionFailure);                        // partial page
  EXPECT_THROW(a.free(IndexVector(Tier::kDevice, {100, 101, 102, 103})), AssertionFailure);
  try {
    a.free(IndexVector::on_device(Tier::kDevice, w.slots(), Block{.id = 1, .bytes = 32}));
    ADD_FAILURE() << "device-resident free accepted";
  } catch (const AssertionFailure& e) {
    EXPECT_NE(std::string(e.what()).find("residency"), std::string::npos);
  }
  a.free(w);
  EXPECT_EQ(a.available_size(), 16);
  EXPECT_EQ(a.check(), "");
}

TEST(KVPool, LayoutsAddressItemsAndTransfersPreserveBytes) {
  CpuBackend b;
  DeviceKVPool dev(b, 8, 3, 16);
  HostKVPool host(b, 8, 3, 16, KVLayout::kPageFirst);
  EXPECT_EQ(host.view().offset(1, 2), (2u * 3 + 1) * 16);
  EXPECT_EQ(dev.view().offset(1, 2), (1u * 8 + 2) * 16);
  std::vector<std::byte> item(16, std::byte{0x5A});
  dev.write_item_async(0, 2, 3, item);
  std::vector<int64_t> si{3}, di{6};
  Block sb = b.allocate(MemoryKind::kDevice, 8, 0, "si");
  Block db = b.allocate(MemoryKind::kDevice, 8, 0, "di");
  b.upload_async(0, sb, 0, std::as_bytes(std::span<const int64_t>(si)), "si");
  b.upload_async(0, db, 0, std::as_bytes(std::span<const int64_t>(di)), "di");
  b.transfer_kv_async(0, KVTransfer{.src = dev.view(),
                                    .dst = host.view(),
                                    .src_indices = sb,
                                    .dst_indices = db,
                                    .count = 1,
                                    .layer_begin = 0,
                                    .layer_end = 3,
                                    .label = "d2h"});
  EXPECT_EQ(host.read_item_sync(2, 6), item);
  EXPECT_EQ(host.read_item_sync(1, 6), std::vector<std::byte>(16, std::byte{0}));
  EXPECT_TRUE(b.violations().empty());
}

}  // namespace
}  // namespace kvsim
