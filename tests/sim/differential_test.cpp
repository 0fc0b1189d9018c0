// The differential (sim/model/differential_cache.h): the same ops through two caches, every
// call's decisions compared. With two kvsim cores a policy difference can be planted where it is
// known (the shadow evicts LFU, the primary LRU), and the op it first shows at is computed
// independently: two plain executors, one per policy, fed the same ops, compared on what they
// report after each op. Against SGLang's own cache (skipped without the bundle or torch) the
// default scenario runs with the differential on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sim/campaign/runner.h"
#include "sim/model/core_cache.h"
#include "sim/model/differential_cache.h"
#include "sim/model/executor.h"
#include "sim/trace/trace.h"
#include "tests/support/sglang_env.h"

namespace kvsim::sim {
namespace {

// A run of `s` whose cache is a differential of two cores: the primary on `s`, the shadow on
// `shadow_scenario`. `out` (optional) receives the differential.
RunResult run_two_cores(const Scenario& s, const Scenario& shadow_scenario, uint64_t seed,
                        std::vector<Op>* record, DifferentialCache** out = nullptr) {
  const ExecutorSetup setup = [&](Executor& e) {
    e.replace_cache_under_test(
        [&](CacheContext ctx) {
          auto d = std::make_unique<DifferentialCache>(
              std::move(ctx), [](CacheContext c) { return std::make_unique<KvsimCoreCache>(c); },
              [&](CacheContext c) {
                return std::make_unique<KvsimCoreCache>(CacheContext{
                    .scenario = shadow_scenario, .seed = c.seed, .fail = c.fail, .stats = c.stats});
              });
          if (out != nullptr) *out = d.get();
          return d;
        },
        seed);
  };
  return run_scenario(RunRequest{.scenario = &s, .seed = seed, .record = record, .setup = setup});
}

// What a plain executor reports after an op, for the independent reference.
using Observed =
    std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, size_t, size_t>;
Observed observe(Executor& e, const OpOutcome& out) {
  const HiCacheStats& st = e.cache().stats();
  const CacheController& c = e.cache().controller();
  return {out.applied,
          out.ok,
          e.stats().device_hit_tokens,
          e.stats().host_hit_tokens,
          st.evicted_device_tokens,
          st.evicted_host_tokens,
          st.load_back_tokens,
          c.pending_writes(),
          c.pending_loads()};
}

// The 1-based number of the first op after which the two policies' executors report differently
// (0: never).
size_t first_difference(const Scenario& a, const Scenario& b, uint64_t seed,
                        const std::vector<Op>& ops) {
  Executor ea(a, seed), eb(b, seed);
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpOutcome oa = ea.apply(ops[i]);
    const OpOutcome ob = eb.apply(ops[i]);
    if (observe(ea, oa) != observe(eb, ob)) return i + 1;
  }
  return 0;
}

Scenario pressured() {
  Scenario s = default_scenario();
  s.workload.requests = 120;
  return s;
}

TEST(Differential, TheSameCacheOnBothSidesReportsNoDivergence) {
  const Scenario s = pressured();
  DifferentialCache* d = nullptr;
  const RunResult r = run_two_cores(s, s, 7, nullptr, &d);
  ASSERT_TRUE(r.ok()) << r.violation->invariant << ": " << r.violation->detail;
  ASSERT_NE(d, nullptr);
  EXPECT_GT(d->compared(), 100);  // it really compared
  EXPECT_EQ(d->excused(), 0);
  // The model followed the primary: the same run as the core alone.
  const RunResult alone = run_scenario(RunRequest{.scenario = &s, .seed = 7});
  EXPECT_EQ(r.event_hash, alone.event_hash);
}

TEST(Differential, APlantedEvictionOrderFlipIsReportedAtTheOpItFirstShowsAt) {
  const Scenario lru = pressured();
  Scenario lfu = lru;
  lfu.cache.eviction_policy = EvictionPolicy::kLfu;
  int found = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    // The ops the run applies follow the primary only: the plain LRU run's ops.
    std::vector<Op> ops;
    const RunResult alone =
        run_scenario(RunRequest{.scenario = &lru, .seed = seed, .record = &ops});
    ASSERT_TRUE(alone.ok());
    const size_t expected = first_difference(lru, lfu, seed, ops);
    const RunResult r = run_two_cores(lru, lfu, seed, nullptr);
    if (expected == 0) {
      EXPECT_TRUE(r.ok()) << "seed " << seed << ": " << r.violation->detail;
      continue;
    }
    ++found;
    ASSERT_FALSE(r.ok()) << "seed " << seed << ": the policies differ after op " << expected;
    EXPECT_EQ(r.violation->invariant, "differential.decision");
    EXPECT_EQ(r.violation->op_index, expected) << "seed " << seed << ": " << r.violation->detail;
    EXPECT_NE(r.violation->detail.find(" vs "), std::string::npos) << r.violation->detail;
  }
  EXPECT_GT(found, 0) << "no seed made LRU and LFU evict differently: the test tests nothing";
}

TEST(Differential, ADivergenceReplaysFromItsTraceToTheSameOp) {
  const Scenario lru = pressured();
  Scenario lfu = lru;
  lfu.cache.eviction_policy = EvictionPolicy::kLfu;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    std::vector<Op> ops;
    const RunResult r = run_two_cores(lru, lfu, seed, &ops);
    if (r.ok()) continue;
    const OpTrace trace{.scenario = lru, .seed = seed, .ops = ops, .event_hash = r.event_hash};
    const RunResult again = replay_ops(trace, [&](Executor& e) {
      e.replace_cache_under_test(
          [&](CacheContext ctx) {
            return std::make_unique<DifferentialCache>(
                std::move(ctx), [](CacheContext c) { return std::make_unique<KvsimCoreCache>(c); },
                [&](CacheContext c) {
                  return std::make_unique<KvsimCoreCache>(CacheContext{
                      .scenario = lfu, .seed = c.seed, .fail = c.fail, .stats = c.stats});
                });
          },
          seed);
    });
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.violation->invariant, r.violation->invariant);
    EXPECT_EQ(again.violation->op_index, r.violation->op_index);
    EXPECT_EQ(again.violation->detail, r.violation->detail);
    return;
  }
  FAIL() << "no seed diverged";
}

TEST(Differential, ATargetRecordsTheDifferentialAndReadsItBack) {
  const Target t{.kind = Target::Kind::kSglang, .sglang_src = "bundle:x", .differential = true};
  EXPECT_EQ(to_json(t).value("differential", false), true);
  EXPECT_EQ(target_from_json(to_json(t), "t"), t);
  Target plain = t;
  plain.differential = false;
  EXPECT_FALSE(to_json(plain).contains("differential"));
  EXPECT_EQ(target_from_json(to_json(plain), "t"), plain);
}

// --- Against SGLang's own cache.

// The default scenario through SGLang's cache at the newest snapshot with kvsim's core beside it:
// with the differences by design run SGLang's way (docs/sglang-hunt.md, "Differential"), every
// call's decisions agree — hits, load-backs, device and host eviction amounts, acks consumed —
// to the end of each run. Before that handling these seeds diverged after ops 395-525.
TEST(DifferentialSglang, TheDefaultScenarioAgreesWithKvsimsCoreOpForOp) {
  if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  Scenario s = default_scenario();
  s.workload.requests = 40;
  const Target t{.kind = Target::Kind::kSglang,
                 .sglang_src = "bundle:sglang-6ed5780c4f",
                 .differential = true};
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::vector<Op> ops;
    const RunResult r =
        run_scenario(RunRequest{.scenario = &s, .seed = seed, .record = &ops, .target = t});
    EXPECT_TRUE(r.ok()) << "seed " << seed << ", after op " << r.violation->op_index << ": "
                        << r.violation->invariant << ": " << r.violation->detail;
    EXPECT_TRUE(r.target.differential);
    EXPECT_GT(ops.size(), 600u) << "seed " << seed << ": too short a run to compare much";
  }
}

// A prefetch whose storage query found too little is revoked by SGLang's query worker through a
// queue its poll drains: until that poll check_prefetch_progress still finds the operation and,
// under wait_complete, answers not done; kvsim's core revokes in the query step and would answer
// done at once. The hunt's trace of file_storage_budget seed 2 (32 ops, ending at that check:
// "prefetch_check of request 1: prefetch_done: 0 vs 1" before the shadow waited for the poll)
// replays clean to its end.
TEST(DifferentialSglang, AStorageRevokeReachesTheShadowAtTheNextPollAsInSglang) {
  if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  const AnyTrace t = read_trace(std::string(KVSIM_SOURCE_DIR) +
                                "/tests/sim/differential_traces/storage_revoke_at_poll.trace.jsonl");
  ASSERT_EQ(t.kind, "ops");
  ASSERT_TRUE(t.ops.target.differential);
  ASSERT_EQ(t.ops.scenario.cache.prefetch_stop_policy, PrefetchStopPolicy::kWaitComplete);
  const ReplayReport rep =
      replay_trace(t.ops, ReplayOptions{.stop_at_problem = false, .check_chain = false});
  const RunResult& r = rep.result;
  EXPECT_TRUE(r.ok()) << "after op " << r.violation->op_index << ": " << r.violation->invariant
                      << ": " << r.violation->detail;
  EXPECT_EQ(rep.rejected, 0);  // every op applied, the last prefetch_check too
}

}  // namespace
}  // namespace kvsim::sim
