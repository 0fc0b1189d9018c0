// [stats.write_back_on_evict] (issue 28, a write policy without a reference): under write-back
// the write policy writes no hit node through (only device victims get a host copy). The check
// reads the policy's own count of hit writes: live under write-through, 0 under write-back with
// and without evictions, and a caller's own write_backup (public API) is not the policy's. Its
// planted bug is the policy ignoring write-back (mutant 73 of the seed-23 sample, killed by the
// re-hunt: docs/mutation-score.md), which no test can plant without changing the core.
#include <gtest/gtest.h>

#include "tests/support/cache_fixture.h"

namespace kvsim::testing {
namespace {

HiCacheOptions write_back_options() {
  HiCacheOptions o = CacheFixture::default_options();
  o.write_policy = WritePolicy::kWriteBack;
  return o;
}

struct WriteBackFixture : CacheFixture {
  WriteBackFixture() : CacheFixture(write_back_options()) {}
  void TestBody() override {}
};

struct DefaultPolicyFixture : CacheFixture {
  DefaultPolicyFixture() : CacheFixture(CacheFixture::default_options()) {}
  void TestBody() override {}
};

bool write_back_reported(const HiCache& cache, const std::string& invariant) {
  SanityReport report;
  cache.sanity_check(report);
  return report.has(invariant);
}

TEST(WriteBackOnEvict, EvictionsWriteBackAndTheCheckStaysQuiet) {
  WriteBackFixture f;
  for (Token first = 0; first < 8 * 40; first += 40)
    f.run_request(1, tokens_from(first, 16));  // 8 x 16 tokens through a 64-token device
  f.cache_->flush();
  ASSERT_GT(f.cache_->stats().write_through_tokens, 0);  // the victims were written back
  EXPECT_EQ(f.cache_->stats().policy_write_tokens, 0);
  EXPECT_EQ(f.cache_->stats().evict_write_tokens, f.cache_->stats().write_through_tokens);
  EXPECT_FALSE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
}

TEST(WriteBackOnEvict, ACallersOwnBackupIsNotThePolicys) {
  WriteBackFixture f;
  f.run_request(1, tokens_from(0, 16));
  TreeNode* node = f.cache_->match_prefix(1, tokens_from(0, 16)).last_device_node;
  ASSERT_FALSE(node->backed_up());
  ASSERT_GT(f.cache_->write_backup(*node), 0);  // the API, as the stateful property test calls it
  f.cache_->flush();
  EXPECT_EQ(f.cache_->stats().policy_write_tokens, 0);
  EXPECT_FALSE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
}

TEST(WriteBackOnEvict, TheCountOfPolicyWritesIsLiveUnderWriteThrough) {
  DefaultPolicyFixture f;  // the default policy writes hit nodes through
  ASSERT_NE(f.cache_->options().write_policy, WritePolicy::kWriteBack);
  for (int i = 0; i < 3; ++i)
    f.run_request(1, tokens_from(0, 16));  // hits past the write-through threshold
  f.cache_->flush();
  EXPECT_GT(f.cache_->stats().policy_write_tokens, 0);
  EXPECT_EQ(f.cache_->stats().policy_write_tokens, f.cache_->stats().write_through_tokens);
}

// The converse: under write-through a device victim without a host copy is dropped, never
// written out at eviction (a node hit once is below selective write-through's threshold).
struct SelectiveFixture : CacheFixture {
  static HiCacheOptions selective_options() {
    HiCacheOptions o = CacheFixture::default_options();
    o.write_policy = WritePolicy::kWriteThroughSelective;
    return o;
  }
  SelectiveFixture() : CacheFixture(selective_options()) {}
  void TestBody() override {}
};

TEST(WriteBackOnEvict, WriteThroughWritesNoVictimAtEviction) {
  SelectiveFixture f;
  for (Token first = 0; first < 8 * 40; first += 40)
    f.run_request(1, tokens_from(first, 16));  // each hit once: none reaches the threshold
  f.cache_->flush();
  ASSERT_GT(f.cache_->stats().evicted_device_tokens, 0);
  EXPECT_EQ(f.cache_->stats().evict_write_tokens, 0);
  EXPECT_EQ(f.cache_->stats().write_through_tokens, 0);
  EXPECT_FALSE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
  f.expect_sane();
}

}  // namespace
}  // namespace kvsim::testing
