// MambaStatePool / HostMambaStatePool: recurrent-state slots and their copy-on-write.
#include "core/pools/mamba_state_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

namespace kvsim {
namespace {

std::vector<std::byte> state_bytes(int32_t layer, SlotIndex slot, uint8_t tag, size_t bytes) {
  std::vector<std::byte> out(bytes);
  for (size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<std::byte>((tag * 97 + layer * 29 + slot * 11 + i) & 0xFF);
  return out;
}

// Goal: slots are handed out one at a time from 1 (0 is reserved), reused LIFO, exhausted cleanly.
TEST(MambaStatePool, AllocFreeOneSlotAtATime) {
  CpuBackend b;
  MambaStatePool pool(b, 3, 2, 32);
  EXPECT_EQ(pool.capacity(), 3);
  EXPECT_EQ(pool.pool().slot_count(), 4);
  EXPECT_EQ(pool.allocator().page_size(), 1);
  EXPECT_EQ(pool.allocator().tier(), Tier::kDevice);
  EXPECT_EQ(pool.alloc(), 1);
  EXPECT_EQ(pool.alloc(), 2);
  EXPECT_EQ(pool.alloc(), 3);
  EXPECT_EQ(pool.alloc(), std::nullopt);
  EXPECT_EQ(pool.available_size(), 0);
  pool.free(2);
  EXPECT_FALSE(pool.is_allocated(2));
  EXPECT_EQ(pool.available_size(), 1);
  EXPECT_EQ(pool.alloc(), 2);
  EXPECT_EQ(pool.check(), "");
}

// Goal: copy-on-write copies every layer into the target, and the source is only read — a
// request extending the copied state must never change the state the tree still shares.
TEST(MambaStatePool, CopyOnWriteCopiesAllLayersAndLeavesSourceUnchanged) {
  CpuBackend b;
  MambaStatePool pool(b, 4, 3, 24);
  const SlotIndex src = *pool.alloc();
  const SlotIndex dst = *pool.alloc();
  const SlotIndex other = *pool.alloc();
  for (int32_t l = 0; l < 3; ++l) {
    pool.write_state_async(0, l, src, state_bytes(l, src, 1, 24));
    pool.write_state_async(0, l, dst, state_bytes(l, dst, 2, 24));
    pool.write_state_async(0, l, other, state_bytes(l, other, 3, 24));
  }
  const StreamId side = b.create_stream("cow");
  b.synchronize();
  pool.copy_state_async(side, src, dst);
  EXPECT_EQ(b.pending_ops(side), 3u);  // one copy per layer, not yet run
  for (int32_t l = 0; l < 3; ++l)
    EXPECT_EQ(pool.read_state_sync(l, dst), state_bytes(l, src, 1, 24)) << "layer " << l;
  for (int32_t l = 0; l < 3; ++l)  // the request extends its own copy
    pool.write_state_async(0, l, dst, state_bytes(l, dst, 4, 24));
  for (int32_t l = 0; l < 3; ++l) {
    EXPECT_EQ(pool.read_state_sync(l, src), state_bytes(l, src, 1, 24)) << "layer " << l;
    EXPECT_EQ(pool.read_state_sync(l, dst), state_bytes(l, dst, 4, 24)) << "layer " << l;
    EXPECT_EQ(pool.read_state_sync(l, other), state_bytes(l, other, 3, 24)) << "layer " << l;
  }
  EXPECT_TRUE(b.violations().empty());
}

// Goal: misuse is refused before anything is enqueued or freed.
TEST(MambaStatePool, ProgrammerErrorsAreCaught) {
  ScopedThrowingAsserts asserts;
  CpuBackend b;
  MambaStatePool pool(b, 3, 2, 16);
  const SlotIndex a = *pool.alloc();
  const SlotIndex c = *pool.alloc();
  EXPECT_THROW(pool.copy_state_async(0, a, a), AssertionFailure);
  EXPECT_THROW(pool.copy_state_async(0, a, 3), AssertionFailure);  // target not allocated
  EXPECT_THROW(pool.copy_state_async(0, 3, a), AssertionFailure);  // source not allocated
  EXPECT_THROW(pool.copy_state_async(0, a, 0), AssertionFailure);  // reserved slot
  EXPECT_EQ(b.pending_ops(), 0u);
  EXPECT_THROW(pool.free(0), AssertionFailure);
  EXPECT_THROW(pool.free(3), AssertionFailure);
  EXPECT_THROW(pool.free(4), AssertionFailure);
  pool.free(c);
  EXPECT_THROW(pool.free(c), AssertionFailure);  // double free
  EXPECT_THROW(pool.write_state_async(0, 2, a, std::vector<std::byte>(16)), AssertionFailure);
  EXPECT_THROW(pool.write_state_async(0, 0, a, std::vector<std::byte>(8)), AssertionFailure);
  EXPECT_THROW(MambaStatePool(b, 0, 2, 16), AssertionFailure);
  EXPECT_THROW(MambaStatePool(b, 2, 2, 12), AssertionFailure);
  EXPECT_EQ(pool.available_size(), 2);
  EXPECT_EQ(pool.check(), "");
}

// Goal: the host pool does the same over pinned memory in either layout, and its copy is
// stream-ordered like the device one (direct reads before the stream runs see the old state).
TEST(HostMambaStatePool, CopyOnWriteInBothLayouts) {
  for (KVLayout layout : {KVLayout::kLayerFirst, KVLayout::kPageFirst}) {
    CpuBackend b;
    HostMambaStatePool pool(b, 3, 4, 16, layout);
    EXPECT_EQ(pool.allocator().tier(), Tier::kHost);
    EXPECT_EQ(pool.pool().layout(), layout);
    const SlotIndex src = *pool.alloc();
    const SlotIndex dst = *pool.alloc();
    for (int32_t l = 0; l < 4; ++l) {
      pool.write_state(l, src, state_bytes(l, src, 1, 16));
      pool.write_state(l, dst, state_bytes(l, dst, 2, 16));
    }
    pool.copy_state_async(0, src, dst);
    EXPECT_EQ(pool.read_state(0, dst), state_bytes(0, dst, 2, 16));  // not run yet
    b.synchronize();
    for (int32_t l = 0; l < 4; ++l) {
      EXPECT_EQ(pool.read_state(l, dst), state_bytes(l, src, 1, 16)) << to_string(layout);
      EXPECT_EQ(pool.read_state(l, src), state_bytes(l, src, 1, 16)) << to_string(layout);
    }
    pool.free(src);
    EXPECT_EQ(pool.alloc(), src);
    EXPECT_EQ(pool.check(), "");
    EXPECT_TRUE(b.violations().empty());
  }
}

}  // namespace
}  // namespace kvsim
