// Issue 28's policy references on the prefetch path (docs/invariants.md): the deadline a
// progress check uses, the storage query's keep-or-revoke decision against the threshold, and
// the finished prefetches' tokens handed to their requests. Each is checked on every full
// sanity check; these tests drive the decision at its boundary and plant the stale value the
// reference catches.
#include "core/cache/hi_cache.h"
#include "core/common/sanity.h"
#include "core/tiers/memory_storage.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/hi_cache_test_peer.h"
#include "tests/support/storage_fixture.h"

namespace kvsim {

namespace testing {
namespace {

bool reports(const HiCache& cache, const std::string& name) {
  SanityReport report;
  cache.sanity_check(report);
  return report.has(name);
}

HiCacheOptions reference_options(int64_t threshold) {
  HiCacheOptions o = CacheFixture::default_options();  // page 4
  o.host_tokens = 128;
  o.prefetch_capacity_fraction = 1.0;
  o.prefetch_threshold_tokens = threshold;
  o.prefetch_stop_policy = PrefetchStopPolicy::kTimeout;
  o.prefetch_timeout_base_ticks = 5;
  o.prefetch_timeout_per_ki_token_ticks = 2048;  // 2 ticks a token
  o.prefetch_timeout_max_ticks = 40;
  return o;
}

// A cache whose storage holds the pages of `stored` (written through a first cache).
class PrefetchReferenceTest : public MemoryStorageHolder, public CacheFixture {
 protected:
  explicit PrefetchReferenceTest(int64_t threshold = 8)
      : CacheFixture(reference_options(threshold), &storage_) {}
  void store(const std::vector<Token>& tokens) {
    populate_storage(storage_, reference_options(0), 0, tokens);
  }
};

// The storage holds exactly the threshold's 8 tokens of a 16-token request: kept, not revoked.
TEST_F(PrefetchReferenceTest, AHitOfExactlyTheThresholdGoesOn) {
  const std::vector<Token> t = tokens_from(1, 16);
  store(std::vector<Token>(t.begin(), t.begin() + 8));
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  ASSERT_TRUE(cache_->storage_query_step());
  EXPECT_EQ(HiCacheTestPeer::prefetches(*cache_).at(1).state, PrefetchOp::State::kHit);
  EXPECT_FALSE(reports(*cache_, "prefetch.query_threshold"));
  cache_->release_aborted_request(1);
}

class OnePageShortTest : public PrefetchReferenceTest {
 protected:
  OnePageShortTest() : PrefetchReferenceTest(12) {}
};

TEST_F(OnePageShortTest, AHitOnePageShortOfTheThresholdIsRevoked) {
  const std::vector<Token> t = tokens_from(1, 16);
  store(std::vector<Token>(t.begin(), t.begin() + 8));
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  ASSERT_TRUE(cache_->storage_query_step());
  EXPECT_EQ(HiCacheTestPeer::prefetches(*cache_).at(1).state, PrefetchOp::State::kRevoked);
  EXPECT_FALSE(reports(*cache_, "prefetch.query_threshold"));
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 0));
}

// 16 tokens: 5 + 16 × 2048 / 1024 = 37 ticks, under the cap of 40. At tick 37 the prefetch
// (nothing read yet) waits; at 38 it has timed out.
TEST_F(PrefetchReferenceTest, TheDeadlineIsBasePlusPerTokenTicksUnderTheCap) {
  const std::vector<Token> t = tokens_from(1, 16);
  store(t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  ASSERT_TRUE(cache_->storage_query_step());
  cache_->check_hicache_events();  // host memory for the hit: kTransfer, nothing read
  EXPECT_FALSE(cache_->check_prefetch_progress(1, 37));
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 38));
  EXPECT_EQ(cache_->pop_prefetch_loaded_tokens(1), 0);
  EXPECT_FALSE(reports(*cache_, "prefetch.deadline"));
}

// 32 tokens: 5 + 64 = 69 ticks, capped at 40.
TEST_F(PrefetchReferenceTest, TheDeadlineNeverPassesTheCap) {
  const std::vector<Token> t = tokens_from(1, 32);
  store(t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  ASSERT_TRUE(cache_->storage_query_step());
  cache_->check_hicache_events();
  EXPECT_FALSE(cache_->check_prefetch_progress(1, 40));
  EXPECT_TRUE(cache_->check_prefetch_progress(1, 41));
  EXPECT_FALSE(reports(*cache_, "prefetch.deadline"));
}

// Planted: the deadline's input left stale (the prefetch counted as 128 tokens): every later
// progress check is reported until the prefetch ends.
TEST_F(PrefetchReferenceTest, ADeadlineOtherThanTheReferencesIsReported) {
  const std::vector<Token> t = tokens_from(1, 16);
  store(t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  PrefetchOp& op = HiCacheTestPeer::prefetches(*cache_).at(1);
  op.tokens.resize(128, 7);  // what prefetch_timeout_ticks reads: 5 + 256, capped at 40
  EXPECT_FALSE(cache_->check_prefetch_progress(1, 38));
  EXPECT_TRUE(reports(*cache_, "prefetch.deadline"));
  op.tokens.resize(16);
  cache_->release_aborted_request(1);
  HiCacheTestPeer::stats(*cache_).prefetch_deadline_divergences = 0;  // a sane teardown
}

// A finished prefetch's tokens reach its request (or go with it on an abort); planted: the
// hand-off dropped.
TEST_F(PrefetchReferenceTest, EveryPrefetchedTokenIsHandedToItsRequest) {
  const std::vector<Token> t = tokens_from(1, 16);
  store(t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), t, 0));
  while (cache_->storage_query_step()) {
  }
  cache_->check_hicache_events();
  while (cache_->storage_io_step()) {
  }
  ASSERT_TRUE(cache_->check_prefetch_progress(1, 0));
  EXPECT_EQ(cache_->stats().prefetched_tokens, 16);
  EXPECT_FALSE(reports(*cache_, "prefetch.reported_tokens"));  // waiting to be handed over
  HiCacheTestPeer::prefetch_loaded(*cache_).erase(1);
  EXPECT_TRUE(reports(*cache_, "prefetch.reported_tokens"));
  HiCacheTestPeer::prefetch_loaded(*cache_)[1] = 16;
  cache_->release_aborted_request(1);  // the request went away: its tokens went with it
  EXPECT_EQ(cache_->pop_prefetch_loaded_tokens(1), 0);
  EXPECT_EQ(cache_->stats().prefetch_reported_tokens, 16);
  EXPECT_FALSE(reports(*cache_, "prefetch.reported_tokens"));
}

}  // namespace
}  // namespace testing
}  // namespace kvsim
