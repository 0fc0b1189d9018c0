// HiCache storage tier: backup of written-through pages, prefetch into the host pool, the
// seed-004 shrink-to-fit rule, namespace isolation and aborts.
#include "core/cache/hi_cache.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/storage_fixture.h"

namespace kvsim {
namespace {

using testing::CacheFixture;
using testing::MemoryStorageHolder;
using testing::populate_storage;
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
  populate_storage(storage, storage_options(), ns, tokens);
}

class StorageCacheTest : public MemoryStorageHolder, public CacheFixture {
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
  ASSERT_EQ(r.device_indices.size(), t.size());  // device_content_ok checks only what it is given
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

// Issue 28, mutant 727 of seed 23 (a finished prefetch gave every page back): the reference
// for what a finished prefetch leaves in the tree (prefetch.finish_reference, verified inside
// finish_prefetch).
TEST_F(StorageCacheTest, AFinishedPrefetchAccountsEveryTokenItRead) {
  const std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 0, t);
  EXPECT_EQ(prefetch(1, 0, t), 32);
  const TreeNode& root = *cache_->tree().root();
  PrefetchOp op;
  op.rid = 7;
  op.tokens = t;
  op.completed_tokens = 32;
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 0, 32), "");  // inserted
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 32, 0), "");  // already present
  // Planted: the pages went back to the free list, none accounted to the tree.
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 0, 0),
            "prefetch.finish_reference: prefetch of request 7 read 32 token(s): it accounted "
            "present 0 + inserted 0, the tree holds 32 of them under its anchor");
  // Planted: read tokens that never reached the tree.
  op.tokens = tokens_from(500, 16);
  op.completed_tokens = 16;
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 0, 16),
            "prefetch.finish_reference: prefetch of request 7 read 16 token(s): only 0 are in "
            "the tree under its anchor with a host copy, and no node without one refused the "
            "rest");
  // A node without a host copy refuses what lies below it: nothing to account. (Write-through
  // backs every node up, so the host copy is taken away for the check and put back.)
  const std::vector<Token> device_only = tokens_from(900, 16);
  run_request(0, device_only);
  cache_->flush();
  cache_->check_hicache_events();
  TreeNode* node = cache_->match_prefix(0, device_only).last_device_node;
  ASSERT_EQ(node->parent, &root);
  std::optional<IndexVector> host_copy = std::move(node->full().host_value);
  node->full().host_value.reset();
  ASSERT_FALSE(node->backed_up());
  op.tokens = device_only;
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 0, 0), "");
  EXPECT_EQ(cache_->check_finished_prefetch(op, root, 0, 16),
            "prefetch.finish_reference: prefetch of request 7 read 16 token(s): it accounted "
            "present 0 + inserted 16, the tree holds 0 of them under its anchor");
  node->full().host_value = std::move(host_copy);
}

}  // namespace
}  // namespace kvsim

namespace kvsim {
namespace {

class TimeoutPolicyTest : public MemoryStorageHolder, public CacheFixture {
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
  // The wrong-size page was removed and counted; the good ones were counted as hits.
  EXPECT_FALSE(storage_.exists(keys[4]));
  EXPECT_EQ(cache_->stats().storage_corrupt_pages, 1);
  EXPECT_EQ(cache_->stats().storage_hit_pages, 4);
  EXPECT_EQ(cache_->stats().storage_query_hit_pages, 8);
}

TEST_F(StorageCacheTest, ADamagedPageIsRemovedCountedAndRewrittenByTheNextBackup) {
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 0, t);
  const std::vector<PageDigest> keys = hash_pages(namespace_seed(0), t, 4);
  (*storage_.damage_for_testing(keys[2]))[0] ^= std::byte{1};  // checksum now fails
  EXPECT_EQ(prefetch(1, 0, t), 8);  // pages 0 and 1 only; nothing damaged is served
  EXPECT_EQ(cache_->stats().storage_corrupt_pages, 1);
  EXPECT_EQ(cache_->stats().storage_hit_pages, 2);
  EXPECT_FALSE(storage_.exists(keys[2]));
  EXPECT_TRUE(storage_.exists(keys[3]));
  expect_sane();
  // The request computes the rest and its write-through backup rewrites the removed page.
  run_request(0, t);
  cache_->flush();
  while (cache_->storage_backup_step()) {
  }
  cache_->check_hicache_events();
  EXPECT_TRUE(storage_.exists(keys[2]));
  std::vector<std::byte> out;
  EXPECT_EQ(storage_.get(keys[2], &out), StorageStatus::kOk);
  EXPECT_GT(cache_->stats().storage_written_bytes, 0);
  expect_sane();
}

TEST_F(StorageCacheTest, MissesReadErrorsAndWriteFailuresAreCounted) {
  struct Flaky : StorageBackend {
    MemoryStorage inner;
    bool fail_reads = false, fail_writes = false, vanish = false;
    std::string_view name() const override { return "flaky"; }
    bool exists(const PageDigest& k) override { return inner.exists(k); }
    StorageStatus get(const PageDigest& k, std::vector<std::byte>* out) override {
      if (fail_reads) return StorageStatus::kIoError;
      if (vanish) inner.remove(k);
      return inner.get(k, out);
    }
    StorageStatus set(const PageDigest& k, std::span<const std::byte> p) override {
      return fail_writes ? StorageStatus::kIoError : inner.set(k, p);
    }
    void remove(const PageDigest& k) override { inner.remove(k); }
    size_t page_count() const override { return inner.page_count(); }
    Usage usage() const override { return inner.usage(); }
  };
  std::vector<Token> t = tokens_from(1, 32);
  populate(storage_, 0, t);
  // Exercise the counters through a second cache on a flaky view of the same pages.
  Flaky flaky;
  const std::vector<PageDigest> keys = hash_pages(namespace_seed(0), t, 4);
  std::vector<std::byte> page;
  for (const PageDigest& k : keys) {
    ASSERT_EQ(storage_.get(k, &page), StorageStatus::kOk);
    flaky.inner.set(k, page);
  }
  struct Reader : CacheFixture {
    explicit Reader(StorageBackend* s) : CacheFixture(storage_options(), s) {}
    void TestBody() override {}
  } reader(&flaky);
  auto prefetch_all = [&](RequestId rid) {
    MatchResult m = reader.cache_->match_prefix(0, t);
    ASSERT_TRUE(reader.cache_->prefetch_from_storage(rid, 0, *m.last_host_node, t, 0));
    while (reader.cache_->storage_query_step()) {
    }
    reader.cache_->check_hicache_events();
    while (reader.cache_->storage_io_step()) {
    }
    ASSERT_TRUE(reader.cache_->check_prefetch_progress(rid, 0));
    EXPECT_EQ(reader.cache_->pop_prefetch_loaded_tokens(rid), 0);
  };
  flaky.fail_reads = true;
  prefetch_all(1);
  EXPECT_EQ(reader.cache_->stats().storage_read_errors, 1);
  EXPECT_TRUE(flaky.inner.exists(keys[0]));  // an I/O error may pass: the page stays
  flaky.fail_reads = false;
  flaky.vanish = true;
  prefetch_all(2);
  EXPECT_EQ(reader.cache_->stats().storage_miss_pages, 1);
  flaky.vanish = false;
  flaky.fail_writes = true;
  reader.run_request(0, tokens_from(500, 16));
  reader.cache_->flush();
  while (reader.cache_->storage_backup_step()) {
  }
  reader.cache_->check_hicache_events();
  EXPECT_GE(reader.cache_->stats().storage_write_failures, 1);
  reader.expect_sane();
}

}  // namespace
}  // namespace kvsim
