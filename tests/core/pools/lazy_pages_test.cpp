// KV pools cost the memory of the slots they use: the backend's blocks come from calloc, so a
// pool sized for the worst case is zero pages until written. Reuse still poisons.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include "core/backend/cpu_backend.h"
#include "core/pools/host_kv_pool.h"

namespace kvsim {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define KVSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVSIM_ASAN 1
#endif
#endif

// Resident set size of this process, in bytes (Linux /proc/self/statm).
size_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t total = 0, resident = 0;
  in >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(LazyPages, UntouchedPoolCostsNothingAndReadsZero) {
#ifdef KVSIM_ASAN
  GTEST_SKIP() << "ASan's allocator and shadow memory change resident size";
#else
  CpuBackend backend;
  const size_t before = resident_bytes();
  // 2^20 slots x 4 layers x 256 bytes = 1 GiB of KV bytes.
  HostKVPool pool(backend, int64_t{1} << 20, 4, 256, KVLayout::kLayerFirst);
  const size_t after_create = resident_bytes();
  EXPECT_LT(after_create - before, size_t{64} << 20)
      << "a 1 GiB pool made " << (after_create - before) << " bytes resident";
  // Written slots cost their pages, and only those.
  std::vector<std::byte> item(256, std::byte{7});
  for (SlotIndex s = 0; s < 1024; ++s)
    pool.write_item(0, s, item);
  EXPECT_EQ(pool.read_item(0, 5), item);
  EXPECT_EQ(pool.read_item(3, (1 << 20) - 1), std::vector<std::byte>(256, std::byte{0}));
  EXPECT_LT(resident_bytes() - before, size_t{64} << 20);
#endif
}

TEST(LazyPages, ReusedBlockIsStillPoisoned) {
  CpuBackend backend;
  Block a = backend.allocate(MemoryKind::kDevice, size_t{1} << 20, 0, "a");
  EXPECT_EQ(std::to_integer<int>(a.ptr[12345]), 0);  // a fresh block is zeros
  a.ptr[12345] = std::byte{1};
  backend.free(a);
  Block b = backend.allocate(MemoryKind::kDevice, size_t{1} << 20, 0, "b");
  ASSERT_EQ(b.ptr, a.ptr);  // the cached block came back
  EXPECT_EQ(std::to_integer<int>(b.ptr[12345]), 0xDB);
  EXPECT_EQ(std::to_integer<int>(b.ptr[0]), 0xDB);
  backend.free(b);
}

}  // namespace
}  // namespace kvsim
