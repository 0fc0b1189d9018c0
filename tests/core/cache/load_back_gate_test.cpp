// load_back.gate: a load-back's two gates against their reference (SGLang's load_back): a chain
// shorter than load_back_threshold_tokens is not loaded, one longer than the caller's quota is
// declined, and a chain of exactly the threshold or exactly the quota is loaded. The core checks
// each branch it takes (KV_VERIFY in HiCache::load_back), so a gate moved by one token fails
// these tests as an AssertionFailure; insert.chunked_no_write is shown by
// HiCacheTest.AChunkedInsertCountsNoHitAndWritesNothingThrough.
#include <gtest/gtest.h>

#include "tests/support/cache_fixture.h"

namespace kvsim::testing {
namespace {

HiCacheOptions threshold_options() {
  HiCacheOptions o = CacheFixture::default_options();
  o.load_back_threshold_tokens = 8;
  return o;
}

struct LoadBackGateTest : CacheFixture {
  LoadBackGateTest() : CacheFixture(threshold_options()) {}

  // Caches `n` tokens, backs them up and evicts them: a chain of n host-only tokens.
  TreeNode* evicted_chain(Token first, size_t n) {
    const std::vector<Token> t = tokens_from(first, n);
    run_request(0, t);
    cache_->flush();
    EXPECT_EQ(cache_->evict(64), static_cast<int64_t>(n));
    const MatchResult m = cache_->match_prefix(0, t);
    EXPECT_EQ(m.host_hit_length, static_cast<int64_t>(n));
    return m.best_match_node;
  }
};

TEST_F(LoadBackGateTest, AChainOfExactlyTheQuotaIsLoaded) {
  TreeNode* node = evicted_chain(1, 12);
  const LoadBackResult r = cache_->init_load_back(*node, /*mem_quota=*/12);
  ASSERT_TRUE(r.loaded);
  EXPECT_EQ(r.device_indices.size(), 12u);
  cache_->flush();
}

TEST_F(LoadBackGateTest, AChainOneOverTheQuotaIsDeclined) {
  TreeNode* node = evicted_chain(1, 12);
  const LoadBackResult r = cache_->init_load_back(*node, /*mem_quota=*/11);
  EXPECT_FALSE(r.loaded);
  EXPECT_TRUE(r.device_indices.empty());
  EXPECT_TRUE(node->evicted());
}

TEST_F(LoadBackGateTest, AChainOfExactlyTheThresholdIsLoadedAndAShorterOneIsNot) {
  TreeNode* eight = evicted_chain(1, 8);
  const LoadBackResult r = cache_->init_load_back(*eight);
  ASSERT_TRUE(r.loaded);
  EXPECT_EQ(r.device_indices.size(), 8u);
  cache_->flush();
  TreeNode* four = evicted_chain(500, 4);
  EXPECT_FALSE(cache_->init_load_back(*four).loaded);
  EXPECT_TRUE(four->evicted());
}

}  // namespace
}  // namespace kvsim::testing
