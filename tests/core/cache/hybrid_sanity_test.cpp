// sanity_check sees broken hybrid state: each planted fault is reported by its stable name.
#include <gtest/gtest.h>

#include "tests/support/cache_fixture.h"
#include "tests/support/hybrid_fixture.h"

namespace kvsim::testing {
namespace {

using HybridSanityTest = HybridFixture;

bool hybrid_reports(HiCache& cache, const std::string& name) {
  SanityReport report;
  cache.sanity_check(report);
  return report.has(name);
}

TEST_F(HybridSanityTest, CleanCacheReportsNothing) {
  serve(1, tokens_from(100, 16));
  cache_->flush();
  SanityReport report;
  cache_->sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

TEST_F(HybridSanityTest, LeakedSwaSlotIsReported) {
  std::optional<IndexVector> leak =
      cache_->side_pool(ComponentType::kSwa)->device_slots().alloc(4);  // nobody owns it
  ASSERT_TRUE(leak);
  EXPECT_TRUE(hybrid_reports(*cache_, "slots.swa_device_ownership"));
  cache_->side_pool(ComponentType::kSwa)->device_slots().free(*leak);
}

TEST_F(HybridSanityTest, DeviceResidentMambaIndicesInTheTreeAreReported) {
  serve(1, tokens_from(100, 16));
  cache_->flush();
  TreeNode* node = cache_->match_prefix(1, tokens_from(100, 16)).last_device_node;
  ASSERT_TRUE(node->has_host(ComponentType::kMamba));
  // What seed 001's bug did: the tree's host indices replaced by a device-resident copy.
  ComponentData& d = node->component(ComponentType::kMamba);
  const IndexVector original = *d.host_value;
  Block block =
      backend_.allocate(MemoryKind::kDevice, sizeof(SlotIndex), backend_.compute_stream(), "moved");
  d.host_value = IndexVector::on_device(Tier::kHost, original.slots(), block);
  EXPECT_TRUE(hybrid_reports(*cache_, "residency"));
  d.host_value = original;
  backend_.free(block);
}

TEST_F(HybridSanityTest, AuxLockBehindTheAccountingIsReported) {
  serve(1, tokens_from(100, 16));
  cache_->flush();
  TreeNode* node = cache_->match_prefix(1, tokens_from(100, 16)).last_device_node;
  ++node->component(ComponentType::kSwa).lock_ref;  // a lock that skipped inc_aux_lock
  EXPECT_TRUE(hybrid_reports(*cache_, "tree.aux"));
  --node->component(ComponentType::kSwa).lock_ref;
}

TEST_F(HybridSanityTest, SwaValueOnAnEvictedNodeIsReported) {
  serve(1, tokens_from(100, 16));
  cache_->flush();
  TreeNode* node = cache_->match_prefix(1, tokens_from(100, 16)).last_device_node;
  std::optional<IndexVector> full = node->full().value;
  node->full().value.reset();  // full KV gone, SWA left behind
  EXPECT_TRUE(hybrid_reports(*cache_, "tree.aux"));
  node->full().value = full;
}

}  // namespace
}  // namespace kvsim::testing
