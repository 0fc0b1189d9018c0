// Issue 28, kinds 1 and 3 (markers and counts nothing recomputed): [write_through.marker],
// [inflight.protect_once] and [storage.hash_complete] in HiCache's full check
// (core/cache/hi_cache_sanity_inflight.cpp, hi_cache_sanity.cpp), and the root's lock under the
// public lock calls ([tree.root]). Each test keeps the check quiet on the clean path (splits of
// a node with a write in flight, a prefetch's host insert) and plants the bug it names.
#include <gtest/gtest.h>

#include "core/cache/hi_cache.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/storage_fixture.h"

namespace kvsim {

// Reaches the operation lists a planted bug must change along with the tree.
struct InflightTestPeer {
  static std::vector<NodeId>& load_protections(HiCache& c, NodeId load) {
    return c.pending_loads_.at(load).protected_nodes;
  }
  static size_t backups(const HiCache& c) { return c.backups_.size() + c.finished_backups_.size(); }
  // A second storage backup of the node the first one backs up, protecting it as a real one.
  static NodeId queue_second_backup(HiCache& c) {
    const NodeId node = c.backups_.empty() ? c.finished_backups_.front() : c.backups_.front().node;
    c.finished_backups_.push_back(node);
    c.tree_->protect_host(*c.tree_->find(node));
    return node;
  }
  static void drop_second_backup(HiCache& c) {
    const NodeId node = c.finished_backups_.back();
    c.finished_backups_.pop_back();
    c.tree_->release_host(*c.tree_->find(node));
  }
};

namespace {

using testing::CacheFixture;
using testing::MemoryStorageHolder;
using testing::tokens_from;

bool inflight_reports(const HiCache& cache, const std::string& invariant) {
  SanityReport report;
  cache.sanity_check(report);
  return report.has(invariant);
}

// Default options: write-through at the first hit, so an insert queues a write per new node.
class WriteMarkerTest : public CacheFixture {};

TEST_F(WriteMarkerTest, MarksFollowTheirWritesThroughSplitsAndAcks) {
  const std::vector<Token> t = tokens_from(1, 16);
  run_request(1, t);
  TreeNode* node = cache_->match_prefix(1, t).last_device_node;
  ASSERT_TRUE(cache_->write_pending(node->id));
  EXPECT_EQ(node->write_through_pending, node->id);
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
  // Split the node twice while its copy runs: the fragments above it carry its mark.
  run_request(1, tokens_from(1, 8));
  run_request(1, tokens_from(1, 4));
  ASSERT_NE(node->parent->parent, nullptr);
  EXPECT_EQ(node->parent->write_through_pending, node->id);
  EXPECT_EQ(node->parent->parent->write_through_pending, node->id);
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
  cache_->flush();
  EXPECT_FALSE(cache_->write_pending(node->id));
  EXPECT_FALSE(node->write_through_pending.has_value());
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
}

TEST_F(WriteMarkerTest, AMarkLeftAfterItsAckIsReported) {
  const std::vector<Token> t = tokens_from(1, 16);
  run_request(1, t);
  TreeNode* node = cache_->match_prefix(1, t).last_device_node;
  cache_->flush();
  // What finish_write_ack without its reset leaves.
  node->write_through_pending = node->id;
  EXPECT_TRUE(inflight_reports(*cache_, "write_through.marker"));
  node->write_through_pending.reset();
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
}

TEST_F(WriteMarkerTest, APendingWriteWithoutItsMarkIsReported) {
  const std::vector<Token> t = tokens_from(1, 16);
  run_request(1, t);
  TreeNode* node = cache_->match_prefix(1, t).last_device_node;
  ASSERT_TRUE(cache_->write_pending(node->id));
  node->write_through_pending.reset();
  EXPECT_TRUE(inflight_reports(*cache_, "write_through.marker"));
  node->write_through_pending = node->id;
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
}

TEST_F(WriteMarkerTest, AMarkAwayFromItsWritesPathIsReported) {
  const std::vector<Token> a = tokens_from(1, 8);
  const std::vector<Token> b = tokens_from(100, 8);
  run_request(1, a);
  run_request(1, b);
  TreeNode* na = cache_->match_prefix(1, a).last_device_node;
  TreeNode* nb = cache_->match_prefix(1, b).last_device_node;
  ASSERT_TRUE(cache_->write_pending(na->id) && cache_->write_pending(nb->id));
  nb->write_through_pending = na->id;  // b's write still pending, its node marked as a's
  EXPECT_TRUE(inflight_reports(*cache_, "write_through.marker"));
  nb->write_through_pending = nb->id;
  EXPECT_FALSE(inflight_reports(*cache_, "write_through.marker"));
  cache_->flush();
}

// A pending load-back of an evicted 16-token node (one node in the chain).
class ProtectOnceTest : public CacheFixture {
 protected:
  TreeNode* start_load(const std::vector<Token>& t) {
    run_request(1, t);
    cache_->flush();
    cache_->evict(static_cast<int64_t>(t.size()));
    MatchResult m = cache_->match_prefix(1, t);
    EXPECT_TRUE(m.best_match_node->evicted());
    LoadBackResult r = cache_->init_load_back(*m.best_match_node);
    EXPECT_TRUE(r.loaded);
    return m.best_match_node;
  }
};

TEST_F(ProtectOnceTest, ALoadProtectingANodeTwiceIsReported) {
  const std::vector<Token> t = tokens_from(1, 16);
  TreeNode* node = start_load(t);
  std::vector<NodeId>& protections = InflightTestPeer::load_protections(*cache_, node->id);
  ASSERT_EQ(protections, std::vector<NodeId>{node->id});
  EXPECT_FALSE(inflight_reports(*cache_, "inflight.protect_once"));
  // What load_back leaves when its "not on the chain already" test passes a chain node: the
  // node protected twice, to be released twice at the ack. The counts still balance.
  protections.push_back(node->id);
  cache_->tree().protect_host(*node);
  EXPECT_FALSE(inflight_reports(*cache_, "host_protection.owned"));
  EXPECT_TRUE(inflight_reports(*cache_, "inflight.protect_once"));
  cache_->ready_to_load_host_cache();
  backend_.drain();
  cache_->check_hicache_events();  // releases both: nothing is left to see
  EXPECT_EQ(node->full().host_lock_ref, 0);
  EXPECT_FALSE(inflight_reports(*cache_, "inflight.protect_once"));
}

HiCacheOptions inflight_storage_options() {
  HiCacheOptions o = CacheFixture::default_options();
  o.prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete;
  o.prefetch_capacity_fraction = 1.0;
  return o;
}

class StorageInflightTest : public MemoryStorageHolder, public CacheFixture {
 protected:
  StorageInflightTest() : CacheFixture(inflight_storage_options(), &storage_) {}
};

TEST_F(StorageInflightTest, TwoBackupsOfOneNodeAreReported) {
  run_request(1, tokens_from(1, 16));
  cache_->flush();  // the write's ack queues the node's storage backup
  ASSERT_EQ(InflightTestPeer::backups(*cache_), 1u);
  EXPECT_FALSE(inflight_reports(*cache_, "inflight.protect_once"));
  InflightTestPeer::queue_second_backup(*cache_);
  EXPECT_FALSE(inflight_reports(*cache_, "host_protection.owned"));
  EXPECT_TRUE(inflight_reports(*cache_, "inflight.protect_once"));
  InflightTestPeer::drop_second_backup(*cache_);
  EXPECT_FALSE(inflight_reports(*cache_, "inflight.protect_once"));
}

TEST_F(StorageInflightTest, EveryNodeHoldsItsHashesAndANodeWithoutIsReported) {
  const std::vector<Token> t = tokens_from(1, 16);
  run_request(1, t);
  run_request(1, tokens_from(1, 8));  // a split divides the hashes
  cache_->flush();
  EXPECT_FALSE(inflight_reports(*cache_, "storage.hash_complete"));
  TreeNode* node = cache_->match_prefix(1, t).last_device_node;
  ASSERT_FALSE(node->hash_value.empty());
  // What insert without its compute_node_hashes leaves: the chain check compares only
  // hashes that are present, so it stays quiet.
  const std::vector<PageDigest> hashes = node->hash_value;
  node->hash_value.clear();
  EXPECT_TRUE(inflight_reports(*cache_, "storage.hash_complete"));
  EXPECT_FALSE(inflight_reports(*cache_, "storage.hash_chain"));
  node->hash_value = hashes;
  EXPECT_FALSE(inflight_reports(*cache_, "storage.hash_complete"));
}

TEST_F(StorageInflightTest, APrefetchsHostInsertLeavesHashes) {
  const std::vector<Token> t = tokens_from(1, 32);
  testing::populate_storage(storage_, inflight_storage_options(), 3, t);
  MatchResult m = cache_->match_prefix(3, t);
  ASSERT_TRUE(cache_->prefetch_from_storage(1, 3, *m.last_host_node, t, 0));
  while (cache_->storage_query_step()) {
  }
  cache_->check_hicache_events();
  while (cache_->storage_io_step()) {
  }
  ASSERT_TRUE(cache_->check_prefetch_progress(1, 0));
  EXPECT_EQ(cache_->pop_prefetch_loaded_tokens(1), 32);
  EXPECT_FALSE(inflight_reports(*cache_, "storage.hash_complete"));
}

TEST(HashCompleteWithoutStorage, NodesWithoutHashesAreFine) {
  struct Plain : CacheFixture {
    void TestBody() override {}
  } f;
  f.run_request(1, tokens_from(1, 16));
  EXPECT_TRUE(f.cache_->match_prefix(1, tokens_from(1, 16)).last_device_node->hash_value.empty());
  EXPECT_FALSE(inflight_reports(*f.cache_, "storage.hash_complete"));
  f.cache_->flush();
  f.expect_sane();
}

// [tree.root] RadixTree::inc_full_lock / dec_full_lock are public (docs/new-component.md points
// component authors at them) and leave the root's permanent lock alone.
TEST_F(WriteMarkerTest, LockCallsOnTheRootLeaveItsLock) {
  run_request(1, tokens_from(1, 16));
  RadixTree& tree = cache_->tree();
  tree.dec_full_lock(*tree.root());
  EXPECT_EQ(tree.root()->full().lock_ref, 1);
  tree.inc_full_lock(*tree.root());
  EXPECT_EQ(tree.root()->full().lock_ref, 1);
  EXPECT_FALSE(inflight_reports(*cache_, "tree.root"));
  --tree.root()->full().lock_ref;  // what dec_full_lock without its root guard leaves
  EXPECT_TRUE(inflight_reports(*cache_, "tree.root"));
  ++tree.root()->full().lock_ref;
  cache_->flush();
}

}  // namespace
}  // namespace kvsim
