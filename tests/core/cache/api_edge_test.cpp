// Caller mistakes at the API edge are error values or documented no-ops, never aborts:
// pool sizes that are not page multiples are rounded down (as SGLang's allocator does), a pool
// below one page is an std::invalid_argument, zero-size allocations return an empty vector.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/pools/paged_allocator.h"
#include "tests/support/cache_fixture.h"

namespace kvsim::testing {
namespace {

HiCacheOptions small_options() {
  HiCacheOptions o = CacheFixture::default_options();
  o.hierarchical = false;
  return o;
}

TEST(ApiEdge, PoolSizesAreRoundedDownToWholePages) {
  ScopedThrowingAsserts asserts;
  CpuBackend backend;
  HiCacheOptions o = small_options();
  o.page_size = 16;
  o.device_tokens = 1000;  // 62.5 pages
  o.host_tokens = 2047;
  HiCache cache(backend, o);
  EXPECT_EQ(cache.options().device_tokens, 992);
  EXPECT_EQ(cache.options().host_tokens, 2032);
  EXPECT_EQ(cache.device_slots().capacity(), 992);
  EXPECT_EQ(cache.available_device_size(), 992);
  SanityReport report;
  cache.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

TEST(ApiEdge, PoolBelowOnePageIsAnError) {
  ScopedThrowingAsserts asserts;
  CpuBackend backend;
  HiCacheOptions o = small_options();
  o.page_size = 16;
  o.device_tokens = 15;
  try {
    HiCache cache(backend, o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("device_tokens = 15 holds no whole page"),
              std::string::npos)
        << e.what();
  }
  o.device_tokens = 64;
  o.page_size = 0;
  EXPECT_THROW(HiCache(backend, o), std::invalid_argument);
}

class ApiEdgeCache : public CacheFixture {};

TEST_F(ApiEdgeCache, ZeroSizeAllocationIsANoOp) {
  const int64_t free_before = cache_->available_device_size();
  std::optional<IndexVector> v = cache_->alloc_device(0);
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(v->empty());
  cache_->free_device(*v);  // freeing it back is a no-op too
  EXPECT_EQ(cache_->available_device_size(), free_before);
  EXPECT_EQ(cache_->request_held_tokens(), 0);
  expect_sane();
}

TEST_F(ApiEdgeCache, BadAllocationSizesAreErrorValues) {
  const int64_t page = cache_->options().page_size;
  ASSERT_GT(page, 1) << "the fixture needs pages of more than one token";
  // Fill the tree a little so that an eviction would show.
  run_request(0, tokens_from(1, static_cast<size_t>(4 * page)));
  cache_->flush();  // write-through acks: the nodes become evictable
  const int64_t evictable = cache_->tree().evictable_size();
  ASSERT_GT(evictable, 0);
  EXPECT_FALSE(cache_->alloc_device(-page).has_value());
  EXPECT_FALSE(cache_->alloc_device(page + 1).has_value());
  EXPECT_EQ(cache_->tree().evictable_size(), evictable) << "a refused alloc evicted";
  EXPECT_EQ(cache_->request_held_tokens(), 0);
  expect_sane();
}

TEST(ApiEdge, AllocatorRoundsDownAndAcceptsEmptyRequests) {
  ScopedThrowingAsserts asserts;
  PagedSlotAllocator a(Tier::kDevice, 10, 4);  // 2 whole pages
  EXPECT_EQ(a.page_count(), 2);
  EXPECT_EQ(a.check(), "");
  std::optional<IndexVector> none = a.alloc(0);
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
  a.free(*none);
  EXPECT_EQ(a.available_size(), 8);
  PagedSlotAllocator tiny(Tier::kHost, 3, 4);  // no whole page
  EXPECT_EQ(tiny.page_count(), 0);
  EXPECT_FALSE(tiny.alloc(4).has_value());
  EXPECT_EQ(tiny.check(), "");
  // Programmer errors inside the core stay assertions.
  EXPECT_THROW(a.alloc(3), AssertionFailure);
  EXPECT_THROW(a.alloc(-4), AssertionFailure);
}

}  // namespace
}  // namespace kvsim::testing
