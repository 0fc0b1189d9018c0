// Invariant backend.memory_owned at the cache's level: everything the backend holds under a
// hybrid HiCache (main, SWA and Mamba pools, device and host, plus transfer index buffers in
// flight) is named by the cache, through write-backs, evictions and load-backs — so the
// complete account (CacheController::memory_problem with no outside owner) stays "" on a
// correct cache, and a leaked index buffer is reported.
#include <gtest/gtest.h>

#include <string>

#include "core/common/assert.h"
#include "tests/support/cache_fixture.h"
#include "tests/support/hybrid_fixture.h"

namespace kvsim::testing {
namespace {

class BackendMemoryTest : public HybridFixture {
 protected:
  std::string complete_account() const { return cache_->controller().memory_problem({}); }
};

TEST_F(BackendMemoryTest, AHybridCacheOwnsEveryBlockThroughBackupsAndLoadBacks) {
  EXPECT_EQ(complete_account(), "");
  const std::vector<Token> a = tokens_from(100, 16);
  const std::vector<Token> b = tokens_from(300, 16);
  serve(1, a);
  EXPECT_EQ(complete_account(), "");  // backups in flight: their index frees are deferred
  serve(1, b);
  cache_->flush();
  EXPECT_EQ(complete_account(), "");
  cache_->evict(64);
  EXPECT_EQ(complete_account(), "");
  TreeNode* node = cache_->match_prefix(1, a).best_match_node;
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(cache_->init_load_back(*node).loaded);
  EXPECT_EQ(complete_account(), "");  // a queued load holds no buffer yet
  cache_->ready_to_load_host_cache();
  EXPECT_GT(backend_.memory_census().device_pending_blocks, 0u);
  EXPECT_EQ(complete_account(), "");  // issued: buffers freed behind the load stream
  backend_.drain();
  cache_->check_hicache_events();
  EXPECT_EQ(complete_account(), "");
  EXPECT_EQ(cache_->controller().memory_problem(), "");
}

TEST_F(BackendMemoryTest, AnIndexBufferLeakedUnderTheCacheIsReported) {
  serve(1, tokens_from(100, 8));
  cache_->flush();
  CacheController& ctl = cache_->controller();
  IndexVector host = *cache_->host_slots().alloc(4);
  IndexVector dev = *cache_->device_slots().alloc(4);
  ResolvedIndices r = ctl.move_indices(host, dev);
  // release_after as mutant 993 left it: both counted as given back, the destination kept.
  const Block decoy = backend_.allocate(MemoryKind::kDevice, r.dst.size() * sizeof(SlotIndex),
                                        backend_.compute_stream(), "decoy");
  ctl.release_after(
      ResolvedIndices{r.src, IndexVector::on_device(Tier::kHost, r.dst.slots(), decoy)},
      ctl.load_stream());
  EXPECT_EQ(ctl.live_index_buffers(), 0);
  const std::string problem = ctl.memory_problem();
  EXPECT_NE(problem.find("never freed (leak)"), std::string::npos) << problem;
  backend_.free(r.dst.device_block());
  cache_->host_slots().free(host);
  cache_->device_slots().free(dev);
  cache_->flush();
  EXPECT_EQ(complete_account(), "");
}

}  // namespace
}  // namespace kvsim::testing
