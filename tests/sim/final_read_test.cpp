// The last forward's read at finish (sim/model/core_cache_reads.cpp): every finished request's
// whole computed sequence is read against the content oracle, so a run whose requests never hit
// the cache still checks model reads, a stray write over running requests' slots is caught there,
// and the read itself changes nothing about the run (no stream op: same event hash).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "sim/campaign/runner.h"
#include "sim/model/executor.h"

namespace kvsim::sim {
namespace {

// Unrelated random prompts: no request shares a prefix, so the cache never hits and no read at
// admission has anything to read.
Scenario no_hit_scenario(bool content) {
  Scenario s = default_scenario();
  s.faults.enabled = false;
  s.workload.kind = WorkloadKind::kUniform;
  s.workload.requests = 40;
  s.check.content = content;
  return s;
}

// Overwrites every byte of the device KV pool once, after the first compute op that applied:
// a write over slots that running requests own (and their forwards already wrote).
class StrayWrite final : public ExecutorObserver {
 public:
  explicit StrayWrite(Executor& e) : executor_(e) {}
  void before_op(size_t, const Op&) override {}
  void after_op(size_t, const Op& op, const OpOutcome& outcome) override {
    if (done_ || op.kind != OpKind::kCompute || !outcome.applied || !outcome.ok) return;
    const KVPoolView& view = executor_.cache().device_pool().view();
    std::memset(view.block.ptr, 0x5a, view.block.bytes);
    done_ = true;
  }
  void on_fault(std::string_view) override {}
  void on_executor_gone() override {}

 private:
  Executor& executor_;
  bool done_ = false;
};

RunResult run_with_stray_write(const Scenario& s, uint64_t seed) {
  std::unique_ptr<StrayWrite> plant;
  return run_scenario(RunRequest{.scenario = &s, .seed = seed, .setup = [&](Executor& e) {
                                   plant = std::make_unique<StrayWrite>(e);
                                   e.set_observer(plant.get());
                                 }});
}

TEST(FinalRead, ARunWithoutHitsStillChecksModelReads) {
  const Scenario s = no_hit_scenario(true);
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 3});
  ASSERT_TRUE(r.ok()) << r.violation->detail;
  EXPECT_EQ(r.stats.device_hit_tokens + r.stats.host_hit_tokens, 0);
  EXPECT_GT(r.stats.finished, 0);
  // Only the reads at finish: at least the full KV of most finished requests (a finish with a
  // load-back's wait queued on the compute stream is skipped).
  EXPECT_GE(r.stats.content_checks, r.stats.finished / 2);
  EXPECT_EQ(vacuous_reason(s, r), "");
}

TEST(FinalRead, TheReadAddsNoStreamOpSoTheRunIsTheSame) {
  const Scenario on = no_hit_scenario(true);
  const Scenario off = no_hit_scenario(false);
  for (uint64_t seed : {1, 2, 3}) {
    const RunResult a = run_scenario(RunRequest{.scenario = &on, .seed = seed});
    const RunResult b = run_scenario(RunRequest{.scenario = &off, .seed = seed});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.event_hash, b.event_hash) << "seed " << seed;
    EXPECT_EQ(a.stats.ops, b.stats.ops) << "seed " << seed;
    EXPECT_GT(a.stats.content_checks, 0);
    EXPECT_EQ(b.stats.content_checks, 0);
  }
}

TEST(FinalRead, CatchesAStrayWriteOverRunningRequestsThatNoHitReads) {
  const Scenario s = no_hit_scenario(true);
  const RunResult r = run_with_stray_write(s, 3);
  ASSERT_FALSE(r.ok()) << "the stray write went unseen";
  EXPECT_EQ(r.violation->invariant, "content");
  EXPECT_NE(r.violation->detail.find("the last forward's read, at finish"), std::string::npos)
      << r.violation->detail;
  // Without content checks nothing else sees it: the bytes are the model's, not the cache's.
  const Scenario off = no_hit_scenario(false);
  const RunResult quiet = run_with_stray_write(off, 3);
  EXPECT_TRUE(quiet.ok());
}

}  // namespace
}  // namespace kvsim::sim
