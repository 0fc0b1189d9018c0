// The simulator: determinism, replay, and clean runs of the default scenario on the fixed core.
#include <gtest/gtest.h>

#include "sim/campaign/runner.h"

namespace kvsim::sim {
namespace {

RunResult run(const Scenario& s, uint64_t seed, std::vector<Op>* record = nullptr) {
  return run_scenario(RunRequest{.scenario = &s, .seed = seed, .record = record});
}

TEST(Simulator, DefaultScenarioRunsCleanOnManySeeds) {
  const Scenario s = default_scenario();
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const RunResult r = run(s, seed);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.violation->invariant << ": "
                        << r.violation->detail;
    EXPECT_GT(r.stats.finished, 0);
  }
}

TEST(Simulator, SameSeedSameHashDifferentSeedDifferentHash) {
  const Scenario s = default_scenario();
  const RunResult a = run(s, 7);
  const RunResult b = run(s, 7);
  const RunResult c = run(s, 8);
  EXPECT_EQ(a.event_hash, b.event_hash);
  EXPECT_EQ(a.stats.ops, b.stats.ops);
  EXPECT_NE(a.event_hash, c.event_hash);
}

TEST(Simulator, ExercisesEvictionLoadBackAndRetract) {
  Scenario s = default_scenario();
  s.cache.device_tokens = 512;
  int64_t host_hits = 0;
  int64_t retracted = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const RunResult r = run(s, seed);
    ASSERT_TRUE(r.ok()) << r.violation->invariant << ": " << r.violation->detail;
    host_hits += r.stats.host_hit_tokens;
    retracted += r.stats.retracted;
  }
  EXPECT_GT(host_hits, 0);
  EXPECT_GT(retracted, 0);
}

TEST(Simulator, RecordedOpTraceReplaysToTheSameHash) {
  const Scenario s = default_scenario();
  std::vector<Op> ops;
  const RunResult r = run(s, 3, &ops);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(ops.empty());
  const RunResult replayed = replay_ops(OpTrace{.scenario = s, .seed = 3, .ops = ops});
  EXPECT_TRUE(replayed.ok());
  EXPECT_EQ(replayed.event_hash, r.event_hash);
}

TEST(Simulator, OpTraceSurvivesTheFileRoundTrip) {
  const Scenario s = default_scenario();
  std::vector<Op> ops;
  const RunResult r = run(s, 5, &ops);
  const std::string path = ::testing::TempDir() + "/roundtrip.trace.jsonl";
  write_op_trace(path, OpTrace{.scenario = s, .seed = 5, .ops = ops, .event_hash = r.event_hash});
  const AnyTrace t = read_trace(path);
  ASSERT_EQ(t.kind, "ops");
  EXPECT_EQ(t.ops.ops.size(), ops.size());
  ASSERT_TRUE(t.ops.event_hash.has_value());
  EXPECT_EQ(replay_ops(t.ops).event_hash, r.event_hash);
}

TEST(Simulator, WorkloadTraceReproducesTheRun) {
  const Scenario s = default_scenario();
  const std::vector<Arrival> arrivals = generate_workload(s, 11);
  const std::string path = ::testing::TempDir() + "/workload.trace.jsonl";
  write_workload_trace(path, WorkloadTrace{.scenario = s, .seed = 11, .arrivals = arrivals});
  const AnyTrace t = read_trace(path);
  ASSERT_EQ(t.kind, "workload");
  const RunResult a = run(s, 11);
  const RunResult b = run_scenario(
      RunRequest{.scenario = &t.workload.scenario, .seed = 11, .arrivals = &t.workload.arrivals});
  EXPECT_EQ(a.event_hash, b.event_hash);
}

}  // namespace
}  // namespace kvsim::sim
