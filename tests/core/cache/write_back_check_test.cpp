// [stats.write_back_on_evict] (issue 28, a write policy without a reference): under write-back a
// host copy is written only for a device victim, so the tokens backed up never exceed the
// tokens evicted from the device. Quiet on the clean path (with and without evictions); a
// planted write of a hit node (what write-through does) is reported.
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
  EXPECT_FALSE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
}

TEST(WriteBackOnEvict, AWriteOfAHitNodeIsReported) {
  WriteBackFixture f;
  f.run_request(1, tokens_from(0, 16));
  EXPECT_FALSE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
  TreeNode* node = f.cache_->match_prefix(1, tokens_from(0, 16)).last_device_node;
  ASSERT_FALSE(node->backed_up());
  ASSERT_GT(f.cache_->write_backup(*node), 0);  // written through on a hit, nothing evicted
  f.cache_->flush();
  EXPECT_TRUE(write_back_reported(*f.cache_, "stats.write_back_on_evict"));
}

}  // namespace
}  // namespace kvsim::testing
