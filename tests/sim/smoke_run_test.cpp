// The built-in default job: clean on the fixed core, and deterministic per seed.
#include "sim/smoke_run.h"

#include <gtest/gtest.h>

namespace kvsim::sim {
namespace {

TEST(SmokeRun, FiftySeedsRunCleanOnTheFixedCore) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    SmokeOptions o = default_smoke_options();
    o.seed = seed;
    const SmokeSummary s = run_smoke(o);
    ASSERT_TRUE(s.ok) << "seed " << seed << ": " << s.violation;
    EXPECT_GT(s.requests_done, 0);
  }
}

TEST(SmokeRun, SameSeedSameEventLogDifferentSeedDifferentLog) {
  SmokeOptions o = default_smoke_options();
  o.seed = 42;
  const SmokeSummary a = run_smoke(o);
  const SmokeSummary b = run_smoke(o);
  EXPECT_EQ(a.event_log_hash, b.event_log_hash);
  EXPECT_EQ(a.step, b.step);
  o.seed = 43;
  EXPECT_NE(run_smoke(o).event_log_hash, a.event_log_hash);
}

TEST(SmokeRun, ExercisesEvictionAndLoadBack) {
  const SmokeSummary s = run_smoke(default_smoke_options());
  EXPECT_GT(s.evicted_device_tokens, 0);
  EXPECT_GT(s.load_back_tokens, 0);
  EXPECT_GT(s.device_hit_tokens, 0);
}

}  // namespace
}  // namespace kvsim::sim
