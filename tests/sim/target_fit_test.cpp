// Fitting a drawn unit to what a target can run (sim/campaign/target_fit.h), without SGLang: the
// capabilities are given, as an SGLang revision's driver would report them.
#include <gtest/gtest.h>

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
  EXPECT_EQ(off, (std::vector<std::string>{"swa", "mamba_page_size", "mamba_host_layout",
                                           "storage"}));
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
  EXPECT_EQ(off, (std::vector<std::string>{"swa", "mamba_page_size", "mamba_few_states",
                                           "storage"}));
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
  const std::vector<std::string> off = fit_to_capabilities(
      s, TargetCapabilities{.mamba = true, .mamba_host_layouts = {}}, false);
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
  nlohmann::json a = to_json(drawn);
  nlohmann::json b = to_json(fitted);
  a["workload"].erase("requests");
  b["workload"].erase("requests");
  EXPECT_EQ(a, b) << what;
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
