// Recomputed caches of HiCache (storage page-hash chains, request-held page counts) and pool
// conservation at quiescence: each test plants the bug and expects the named violation.
#include <gtest/gtest.h>

#include "core/cache/request_kv.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/hi_cache_test_peer.h"
#include "tests/support/hybrid_fixture.h"
#include "tests/support/storage_fixture.h"

namespace kvsim {

struct RequestSlotsTestPeer {
  static int64_t& count(RequestSlots& s) { return s.count_; }
};

namespace testing {
namespace {

bool reports(const HiCache& cache, const std::string& name, bool quiescent = false) {
  SanityReport report;
  if (quiescent) {
    cache.check_quiescent(report);
  } else {
    cache.sanity_check(report);
  }
  return report.has(name);
}

using CacheConservationTest = CacheFixture;
using HybridConservationTest = HybridFixture;

TEST_F(CacheConservationTest, CorrectHashChainPassesAndAStaleOneIsReported) {
  const std::vector<Token> tokens = tokens_from(10, 8);
  run_request(1, tokens);
  TreeNode* node = cache_->match_prefix(1, tokens).last_device_node;
  ASSERT_FALSE(node->is_root());
  const auto page = cache_->options().page_size;
  node->hash_value = hash_pages(namespace_seed(1), node->key.span(), page);
  EXPECT_FALSE(reports(*cache_, "storage.hash_chain"));
  // Hashed under the other namespace's seed (the cross-tenant key bug).
  node->hash_value = hash_pages(namespace_seed(2), node->key.span(), page);
  EXPECT_TRUE(reports(*cache_, "storage.hash_chain"));
  node->hash_value.clear();
}

TEST_F(CacheConservationTest, ChildChainFollowsTheRecomputedParent) {
  const std::vector<Token> tokens = tokens_from(10, 16);
  run_request(1, tokens);
  cache_->match_prefix(1, tokens_from(10, 8));  // split into two nodes
  TreeNode* child = cache_->match_prefix(1, tokens).last_device_node;
  ASSERT_FALSE(child->parent->is_root());
  const auto page = cache_->options().page_size;
  // Chained from the seed, as if the parent did not exist: wrong for a child.
  child->hash_value = hash_pages(namespace_seed(1), child->key.span(), page);
  EXPECT_TRUE(reports(*cache_, "storage.hash_chain"));
  const std::vector<PageDigest> parent =
      hash_pages(namespace_seed(1), child->parent->key.span(), page);
  child->hash_value = hash_pages(parent.back(), child->key.span(), page);
  EXPECT_FALSE(reports(*cache_, "storage.hash_chain"));
  child->hash_value.clear();
}

TEST_F(HybridConservationTest, StaleRequestHeldCountIsReported) {
  SidePool& swa = *cache_->side_pool(ComponentType::kSwa);
  int64_t& count = RequestSlotsTestPeer::count(const_cast<RequestSlots&>(swa.request_slots()));
  ++count;
  EXPECT_TRUE(reports(*cache_, "slots.request_count"));
  --count;
  EXPECT_FALSE(reports(*cache_, "slots.request_count"));
}

TEST_F(CacheConservationTest, SlotHeldByARequestIsALeakOnlyAtQuiescence) {
  std::optional<IndexVector> held = cache_->alloc_device(cache_->options().page_size);
  ASSERT_TRUE(held);
  EXPECT_FALSE(reports(*cache_, "slots.held_at_quiescence"));  // a live request may hold it
  EXPECT_TRUE(reports(*cache_, "slots.held_at_quiescence", /*quiescent=*/true));
  cache_->free_device(*held);
  EXPECT_FALSE(reports(*cache_, "slots.held_at_quiescence", true));
}

// The planted bug: an abort path that forgets the request's own slots (release_own skipped).
TEST_F(HybridConservationTest, AbortThatSkipsTheReleaseLeaksSidePoolsAndIsReported) {
  const std::vector<Token> tokens = tokens_from(300, 12);
  {
    RequestKV req(*cache_, 1);
    ASSERT_TRUE(req.admit(tokens));
    ASSERT_TRUE(req.extend(tokens.size()));
    req.abort();  // the correct path
  }
  EXPECT_FALSE(reports(*cache_, "slots.held_at_quiescence", true));
  RequestKV req(*cache_, 1);
  ASSERT_TRUE(req.admit(tokens));
  ASSERT_TRUE(req.extend(tokens.size()));
  const IndexVector kv = req.kv();
  const std::optional<IndexVector> swa = req.swa();
  const std::optional<SlotIndex> mamba = req.mamba_state();
  req.detach();  // "aborted" without giving anything back
  SanityReport report;
  cache_->check_quiescent(report);
  std::string details;
  for (const auto& v : report.violations()) {
    if (v.invariant == "slots.held_at_quiescence") details += v.detail + "\n";
  }
  EXPECT_NE(details.find("device page"), std::string::npos) << details;
  EXPECT_NE(details.find("swa"), std::string::npos) << details;
  EXPECT_NE(details.find("mamba"), std::string::npos) << details;
  // Give everything back so the fixture's teardown sees a sane cache.
  cache_->free_device(kv.slice(req.owned_from(), kv.size()));
  cache_->free_swa(swa->slice(req.owned_from(), swa->size()));
  cache_->free_mamba_state(*mamba);
}

HiCacheOptions rate_options() {
  HiCacheOptions o = CacheFixture::default_options();
  o.host_tokens = 128;
  o.prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete;
  o.prefetch_capacity_fraction = 1.0;  // the limit: 128 tokens in flight
  return o;
}

class RateLimitReferenceTest : public MemoryStorageHolder, public CacheFixture {
 protected:
  RateLimitReferenceTest() : CacheFixture(rate_options(), &storage_) {}
};

TEST_F(RateLimitReferenceTest, AdmissionsAgreeWithTheReference) {
  EXPECT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), tokens_from(1, 128), 0));
  EXPECT_FALSE(
      cache_->prefetch_from_storage(2, 0, *cache_->tree().root(), tokens_from(500, 64), 0));
  EXPECT_FALSE(reports(*cache_, "prefetch.rate_limit"));
  cache_->release_aborted_request(1);
}

// The planted policy bug: the limit decided on an occupancy that no longer counts a live
// prefetch (a counter left stale), so a second prefetch is admitted past the limit.
TEST_F(RateLimitReferenceTest, AnAdmissionPastTheLimitIsReported) {
  EXPECT_TRUE(cache_->prefetch_from_storage(1, 0, *cache_->tree().root(), tokens_from(1, 128), 0));
  int64_t& occupied = HiCacheTestPeer::prefetch_occupied(*cache_);
  occupied -= 128;
  EXPECT_TRUE(cache_->prefetch_from_storage(2, 0, *cache_->tree().root(), tokens_from(500, 64), 0));
  EXPECT_TRUE(reports(*cache_, "prefetch.rate_limit"));
  occupied += 128;
  cache_->release_aborted_request(2);
  cache_->release_aborted_request(1);
  HiCacheTestPeer::stats(*cache_).prefetch_rate_divergences =
      0;  // the fixture's teardown checks a sane cache
}

}  // namespace
}  // namespace testing
}  // namespace kvsim
