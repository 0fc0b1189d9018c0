// [inflight.load_sources] (issue 28, kind 1: recomputed, not trusted): every host slot a load
// reads, from its queueing to its ack, is held by a tree node no eviction can remove. The check
// reads the controller's own loads, so a load the cache lost track of (or never recorded) is
// still seen. Quiet on the cache's load-back from queueing to ack; the planted bug is a load
// queued past the cache, from a node nothing pins.
#include <gtest/gtest.h>

#include "tests/support/cache_fixture.h"

namespace kvsim::testing {
namespace {

struct LoadSourcesFixture : CacheFixture {
  void TestBody() override {}
  bool reports(const std::string& invariant) const {
    SanityReport report;
    cache_->sanity_check(report);
    return report.has(invariant);
  }
  // A 16-token prefix backed up and then evicted from device: its host copy is all it has.
  TreeNode* evicted_node(Token first) {
    const std::vector<Token> t = tokens_from(first, 16);
    run_request(0, t);
    cache_->flush();
    cache_->evict(64);
    TreeNode* node = cache_->match_prefix(0, t).best_match_node;
    EXPECT_TRUE(node->evicted() && node->backed_up());
    return node;
  }
};

TEST(LoadSourcesCheck, QuietFromQueueingToAck) {
  LoadSourcesFixture f;
  TreeNode* node = f.evicted_node(1);
  const LoadBackResult lb = f.cache_->init_load_back(*node);
  ASSERT_TRUE(lb.loaded);
  ASSERT_EQ(f.cache_->controller().load_sources().size(), 1u);  // queued
  EXPECT_FALSE(f.reports("inflight.load_sources"));
  const int producer = f.cache_->ready_to_load_host_cache();
  ASSERT_GE(producer, 0);
  EXPECT_EQ(f.cache_->controller().load_sources().size(), 1u);  // issued, not acked
  EXPECT_FALSE(f.reports("inflight.load_sources"));
  f.cache_->wait_for_load(producer);
  f.backend_.drain();
  f.cache_->check_hicache_events();
  EXPECT_TRUE(f.cache_->controller().load_sources().empty());  // acked
  EXPECT_FALSE(f.reports("inflight.load_sources"));
}

TEST(LoadSourcesCheck, ALoadFromANodeNothingPinsIsReported) {
  LoadSourcesFixture f;
  TreeNode* node = f.evicted_node(1);
  ASSERT_EQ(node->full().host_lock_ref, 0);
  ASSERT_EQ(node->full().lock_ref, 0);
  // The planted bug: a load queued without the cache's protection (as a load path that forgot
  // protect_host and its lock would leave it): host eviction may free these slots under it.
  ASSERT_TRUE(f.cache_->controller().load(*node->full().host_value, node->id));
  EXPECT_TRUE(f.reports("inflight.load_sources"));
  // Pinned by a host protection, the same load is safe.
  f.cache_->tree().protect_host(*node);
  EXPECT_FALSE(f.reports("inflight.load_sources"));
  // Once host eviction has removed the node, the slots belong to no node at all.
  f.cache_->tree().release_host(*node);
  f.cache_->evict_host(128);
  EXPECT_TRUE(f.reports("inflight.load_sources"));
  // The rogue load's ack would name a node the cache never loaded: stop here, unchecked.
  f.cache_.reset();
}

}  // namespace
}  // namespace kvsim::testing
