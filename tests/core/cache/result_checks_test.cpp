// The result checks of HiCache's public calls (evict.result, backup.result, load_back.result,
// prefetch.start_result, storage.step_result): each public call asserts that what it returns
// agrees with state recomputed apart from it. Each test runs the clean path (the call's own
// assertion stays quiet) and hands the check a planted wrong result, which it must name.
#include <gtest/gtest.h>

#include "core/tiers/memory_storage.h"
#include "tests/support/cache_fixture.h"

namespace kvsim::testing {
namespace {

struct HiCacheResultChecks : CacheFixture {
  HiCacheResultChecks() : CacheFixture(default_options(), &store_) {}
  MemoryStorage store_;
  static HiCacheOptions write_back() {
    HiCacheOptions o = default_options();
    o.write_policy = WritePolicy::kWriteBack;
    return o;
  }
};

TEST_F(HiCacheResultChecks, EvictReturnsWhatThePoolsGained) {
  run_request(1, tokens_from(10, 16));
  run_request(1, tokens_from(50, 16));
  cache_->flush();
  const int64_t device_before = cache_->available_device_size();
  const int64_t freed = cache_->evict(4);  // asserts evict.result inside
  EXPECT_GT(freed, 0);
  EXPECT_EQ(cache_->available_device_size() - device_before, freed);
  const int64_t host_before = cache_->host_slots().available_size();
  const int64_t host_freed = cache_->evict_host(1000);
  EXPECT_EQ(cache_->host_slots().available_size() - host_before, host_freed);
  expect_sane();
}

TEST(HiCacheResultCheckPlants, BackupResultNamesAWrongCount) {
  HiCacheOptions o = HiCacheResultChecks::write_back();
  CpuBackend backend;
  HiCache cache(backend, o);
  const std::vector<Token> t = tokens_from(10, 8);
  std::optional<IndexVector> slots = cache.alloc_device(8);
  ASSERT_TRUE(slots);
  InsertResult ins = cache.insert(0, t, *slots);
  TreeNode& node = *ins.last_node;
  const int64_t before = cache.stats().write_through_tokens;
  ASSERT_FALSE(node.backed_up());
  const int64_t written = cache.write_backup(node);
  EXPECT_EQ(written, 8);
  EXPECT_EQ(cache.check_backup_result(node, written, before), "");
  EXPECT_NE(cache.check_backup_result(node, written + 1, before), "");
  EXPECT_NE(cache.check_backup_result(node, 0, before), "");
  EXPECT_NE(cache.check_backup_result(node, written, before + 1), "");
  cache.flush();
}

TEST_F(HiCacheResultChecks, LoadBackResultNamesAWrongReport) {
  const std::vector<Token> t = tokens_from(10, 16);
  run_request(1, t);
  cache_->flush();
  cache_->evict(1000);
  TreeNode& match = *cache_->match_prefix(1, t).best_match_node;
  ASSERT_TRUE(match.evicted());
  const int64_t counted_before = cache_->stats().load_back_tokens;
  LoadBackResult lb = cache_->init_load_back(match);  // asserts load_back.result inside
  ASSERT_TRUE(lb.loaded);
  EXPECT_EQ(cache_->check_load_back_result(match, lb, counted_before, false), "");
  LoadBackResult wrong = lb;
  wrong.loaded = false;  // a load that reports none
  EXPECT_NE(cache_->check_load_back_result(match, wrong, counted_before, false), "");
  wrong = lb;
  wrong.last_node = match.parent;
  EXPECT_NE(cache_->check_load_back_result(match, wrong, counted_before, false), "");
  EXPECT_NE(cache_->check_load_back_result(match, lb, counted_before + 4, false), "");
  cache_->wait_for_load(cache_->ready_to_load_host_cache());
  cache_->flush();
  // Nothing to load: the report falls back to the match itself, now on device.
  LoadBackResult none = cache_->init_load_back(match);
  EXPECT_FALSE(none.loaded);
  EXPECT_EQ(none.last_node, &match);
  none.last_node = nullptr;
  EXPECT_NE(cache_->check_load_back_result(match, none, cache_->stats().load_back_tokens, false),
            "");
}

TEST_F(HiCacheResultChecks, PrefetchStartAndStepsNameAWrongAnswer) {
  const std::vector<Token> t = tokens_from(10, 16);
  TreeNode& root = *cache_->match_prefix(1, t).last_host_node;
  const HiCache::StorageStepBefore before = cache_->check_prefetch_start_before(1, root);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 1, root, t, 5));  // asserts its result inside
  EXPECT_EQ(cache_->check_prefetch_start(1, 1, root, t, 5, before, true), "");
  EXPECT_NE(cache_->check_prefetch_start(1, 1, root, t, 5, before, false), "");
  EXPECT_NE(cache_->check_prefetch_start(1, 1, root, t, 6, before, true), "");  // start tick
  // A second start of the same request is refused, and a "yes" would be named.
  const HiCache::StorageStepBefore again = cache_->check_prefetch_start_before(1, root);
  EXPECT_FALSE(cache_->prefetch_from_storage(1, 1, root, t, 5));
  EXPECT_NE(cache_->check_prefetch_start(1, 1, root, t, 5, again, true), "");

  const HiCache::StorageStepBefore query = cache_->check_query_step_before();
  EXPECT_EQ(query.prefetches, 1u);
  EXPECT_TRUE(cache_->storage_query_step());  // nothing stored: the prefetch is revoked
  EXPECT_EQ(cache_->check_query_step(query, true), "");
  EXPECT_NE(cache_->check_query_step(query, false), "");
  EXPECT_FALSE(cache_->storage_query_step());
  EXPECT_NE(cache_->check_query_step(cache_->check_query_step_before(), true), "");
  EXPECT_NE(cache_->check_io_step(cache_->check_io_step_before(), true), "");
  EXPECT_NE(cache_->check_backup_step(cache_->check_backup_step_before(), true), "");
  EXPECT_FALSE(cache_->storage_io_step());
  EXPECT_FALSE(cache_->storage_backup_step());
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 6));
  expect_sane();
}

}  // namespace
}  // namespace kvsim::testing
