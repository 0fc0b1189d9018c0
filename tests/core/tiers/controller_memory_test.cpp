// Invariant backend.memory_owned (CacheController::memory_problem): the backend's memory is
// conserved — its counters add up, every pool block is live, and the transfer index buffers it
// still holds are exactly the ones the controller counts as live. Each planted leak below is
// a state a real bug leaves (release_after dropping a free, a buffer freed behind the
// controller's back, a stray allocation, a pool block freed under its owner); the clean runs,
// deferred frees included, report nothing.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"
#include "core/tiers/cache_controller.h"

namespace kvsim {
namespace {

class ControllerMemoryTest : public ::testing::Test {
 protected:
  ControllerMemoryTest() { controller_.add_side_pool(PoolName::kSwa, swa_device_, swa_host_); }

  // What release_after did with mutant 993: counts both buffers as given back, frees only the
  // source. A decoy stands in for the destination so that the count drops by two while the
  // real destination buffer stays live in the backend.
  void release_without_freeing_dst(const ResolvedIndices& r) {
    const Block decoy = backend_.allocate(MemoryKind::kDevice, r.dst.size() * sizeof(SlotIndex),
                                          backend_.compute_stream(), "decoy");
    const ResolvedIndices fake{r.src, IndexVector::on_device(r.dst.tier(), r.dst.slots(), decoy)};
    controller_.release_after(fake, controller_.load_stream());
  }

  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  PagedSlotAllocator device_slots_{Tier::kDevice, 32, 4};
  PagedSlotAllocator host_slots_{Tier::kHost, 32, 4};
  DeviceKVPool device_{backend_, 36, 2, 8};
  HostKVPool host_{backend_, 36, 2, 8, KVLayout::kPageFirst};
  DeviceKVPool swa_device_{backend_, 20, 2, 8};
  HostKVPool swa_host_{backend_, 20, 2, 8, KVLayout::kLayerFirst};
  CacheController controller_{backend_, device_,     device_slots_,
                              host_,    host_slots_, {.page_size = 4}};
};

TEST_F(ControllerMemoryTest, CleanTransfersReportNothingEvenWhileTheirFreesAreDeferred) {
  EXPECT_EQ(controller_.memory_problem(), "");
  EXPECT_EQ(controller_.memory_problem({}), "");  // complete: nothing but the pools
  IndexVector d = *device_slots_.alloc(8);
  IndexVector swa_h = *host_slots_.alloc(4);  // host slots of the same shape for the SWA copy
  std::optional<IndexVector> h = controller_.write(
      d, 1,
      {PoolTransfer{
          .pool = PoolName::kSwa, .host_indices = swa_h, .device_indices = d.slice(0, 4)}});
  ASSERT_TRUE(h);
  // The copy has not run: its four index buffers (main and SWA) were freed behind a
  // record_stream and wait for the write stream. Not live, so not owed; the backend counts
  // them as pending.
  EXPECT_EQ(backend_.memory_census().problem, "");
  EXPECT_EQ(backend_.memory_census().device_pending_blocks, 4u);
  EXPECT_EQ(controller_.live_index_buffers(), 0);
  EXPECT_EQ(controller_.memory_problem(), "");
  EXPECT_EQ(controller_.memory_problem({}), "");
  backend_.drain();
  EXPECT_EQ(controller_.poll_write_acks().size(), 1u);
  ASSERT_TRUE(controller_.load(*h, 2));
  controller_.start_loading();  // its allocations return the passed frees to the pool
  EXPECT_EQ(backend_.memory_census().device_pending_blocks, 2u);
  EXPECT_EQ(controller_.memory_problem({}), "");
  backend_.drain();
  EXPECT_EQ(controller_.poll_load_acks().size(), 1u);
  EXPECT_EQ(controller_.memory_problem({}), "");
  EXPECT_TRUE(backend_.violations().empty());
}

TEST_F(ControllerMemoryTest, IndexBuffersInUseAreCountedOnBothSides) {
  IndexVector h = *host_slots_.alloc(4);
  IndexVector d = *device_slots_.alloc(4);
  ResolvedIndices r = controller_.move_indices(h, d);
  EXPECT_EQ(controller_.live_index_buffers(), 2);
  EXPECT_EQ(controller_.memory_problem({}), "");  // held and counted: conserved
  controller_.release_after(r, controller_.load_stream());
  EXPECT_EQ(controller_.memory_problem({}), "");
}

TEST_F(ControllerMemoryTest, AReleaseThatNeverFreesTheDestinationBufferIsALeak) {
  IndexVector h = *host_slots_.alloc(4);
  IndexVector d = *device_slots_.alloc(4);
  ResolvedIndices r = controller_.move_indices(h, d);
  release_without_freeing_dst(r);
  EXPECT_EQ(controller_.live_index_buffers(), 0);  // the old check is satisfied
  const std::string problem = controller_.memory_problem();
  EXPECT_NE(problem.find("1 live transfer index buffer(s) (0 src, 1 dst)"), std::string::npos)
      << problem;
  EXPECT_NE(problem.find("never freed (leak)"), std::string::npos) << problem;
  backend_.free(r.dst.device_block());
  EXPECT_EQ(controller_.memory_problem(), "");
}

TEST_F(ControllerMemoryTest, AnIndexBufferFreedBehindTheControllerIsReported) {
  IndexVector h = *host_slots_.alloc(4);
  IndexVector d = *device_slots_.alloc(4);
  ResolvedIndices r = controller_.move_indices(h, d);
  backend_.free(r.src.device_block());  // one of the two, freed by someone else
  const std::string problem = controller_.memory_problem();
  EXPECT_NE(problem.find("(0 src, 1 dst); the controller counts 2"), std::string::npos) << problem;
}

TEST_F(ControllerMemoryTest, AStrayBlockIsOwnedByNoOneOnceTheAccountIsComplete) {
  const Block stray =
      backend_.allocate(MemoryKind::kDevice, 100, backend_.compute_stream(), "stray");
  // The first form leaves blocks it cannot recognise to the caller.
  EXPECT_EQ(controller_.memory_problem(), "");
  const std::string problem = controller_.memory_problem({});
  EXPECT_NE(problem.find("'stray' (100 bytes of device memory) is owned by no one"),
            std::string::npos)
      << problem;
  const std::array<Block, 1> outside{stray};
  EXPECT_EQ(controller_.memory_problem(outside), "");
  backend_.free(stray);
  // An outside owner whose block is gone: freed under it.
  const std::string gone = controller_.memory_problem(outside);
  EXPECT_NE(gone.find("an outside owner's block"), std::string::npos) << gone;
  EXPECT_NE(gone.find("is not live"), std::string::npos) << gone;
}

TEST_F(ControllerMemoryTest, APinnedStrayIsReportedToo) {
  const Block stray =
      backend_.allocate(MemoryKind::kPinnedHost, 8, backend_.compute_stream(), "host stray");
  const std::string problem = controller_.memory_problem({});
  EXPECT_NE(problem.find("'host stray' (8 bytes of host memory)"), std::string::npos) << problem;
  backend_.free(stray);
  EXPECT_EQ(controller_.memory_problem({}), "");
}

TEST_F(ControllerMemoryTest, TwoOwnersNamingOneBlockAreReported) {
  const std::array<Block, 1> outside{device_.block()};
  const std::string problem = controller_.memory_problem(outside);
  EXPECT_NE(problem.find("named by both the device KV pool and an outside owner"),
            std::string::npos)
      << problem;
}

TEST_F(ControllerMemoryTest, ASidePoolIsNamedOnceRegistered) {
  DeviceKVPool mamba_device{backend_, 4, 1, 16};
  HostKVPool mamba_host{backend_, 8, 1, 16, KVLayout::kLayerFirst};
  const std::string problem = controller_.memory_problem({});
  EXPECT_NE(problem.find("is owned by no one"), std::string::npos) << problem;
  controller_.add_side_pool(PoolName::kMamba, mamba_device, mamba_host);
  EXPECT_EQ(controller_.memory_problem({}), "");
}

}  // namespace
}  // namespace kvsim
