// Invariants from the mutation survivors of issue 11: load_back.window_whole,
// evict.over_eviction and transfers.index_buffers_returned (and issue 28's: over-eviction on
// every branch, tree.swa_window_adopted). Each test shows the check firing
// on a planted fault and staying quiet on the clean path.
#include <gtest/gtest.h>

#include "core/common/assert.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/hybrid_fixture.h"

namespace kvsim::testing {
namespace {

constexpr ComponentType kSwaComponent = ComponentType::kSwa;

bool load_back_reports(const HiCache& cache, const std::string& invariant) {
  SanityReport report;
  cache.sanity_check(report);
  return report.has(invariant);
}

// SWA only (no Mamba), window 12 = three 4-token nodes.
HiCacheOptions swa_options() {
  HiCacheOptions o = HybridFixture::hybrid_options();
  o.swa_window_tokens = 12;
  o.mamba_device_states = 0;
  return o;
}

struct SwaFixture : HybridFixture {
  SwaFixture() : HybridFixture(swa_options()) {}
  void TestBody() override {}
};

// A (device SWA) → X (SWA tombstone, host copy) → B (evicted, host copy). B's window is B, X
// and A. The load-back must load X and B and keep A's SWA while it makes room in the SWA pool:
// A is not covered by the ancestor lock (X, the device anchor, has no SWA to lock from).
struct WindowState {
  TreeNode* a;
  TreeNode* x;
  TreeNode* b;
  IndexVector hog{Tier::kDevice, {}};
};

WindowState build_window_state(SwaFixture& f) {
  const std::vector<Token> axb = tokens_from(100, 12);
  f.serve(1, tokens_from(100, 4));
  f.serve(1, tokens_from(100, 8));
  f.serve(1, axb);
  f.cache_->flush();  // write-through: every node backed up with its SWA
  WindowState s;
  s.b = f.cache_->match_prefix(1, axb).last_device_node;
  s.x = s.b->parent;
  s.a = s.x->parent;
  EXPECT_TRUE(s.x->has_host(kSwaComponent) && s.b->has_host(kSwaComponent) &&
              s.a->parent->is_root());
  // Tombstone X's SWA (its full KV stays), then evict the leaf B.
  f.cache_->side_pool(kSwaComponent)
      ->device_slots()
      .free(f.cache_->tree().take_aux_value(*s.x, kSwaComponent));
  f.cache_->evict(4);
  EXPECT_TRUE(s.b->evicted());
  EXPECT_FALSE(s.x->evicted());
  // Requests hold all but 4 free SWA slots: loading X and B (8) needs exactly A's 4.
  const int64_t free_swa = f.cache_->side_pool(kSwaComponent)->device_slots().available_size();
  s.hog = *f.cache_->alloc_swa(free_swa - 4);
  return s;
}

// Serves `n` unrelated 8-token requests and lands every copy: a tree of `n` evictable,
// backed-up leaves.
void serve_distinct(SwaFixture& f, int n) {
  for (int i = 0; i < n; ++i)
    f.serve(1, tokens_from(1000 + 100 * i, 8));
  f.cache_->flush();
}

// Takes every free SWA slot (the caller frees them): the next SWA allocation must evict.
IndexVector hold_free_swa(SwaFixture& f) {
  return *f.cache_->alloc_swa(f.cache_->side_pool(kSwaComponent)->device_slots().available_size());
}

TEST(LoadBackWindowWhole, MakingRoomNeverTakesTheWindowValuesAlreadyOnDevice) {
  SwaFixture f;
  WindowState s = build_window_state(f);
  MatchResult m = f.cache_->match_prefix(1, tokens_from(100, 12));
  ASSERT_EQ(m.best_match_node, s.b);
  // A's SWA is the only evictable SWA value and it is in the window: the load must decline
  // (not take it). A core that does not pin it loads a window with a hole, and the
  // load_back.window_whole assertion in init_load_back fires.
  LoadBackResult lb = f.cache_->init_load_back(*m.best_match_node);
  EXPECT_FALSE(lb.loaded);
  EXPECT_TRUE(s.a->has_device(kSwaComponent));
  EXPECT_EQ(f.cache_->check_load_back_window(*s.x),
            "node " + std::to_string(s.x->id) + " of the SWA window ending at node " +
                std::to_string(s.x->id) + " has no device SWA value");
  // With the room there, the load brings X and B back and the window is whole.
  f.cache_->free_swa(s.hog);
  lb = f.cache_->init_load_back(*f.cache_->match_prefix(1, tokens_from(100, 12)).best_match_node);
  ASSERT_TRUE(lb.loaded);
  EXPECT_EQ(lb.swa_loaded_tokens, 8);
  EXPECT_EQ(f.cache_->check_load_back_window(*s.b), "");
  f.cache_->ready_to_load_host_cache();
  f.cache_->flush();
  f.expect_sane();
}

TEST(LoadBackWindowWhole, CheckNamesTheFirstHoleInTheWindow) {
  SwaFixture f;
  const std::vector<Token> axb = tokens_from(100, 12);
  f.serve(1, tokens_from(100, 4));
  f.serve(1, tokens_from(100, 8));
  f.serve(1, axb);
  f.cache_->flush();
  TreeNode* b = f.cache_->match_prefix(1, axb).last_device_node;
  TreeNode* a = b->parent->parent;
  EXPECT_EQ(f.cache_->check_load_back_window(*b), "");
  f.cache_->side_pool(kSwaComponent)
      ->device_slots()
      .free(f.cache_->tree().take_aux_value(*a, kSwaComponent));
  EXPECT_EQ(f.cache_->check_load_back_window(*b),
            "node " + std::to_string(a->id) + " of the SWA window ending at node " +
                std::to_string(b->id) + " has no device SWA value");
}

TEST(OverEviction, AllocationsUnderPressureEvictOnlyTheShortfall) {
  SwaFixture f;
  serve_distinct(f, 12);
  // Fill both pools so each allocation below must evict.
  IndexVector swa_hog = hold_free_swa(f);
  IndexVector dev_hog = *f.cache_->alloc_device(f.cache_->available_device_size());
  const int64_t evicted_before = f.cache_->stats().evicted_device_tokens;
  IndexVector more = *f.cache_->alloc_device(4);
  IndexVector swa_more = *f.cache_->alloc_swa(12);  // spans several 8-token victims
  EXPECT_GT(f.cache_->stats().evicted_device_tokens, evicted_before);
  EXPECT_EQ(f.cache_->stats().over_evicted_tokens, 0);
  EXPECT_FALSE(load_back_reports(*f.cache_, "evict.over_eviction"));
  EXPECT_EQ(f.cache_->stats().needless_evictions, 0);
  for (const IndexVector& v : {swa_hog, swa_more})
    f.cache_->free_swa(v);
  for (const IndexVector& v : {dev_hog, more})
    f.cache_->free_device(v);
}

TEST(OverEviction, AnAllocatorThatEvictsPastItsShortfallIsReported) {
  SwaFixture f;
  serve_distinct(f, 6);
  // A planted allocator: it needs 4 more SWA slots but asks the eviction for 24.
  IndexVector hog = hold_free_swa(f);
  ASSERT_EQ(f.cache_->evict_swa(24), 24);
  f.cache_->note_eviction(4, /*free_before=*/0,
                          f.cache_->side_pool(kSwaComponent)->device_slots().available_size());
  EXPECT_EQ(f.cache_->stats().over_evicted_tokens, 20);
  EXPECT_TRUE(load_back_reports(*f.cache_, "evict.over_eviction"));
  f.cache_->free_swa(hog);
}

// Issue 28, mutant 138 of seed 23: a host eviction is accounted on every branch of the
// backup's allocation (note_host_eviction); only SGLang's eviction amounts, which evict a
// node's whole length by design, have their surplus excused.
TEST(OverEviction, AHostEvictionPastItsShortfallIsExcusedOnlyUnderSglangAmounts) {
  for (const bool sglang_amounts : {false, true}) {
    SCOPED_TRACE(sglang_amounts ? "SGLang's amounts" : "default amounts");
    SwaFixture f;
    f.cache_->set_sglang_eviction_amounts(sglang_amounts);
    serve_distinct(f, 6);
    f.cache_->evict(f.cache_->tree().evictable_size());  // six 8-token host-only leaves
    IndexVector hog = *f.cache_->host_slots().alloc(f.cache_->host_slots().available_size());
    // A backup short of 4 host tokens that evicts 24 (three 8-token victims), as a node's
    // whole length would: 20 tokens past the shortfall, more than the last victim.
    ASSERT_EQ(f.cache_->evict_host(24), 24);
    f.cache_->note_host_eviction(4, /*free_before=*/0);
    EXPECT_EQ(f.cache_->stats().over_evicted_tokens, sglang_amounts ? 0 : 20);
    EXPECT_EQ(load_back_reports(*f.cache_, "evict.over_eviction"), !sglang_amounts);
    EXPECT_FALSE(load_back_reports(*f.cache_, "evict.needless"));
    f.cache_->host_slots().free(hog);
  }
}

// Issue 28, mutant 343 of seed 28: an eviction starts only when the pool cannot hold the
// allocation as it is. SGLang's amounts excuse a surplus, never an eviction that was not
// needed at all (a load-back that evicts before trying the pool it fits in).
TEST(NeedlessEviction, AnEvictionForAnAllocationThatFitsIsReportedInBothModes) {
  for (const bool sglang_amounts : {false, true}) {
    SCOPED_TRACE(sglang_amounts ? "SGLang's amounts" : "default amounts");
    SwaFixture f;
    f.cache_->set_sglang_eviction_amounts(sglang_amounts);
    serve_distinct(f, 6);
    const int64_t free_before = f.cache_->available_device_size();
    ASSERT_GE(free_before, 8);
    // A planted allocator: 8 device slots are free for its 8, yet it evicts a victim first.
    ASSERT_GT(f.cache_->evict(8), 0);
    f.cache_->note_eviction(8, free_before, f.cache_->available_device_size());
    EXPECT_EQ(f.cache_->stats().needless_evictions, 1);
    EXPECT_TRUE(load_back_reports(*f.cache_, "evict.needless"));
  }
}

TEST(NeedlessEviction, AHostEvictionForABackupThatFitsIsReported) {
  SwaFixture f;
  serve_distinct(f, 6);
  f.cache_->evict(f.cache_->tree().evictable_size());  // six 8-token host-only leaves
  const int64_t free_before = f.cache_->host_slots().available_size();
  ASSERT_GE(free_before, 8);
  ASSERT_EQ(f.cache_->evict_host(8), 8);
  f.cache_->note_host_eviction(8, free_before);
  EXPECT_TRUE(load_back_reports(*f.cache_, "evict.needless"));
}

// Issue 28, mutant 1645 of seed 23: an insert that owns every SWA slot of a node's range
// caches that window on the node (tree.swa_window_adopted, verified inside insert).
TEST(SwaWindowAdopted, AnInsertThatOwnsItsWindowCachesIt) {
  SwaFixture f;
  const std::vector<Token> t = tokens_from(100, 8);
  f.serve(1, t);      // a new 8-token leaf: the insert adopted the request's SWA slots
  f.cache_->flush();  // the write-through's lock on the leaf is released
  TreeNode* leaf = f.cache_->match_prefix(1, t).last_device_node;
  ASSERT_FALSE(leaf->is_root());
  ASSERT_EQ(leaf->token_count(), 8);
  ASSERT_TRUE(leaf->has_device(kSwaComponent));
  AuxInsertValues aux;
  aux.swa = IndexVector(Tier::kDevice, {11, 12, 13, 14, 15, 16, 17, 18});
  const RadixTree& tree = f.cache_->tree();
  EXPECT_EQ(tree.check_swa_adopted(*leaf, aux, 0, 8), "");
  // Planted: the leaf never took the window the request owned.
  const IndexVector window = f.cache_->tree().take_aux_value(*leaf, kSwaComponent);
  EXPECT_EQ(tree.check_swa_adopted(*leaf, aux, 0, 8),
            "tree.swa_window_adopted: an insert owned every SWA slot of tokens [0, 8) of node " +
                std::to_string(leaf->id) + " and left the node without an SWA value");
  // Not the request's own window: part of it came from its match, or it dropped a slot.
  aux.owned_from = 4;
  EXPECT_EQ(tree.check_swa_adopted(*leaf, aux, 0, 8), "");
  aux.owned_from = 0;
  aux.swa = IndexVector(Tier::kDevice, {11, 12, 13, 0, 15, 16, 17, 18});
  EXPECT_EQ(tree.check_swa_adopted(*leaf, aux, 0, 8), "");
  f.cache_->side_pool(kSwaComponent)->device_slots().free(window);
}

TEST(UnderEviction, AnAllocationFailsOnlyWhenNothingIsLeftToEvict) {
  SwaFixture f;
  serve_distinct(f, 6);
  // Everything evictable goes, and the allocation still cannot be served: a rightful failure.
  const int64_t all = f.cache_->available_device_size() + f.cache_->tree().evictable_size();
  EXPECT_FALSE(f.cache_->alloc_device(all + f.cache_->options().page_size).has_value());
  EXPECT_EQ(f.cache_->stats().under_evicted_allocations, 0);
  EXPECT_FALSE(load_back_reports(*f.cache_, "evict.under_eviction"));
}

TEST(UnderEviction, AnAllocatorThatSkipsTheEvictionIsReported) {
  SwaFixture f;
  serve_distinct(f, 6);
  // A planted allocator: the SWA pool is full, the tree holds evictable windows, and it
  // gives up without evicting (mutant 368 of issue 11 did this for a shortfall of one slot).
  IndexVector hog = hold_free_swa(f);
  ASSERT_NE(f.cache_->tree().next_aux_victim(kSwaComponent), nullptr);
  f.cache_->begin_allocation();
  ASSERT_FALSE(f.cache_->side_pool(kSwaComponent)->alloc_for_request(4).has_value());
  f.cache_->note_failed_allocation();
  EXPECT_EQ(f.cache_->stats().under_evicted_allocations, 1);
  EXPECT_TRUE(load_back_reports(*f.cache_, "evict.under_eviction"));
  f.cache_->free_swa(hog);
}

TEST(HostBalance, TheCountersAddUpAndAHostCopyDroppedUncountedIsReported) {
  SwaFixture f;
  serve_distinct(f, 6);
  ASSERT_GT(f.cache_->stats().write_through_tokens, 0);
  f.cache_->evict(f.cache_->tree().evictable_size());  // backed-up leaves become host-only
  f.cache_->evict_host(8);
  ASSERT_GT(f.cache_->stats().evicted_host_tokens, 0);
  EXPECT_FALSE(load_back_reports(*f.cache_, "stats.host_balance"));
  // A planted host eviction that frees a host leaf without counting it.
  TreeNode* victim = f.cache_->tree().next_host_victim();
  ASSERT_NE(victim, nullptr);
  const ReleasedSlots released = f.cache_->tree().remove_host_leaf(*victim);
  f.cache_->host_slots().free(*released.host[0]);
  for (size_t t = 1; t < kComponentTypesMax; ++t) {
    if (!released.host[t]) continue;
    f.cache_->side_pool(static_cast<ComponentType>(t))->host_slots().free(*released.host[t]);
  }
  EXPECT_TRUE(load_back_reports(*f.cache_, "stats.host_balance"));
}

TEST(IndexBuffersReturned, AnIndexBufferNeverReleasedIsReported) {
  SwaFixture f;
  f.serve(1, tokens_from(100, 8));
  f.cache_->flush();
  EXPECT_EQ(f.cache_->controller().live_index_buffers(), 0);
  EXPECT_FALSE(load_back_reports(*f.cache_, "transfers.index_buffers_returned"));
  // A planted transfer that uploads its indices and never gives them back.
  IndexVector host = *f.cache_->host_slots().alloc(4);
  IndexVector dev = *f.cache_->device_slots().alloc(4);
  ResolvedIndices r = f.cache_->controller().move_indices(host, dev);
  EXPECT_EQ(f.cache_->controller().live_index_buffers(), 2);
  EXPECT_TRUE(load_back_reports(*f.cache_, "transfers.index_buffers_returned"));
  f.cache_->controller().release_after(r, f.cache_->controller().load_stream());
  EXPECT_EQ(f.cache_->controller().live_index_buffers(), 0);
  f.cache_->host_slots().free(host);
  f.cache_->device_slots().free(dev);
  f.cache_->flush();
  EXPECT_FALSE(load_back_reports(*f.cache_, "transfers.index_buffers_returned"));
}

}  // namespace
}  // namespace kvsim::testing
