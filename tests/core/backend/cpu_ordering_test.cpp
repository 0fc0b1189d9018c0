// CpuBackend's happens-before check (unordered_read): a read of bytes whose last writer is
// on another stream must be ordered after it by an event wait or an observed completion,
// whatever order the driver runs the streams in.
#include <gtest/gtest.h>

#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

namespace kvsim {
namespace {

size_t count_kind(const CpuBackend& b, const std::string& kind) {
  size_t n = 0;
  for (const BackendViolation& v : b.violations())
    n += v.kind == kind ? 1 : 0;
  return n;
}

class OrderingTest : public ::testing::Test {
 protected:
  // A copy on `side` writes 64 bytes of `pool`; returns the event recorded after it.
  EventId side_write() {
    std::vector<std::byte> bytes(64, std::byte{7});
    backend_.upload_async(side_, staging_, 0, bytes, "stage");
    backend_.copy_async(side_, pool_, 128, staging_, 0, 64, "side write");
    return backend_.record_event(side_);
  }
  void compute_read(size_t offset) {
    backend_.copy_async(backend_.compute_stream(), out_, 0, pool_, offset, 32, "compute read");
  }

  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  StreamId side_ = backend_.create_stream("load");
  Block pool_ = backend_.allocate(MemoryKind::kDevice, 1024, 0, "pool");
  Block staging_ = backend_.allocate(MemoryKind::kDevice, 64, side_, "staging");
  Block out_ = backend_.allocate(MemoryKind::kPinnedHost, 64, 0, "out");
};

TEST_F(OrderingTest, AReadNotOrderedAfterItsWriterIsReportedWhateverRunsFirst) {
  side_write();
  backend_.synchronize_stream(side_);  // the write has landed, but the host did not wait on it
  ASSERT_EQ(count_kind(backend_, "unordered_read"), 0u);
  // synchronize_stream made the host wait: reads after it are ordered. A fresh write is not.
  side_write();
  while (backend_.step(side_)) {
  }  // it even ran first: still a race on a real GPU
  compute_read(144);
  EXPECT_EQ(count_kind(backend_, "unordered_read"), 1u);
  EXPECT_NE(backend_.violations().back().detail.find("'compute read'"), std::string::npos);
  compute_read(512);  // bytes nobody wrote on another stream
  EXPECT_EQ(count_kind(backend_, "unordered_read"), 1u);
  backend_.drain();
}

TEST_F(OrderingTest, AWaitOrAnObservedCompletionOrdersTheRead) {
  backend_.wait_event(backend_.compute_stream(), side_write());
  compute_read(128);
  const EventId e = side_write();
  backend_.drain();
  EXPECT_TRUE(backend_.query_event(e));  // the host observed it
  compute_read(160);
  backend_.drain();
  EXPECT_EQ(count_kind(backend_, "unordered_read"), 0u);
}

}  // namespace
}  // namespace kvsim
