// HiCache storage tier: backup of written-through pages, prefetch into the host pool, the
// seed-004 shrink-to-fit rule, namespace isolation and aborts.
#include "core/cache/hi_cache.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"
#include "tests/support/cache_fixture.h"

namespace kvsim {
namespace {

using testing::CacheFixture;
using testing::tokens_from;

HiCacheOptions storage_options(int64_t host_tokens = 128) {
  HiCacheOptions o = CacheFixture::default_options();
  o.host_tokens = host_tokens;
  o.prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete;
  o.prefetch_capacity_fraction = 1.0;
  return o;
}

// Fills `storage` with the pages of `tokens` by running them through a separate cache.
void populate(MemoryStorage& storage, Namespace ns, const std::vector<Token>& tokens) {
  struct Writer : CacheFixture {
    explicit Writer(StorageBackend* s) : CacheFixture(storage_options(), s) {}
    void TestBody() override {}
  } writer(&storage);
  writer.run_request(ns, tokens);
  writer.cache_->flush();
  while (writer.cache_->storage_backup_step()) {
  }
  writer.cache_->check_hicache_events();
  writer.expect_sane();
}

// Constructed before CacheFixture, so the cache can point at it (base-from-member).
struct StorageHolder {
  MemoryStorage storage_;
};

class StorageCacheTest : public StorageHolder, public CacheFixture {
 protected:
  explicit StorageCacheTest(int64_t host_tokens = 128)
      : CacheFixture(storage_options(host_tokens), &storage_) {}
  // Runs the prefetch of `tokens` to its end; returns tokens inserted as host-only nodes.
  int64_t prefetch(RequestId rid, Namespace ns, const std::vector<Token>& tokens) {
    MatchResult m = cache_->match_prefix(ns, tokens);
    if (!cache_->prefetch_from_storage(rid, ns, *m.last_host_node, tokens, 0)) return -1;
    while (cache_->storage_query_step()) {
    }
    cache_->check_hicache_events();  // allocates host memory for the hit
    while (cache_->storage_io_step()) {
    }
    EXPECT_TRUE(cache_->check_prefetch_progress(rid, 0));
    return cache_->pop_prefetch_loaded_tokens(rid);
  }
};

TEST_F(StorageCacheTest, BackupThenPrefetchIntoAFreshCacheRestoresTheBytes) {
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 3, t);
  EXPECT_EQ(storage_.page_count(), 8u);
  EXPECT_EQ(prefetch(1, 3, t), 32);
  MatchResult m = cache_->match_prefix(3, t);
  EXPECT_EQ(m.host_hit_length, 32);
  LoadBackResult r = cache_->init_load_back(*m.best_match_node);
  cache_->ready_to_load_host_cache();
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(3, t, r.device_indices));
}

TEST_F(StorageCacheTest, StoragePagesAreIsolatedByNamespace) {
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 1, t);
  EXPECT_EQ(prefetch(1, 2, t), 0);  // same tokens, other tenant: no hit
  EXPECT_EQ(cache_->stats().prefetch_revoked, 1);
}

TEST_F(StorageCacheTest, BelowThresholdOrRateLimitedPrefetchesAreNotStarted) {
  std::vector<Token> t = tokens_from(1, 4);  // below the 8-token threshold
  EXPECT_FALSE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  EXPECT_TRUE(cache_->prefetch_from_storage(2, 0, *cache_->tree().root(), tokens_from(1, 128), 0));
  EXPECT_FALSE(
      cache_->prefetch_from_storage(3, 0, *cache_->tree().root(), tokens_from(500, 64), 0));
  cache_->release_aborted_request(2);
  EXPECT_EQ(cache_->prefetch_tokens_occupied(), 0);
}

class SmallHostTest : public StorageCacheTest {
 protected:
  SmallHostTest() : StorageCacheTest(32) {}
};

TEST_F(SmallHostTest, Seed004PrefetchShrinksToFreeHostMemoryInsteadOfGivingUp) {
  std::vector<Token> t = tokens_from(1, 64);
  populate(storage_, 0, t);  // 16 pages in storage, the host pool holds 8
  // Occupy 16 of the 32 host slots with a protected host copy.
  std::vector<Token> other = tokens_from(900, 16);
  run_request(0, other);
  cache_->flush();
  EXPECT_EQ(cache_->host_slots().available_size(), 16);
  EXPECT_EQ(prefetch(1, 0, t), 16);  // shrunk to the 16 free tokens, page-aligned
  EXPECT_EQ(cache_->stats().prefetch_shrunk, 1);
  EXPECT_EQ(cache_->match_prefix(0, t).host_hit_length, 16);
}

TEST_F(SmallHostTest, PrefetchIsRevokedOnlyWhenLessThanTheThresholdFits) {
  std::vector<Token> t = tokens_from(1, 64);
  populate(storage_, 0, t);
  std::vector<Token> other = tokens_from(900, 28);
  run_request(0, other);  // 28 of 32 host slots (a locked device copy keeps them)
  MatchResult m = cache_->match_prefix(0, other);
  LockRecord keep = cache_->lock(*m.last_device_node);
  cache_->flush();
  EXPECT_EQ(prefetch(1, 0, t), 0);  // 4 free < threshold 8
  EXPECT_EQ(cache_->stats().prefetch_revoked, 1);
  cache_->unlock(keep);
}

TEST_F(StorageCacheTest, AbortMidTransferReleasesEverything) {
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 0, t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  cache_->storage_query_step();
  cache_->check_hicache_events();
  EXPECT_EQ(cache_->host_slots().available_size(), 128 - 32);
  EXPECT_FALSE(cache_->check_prefetch_progress(1, 0));  // wait_complete: not yet
  cache_->release_aborted_request(1);
  EXPECT_EQ(cache_->host_slots().available_size(), 128);
  EXPECT_EQ(cache_->prefetch_tokens_occupied(), 0);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

class TimeoutPolicyTest : public StorageHolder, public CacheFixture {
 protected:
  TimeoutPolicyTest() : CacheFixture(options(), &storage_) {}
  static HiCacheOptions options() {
    HiCacheOptions o = storage_options();
    o.prefetch_stop_policy = PrefetchStopPolicy::kTimeout;
    o.prefetch_timeout_base_ticks = 100;
    o.prefetch_timeout_per_ki_token_ticks = 0;
    return o;
  }
};

TEST_F(TimeoutPolicyTest, PartialPrefetchIsUsedAfterTheTimeout) {
  std::vector<Token> t = tokens_from(1, 64);
  populate(storage_, 0, t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 1000));
  cache_->storage_query_step();
  cache_->check_hicache_events();
  EXPECT_FALSE(cache_->check_prefetch_progress(1, 1050));  // in time, not complete
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 1101));   // timed out with nothing read
  EXPECT_EQ(cache_->pop_prefetch_loaded_tokens(1), 0);
  EXPECT_EQ(cache_->host_slots().available_size(), 128);
}

TEST_F(TimeoutPolicyTest, ACorruptPageEndsThePrefetchAndKeepsTheGoodPrefix) {
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 0, t);
  // Replace page 4's payload with a different length: the read fails at that page.
  std::vector<PageDigest> keys = hash_pages(namespace_seed(0), t, 4);
  storage_.remove(keys[4]);
  storage_.set(keys[4], std::vector<std::byte>(3));
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  cache_->storage_query_step();
  cache_->check_hicache_events();
  while (cache_->storage_io_step()) {
  }
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 0));  // terminated counts as complete
  EXPECT_EQ(cache_->pop_prefetch_loaded_tokens(1), 16);
}

}  // namespace
}  // namespace kvsim
