// `kvsim hunt --time-budget S` ends by S seconds: a unit still running at the end of the budget
// is cut off there, and the shrinks of what the hunt found fit in the same budget (issue 32: a
// hunt with a 60 s budget found its failures in 11 s and then shrank them until 110 s).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "core/tree/component.h"
#include "core/tree/radix_tree.h"
#include "sim/campaign/hunt.h"
#include "tests/support/planted_component.h"

namespace kvsim::sim {
namespace {

// Makes every run (hunt unit or shrink replay) slow to start: a shrink's hundreds of replays
// then take far longer than the budget.
class SlowStart final : public ExecutorObserver {
 public:
  explicit SlowStart(int ms) : ms_(ms) {}
  void before_op(size_t index, const Op&) override {
    if (index == 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms_));
  }
  void after_op(size_t, const Op&, const OpOutcome&) override {}
  void on_fault(std::string_view) override {}
  void on_executor_gone() override {}

 private:
  int ms_;
};

// Never gets past its 10th op: a unit that would run forever.
class Stuck final : public ExecutorObserver {
 public:
  void before_op(size_t index, const Op&) override {
    while (index >= 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  void after_op(size_t, const Op&, const OpOutcome&) override {}
  void on_fault(std::string_view) override {}
  void on_executor_gone() override {}
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What the end of a budget may take beyond it: a 20 ms poll, killing a process, reaping it.
constexpr double kSlackS = 0.75;

HuntOptions swarm_hunt(double budget_s) {
  HuntOptions o;
  o.time_budget_s = budget_s;
  o.trace_dir = ::testing::TempDir() + "/hunt-budget";
  o.unit_timeout_s = 60;  // longer than any budget here: only the budget can stop a unit
  return o;
}

TEST(HuntBudget, TheShrinkOfAFailureFitsInTheBudget) {
  HuntOptions o = swarm_hunt(6);
  static SlowStart slow(100);
  o.setup = [](Executor& e) {
    if (!e.scenario().cache.has_mamba()) {
      e.cache().tree().add_component(
          std::make_unique<testing::PlantedBugComponent>(1, "planted.split"));
      e.set_observer(&slow);
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const HuntReport r = run_hunt(o);
  const double took = seconds_since(start);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_EQ(r.stopped, "failures");
  const HuntFailure& f = r.failures.front();
  EXPECT_EQ(f.invariant, "planted.split");
  ASSERT_LT(f.wall_s, o.time_budget_s - 1);  // found with time left for the shrink
  // The shrink (hundreds of 100 ms replays) was cut off at the budget's end...
  EXPECT_LT(took, o.time_budget_s + kSlackS);
  EXPECT_GE(took, o.time_budget_s);
  // ...and said so: the failure keeps its unshrunk trace and names the command that shrinks it.
  EXPECT_TRUE(f.shrunk_trace.empty());
  EXPECT_NE(f.shrink_note.find("time budget ran out during the shrink"), std::string::npos)
      << f.shrink_note;
  EXPECT_NE(f.shrink_note.find("kvsim shrink " + f.trace), std::string::npos) << f.shrink_note;
  EXPECT_FALSE(f.trace.empty());
  // (Without a budget the same planted bug is shrunk in full: swarm_test.cpp,
  // Hunt.FindsShrinksAndReplaysAPlantedBug.)
}

TEST(HuntBudget, AUnitStillRunningWhenTheBudgetEndsIsCutOffThere) {
  for (const int jobs : {1, 2}) {
    HuntOptions o = swarm_hunt(2);  // before: cut off at 1.05 x 2 + 1 = 3.1 s
    o.jobs = jobs;
    static Stuck stuck;
    o.setup = [](Executor& e) { e.set_observer(&stuck); };
    const auto start = std::chrono::steady_clock::now();
    const HuntReport r = run_hunt(o);
    const double took = seconds_since(start);
    EXPECT_EQ(r.stopped, "time_budget") << jobs << " job(s)";
    EXPECT_TRUE(r.failures.empty()) << jobs << " job(s)";
    EXPECT_EQ(r.units, 0u) << jobs << " job(s)";  // no unit finished
    EXPECT_LT(took, o.time_budget_s + kSlackS) << jobs << " job(s)";
  }
}

}  // namespace
}  // namespace kvsim::sim
