// Hybrid models through HiCache: SWA windows and tombstones, Mamba states with copy-on-write,
// side-pool transfers on backup and load-back, and seeds 000, 001 and 002 on these paths.
#include <gtest/gtest.h>

#include "core/common/assert.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/hybrid_fixture.h"

namespace kvsim::testing {
namespace {

constexpr ComponentType kSwa = ComponentType::kSwa;
constexpr ComponentType kMamba = ComponentType::kMamba;

std::vector<Token> concat(std::vector<Token> a, const std::vector<Token>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

using HybridCacheTest = HybridFixture;

TEST_F(HybridCacheTest, SecondRequestReusesFullSwaAndMambaState) {
  const std::vector<Token> a = tokens_from(100, 16);
  const std::vector<Token> ab = concat(a, tokens_from(500, 8));
  EXPECT_EQ(serve(1, a).device_hit_tokens, 0);
  const AdmitOutcome second = serve(1, ab);  // serve() checks every pool's prefix bytes
  EXPECT_EQ(second.device_hit_tokens, 16);
  EXPECT_TRUE(second.mamba_hit);
  MatchResult m = cache_->match_prefix(1, ab);
  EXPECT_EQ(m.device_hit_length(), 24);
  EXPECT_TRUE(node_ok(*m.last_device_node));
}

TEST_F(HybridCacheTest, MambaCopyOnWriteLeavesTheTreeStateAlone) {
  const std::vector<Token> a = tokens_from(100, 16);
  serve(1, a);
  MatchResult m = cache_->match_prefix(1, a);
  ASSERT_TRUE(m.last_device_node->has_device(kMamba));
  RequestKV req(*cache_, 1);
  ASSERT_TRUE(req.admit(a));
  const SlotIndex tree_state = (*m.last_device_node->component(kMamba).value)[0];
  EXPECT_NE(*req.mamba_state(), tree_state);
  // The request advances its own state: the tree's copy must not change.
  const std::vector<Token> longer = concat(a, tokens_from(900, 4));
  ASSERT_TRUE(req.extend(longer.size()));
  forward(req, longer, req.owned_from());
  EXPECT_TRUE(node_ok(*m.last_device_node));
  req.abort();
}

TEST_F(HybridCacheTest, SplitLeavesTheUpperHalfWithoutAState) {
  const std::vector<Token> a = tokens_from(100, 16);
  serve(1, a);
  // A request sharing only 8 tokens splits the node; the upper half has no state, so it is
  // no match end for a Mamba model and the request starts from the root.
  const std::vector<Token> other = concat(tokens_from(100, 8), tokens_from(700, 8));
  MatchResult m = cache_->match_prefix(1, other);
  EXPECT_EQ(m.device_hit_length(), 0);
  EXPECT_TRUE(m.last_device_node->is_root());
  serve(1, other);
  MatchResult again = cache_->match_prefix(1, other);
  EXPECT_EQ(again.device_hit_length(), 16);
}

TEST_F(HybridCacheTest, SwaTombstonesOutsideTheWindowStillMatch) {
  // Three nodes of 8 tokens: A, A+B, A+B+C. Window 8: a match ending at C needs only C's SWA.
  const std::vector<Token> a = tokens_from(100, 8);
  const std::vector<Token> ab = concat(a, tokens_from(200, 8));
  const std::vector<Token> abc = concat(ab, tokens_from(300, 8));
  serve(1, a);
  serve(1, ab);
  serve(1, abc);
  MatchResult m = cache_->match_prefix(1, abc);
  TreeNode* c = m.last_device_node;
  TreeNode* b = c->parent;
  TreeNode* top = b->parent;
  ASSERT_FALSE(top->is_root());
  // Tombstone A's and B's SWA (internal nodes): LRU order picks them first after touching C.
  cache_->flush();  // write-through copies done: their locks are gone
  cache_->tree().touch(*c);
  EXPECT_EQ(cache_->evict_swa(16), 16);
  EXPECT_FALSE(top->has_device(kSwa));
  EXPECT_FALSE(b->has_device(kSwa));
  EXPECT_TRUE(c->has_device(kSwa));
  EXPECT_FALSE(b->evicted());  // full KV stays: a tombstone, not an eviction
  // The full prefix still matches on device; the shorter one ending at B does not.
  EXPECT_EQ(cache_->match_prefix(1, abc).device_hit_length(), 24);
  EXPECT_EQ(cache_->match_prefix(1, ab).device_hit_length(), 0);
  // A request re-serving A+B revives B's window with its own SWA slots.
  serve(1, ab);
  EXPECT_TRUE(b->has_device(kSwa));
  EXPECT_TRUE(node_ok(*b));
}

TEST_F(HybridCacheTest, WindowLockProtectsOnlyTheWindowAndSurvivesASplit) {
  const std::vector<Token> abc = tokens_from(100, 24);
  serve(1, tokens_from(100, 8));
  serve(1, tokens_from(100, 16));
  serve(1, abc);
  MatchResult m = cache_->match_prefix(1, abc);
  TreeNode* c = m.last_device_node;
  cache_->flush();
  LockRecord lock = cache_->lock(*c);
  EXPECT_EQ(c->component(kSwa).lock_ref, 1);
  EXPECT_EQ(c->parent->component(kSwa).lock_ref, 0);  // outside the 8-token window
  EXPECT_EQ(cache_->tree().aux_protected_size(kSwa), 8);
  // Tombstoning may take what is outside the window, never what is inside it.
  cache_->evict_swa(1000);
  EXPECT_TRUE(c->has_device(kSwa));
  // A split of the locked node (a request sharing 4 of its tokens) keeps release exact.
  serve(1, concat(tokens_from(100, 20), tokens_from(900, 4)));
  cache_->flush();
  EXPECT_EQ(c->token_count(), 4);
  EXPECT_EQ(c->parent->component(kSwa).lock_ref, 1);
  cache_->unlock(lock);
  EXPECT_EQ(cache_->tree().aux_protected_size(kSwa), 0);
}

// Seed 002 on the SWA path: the load-back is anchored on best_match_node and brings back only
// the window ending there; the nodes above the window have no SWA copy anywhere, and a walk
// past the window reset point would hit them ("neither device nor host value").
TEST(HybridSeed002, SwaLoadBackStopsAtTheWindowResetPoint) {
  HiCacheOptions o = HybridFixture::hybrid_options();
  o.write_policy = WritePolicy::kWriteBack;  // back up only on eviction, after the tombstones
  struct Fixture : HybridFixture {
    explicit Fixture(HiCacheOptions opts) : HybridFixture(opts) {}
    void TestBody() override {}
  } f(o);
  const std::vector<Token> abc = tokens_from(100, 24);
  f.serve(1, tokens_from(100, 8));
  f.serve(1, tokens_from(100, 16));
  f.serve(1, abc);
  MatchResult m = f.cache_->match_prefix(1, abc);
  TreeNode* c = m.last_device_node;
  TreeNode* b = c->parent;
  TreeNode* a = b->parent;
  f.cache_->flush();
  f.cache_->tree().touch(*c);
  f.cache_->evict_swa(16);  // A and B lose their SWA before any backup
  ASSERT_FALSE(a->has_device(kSwa));
  f.cache_->evict(1000);  // writes each leaf back (with what SWA it still has), then drops it
  ASSERT_TRUE(a->evicted() && b->evicted() && c->evicted());
  ASSERT_FALSE(a->has_host(kSwa));
  ASSERT_FALSE(b->has_host(kSwa));
  ASSERT_TRUE(c->has_host(kSwa));

  MatchResult after = f.cache_->match_prefix(1, abc);
  EXPECT_EQ(after.best_match_node, c);
  EXPECT_EQ(after.host_hit_length, 24);
  LoadBackResult lb = f.cache_->init_load_back(*after.best_match_node);
  ASSERT_TRUE(lb.loaded);
  EXPECT_EQ(lb.swa_loaded_tokens, 8);  // C only: the window, not the path
  EXPECT_TRUE(lb.mamba_loaded);
  f.cache_->ready_to_load_host_cache();
  f.cache_->flush();
  EXPECT_TRUE(f.node_ok(*a));
  EXPECT_TRUE(f.node_ok(*c));
  EXPECT_FALSE(a->has_device(kSwa));
  // The next request is served from device, every pool checked by serve().
  EXPECT_EQ(f.serve(1, concat(abc, tokens_from(600, 4))).device_hit_tokens, 24);
  f.expect_sane();
}

// Seed 000 on the hybrid path: the index buffers of the SWA and Mamba pool transfers must be
// recorded on the load stream, or the next allocation of the same size on the compute stream
// reuses them while the copy still reads them.
TEST_F(HybridCacheTest, Seed000SidePoolIndexBuffersOutliveTheirCopy) {
  const std::vector<Token> a = tokens_from(100, 16);
  serve(1, a);
  MatchResult m = cache_->match_prefix(1, a);
  TreeNode* node = m.last_device_node;
  cache_->flush();  // write-through acks: the node is backed up, unlocked
  ASSERT_TRUE(node->has_host(kSwa) && node->has_host(kMamba));
  cache_->evict(1000);
  ASSERT_TRUE(node->evicted());

  MatchResult again = cache_->match_prefix(1, a);
  LoadBackResult lb = cache_->init_load_back(*again.best_match_node);
  ASSERT_TRUE(lb.loaded);
  cache_->ready_to_load_host_cache();
  // The caller moves on: compute-stream allocations of every index-buffer size, written at
  // once. Without record_stream these would take the in-flight index blocks.
  std::vector<Block> grabbed;
  for (size_t bytes : {16 * sizeof(SlotIndex), 1 * sizeof(SlotIndex)}) {
    for (int i = 0; i < 4; ++i) {
      Block b = backend_.allocate(MemoryKind::kDevice, bytes, backend_.compute_stream(), "next");
      std::vector<std::byte> junk(bytes, std::byte{0x5A});
      backend_.upload_async(backend_.compute_stream(), b, 0, junk, "next batch");
      grabbed.push_back(b);
    }
  }
  while (backend_.step(backend_.compute_stream())) {
  }
  backend_.synchronize();
  EXPECT_TRUE(backend_.violations().empty())
      << backend_.violations().front().kind << ": " << backend_.violations().front().detail;
  for (const Block& b : grabbed)
    backend_.free(b);
  cache_->check_hicache_events();
  EXPECT_TRUE(node_ok(*node));
}

// Seed 001 on the hybrid path: resolving pool transfers for a kernel builds new device-resident
// objects; the transfers (copied from tree state) and the tree stay host-resident.
TEST_F(HybridCacheTest, Seed001ResolvingPoolTransfersNeverMutatesThem) {
  const std::vector<Token> a = tokens_from(100, 16);
  serve(1, a);
  cache_->flush();
  TreeNode* node = cache_->match_prefix(1, a).last_device_node;
  std::vector<PoolTransfer> transfers{
      PoolTransfer{.pool = PoolName::kMamba,
                   .host_indices = *node->component(kMamba).host_value,
                   .device_indices = *node->component(kMamba).value,
                   .nodes = {node->id}},
      PoolTransfer{.pool = PoolName::kSwa,
                   .host_indices = *node->component(kSwa).host_value,
                   .device_indices = *node->component(kSwa).value,
                   .nodes = {node->id}}};
  const std::vector<PoolTransfer> before = transfers;
  std::vector<ResolvedPoolTransfer> resolved =
      cache_->controller().resolve_pool_transfers(transfers, /*to_host=*/false);
  ASSERT_EQ(resolved.size(), 2u);
  for (size_t i = 0; i < transfers.size(); ++i) {
    EXPECT_EQ(transfers[i].host_indices, before[i].host_indices);
    EXPECT_EQ(transfers[i].host_indices.residency(), Residency::kHost);
    EXPECT_EQ(transfers[i].device_indices.residency(), Residency::kHost);
    EXPECT_EQ(resolved[i].indices.src.residency(), Residency::kDevice);
    EXPECT_EQ(resolved[i].indices.dst.residency(), Residency::kDevice);
  }
  EXPECT_EQ(node->component(kMamba).host_value->residency(), Residency::kHost);
  for (const ResolvedPoolTransfer& r : resolved) {
    cache_->controller().release_after(r.indices, backend_.compute_stream());
  }
}

TEST_F(HybridCacheTest, MambaLoadBackRollsBackItsPreallocationWhenDeviceIsFull) {
  const std::vector<Token> a = tokens_from(100, 16);
  serve(1, a);
  cache_->flush();
  TreeNode* node = cache_->match_prefix(1, a).last_device_node;
  cache_->evict(1000);
  ASSERT_TRUE(node->evicted());
  // Every device KV slot goes to a running request: the load cannot be placed.
  RequestKV hog(*cache_, 2);
  ASSERT_TRUE(hog.admit(tokens_from(5000, 4), /*allow_load_back=*/false));
  ASSERT_TRUE(hog.extend(64));
  const int64_t states_before = cache_->side_pool(kMamba)->device_slots().available_size();
  const int64_t swa_before = cache_->side_pool(kSwa)->device_slots().available_size();
  LoadBackResult lb = cache_->init_load_back(*cache_->match_prefix(1, a).best_match_node);
  EXPECT_FALSE(lb.loaded);
  EXPECT_EQ(cache_->side_pool(kMamba)->device_slots().available_size(), states_before);
  EXPECT_EQ(cache_->side_pool(kSwa)->device_slots().available_size(), swa_before);
  EXPECT_EQ(node->full().host_lock_ref, 0);  // host protection released too
  expect_sane();
  hog.abort();
}

TEST(HybridWriteBack, EvictionWritesSidePoolsAndLoadBackRestoresThem) {
  HiCacheOptions o = HybridFixture::hybrid_options();
  o.write_policy = WritePolicy::kWriteBack;
  struct Fixture : HybridFixture {
    explicit Fixture(HiCacheOptions opts) : HybridFixture(opts) {}
    void TestBody() override {}
  } f(o);
  const std::vector<Token> a = tokens_from(100, 16);
  f.serve(1, a);
  TreeNode* node = f.cache_->match_prefix(1, a).last_device_node;
  EXPECT_FALSE(node->backed_up());
  f.cache_->evict(1000);  // write_back: backs up (all pools), then drops the device copy
  ASSERT_TRUE(node->evicted());
  EXPECT_TRUE(node->has_host(kSwa));
  EXPECT_TRUE(node->has_host(kMamba));
  EXPECT_TRUE(f.node_ok(*node));
  const AdmitOutcome out = f.serve(1, concat(a, tokens_from(800, 4)));
  EXPECT_EQ(out.host_hit_tokens, 16);
  EXPECT_TRUE(out.mamba_hit);
  f.expect_sane();
}

TEST_F(HybridCacheTest, ManyRequestsUnderPressureStaySane) {
  // A deterministic churn: shared prefixes, growing sessions, all pools under pressure.
  uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  std::vector<std::vector<Token>> sessions(4, std::vector<Token>{});
  for (int r = 0; r < 120; ++r) {
    std::vector<Token>& s = sessions[next() % sessions.size()];
    if (s.size() > 40) s.resize(8);
    const std::vector<Token> tail =
        tokens_from(static_cast<Token>(1000 + next() % 50000), 4 + next() % 8);
    s.insert(s.end(), tail.begin(), tail.end());
    serve(static_cast<Namespace>(1), s);
    if (r % 7 == 0) cache_->flush();
    if (r % 11 == 0) cache_->evict_swa(8);
    SanityReport report;
    cache_->sanity_check(report);
    ASSERT_TRUE(report.ok()) << "request " << r << ": " << report.summary();
  }
  EXPECT_GT(cache_->stats().load_back_tokens, 0);
}

}  // namespace
}  // namespace kvsim::testing
