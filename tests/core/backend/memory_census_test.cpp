// Backend::memory_census: every live handout with its label, and the bytes and blocks in each
// state (live, pending behind record_stream, cached), adding up to the backend's own counters.
// Run on the CPU backend and, where it is built and a GPU is present, the CUDA one: both must
// account the same calls the same way (backend.h MemoryCensus).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

#if KVSIM_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#endif

namespace kvsim {
namespace {

std::unique_ptr<Backend> make_census_backend(const std::string& name, std::string* why) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
#if KVSIM_HAVE_CUDA
  return make_cuda_backend({}, why);
#else
  *why = "the CUDA backend is not built";
  return nullptr;
#endif
}

class MemoryCensusTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = make_census_backend(GetParam(), &why);
    if (!backend_) GTEST_SKIP() << why;
  }
  ScopedThrowingAsserts asserts_;
  std::unique_ptr<Backend> backend_;
};

std::vector<std::string> census_labels(const MemoryCensus& c) {
  std::vector<std::string> out;
  for (const LiveBlock& b : c.live)
    out.push_back(b.label);
  return out;
}

TEST_P(MemoryCensusTest, AFreshBackendHoldsNothing) {
  const MemoryCensus c = backend_->memory_census();
  EXPECT_EQ(c.problem, "");
  EXPECT_TRUE(c.live.empty());
  EXPECT_EQ(c.device_reserved_bytes, 0u);
  EXPECT_EQ(c.host_in_use_bytes, 0u);
}

TEST_P(MemoryCensusTest, LiveHandoutsAreListedWithTheirLabelsAndSizes) {
  Backend& b = *backend_;
  const Block pool = b.allocate(MemoryKind::kDevice, 4096, b.compute_stream(), "device kv pool");
  const Block idx = b.allocate(MemoryKind::kDevice, 24, b.compute_stream(), "src indices");
  const Block pinned = b.allocate(MemoryKind::kPinnedHost, 100, b.compute_stream(), "scratch");
  const MemoryCensus c = b.memory_census();
  EXPECT_EQ(c.problem, "");
  ASSERT_EQ(c.live.size(), 3u);
  EXPECT_EQ(census_labels(c),
            (std::vector<std::string>{"device kv pool", "src indices", "scratch"}));
  EXPECT_EQ(c.live[1].block.id, idx.id);
  EXPECT_EQ(c.live[1].block.ptr, idx.ptr);
  EXPECT_EQ(c.live[1].block.bytes, 24u);
  EXPECT_EQ(c.live[2].block.kind, MemoryKind::kPinnedHost);
  EXPECT_EQ(c.device_live_blocks, 2u);
  EXPECT_EQ(c.device_live_bytes, 4096u + 512u);  // rounded up to 512
  EXPECT_EQ(c.device_reserved_bytes, c.device_live_bytes);
  EXPECT_EQ(c.host_live_blocks, 1u);
  EXPECT_EQ(c.host_in_use_bytes, c.host_live_bytes);
  b.free(pinned);
  b.free(idx);
  b.free(pool);
  b.synchronize();
}

TEST_P(MemoryCensusTest, ADeferredFreeIsPendingUntilItsStreamPassesThenCached) {
  Backend& b = *backend_;
  const StreamId copy = b.create_stream("copy");
  const Block a = b.allocate(MemoryKind::kDevice, 64, b.compute_stream(), "src indices");
  const Block plain = b.allocate(MemoryKind::kDevice, 64, b.compute_stream(), "plain");
  b.record_stream(a, copy);  // a copy on `copy` still reads it
  b.free(a);
  b.free(plain);  // no other stream: cached at once
  MemoryCensus c = b.memory_census();
  EXPECT_EQ(c.problem, "");
  EXPECT_TRUE(c.live.empty());
  EXPECT_EQ(c.device_pending_blocks, 1u);
  EXPECT_EQ(c.device_pending_bytes, 512u);
  EXPECT_EQ(c.device_cached_blocks, 1u);
  EXPECT_EQ(c.device_reserved_bytes, 1024u);
  // The stream passes; the next allocation (of another size, so it takes neither) returns the
  // pending block to its pool.
  b.synchronize();
  const Block big = b.allocate(MemoryKind::kDevice, 4096, b.compute_stream(), "big");
  c = b.memory_census();
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.device_pending_blocks, 0u);
  EXPECT_EQ(c.device_cached_blocks, 2u);
  EXPECT_EQ(c.device_live_blocks, 1u);
  EXPECT_EQ(c.device_reserved_bytes, 1024u + 4096u);
  b.free(big);
}

TEST_P(MemoryCensusTest, AReleasedPinnedBlockLeavesTheAccount) {
  Backend& b = *backend_;
  const Block h = b.allocate(MemoryKind::kPinnedHost, 10, b.compute_stream(), "h");
  b.free(h);
  b.synchronize();
  const Block d = b.allocate(MemoryKind::kDevice, 8, b.compute_stream(), "d");  // frees processed
  const MemoryCensus c = b.memory_census();
  EXPECT_EQ(c.problem, "");
  EXPECT_EQ(c.host_in_use_bytes, 0u);
  EXPECT_EQ(c.host_live_blocks + c.host_pending_blocks, 0u);
  ASSERT_EQ(c.live.size(), 1u);
  EXPECT_EQ(c.live[0].block.id, d.id);
  b.free(d);
}

std::vector<std::string> census_backends() {
  std::vector<std::string> names{"cpu"};
#if KVSIM_HAVE_CUDA
  names.push_back("cuda");
#endif
  return names;
}

INSTANTIATE_TEST_SUITE_P(Backends, MemoryCensusTest, ::testing::ValuesIn(census_backends()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace kvsim
