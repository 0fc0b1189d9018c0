// Invariant load.layer_events: every started load records one event per layer, in layer
// order, so a forward waiting for layer i alone finds every pool's layer i landed.
#include <gtest/gtest.h>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"
#include "core/tiers/cache_controller.h"

namespace kvsim {
namespace {

size_t count_kind(const CpuBackend& b, const std::string& kind) {
  size_t n = 0;
  for (const BackendViolation& v : b.violations())
    n += v.kind == kind ? 1 : 0;
  return n;
}

TEST(LayerEvents, AMissingOrOutOfOrderLayerEventIsReported) {
  CpuBackend backend;
  LayerDoneCounter counter(3);
  const int p = counter.update_producer(backend);
  const StreamId s = backend.create_stream("load");
  EXPECT_EQ(counter.check(p), "layer 0 has no event: a forward would not wait for it");
  const EventId e1 = backend.record_event(s);
  const EventId e2 = backend.record_event(s);
  const EventId e3 = backend.record_event(s);
  // A planted load that records layers 1 and 2 only (layer 0 would be read unwaited).
  counter.set_layer_event(p, 1, e2);
  counter.set_layer_event(p, 2, e3);
  EXPECT_EQ(counter.check(p), "layer 0 has no event: a forward would not wait for it");
  // Layer 0's event recorded after layer 1's: waiting for layer 0 misses layer 0's copies.
  counter.set_layer_event(p, 0, e3);
  EXPECT_EQ(counter.check(p), "layer 1's event precedes layer 0's");
  counter.set_layer_event(p, 0, e1);
  EXPECT_EQ(counter.check(p), "");
  EXPECT_EQ(counter.check(LayerDoneCounter::kSlots), "producer index out of range");
}

class LayerEventsControllerTest : public ::testing::Test {
 protected:
  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  PagedSlotAllocator device_slots_{Tier::kDevice, 32, 4};
  PagedSlotAllocator host_slots_{Tier::kHost, 32, 4};
  DeviceKVPool device_{backend_, 36, 3, 8};
  HostKVPool host_{backend_, 36, 3, 8, KVLayout::kPageFirst};
  DeviceKVPool side_device_{backend_, 9, 3, 8};
  HostKVPool side_host_{backend_, 9, 3, 8, KVLayout::kLayerFirst};
  CacheController controller_{backend_, device_,     device_slots_,
                              host_,    host_slots_, {.page_size = 4}};
};

TEST_F(LayerEventsControllerTest, MainAndAuxOnlyLoadsRecordEveryLayer) {
  controller_.add_side_pool(PoolName::kMamba, side_device_, side_host_);
  ASSERT_TRUE(controller_.load(*host_slots_.alloc(8), 1));
  const int main_load = controller_.start_loading();  // asserts load.layer_events itself
  EXPECT_EQ(controller_.layer_done_counter().check(main_load), "");
  // An aux-only load (a Mamba state under a device-resident prefix): no KV, events still.
  PoolTransfer state{.pool = PoolName::kMamba,
                     .host_indices = IndexVector(Tier::kHost, {1}),
                     .device_indices = IndexVector(Tier::kDevice, {2}),
                     .nodes = {2}};
  ASSERT_TRUE(controller_.load(IndexVector(Tier::kHost, {}), 2, {state}));
  const int aux_load = controller_.start_loading();
  EXPECT_EQ(controller_.layer_done_counter().check(aux_load), "");
  EXPECT_EQ(controller_.live_index_buffers(), 0);
  backend_.drain();
  EXPECT_EQ(controller_.poll_load_acks().size(), 2u);
  EXPECT_TRUE(backend_.violations().empty());
}

// The class of mutant 777 (issue 11): a side-pool load (a Mamba state) the forward does not
// wait for. The state bytes may even be unchanged (reloaded into the slot they left), so only
// the ordering shows it.
TEST(OrderingSidePool, ReadingALoadedStateWithoutWaitingForItsLayerIsReported) {
  for (const bool wait : {true, false}) {
    ScopedThrowingAsserts asserts;
    CpuBackend backend;
    PagedSlotAllocator device_slots{Tier::kDevice, 32, 4};
    PagedSlotAllocator host_slots{Tier::kHost, 32, 4};
    DeviceKVPool device{backend, 36, 2, 8};
    HostKVPool host{backend, 36, 2, 8, KVLayout::kPageFirst};
    DeviceKVPool state_device{backend, 9, 2, 8};
    HostKVPool state_host{backend, 9, 2, 8, KVLayout::kLayerFirst};
    CacheController controller{backend, device, device_slots, host, host_slots, {.page_size = 4}};
    controller.add_side_pool(PoolName::kMamba, state_device, state_host);
    PoolTransfer state{.pool = PoolName::kMamba,
                       .host_indices = IndexVector(Tier::kHost, {3}),
                       .device_indices = IndexVector(Tier::kDevice, {5}),
                       .nodes = {1}};
    ASSERT_TRUE(controller.load(IndexVector(Tier::kHost, {}), 1, {state}));
    const int producer = controller.start_loading();
    LayerDoneCounter& counter = controller.layer_done_counter();
    counter.set_consumer(producer);
    Block out = backend.allocate(MemoryKind::kPinnedHost, 8, 0, "out");
    const KVPoolView& v = state_device.view();
    for (int32_t layer = 0; layer < v.layer_count; ++layer) {
      if (wait) counter.wait_until(backend, backend.compute_stream(), layer);
      backend.copy_async(backend.compute_stream(), out, 0, v.block, v.offset(layer, 5), 8,
                         "forward reads the state");
    }
    backend.drain();
    EXPECT_EQ(count_kind(backend, "unordered_read"), wait ? 0u : 2u) << "wait=" << wait;
    backend.free(out);
  }
}

// A later reader of a node whose load another request started (the Mamba copy-on-write of a
// request that matched the node on device) waits for that load through wait_for_loads_of; a
// read of a node whose load is still queued is refused. Found by the property
// HiCacheStateful.HybridSelectiveWithStorage: an unordered read on the compute stream.
TEST_F(LayerEventsControllerTest, AReadOfANodeWaitsForItsLoadWhoeverStartedIt) {
  controller_.add_side_pool(PoolName::kMamba, side_device_, side_host_);
  for (const bool wait : {true, false}) {
    PoolTransfer state{.pool = PoolName::kMamba,
                       .host_indices = IndexVector(Tier::kHost, {3}),
                       .device_indices = IndexVector(Tier::kDevice, {5}),
                       .nodes = {7}};
    ASSERT_TRUE(controller_.load(IndexVector(Tier::kHost, {}), 7, {state}));
    EXPECT_THROW(controller_.wait_for_loads_of(7, backend_.compute_stream()), AssertionFailure);
    controller_.start_loading();
    controller_.wait_for_loads_of(8, backend_.compute_stream());  // another node: no wait
    if (wait) controller_.wait_for_loads_of(7, backend_.compute_stream());
    const KVPoolView& v = side_device_.view();
    Block out = backend_.allocate(MemoryKind::kPinnedHost, 8, 0, "out");
    backend_.copy_async(backend_.compute_stream(), out, 0, v.block, v.offset(0, 5), 8,
                        "copy-on-write reads the state");
    backend_.drain();
    EXPECT_EQ(count_kind(backend_, "unordered_read"), wait ? 0u : 1u) << "wait=" << wait;
    controller_.poll_load_acks();
    backend_.free(out);
  }
}

}  // namespace
}  // namespace kvsim
