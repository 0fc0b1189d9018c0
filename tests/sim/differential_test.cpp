// The differential (sim/model/differential_cache.h): the same ops through two caches, every
// call's decisions compared. With two kvsim cores a policy difference can be planted where it is
// known (the shadow evicts LFU, the primary LRU), and the op it first shows at is computed
// independently: two plain executors, one per policy, fed the same ops, compared on what they
// report after each op. Against SGLang's own cache (skipped without the bundle or torch) the
// default scenario runs with the differential on.
#include <gtest/gtest.h>

#include <algorithm>
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
#include "sim/model/sglang_cache.h"
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

// A differential hunt's trace, replayed leniently (recorded hashes not compared): the divergence
// it ended at is gone, every op applies, no violation to its end.
void expect_witness_replays_clean(const std::string& name) {
  const AnyTrace t =
      read_trace(std::string(KVSIM_SOURCE_DIR) + "/tests/sim/differential_traces/" + name);
  ASSERT_EQ(t.kind, "ops");
  ASSERT_TRUE(t.ops.target.differential);
  ASSERT_TRUE(t.ops.violation.has_value()) << "the witness recorded no divergence";
  const ReplayReport rep =
      replay_trace(t.ops, ReplayOptions{.stop_at_problem = false, .check_chain = false});
  const RunResult& r = rep.result;
  EXPECT_TRUE(r.ok()) << name << ", after op " << r.violation->op_index << ": "
                      << r.violation->invariant << ": " << r.violation->detail;
  EXPECT_EQ(rep.rejected, 0);  // every op applied, the recorded divergence's op too
}

class DifferentialWitness : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
      GTEST_SKIP() << why;
    setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  }
};

// A prefetch whose storage query found too little is revoked by SGLang's query worker through a
// queue its poll drains: until that poll check_prefetch_progress still finds the operation and,
// under wait_complete, answers not done; kvsim's core revokes in the query step and would answer
// done at once. The hunt's trace of file_storage_budget seed 2 (32 ops, ending at "prefetch_check
// of request 1: prefetch_done: 0 vs 1" before the shadow waited for the poll).
TEST_F(DifferentialWitness, AStorageRevokeReachesTheShadowAtTheNextPollAsInSglang) {
  expect_witness_replays_clean("storage_revoke_at_poll.trace.jsonl");
}

// A request aborted before its storage query: SGLang's query worker still dequeues its operation
// in its turn (a step that only revokes it), kvsim's core dropped it at the abort, so the shadow
// ran one query ahead. The hunt's trace of file_storage_budget seed 16 (87 ops, ending at
// "prefetch_check of request 3: prefetch_done: 0 vs 1").
TEST_F(DifferentialWitness, AnAbortedRequestsQueuedQueryTakesItsTurnInTheShadow) {
  expect_witness_replays_clean("aborted_prefetch_query_turn.trace.jsonl");
}

// SGLang's storage workers move a whole operation per dequeue (batches of STORAGE_BATCH_SIZE,
// 128 pages); kvsim's core moved the scenario's storage_batch_pages (3 here) per step, so a
// backup took it more steps. The hunt's trace of swarm seed 19 (255 ops, ending at "storage: did:
// 0 vs 1" on the backup worker).
TEST_F(DifferentialWitness, TheShadowsStorageWorkersMoveSglangsBatchPerStep) {
  expect_witness_replays_clean("storage_batch_per_step.trace.jsonl");
}

// Under write-back kvsim's core synchronizes inside an eviction (its flush waits for the write)
// and so consumes a finished load-back's ack then; SGLang's write-back eviction handles write acks
// only and leaves the load ack to its next poll. The hunt's trace of write_back_pressure seed 28
// (132 ops, ending at "poll: load_acks: 1 vs 0"): acks the core took early count at that poll.
TEST_F(DifferentialWitness, ALoadAckTheCoreConsumedInAnEvictionCountsAtTheNextPoll) {
  expect_witness_replays_clean("write_back_load_ack_early.trace.jsonl");
}

// SGLang's cache_unfinished_req matches back only the page-aligned prefix it inserted; the shadow
// matched the whole request, so a longer prefix another request had cached put it a page ahead
// (one page fewer held). The hunt's trace of swarm seed 43 (787 ops, ending at "compute of
// request 3: computed: 0 vs 1").
TEST_F(DifferentialWitness, ACachedPrefillMatchesBackOnlyItsAlignedPrefix) {
  expect_witness_replays_clean("unfinished_matches_aligned_prefix.trace.jsonl");
}

// --- The hybrid and PD paths (issue 31): SGLang's HiMambaRadixCache and the PD decode's
// retract-resume (NSA pool, MetadataBuffers) beside kvsim's core.

constexpr const char* kNewest = "bundle:sglang-6ed5780c4f";

// A named scenario as the hunt's fit runs it at the newest snapshot.
Scenario named(const std::string& name) {
  return load_scenario(std::string(KVSIM_SOURCE_DIR) + "/scenarios/" + name + ".json");
}
// mamba_host_eviction: HiMambaRadixCache at the August snapshot takes page size 1 (its Mamba
// host pool is page-first) and the fit's host pool.
Scenario short_mamba() {
  Scenario s = named("mamba_host_eviction");
  s.cache.page_size = 1;
  s.cache.host_tokens = 1280;
  s.workload.requests = 16;
  return s;
}
// pd_retract_resume_sparse: SGLang's NSA pool pages 64 tokens, under RadixCache; a device pool
// under no tree pressure (the SGLang target's decode caches finished requests in its tree, kvsim's
// core's decode does not: docs/sglang-hunt.md, "Differential"), so offloads come from the
// scheduler.
Scenario short_pd() {
  Scenario s = named("pd_retract_resume_sparse");
  s.cache.page_size = 64;
  s.cache.hierarchical = false;  // HiRadixCache over the NSA pool is not modelled yet
  s.cache.device_tokens = 2048;
  s.workload.requests = 16;
  return s;
}

// SGLang's cache at the newest snapshot beside kvsim's core on `shadow` (the run's scenario
// for the plain differential).
RunResult run_beside_sglang(const Scenario& s, const Scenario& shadow, uint64_t seed) {
  Target primary{.kind = Target::Kind::kSglang, .sglang_src = kNewest};
  const ExecutorSetup setup = [&](Executor& e) {
    e.replace_cache_under_test(
        [&](CacheContext ctx) {
          return std::make_unique<DifferentialCache>(
              std::move(ctx),
              [&](CacheContext c) { return make_sglang_cache(std::move(c), primary); },
              [&](CacheContext c) {
                return std::make_unique<KvsimCoreCache>(CacheContext{
                    .scenario = shadow, .seed = c.seed, .fail = c.fail, .stats = c.stats});
              });
        },
        seed);
  };
  return run_scenario(
      RunRequest{.scenario = &s,
                 .seed = seed,
                 .setup = setup,
                 .target = Target{.kind = Target::Kind::kSglang, .sglang_src = kNewest}});
}

class DifferentialHybrid : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
      GTEST_SKIP() << why;
    setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  }
};

// FULL + Mamba: hits, load-backs, device and host evictions (KV tokens), acks and the Mamba
// request-row eviction agree op for op to the end of the run.
TEST_F(DifferentialHybrid, AShortMambaRunAgreesWithKvsimsCoreOpForOp) {
  const Scenario s = short_mamba();
  ASSERT_GT(s.cache.mamba_device_states, 0);
  const Target t{.kind = Target::Kind::kSglang, .sglang_src = kNewest, .differential = true};
  std::vector<Op> ops;
  const RunResult r =
      run_scenario(RunRequest{.scenario = &s, .seed = 3, .record = &ops, .target = t});
  EXPECT_TRUE(r.ok()) << "after op " << r.violation->op_index << ": " << r.violation->invariant
                      << ": " << r.violation->detail;
  EXPECT_GT(ops.size(), 300u);
  EXPECT_GT(r.stats.finished, 10);
}

// PD decode's retract and resume: admissions, computes, offloads and resumes agree op for op.
TEST_F(DifferentialHybrid, APdRetractResumeRunAgreesWithKvsimsCoreOpForOp) {
  const Scenario s = short_pd();
  ASSERT_EQ(s.scheduler.mode, SchedulerMode::kPd);
  const Target t{.kind = Target::Kind::kSglang, .sglang_src = kNewest, .differential = true};
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 2, .target = t});
  EXPECT_TRUE(r.ok()) << "after op " << r.violation->op_index << ": " << r.violation->invariant
                      << ": " << r.violation->detail;
  EXPECT_GT(r.stats.offloaded, 0);  // retract-resume really ran
  EXPECT_GT(r.stats.resumed, 0);
}

// A planted difference on each path: kvsim's core beside SGLang's cache with a smaller device
// pool evicts (Mamba) or runs short (PD) where SGLang does not; the first such op is a
// differential.decision naming the call and both values, and the same run with the same pool
// on both sides agrees (the tests above).
TEST_F(DifferentialHybrid, APlantedDifferenceOnTheMambaPathIsReportedAtItsOp) {
  const Scenario s = short_mamba();
  Scenario smaller = s;
  smaller.cache.device_tokens = s.cache.device_tokens / 2;
  const RunResult r = run_beside_sglang(s, smaller, 3);
  ASSERT_FALSE(r.ok()) << "a core with half the device pool agreed with SGLang's cache";
  EXPECT_EQ(r.violation->invariant, "differential.decision") << r.violation->detail;
  EXPECT_GT(r.violation->op_index, 0u);
  EXPECT_NE(r.violation->detail.find(" vs "), std::string::npos) << r.violation->detail;
  EXPECT_NE(r.violation->detail.find("of request "), std::string::npos) << r.violation->detail;
}

TEST_F(DifferentialHybrid, APlantedDifferenceOnThePdPathIsReportedAtItsOp) {
  const Scenario s = short_pd();
  Scenario smaller = s;
  smaller.cache.device_tokens = 384;
  const RunResult r = run_beside_sglang(s, smaller, 2);
  ASSERT_FALSE(r.ok()) << "a core with a 384-token device pool agreed with SGLang's 2048";
  EXPECT_EQ(r.violation->invariant, "differential.decision") << r.violation->detail;
  EXPECT_GT(r.violation->op_index, 0u);
  EXPECT_NE(r.violation->detail.find(" vs "), std::string::npos) << r.violation->detail;
}

}  // namespace
}  // namespace kvsim::sim
