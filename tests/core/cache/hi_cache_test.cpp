// HiCache: write policies, eviction, load-back, the seed situations 000/001/002 and content
// integrity across tiers. Every test ends with sanity_check() (CacheFixture::TearDown).
#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"

#include "tests/support/cache_fixture.h"

namespace kvsim {
namespace {

using testing::CacheFixture;
using testing::tokens_from;

class HiCacheTest : public CacheFixture {};

TEST_F(HiCacheTest, WriteThroughBacksUpOnInsertAndUnlocksAtTheAck) {
  std::vector<Token> t = tokens_from(1, 16);
  run_request(0, t);
  TreeNode* node = cache_->match_prefix(0, t).last_device_node;
  EXPECT_TRUE(node->backed_up());
  EXPECT_EQ(node->full().lock_ref, 1);  // held by the pending write
  EXPECT_EQ(cache_->controller().pending_writes(), 1u);
  cache_->check_hicache_events();  // the copy has not run: nothing to consume
  EXPECT_EQ(node->full().lock_ref, 1);
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_EQ(node->full().lock_ref, 0);
  EXPECT_EQ(cache_->stats().write_through_tokens, 16);
}

TEST_F(HiCacheTest, EvictThenLoadBackRestoresTheBytes) {
  std::vector<Token> t = tokens_from(1, 16);
  run_request(0, t);
  cache_->flush();
  EXPECT_EQ(cache_->evict(64), 16);
  MatchResult m = cache_->match_prefix(0, t);
  EXPECT_EQ(m.device_hit_length(), 0);
  EXPECT_EQ(m.host_hit_length, 16);
  LoadBackResult r = cache_->init_load_back(*m.best_match_node);
  ASSERT_EQ(r.device_indices.size(), 16u);
  EXPECT_EQ(r.last_node, m.best_match_node);
  EXPECT_EQ(cache_->ready_to_load_host_cache(), 0);
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, t, r.device_indices));
  EXPECT_EQ(cache_->match_prefix(0, t).device_hit_length(), 16);
}

// SGLang's batch: every admit queues its load-back, one ready_to_load_host_cache issues
// them together, and the forward's wait covers all of them.
TEST_F(HiCacheTest, BatchedLoadBacksIssueAsOneTransferAndOneWaitCoversThem) {
  const std::vector<Token> a = tokens_from(1, 16);
  const std::vector<Token> b = tokens_from(500, 16);
  run_request(0, a);
  run_request(0, b);
  cache_->flush();
  ASSERT_EQ(cache_->evict(64), 32);
  RequestKV ra(*cache_, 0);
  RequestKV rb(*cache_, 0);
  ASSERT_EQ(ra.admit(a, true, true, /*start_load=*/false)->host_hit_tokens, 16);
  ASSERT_EQ(rb.admit(b, true, true, /*start_load=*/false)->host_hit_tokens, 16);
  EXPECT_EQ(cache_->controller().queued_loads(), 2u);
  const int producer = cache_->ready_to_load_host_cache();
  ASSERT_GE(producer, 0);
  EXPECT_EQ(cache_->controller().queued_loads(), 0u);
  EXPECT_EQ(cache_->controller().pending_loads(), 1u);  // one merged transfer, one ack
  cache_->wait_for_load(producer);
  backend_.drain();
  EXPECT_TRUE(backend_.violations().empty());
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, a, ra.kv()));
  EXPECT_TRUE(device_content_ok(0, b, rb.kv()));
  ra.finish(a);
  rb.finish(b);
}

// A read of a node whose load is still queued issues the queue; the batch's
// ready_to_load_host_cache then hands out that load's producer, so its forward still waits.
TEST_F(HiCacheTest, AReadOfAQueuedLoadIssuesItAndTheBatchStillWaitsForIt) {
  const std::vector<Token> t = tokens_from(1, 16);
  run_request(0, t);
  cache_->flush();
  ASSERT_EQ(cache_->evict(64), 16);
  TreeNode* node = cache_->match_prefix(0, t).best_match_node;
  const LoadBackResult lb = cache_->init_load_back(*node);
  ASSERT_TRUE(lb.loaded);
  EXPECT_EQ(cache_->controller().queued_loads(), 1u);
  cache_->wait_for_loads_of(*node);
  EXPECT_EQ(cache_->controller().queued_loads(), 0u);
  const int producer = cache_->ready_to_load_host_cache();
  EXPECT_GE(producer, 0);
  EXPECT_EQ(cache_->ready_to_load_host_cache(), -1);  // handed out once
  cache_->wait_for_load(producer);
  backend_.drain();
  EXPECT_TRUE(backend_.violations().empty());
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, t, lb.device_indices));
}

TEST_F(HiCacheTest, ForwardWaitsOnlyForItsLayerOfTheLoad) {
  std::vector<Token> t = tokens_from(1, 8);
  run_request(0, t);
  cache_->flush();
  cache_->evict(64);
  LoadBackResult r = cache_->init_load_back(*cache_->match_prefix(0, t).best_match_node);
  const int producer = cache_->ready_to_load_host_cache();
  LayerDoneCounter& counter = cache_->controller().layer_done_counter();
  counter.set_consumer(producer);
  counter.wait_until(backend_, backend_.compute_stream(), 0);
  const StreamId compute = backend_.compute_stream();
  const StreamId load = cache_->controller().load_stream();
  while (backend_.step(compute)) {
  }
  EXPECT_EQ(backend_.pending_ops(compute), 1u);  // blocked on layer 0's event
  EXPECT_TRUE(backend_.step(load));              // the load waits for earlier compute
  EXPECT_FALSE(backend_.runnable(compute));
  EXPECT_TRUE(backend_.step(load));  // layer 0 lands
  EXPECT_TRUE(backend_.runnable(compute));
  EXPECT_TRUE(backend_.step(compute));
  EXPECT_GT(backend_.pending_ops(load), 0u);  // layer 1 still in flight
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, t, r.device_indices));
}

TEST_F(HiCacheTest, Seed000LoadBackIndexBuffersSurviveReuseByTheNextBatch) {
  // The controller drops its index buffers right after enqueueing the copy. The next batch
  // then allocates on the compute stream while the load stream is held back: none of those
  // allocations may get the copy's index buffers, and the copy must move the right bytes.
  std::vector<Token> t = tokens_from(1, 32);
  run_request(0, t);
  cache_->flush();
  cache_->evict(64);
  LoadBackResult r = cache_->init_load_back(*cache_->match_prefix(0, t).best_match_node);
  cache_->ready_to_load_host_cache();
  for (int i = 0; i < 16; ++i) {
    Block b =
        backend_.allocate(MemoryKind::kDevice, 32 * 8, backend_.compute_stream(), "next batch");
    backend_.free(b);
  }
  backend_.drain();
  EXPECT_TRUE(backend_.violations().empty()) << backend_.violations()[0].detail;
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, t, r.device_indices));
}

TEST_F(HiCacheTest, Seed001MoveIndicesNeverMutatesTreeState) {
  std::vector<Token> t = tokens_from(1, 8);
  run_request(0, t);
  TreeNode* node = cache_->match_prefix(0, t).last_device_node;
  const IndexVector host_before = *node->full().host_value;
  ResolvedIndices moved =
      cache_->controller().move_indices(*node->full().host_value, *node->full().value);
  EXPECT_EQ(moved.src.residency(), Residency::kDevice);
  EXPECT_EQ(node->full().host_value->residency(), Residency::kHost);
  EXPECT_EQ(*node->full().host_value, host_before);
  cache_->controller().release_after(moved, cache_->controller().load_stream());
  cache_->flush();
  // Had the moved object been written back into the tree, sanity_check names it.
  std::optional<IndexVector> saved = node->full().host_value;
  node->full().host_value = moved.src;
  SanityReport report;
  cache_->sanity_check(report);
  EXPECT_TRUE(report.has("residency")) << report.summary();
  node->full().host_value = saved;
}

TEST_F(HiCacheTest, Seed002LoadBackAnchorsOnBestMatchAndLocksSkipEvictedNodes) {
  std::vector<Token> a = tokens_from(1, 8);
  std::vector<Token> ab = tokens_from(1, 16);
  run_request(0, a);
  run_request(0, ab);
  cache_->flush();
  MatchResult m0 = cache_->match_prefix(0, ab);
  TreeNode* bottom = m0.last_device_node;
  cache_->evict(8);  // the LRU leaf is the bottom half
  ASSERT_TRUE(bottom->evicted());
  MatchResult m = cache_->match_prefix(0, ab);
  EXPECT_EQ(m.best_match_node, bottom);
  EXPECT_EQ(m.host_hit_length, 8);
  // Admission lock on the match: it skips the evicted bottom node.
  LockRecord admission = cache_->lock(*m.best_match_node);
  EXPECT_EQ(bottom->full().lock_ref, 0);
  LoadBackResult r = cache_->init_load_back(*m.best_match_node);
  ASSERT_EQ(r.device_indices.size(), 8u);
  cache_->ready_to_load_host_cache();
  cache_->unlock(admission);              // replays the skip: the revived node is not decremented
  EXPECT_EQ(bottom->full().lock_ref, 1);  // only the pending load's lock
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_EQ(bottom->full().lock_ref, 0);
  MatchResult after = cache_->match_prefix(0, ab);
  EXPECT_TRUE(device_content_ok(0, ab, after.device_indices));
}

TEST_F(HiCacheTest, LoadBackUnderDevicePressureEvictsOthersButNotItsAncestors) {
  std::vector<Token> a = tokens_from(1, 32);
  std::vector<Token> b = tokens_from(100, 32);
  run_request(0, a);
  cache_->flush();
  cache_->evict(64);
  run_request(0, b);  // fills the device pool
  cache_->flush();
  EXPECT_EQ(cache_->available_device_size(), 32);
  run_request(0, tokens_from(200, 32));
  cache_->flush();
  LoadBackResult r = cache_->init_load_back(*cache_->match_prefix(0, a).best_match_node);
  ASSERT_EQ(r.device_indices.size(), 32u);
  cache_->ready_to_load_host_cache();
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, a, r.device_indices));
}

TEST_F(HiCacheTest, EvictHostDropsHostOnlyLeaves) {
  run_request(0, tokens_from(1, 16));
  cache_->flush();
  cache_->evict(64);
  EXPECT_EQ(cache_->host_slots().available_size(), 128 - 16);
  EXPECT_EQ(cache_->evict_host(16), 16);
  EXPECT_EQ(cache_->host_slots().available_size(), 128);
  EXPECT_EQ(cache_->tree().node_count(), 1u);
}

TEST_F(HiCacheTest, SanityReportsALeakedDeviceSlot) {
  std::optional<IndexVector> stray = cache_->device_slots().alloc(4);  // bypasses HiCache
  SanityReport report;
  cache_->sanity_check(report);
  EXPECT_TRUE(report.has("slots.device_ownership"));
  cache_->device_slots().free(*stray);
}

HiCacheOptions write_back_options(int64_t host_tokens = 0) {
  HiCacheOptions o = CacheFixture::default_options();
  o.write_policy = WritePolicy::kWriteBack;
  if (host_tokens > 0) o.host_tokens = host_tokens;
  return o;
}

class WriteBackTest : public CacheFixture {
 protected:
  WriteBackTest() : CacheFixture(write_back_options()) {}
};

TEST_F(WriteBackTest, EvictionWritesToHostFirstAndLoadBackRestores) {
  std::vector<Token> t = tokens_from(7, 24);
  run_request(0, t);
  EXPECT_FALSE(cache_->match_prefix(0, t).last_device_node->backed_up());  // nothing written yet
  EXPECT_EQ(cache_->evict(64), 24);
  MatchResult m = cache_->match_prefix(0, t);
  EXPECT_EQ(m.host_hit_length, 24);
  LoadBackResult r = cache_->init_load_back(*m.best_match_node);
  cache_->ready_to_load_host_cache();
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_TRUE(device_content_ok(0, t, r.device_indices));
}

// A host pool with room for one 16-token node and half of another.
class WriteBackSmallHostTest : public CacheFixture {
 protected:
  WriteBackSmallHostTest() : CacheFixture(write_back_options(24)) {}
};

// A write-back victim whose evicted child is host-protected (a load or prefetch in flight) and
// a host pool with no room for it: evict_host cannot take the child, so the victim stays on the
// device (HiCache::evict_one_write_back asserts that only such a child can be left). Once the
// protection ends, evict_host takes the child and the victim is written back.
TEST_F(WriteBackSmallHostTest, AVictimWithAProtectedHostOnlyChildStaysUntilTheChildIsFree) {
  const std::vector<Token> t = tokens_from(11, 32);
  run_request(0, std::span<const Token>(t).first(16));
  run_request(0, t);
  ASSERT_EQ(cache_->evict(16), 16);  // the 16-token child, written back to host
  MatchResult m = cache_->match_prefix(0, t);
  ASSERT_EQ(m.host_hit_length, 16);
  TreeNode& parent = *m.last_device_node;
  TreeNode& child = *m.best_match_node;
  ASSERT_TRUE(child.evicted());
  ASSERT_EQ(child.parent, &parent);
  // Stands in for the protection of a load or prefetch in flight (the full check would ask which
  // live operation owns it, so it runs only after the release, at TearDown).
  cache_->tree().protect_host(child);
  EXPECT_EQ(cache_->evict(16), 0);  // 8 host tokens free, the child not evictable
  EXPECT_FALSE(parent.evicted());
  cache_->tree().release_host(child);
  EXPECT_EQ(cache_->evict(16), 16);  // evict_host took the child; the parent went to host
  EXPECT_EQ(cache_->match_prefix(0, t).host_hit_length, 16);
}

class SelectiveTest : public CacheFixture {
 protected:
  SelectiveTest() : CacheFixture(options()) {}
  static HiCacheOptions options() {
    HiCacheOptions o = default_options();
    o.write_policy = WritePolicy::kWriteThroughSelective;
    return o;
  }
};

TEST_F(SelectiveTest, BacksUpOnlyOnTheSecondHit) {
  std::vector<Token> t = tokens_from(1, 8);
  run_request(0, t);
  EXPECT_FALSE(cache_->match_prefix(0, t).last_device_node->backed_up());
  run_request(0, t);
  EXPECT_TRUE(cache_->match_prefix(0, t).last_device_node->backed_up());
  cache_->flush();
  // Not backed up: evicting removes the node outright.
  run_request(0, tokens_from(50, 8));
  cache_->flush();
  cache_->evict(64);
  EXPECT_EQ(cache_->match_prefix(0, tokens_from(50, 8)).host_hit_length, 0);
  EXPECT_EQ(cache_->match_prefix(0, t).host_hit_length, 8);
}

// SGLang's insert(chunked=True), what cache_unfinished_req does after a middle chunk: the chunk's
// nodes count no hit and are not written through; the prefill's last insert counts and writes.
TEST_F(HiCacheTest, AChunkedInsertCountsNoHitAndWritesNothingThrough) {
  const std::vector<Token> t = tokens_from(1, 16);
  const std::span<const Token> chunk = std::span<const Token>(t).first(8);
  RequestKV first(*cache_, 0);
  ASSERT_TRUE(first.admit(t));
  ASSERT_TRUE(first.extend(8));
  forward(0, t, first.kv().slice(0, 8), 0);
  first.finish(chunk, /*chunked=*/true);
  TreeNode* node = cache_->match_prefix(0, chunk).last_device_node;
  EXPECT_EQ(node->hit_count, 0u);
  EXPECT_FALSE(node->backed_up());
  EXPECT_EQ(cache_->controller().pending_writes(), 0u);
  RequestKV last(*cache_, 0);
  ASSERT_EQ(last.admit(t)->device_hit_tokens, 8);
  ASSERT_TRUE(last.extend(16));
  forward(0, t, last.kv().slice(8, 16), 8);
  last.finish(t);
  EXPECT_EQ(node->hit_count, 1u);
  EXPECT_TRUE(node->backed_up());
  EXPECT_EQ(cache_->controller().pending_writes(), 2u);  // the chunk's node and the rest
  cache_->flush();
}

// A request holds its lock from admit to finish or abort and nothing after, so one RequestKV can
// be admitted again: after a prefix admit and finish, an admit without the prefix cache and an
// abort release no lock a second time (the record of the first lock was left behind before).
TEST_F(HiCacheTest, ARequestAdmittedAgainAfterFinishHoldsNoStaleLock) {
  const std::vector<Token> t = tokens_from(1, 16);
  RequestKV seed(*cache_, 0);
  ASSERT_TRUE(seed.admit(t));
  ASSERT_TRUE(seed.extend(16));
  forward(0, t, seed.kv().slice(0, 16), 0);
  seed.finish(t);
  cache_->flush();  // the write-through's hold ends with its ack
  ASSERT_EQ(cache_->tree().protected_size(), 0);
  RequestKV again(*cache_, 0);
  ASSERT_EQ(again.admit(t)->device_hit_tokens, 16);  // locks the cached path
  EXPECT_EQ(cache_->tree().protected_size(), 16);
  again.finish(t);
  cache_->flush();
  EXPECT_EQ(cache_->tree().protected_size(), 0);
  ASSERT_TRUE(again.admit(t, /*allow_load_back=*/true, /*use_prefix_cache=*/false));
  EXPECT_EQ(cache_->tree().protected_size(), 0);
  again.abort();  // would unlock the first admit's path again
  EXPECT_EQ(cache_->tree().protected_size(), 0);
  EXPECT_EQ(cache_->tree().evictable_size(), 16);
  cache_->flush();
}

// With SGLang's eviction amounts a load-back that does not fit evicts the load's whole length
// (load_back: evict(len(host_indices))), not the shortfall: 4 victims of 4 tokens, not 3.
TEST_F(HiCacheTest, SglangEvictionAmountsEvictALoadBacksWholeLength) {
  const std::vector<Token> a = tokens_from(1, 16);
  run_request(0, a);
  cache_->flush();
  ASSERT_EQ(cache_->evict(16), 16);
  for (Token i = 0; i < 15; ++i)
    run_request(0, tokens_from(100 + 10 * i, 4));
  cache_->flush();
  ASSERT_EQ(cache_->available_device_size(), 4);
  cache_->set_sglang_eviction_amounts(true);
  const int64_t before = cache_->stats().evicted_device_tokens;
  MatchResult m = cache_->match_prefix(0, a);
  ASSERT_EQ(m.host_hit_length, 16);
  LoadBackResult r = cache_->init_load_back(*m.best_match_node);
  ASSERT_EQ(r.device_indices.size(), 16u);
  EXPECT_EQ(cache_->stats().evicted_device_tokens - before, 16);  // the shortfall was 12
  EXPECT_EQ(cache_->available_device_size(), 4);
  cache_->ready_to_load_host_cache();
  backend_.drain();
  cache_->check_hicache_events();
}

}  // namespace
}  // namespace kvsim
