// The SGLang target through the simulator: the scheduler model, the executor and the traces run
// SGLang's own HiRadixCache (from the SGLang bundle beside the repo, at its newest snapshot) in
// the driver process, exactly as they run kvsim's core. Skips where Debian's torch or the bundle
// is absent (docs/sglang-hunt.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "sim/campaign/runner.h"
#include "sim/model/driver_process.h"
#include "tests/support/sglang_env.h"

namespace kvsim::sim {
namespace {

constexpr const char* kNewest = "bundle:sglang-6ed5780c4f";

class SglangTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
      GTEST_SKIP() << why;
    setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  }
  static Target newest() { return Target{.kind = Target::Kind::kSglang, .sglang_src = kNewest}; }
  static Scenario small() {
    Scenario s = default_scenario();
    s.workload.requests = 24;
    return s;
  }
};

TEST_F(SglangTarget, TheDefaultScenarioRunsCleanOnSglangsOwnCache) {
  const Scenario s = small();
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 3, .target = newest()});
  ASSERT_TRUE(r.ok()) << r.violation->invariant << ": " << r.violation->detail;
  EXPECT_EQ(r.stats.finished + r.stats.aborted, s.workload.requests);
  EXPECT_GT(r.stats.finished, 0);
  EXPECT_GT(r.stats.content_checks, 0);  // the model's reads were checked
  EXPECT_GT(r.stats.device_hit_tokens, 0);
  // The run names the commit it ran: SGLang's 40-hex id.
  EXPECT_EQ(r.target.sglang_commit.size(), 40u) << r.target.sglang_commit;
}

TEST_F(SglangTarget, ARunIsDeterministicAndItsOpTraceReplaysBitForBit) {
  const Scenario s = small();
  std::vector<Op> ops;
  std::vector<OpCheck> checks;
  const RunResult a = run_scenario(
      RunRequest{.scenario = &s, .seed = 5, .record = &ops, .checks = &checks, .target = newest()});
  const RunResult b = run_scenario(RunRequest{.scenario = &s, .seed = 5, .target = newest()});
  ASSERT_TRUE(a.ok()) << a.violation->invariant << ": " << a.violation->detail;
  EXPECT_EQ(a.event_hash, b.event_hash);
  const OpTrace trace{.scenario = s,
                      .seed = 5,
                      .target = a.target,
                      .ops = ops,
                      .event_hash = a.event_hash,
                      .checks = checks};
  const ReplayReport replay = replay_trace(trace);
  EXPECT_FALSE(replay.problem.has_value()) << describe(trace, *replay.problem);
  EXPECT_EQ(replay.result.event_hash, a.event_hash);
  EXPECT_TRUE(replay.result.ok());
}

TEST_F(SglangTarget, ASourceThatIsNoSglangTreeIsADriverErrorNotAViolation) {
  const Scenario s = small();
  const Target bad{.kind = Target::Kind::kSglang, .sglang_src = "/nonexistent/sglang"};
  EXPECT_THROW(run_scenario(RunRequest{.scenario = &s, .seed = 1, .target = bad}), DriverError);
}

}  // namespace
}  // namespace kvsim::sim
