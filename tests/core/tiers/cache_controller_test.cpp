// CacheController: copies go on their own streams, acks pop in FIFO order only once complete,
// queued loads merge into one layer-by-layer copy, and move_indices never mutates its inputs.
#include "core/tiers/cache_controller.h"

#include <gtest/gtest.h>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

namespace kvsim {
namespace {

class CacheControllerTest : public ::testing::Test {
 protected:
  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  PagedSlotAllocator device_slots_{Tier::kDevice, 32, 4};
  PagedSlotAllocator host_slots_{Tier::kHost, 32, 4};
  DeviceKVPool device_{backend_, 36, 2, 8};
  HostKVPool host_{backend_, 36, 2, 8, KVLayout::kPageFirst};
  CacheController controller_{backend_, device_,     device_slots_,
                              host_,    host_slots_, {.page_size = 4}};
};

TEST_F(CacheControllerTest, WriteAcksPopInOrderOnlyWhenComplete) {
  IndexVector a = *device_slots_.alloc(4);
  IndexVector b = *device_slots_.alloc(4);
  std::vector<std::byte> item(8, std::byte{0x42});
  device_.write_item_async(backend_.compute_stream(), 1, b[2], item);
  std::optional<IndexVector> ha = controller_.write(a, 1);
  std::optional<IndexVector> hb = controller_.write(b, 2);
  ASSERT_TRUE(ha && hb);
  EXPECT_TRUE(controller_.poll_write_acks().empty());
  EXPECT_EQ(controller_.pending_writes(), 2u);
  // The write stream waits for compute (the forward that produced the KV).
  EXPECT_FALSE(backend_.runnable(controller_.write_stream()));
  backend_.drain();
  std::vector<TransferAck> acks = controller_.poll_write_acks();
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_EQ(acks[0].node_ids, std::vector<NodeId>{1});
  EXPECT_EQ(acks[1].node_ids, std::vector<NodeId>{2});
  EXPECT_EQ(host_.read_item_sync(1, (*hb)[2]), item);
  EXPECT_TRUE(backend_.violations().empty());
}

TEST_F(CacheControllerTest, QueuedLoadsMergeIntoOneCopyWithOneEventPerLayer) {
  IndexVector h1 = *host_slots_.alloc(4);
  IndexVector h2 = *host_slots_.alloc(8);
  ASSERT_TRUE(controller_.load(h1, 1));
  ASSERT_TRUE(controller_.load(h2, 2));
  EXPECT_EQ(controller_.queued_loads(), 2u);
  EXPECT_EQ(controller_.start_loading(), 0);
  EXPECT_EQ(controller_.start_loading(), -1);  // nothing left queued
  backend_.drain();
  std::vector<TransferAck> acks = controller_.poll_load_acks();
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].node_ids, (std::vector<NodeId>{1, 2}));
  EXPECT_EQ(acks[0].tokens, 12);
}

TEST_F(CacheControllerTest, FullPoolsReturnNothingAndLaunchNothing) {
  IndexVector h = *host_slots_.alloc(32);
  EXPECT_FALSE(controller_.write(*device_slots_.alloc(4), 1));
  EXPECT_EQ(backend_.pending_ops(controller_.write_stream()), 0u);
  device_slots_.alloc(28);
  EXPECT_FALSE(controller_.load(h, 1));
}

TEST_F(CacheControllerTest, MoveIndicesReturnsNewDeviceResidentObjects) {
  IndexVector h = *host_slots_.alloc(4);
  IndexVector d = *device_slots_.alloc(4);
  ResolvedIndices r = controller_.move_indices(h, d);
  EXPECT_EQ(r.src.residency(), Residency::kDevice);
  EXPECT_EQ(r.dst.residency(), Residency::kDevice);
  EXPECT_EQ(h.residency(), Residency::kHost);
  EXPECT_EQ(r.src.slots(), h.slots());
  controller_.release_after(r, controller_.load_stream());
  EXPECT_THROW(controller_.move_indices(h, d.slice(0, 2)), AssertionFailure);
}

}  // namespace
}  // namespace kvsim
