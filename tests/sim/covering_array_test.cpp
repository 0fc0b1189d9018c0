// The swarm's covering array (sim/campaign/covering_array.h): every allowed pair and chosen
// triple of feature settings is in some row, forbidden pairs in none, and draw_scenario gives
// each seed the settings of its row, so every combination meets within rows() swarm seeds.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "sim/campaign/covering_array.h"
#include "sim/campaign/swarm.h"

namespace kvsim::sim {
namespace {

// The levels a drawn scenario actually has, read back from the Scenario (not from the row).
std::vector<size_t> realized(const Scenario& s) {
  const HiCacheOptions& c = s.cache;
  const WorkloadOptions& w = s.workload;
  std::vector<size_t> r(kSwarmFactors);
  r[kFactorStorage] = !s.storage                              ? 0
                      : s.store.backend == StorageKind::kFile ? 3
                      : s.store.capacity_bytes > 0            ? 2
                                                              : 1;
  r[kFactorNamespaces] = w.namespaces == 1 ? 0 : (w.cross_namespace ? 2 : 1);
  r[kFactorComponents] =
      s.scheduler.mode == SchedulerMode::kPd ? 4 : (c.has_swa() ? 1 : 0) + (c.has_mamba() ? 2 : 0);
  r[kFactorFaults] = !s.faults.enabled ? 0 : (s.faults.site_probability <= 0.25 ? 1 : 2);
  switch (w.kind) {
    case WorkloadKind::kSharedPrompt:
      r[kFactorTreeShape] = 0;
      break;
    case WorkloadKind::kMultiTurn:
    case WorkloadKind::kAgentic:
      r[kFactorTreeShape] = 1;
      break;
    case WorkloadKind::kFork:
    case WorkloadKind::kAdversarial:
      r[kFactorTreeShape] = 2;
      break;
    case WorkloadKind::kPageMosaic:
      r[kFactorTreeShape] = 4;
      break;
    default:
      r[kFactorTreeShape] = 3;
  }
  const int32_t p = c.page_size;
  r[kFactorPage] = p == 1 ? 0 : (p >= 16 ? 3 : ((p & (p - 1)) != 0 ? 1 : 2));
  r[kFactorWritePolicy] = c.write_policy == WritePolicy::kWriteThrough            ? 0
                          : c.write_policy == WritePolicy::kWriteThroughSelective ? 1
                                                                                  : 2;
  r[kFactorPressure] = 0;  // checked apart: see pressure_holds
  r[kFactorEviction] = c.eviction_policy == EvictionPolicy::kLru ? 0 : 1;
  const int64_t threshold = c.prefetch_threshold_tokens;
  r[kFactorPrefetchThreshold] = threshold == 0 ? 0 : (threshold <= p ? 1 : 2);
  return r;
}

// Pool pressure, as far as page rounding lets it show: starved pools hold the largest request
// at most 1.3 times (rounded up to a page), roomy ones at least twice; only host_small has a
// host pool below the device pool's.
bool pressure_holds(const Scenario& s, size_t level) {
  const HiCacheOptions& c = s.cache;
  const WorkloadOptions& w = s.workload;
  const int64_t largest = w.system_prompt_tokens + w.prompt_max * 4 + w.output_max;
  const int64_t page = c.page_size;
  const int64_t starved_max =
      (static_cast<int64_t>(1.3 * static_cast<double>(largest)) + page) / page * page;
  if (level == 0) return c.device_tokens <= starved_max && c.host_tokens >= c.device_tokens;
  if (level == 1) return c.device_tokens >= 2 * largest && c.host_tokens >= c.device_tokens;
  return c.host_tokens <= c.device_tokens / 2 + page;
}

TEST(CoveringArray, SwarmArrayCoversEveryAllowedPairAndTriple) {
  const CoveringArray& a = swarm_covering_array();
  EXPECT_EQ(a.uncovered(), std::vector<std::string>{});
  // The bound docs/hunt.md states: every combination within this many swarm units.
  EXPECT_LE(a.rows(), 83u);
  EXPECT_EQ(a.rows() % 2, 1u) << "an odd count: seeds stepping by 2 visit every row";
  for (size_t r = 0; r < a.rows(); ++r)
    EXPECT_TRUE(a.allowed(a.row(r))) << "row " << r;
}

TEST(CoveringArray, DrawnScenariosHoldTheirRowsSettings) {
  const CoveringArray& a = swarm_covering_array();
  for (uint64_t seed = 1000; seed < 1000 + 3 * a.rows(); ++seed) {
    const Scenario s = draw_scenario(seed);
    const std::vector<size_t> want = swarm_row(seed);
    const std::vector<size_t> got = realized(s);
    EXPECT_TRUE(pressure_holds(s, want[kFactorPressure]))
        << "seed " << seed << ", pressure " << want[kFactorPressure] << ": device "
        << s.cache.device_tokens << ", host " << s.cache.host_tokens;
    for (size_t f = 0; f < kSwarmFactors; ++f) {
      if (f == kFactorPressure) continue;
      EXPECT_EQ(a.spec().factors[f].levels[got[f]], a.spec().factors[f].levels[want[f]])
          << "seed " << seed << ", factor " << a.spec().factors[f].name;
    }
  }
}

TEST(CoveringArray, ConsecutiveSeedsAndEverySecondSeedVisitEveryRow) {
  const size_t n = swarm_covering_array().rows();
  for (uint64_t start : {0ull, 1ull, 987654321ull}) {
    for (uint64_t step : {1ull, 2ull}) {
      std::set<std::vector<size_t>> rows;
      for (uint64_t i = 0; i < n; ++i)
        rows.insert(swarm_row(start + i * step));
      std::set<std::vector<size_t>> all;
      for (size_t r = 0; r < n; ++r)
        all.insert(swarm_covering_array().row(r));
      EXPECT_EQ(rows, all) << "start " << start << " step " << step;
    }
  }
}

CoveringSpec small_spec() {
  CoveringSpec s;
  s.factors = {{"a", {"0", "1", "2"}}, {"b", {"0", "1"}}, {"c", {"0", "1"}}, {"d", {"0", "1"}}};
  return s;
}

TEST(CoveringArray, SmallArrayCoversPairsAndRespectsForbiddenPairs) {
  CoveringSpec spec = small_spec();
  spec.forbidden = {{{0, 2}, {1, 1}}};  // a=2 never with b=1
  spec.triples = {{1, 2, 3}};           // b x c x d whole: 8 combinations
  const CoveringArray a(spec);
  EXPECT_EQ(a.uncovered(), std::vector<std::string>{});
  EXPECT_GE(a.rows(), 8u);
  for (size_t r = 0; r < a.rows(); ++r) {
    EXPECT_FALSE(a.row(r)[0] == 2 && a.row(r)[1] == 1) << "row " << r;
  }
  // Deterministic: the same spec gives the same rows.
  const CoveringArray again(spec);
  ASSERT_EQ(a.rows(), again.rows());
  for (size_t r = 0; r < a.rows(); ++r)
    EXPECT_EQ(a.row(r), again.row(r));
}

TEST(CoveringArray, UncoveredNamesAMissingCombination) {
  // Rows given by hand: the check recomputed from the rows names what they miss, and a
  // forbidden combination is never missing.
  CoveringSpec spec;
  spec.factors = {{"x", {"0", "1"}}, {"y", {"0", "1"}}};
  spec.forbidden = {{{0, 1}, {1, 1}}};
  const CoveringArray partial(spec, {{0, 0}, {0, 1}});
  EXPECT_EQ(partial.uncovered(), std::vector<std::string>{"x=1 x y=0"});
  const CoveringArray whole(spec, {{0, 0}, {0, 1}, {1, 0}});
  EXPECT_EQ(whole.uncovered(), std::vector<std::string>{});
  EXPECT_THROW(CoveringArray(spec, {{0, 0}, {1, 1}}), std::invalid_argument);  // forbidden row
  EXPECT_THROW(CoveringArray(spec, {{0, 2}}), std::invalid_argument);          // no such level
}

TEST(CoveringArray, BadSpecsAreRefused) {
  EXPECT_THROW(CoveringArray(CoveringSpec{}), std::invalid_argument);
  CoveringSpec no_levels;
  no_levels.factors = {{"a", {}}};
  EXPECT_THROW(CoveringArray{no_levels}, std::invalid_argument);
  CoveringSpec bad_triple = small_spec();
  bad_triple.triples = {{0, 1, 9}};
  EXPECT_THROW(CoveringArray{bad_triple}, std::invalid_argument);
  CoveringSpec bad_pair = small_spec();
  bad_pair.forbidden = {{{0, 5}, {1, 0}}};
  EXPECT_THROW(CoveringArray{bad_pair}, std::invalid_argument);
}

}  // namespace
}  // namespace kvsim::sim
