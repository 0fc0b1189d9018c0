// Fitting a drawn unit to what a target can run (sim/campaign/target_fit.h), without SGLang: the
// capabilities are given, as an SGLang revision's driver would report them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/campaign/runner.h"
#include "sim/campaign/swarm.h"
#include "sim/campaign/target_fit.h"
#include "sim/config/scenario.h"

namespace kvsim::sim {
namespace {

// A unit drawn with every hybrid feature at once, beside a storage tier.
Scenario swa_mamba_storage() {
  Scenario s = default_scenario();
  s.cache.page_size = 4;
  s.cache.hierarchical = true;
  s.cache.swa_window_tokens = 64;
  s.cache.swa_device_tokens = 256;
  s.cache.swa_host_tokens = 512;
  s.cache.mamba_device_states = 8;
  s.cache.mamba_host_states = 16;
  s.storage = true;
  return s;
}

TEST(TargetFit, KvsimsCoreRunsTheUnitAsDrawn) {
  Scenario s = swa_mamba_storage();
  const TargetCapabilities core = capabilities_of(Target{});
  EXPECT_TRUE(fit_to_capabilities(s, core, true).empty());
  EXPECT_TRUE(s.cache.has_swa());
  EXPECT_TRUE(s.cache.has_mamba());
  EXPECT_TRUE(s.storage);
}

TEST(TargetFit, ARevisionThatBuildsOnlyMambaKeepsMambaAloneWithoutStorage) {
  // SWA goes first, so the Mamba tree it leaves has no storage tier beside it (a revision that
  // builds FULL + Mamba refuses a storage tier beside it).
  Scenario s = swa_mamba_storage();
  const std::vector<std::string> off =
      fit_to_capabilities(s, TargetCapabilities{.mamba = true}, false);
  EXPECT_EQ(off, (std::vector<std::string>{"swa", "mamba_page_size", "storage"}));
  EXPECT_FALSE(s.cache.has_swa());
  EXPECT_TRUE(s.cache.has_mamba());
  EXPECT_EQ(s.cache.page_size, 1);
  EXPECT_FALSE(s.storage);
  EXPECT_TRUE(s.cache.hierarchical);
}

TEST(TargetFit, ARevisionThatBuildsSwaAndMambaKeepsOneTreeAtATime) {
  Scenario s = swa_mamba_storage();
  const std::vector<std::string> off =
      fit_to_capabilities(s, TargetCapabilities{.swa = true, .mamba = true}, false);
  EXPECT_EQ(off, (std::vector<std::string>{"mamba", "storage"}));
  EXPECT_TRUE(s.cache.has_swa());
  EXPECT_FALSE(s.cache.has_mamba());
  EXPECT_EQ(s.cache.page_size, 4);
  EXPECT_FALSE(s.storage);
}

TEST(TargetFit, ARevisionWithoutHybridTreesTurnsBothOffAndKeepsStorage) {
  Scenario s = swa_mamba_storage();
  const std::vector<std::string> off = fit_to_capabilities(s, TargetCapabilities{}, false);
  EXPECT_EQ(off, (std::vector<std::string>{"swa", "mamba"}));
  EXPECT_FALSE(s.cache.has_swa());
  EXPECT_FALSE(s.cache.has_mamba());
  EXPECT_TRUE(s.storage);
  EXPECT_EQ(s.cache.page_size, 4);
}

TEST(TargetFit, AMambaUnitTakesTheOnlyHostLayoutTheRevisionRunsMambaWith) {
  // The August 2026 snapshot: MambaPoolHost asserts page-first layouts, so a Mamba unit drawn
  // layer-first keeps Mamba and runs page-first (every host pool: one layout).
  const TargetCapabilities page_first_only{.mamba = true,
                                           .mamba_host_layouts = {KVLayout::kPageFirst}};
  Scenario s = swa_mamba_storage();
  s.cache.host_layout = KVLayout::kLayerFirst;
  const std::vector<std::string> off = fit_to_capabilities(s, page_first_only, false);
  EXPECT_EQ(off,
            (std::vector<std::string>{"swa", "mamba_page_size", "mamba_host_layout", "storage"}));
  EXPECT_TRUE(s.cache.has_mamba());
  EXPECT_EQ(s.cache.host_layout, KVLayout::kPageFirst);
  // Drawn page-first, it runs as drawn there.
  Scenario page_first = swa_mamba_storage();
  page_first.cache.host_layout = KVLayout::kPageFirst;
  EXPECT_EQ(fit_to_capabilities(page_first, page_first_only, false),
            (std::vector<std::string>{"swa", "mamba_page_size", "storage"}));
  // Both layouts taken (April-May 2026): a layer-first unit keeps its layout.
  Scenario both = swa_mamba_storage();
  both.cache.host_layout = KVLayout::kLayerFirst;
  fit_to_capabilities(both, TargetCapabilities{.mamba = true}, false);
  EXPECT_EQ(both.cache.host_layout, KVLayout::kLayerFirst);
  // A unit without Mamba keeps its layer-first host pool.
  Scenario plain = default_scenario();
  plain.cache.hierarchical = true;
  plain.cache.host_layout = KVLayout::kLayerFirst;
  EXPECT_TRUE(fit_to_capabilities(plain, page_first_only, false).empty());
  EXPECT_EQ(plain.cache.host_layout, KVLayout::kLayerFirst);
}

TEST(TargetFit, AMambaUnitGetsTheStatesSglangSizesOneRequestBy) {
  // SGLang's request pool: max_mamba_cache_size // 3 rows. 2 drawn states become 3; 3 stay.
  Scenario s = swa_mamba_storage();
  s.cache.mamba_device_states = 2;
  const std::vector<std::string> off =
      fit_to_capabilities(s, TargetCapabilities{.mamba = true}, false);
  EXPECT_EQ(off,
            (std::vector<std::string>{"swa", "mamba_page_size", "mamba_few_states", "storage"}));
  EXPECT_EQ(s.cache.mamba_device_states, 3);
  Scenario three = swa_mamba_storage();
  three.cache.mamba_device_states = 3;
  fit_to_capabilities(three, TargetCapabilities{.mamba = true}, false);
  EXPECT_EQ(three.cache.mamba_device_states, 3);
  // kvsim's core runs 2 states as drawn.
  Scenario core = swa_mamba_storage();
  core.cache.mamba_device_states = 2;
  EXPECT_TRUE(fit_to_capabilities(core, capabilities_of(Target{}), true).empty());
}

TEST(TargetFit, MambaWithNoHostLayoutItTakesIsTurnedOff) {
  Scenario s = swa_mamba_storage();
  const std::vector<std::string> off =
      fit_to_capabilities(s, TargetCapabilities{.mamba = true, .mamba_host_layouts = {}}, false);
  EXPECT_EQ(off, (std::vector<std::string>{"swa", "mamba"}));
  EXPECT_FALSE(s.cache.has_mamba());
}

TEST(TargetFit, TheDriversHostLayoutsAreParsedAndBadOnesRefused) {
  EXPECT_EQ(host_layouts_from_json(nlohmann::json::parse(R"(["page_first"])")),
            (std::vector<KVLayout>{KVLayout::kPageFirst}));
  EXPECT_EQ(host_layouts_from_json(nlohmann::json::parse(R"(["layer_first", "page_first"])")),
            (std::vector<KVLayout>{KVLayout::kLayerFirst, KVLayout::kPageFirst}));
  EXPECT_TRUE(host_layouts_from_json(nlohmann::json::array()).empty());
  EXPECT_THROW(host_layouts_from_json(nlohmann::json::parse(R"(["page_first_direct"])")),
               std::invalid_argument);
  EXPECT_THROW(host_layouts_from_json(nlohmann::json("page_first")), std::invalid_argument);
}

// Every capability SGLang's target has at some revision: the drawn units keep the most.
const TargetCapabilities kSglangAll{.swa = true, .mamba = true, .sparse_index = true, .pd = true};

// What fit_unit_length promises about a scenario it fitted from `drawn`: never more requests than
// drawn, never fewer than kMinUnitRequests (or all drawn); above that floor the most requests whose
// estimate fits the budget; nothing else changed.
void expect_unit_length_respected(const Scenario& drawn, const Scenario& fitted,
                                  const std::string& what) {
  const int64_t r = fitted.workload.requests;
  const double per_request = estimated_ops_per_request(fitted);
  EXPECT_LE(r, drawn.workload.requests) << what;
  EXPECT_GE(r, std::min(drawn.workload.requests, kMinUnitRequests)) << what;
  if (r > kMinUnitRequests) {
    EXPECT_LE(static_cast<double>(r) * per_request, static_cast<double>(kSglangUnitOps)) << what;
  }
  if (r < drawn.workload.requests) {  // capped: one more request would not have fitted
    EXPECT_GT(static_cast<double>(r + 1) * per_request, static_cast<double>(kSglangUnitOps))
        << what;
  }
  // The pools shrink with the requests, no further than the floors: the device pool holds the
  // largest request; a host pool larger than the device pool stays larger.
  const HiCacheOptions& d = drawn.cache;
  const HiCacheOptions& c = fitted.cache;
  const WorkloadOptions& w = fitted.workload;
  EXPECT_LE(c.device_tokens, d.device_tokens) << what;
  EXPECT_LE(c.host_tokens, std::max(d.host_tokens, 2 * c.device_tokens)) << what;
  EXPECT_GE(c.device_tokens, w.system_prompt_tokens + 4 * w.prompt_max + w.output_max) << what;
  EXPECT_EQ(c.device_tokens % c.page_size, 0) << what;
  EXPECT_EQ(c.host_tokens % c.page_size, 0) << what;
  if (d.host_tokens > d.device_tokens) {
    EXPECT_GT(c.host_tokens, c.device_tokens) << what;
  }
  EXPECT_LE(fitted.store.capacity_bytes, drawn.store.capacity_bytes) << what;
  if (r == drawn.workload.requests) {
    EXPECT_EQ(to_json(fitted), to_json(drawn)) << what;
  }
  // Nothing else changes.
  nlohmann::json a = to_json(drawn);
  nlohmann::json b = to_json(fitted);
  for (nlohmann::json* j : {&a, &b}) {
    (*j)["workload"].erase("requests");
    for (const char* pool :
         {"device_tokens", "host_tokens", "swa_device_tokens", "swa_host_tokens"})
      (*j)["cache"].erase(pool);
    if ((*j)["cache"]["storage"].is_object()) (*j)["cache"]["storage"].erase("capacity_bytes");
  }
  EXPECT_EQ(a, b) << what;
}

TEST(TargetFit, AShortenedUnitsPoolsShrinkWithItsRequests) {
  // file_storage_budget as SGLang's target runs it (a host pool twice the device pool): cut to
  // a fraction of its requests, its pools and its store's budget shrink by about that fraction.
  Scenario s = load_scenario(KVSIM_SOURCE_DIR "/scenarios/file_storage_budget.json");
  s.cache.host_tokens = 2 * s.cache.device_tokens;
  s.store.backend = StorageKind::kMemory;
  const Scenario drawn = s;
  ASSERT_TRUE(fit_unit_length(s, kSglangUnitOps));
  const double f =
      static_cast<double>(s.workload.requests) / static_cast<double>(drawn.workload.requests);
  ASSERT_LT(f, 0.5);
  const WorkloadOptions& w = s.workload;
  const int64_t largest = w.system_prompt_tokens + 4 * w.prompt_max + w.output_max;
  EXPECT_EQ(s.cache.device_tokens,
            std::max<int64_t>(largest, static_cast<int64_t>(std::ceil(512 * f))) / 4 * 4 +
                (std::max<int64_t>(largest, static_cast<int64_t>(std::ceil(512 * f))) % 4 ? 4 : 0));
  EXPECT_LT(s.cache.host_tokens, drawn.cache.host_tokens);
  EXPECT_GT(s.cache.host_tokens, s.cache.device_tokens);
  EXPECT_NEAR(static_cast<double>(s.store.capacity_bytes),
              static_cast<double>(drawn.store.capacity_bytes) * f, 1.0);
}

TEST(TargetFit, ASlowTargetsSwarmUnitsAreCappedToTheOpBudgetForEverySeed) {
  int capped = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    Scenario drawn = draw_scenario(seed);
    fit_to_capabilities(drawn, kSglangAll, false);
    Scenario fitted = drawn;
    const bool lowered = fit_unit_length(fitted, kSglangUnitOps);
    EXPECT_EQ(lowered, fitted.workload.requests < drawn.workload.requests) << seed;
    capped += lowered ? 1 : 0;
    expect_unit_length_respected(drawn, fitted, "swarm seed " + std::to_string(seed));
    Scenario again = drawn;  // the same scenario is fitted the same way
    fit_unit_length(again, kSglangUnitOps);
    EXPECT_EQ(to_json(again), to_json(fitted)) << seed;
  }
  EXPECT_GT(capped, 900);  // draws are 20-120 requests of ~100 ops: nearly all are capped
}

TEST(TargetFit, TheNamedScenariosAreCappedToo) {
  int named = 0;
  for (const auto& e : std::filesystem::directory_iterator(KVSIM_SOURCE_DIR "/scenarios")) {
    if (e.path().extension() != ".json") continue;
    const Scenario drawn = load_scenario(e.path().string());
    if (drawn.workload.kind == WorkloadKind::kMooncake) continue;  // the hunt leaves these out
    ++named;
    Scenario fitted = drawn;
    fit_unit_length(fitted, kSglangUnitOps);
    expect_unit_length_respected(drawn, fitted, e.path().filename().string());
  }
  EXPECT_GE(named, 5);
}

TEST(TargetFit, CappedUnitsRunAboutTheBudgetOnAverage) {
  // The estimate against the ops the simulator really runs (kvsim's core; SGLang's target runs
  // the same scenario in about as many ops). A change to the scheduler model or the swarm that
  // makes units much longer than their estimate shows here before it costs hunt throughput.
  int64_t ops = 0;
  int64_t units = 0;
  for (uint64_t seed = 1; seed <= 80; ++seed) {
    Scenario s = draw_scenario(seed);
    fit_to_capabilities(s, kSglangAll, false);
    fit_unit_length(s, kSglangUnitOps);
    const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = seed});
    ops += r.stats.ops;
    ++units;
  }
  const double mean = static_cast<double>(ops) / static_cast<double>(units);
  EXPECT_GT(mean, 0.5 * kSglangUnitOps);
  EXPECT_LT(mean, 2.0 * kSglangUnitOps);
}

TEST(TargetFit, KvsimsCoreKeepsTheDrawnUnitLength) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const Scenario drawn = draw_scenario(seed);
    Scenario fitted = drawn;
    const std::vector<std::string> off = fit_to_target(fitted, Target{});
    EXPECT_TRUE(off.empty()) << seed;
    EXPECT_EQ(to_json(fitted), to_json(drawn)) << seed;
  }
}

TEST(TargetFit, AUnitWithinTheBudgetIsLeftAsDrawn) {
  Scenario s = default_scenario();
  s.workload.requests = kMinUnitRequests;
  const Scenario drawn = s;
  EXPECT_FALSE(fit_unit_length(s, kSglangUnitOps));
  EXPECT_EQ(to_json(s), to_json(drawn));
  // A budget of one op still leaves the floor.
  s.workload.requests = 50;
  EXPECT_TRUE(fit_unit_length(s, 1));
  EXPECT_EQ(s.workload.requests, kMinUnitRequests);
}

}  // namespace
}  // namespace kvsim::sim
