// Crash evidence (docs/hunt.md, "Crashes"): a hunt unit that dies by a signal leaves an op
// trace, recorded by re-running the unit in a child process; the trace replays to the same
// crash and shrinks, with every replay in a child so the crash never takes the hunt with it.
// The crash is planted by HiCache's test-only hook KVSIM_TEST_SEGV_AT_INSERT (a SIGSEGV at the
// cache's Nth insert), which a separate `kvsim replay` process sees too.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "sim/campaign/hunt.h"
#include "sim/campaign/shrink.h"
#include "sim/config/scenario.h"
#include "sim/trace/trace.h"

namespace kvsim::sim {
namespace {

class PlantedSegv {
 public:
  explicit PlantedSegv(const char* at) { ::setenv("KVSIM_TEST_SEGV_AT_INSERT", at, 1); }
  ~PlantedSegv() { ::unsetenv("KVSIM_TEST_SEGV_AT_INSERT"); }
};

TEST(CrashEvidence, ASegvInAHuntUnitLeavesATraceThatReplaysToTheCrashAndShrinks) {
  HuntOptions o;
  o.seed = 7;
  o.time_budget_s = 0;
  o.max_units = 3;
  o.jobs = 1;
  o.unit_timeout_s = 120;  // units run in worker processes: the crash kills a worker only
  o.shrink_replays = 400;
  o.trace_dir = ::testing::TempDir() + "/crash_hunt";
  std::filesystem::remove_all(o.trace_dir);
  PlantedSegv planted("3");
  const HuntReport r = run_hunt(o);
  ASSERT_EQ(r.failures.size(), 1u);
  const HuntFailure& f = r.failures.front();
  EXPECT_EQ(f.invariant, "crash");
  EXPECT_NE(f.detail.find("signal " + std::to_string(SIGSEGV)), std::string::npos) << f.detail;
  ASSERT_FALSE(f.trace.empty()) << "no op trace for the crash";
  EXPECT_TRUE(f.hang_scenario.empty());
  EXPECT_EQ(r.unit_log.at(f.unit).verdict, "crash");

  const OpTrace recorded = read_trace(f.trace).ops;
  ASSERT_TRUE(recorded.violation);
  EXPECT_EQ(recorded.violation->invariant, "crash");
  // The recorded ops replay (in a child) to the same crash.
  const IsolatedReplay again = replay_isolated(recorded);
  ASSERT_TRUE(again.violation);
  EXPECT_TRUE(same_failure(*recorded.violation, *again.violation)) << again.violation->detail;

  // Shrunk in a child process, to a trace that still crashes the same way.
  ASSERT_FALSE(f.shrunk_trace.empty()) << f.shrink_note;
  const OpTrace shrunk = read_trace(f.shrunk_trace).ops;
  EXPECT_LT(shrunk.ops.size(), recorded.ops.size());
  const IsolatedReplay shrunk_again = replay_isolated(shrunk);
  ASSERT_TRUE(shrunk_again.violation);
  EXPECT_EQ(shrunk_again.violation->invariant, "crash");
  for (uint8_t applied : shrunk_again.applied)
    EXPECT_EQ(applied, 1) << "the shrunk crash trace holds an op that does not apply";
}

TEST(CrashEvidence, WithoutTheHookTheShrunkTraceDoesNotCrash) {
  HuntOptions o;
  o.seed = 7;
  o.time_budget_s = 0;
  o.max_units = 1;
  o.jobs = 1;
  o.unit_timeout_s = 120;
  o.shrink = false;
  o.trace_dir = ::testing::TempDir() + "/crash_hunt_off";
  std::filesystem::remove_all(o.trace_dir);
  std::string trace;
  {
    PlantedSegv planted("2");
    const HuntReport r = run_hunt(o);
    ASSERT_EQ(r.failures.size(), 1u);
    trace = r.failures.front().trace;
    ASSERT_FALSE(trace.empty());
  }
  // The crash was the hook's, not the ops': unplanted, the same ops replay without one.
  const IsolatedReplay replay = replay_isolated(read_trace(trace).ops);
  EXPECT_FALSE(replay.violation && replay.violation->invariant == "crash");
}

}  // namespace
}  // namespace kvsim::sim
