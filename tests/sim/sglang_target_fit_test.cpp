// Capability negotiation with the SGLang target: the driver reports what the revision it loads
// can build (python/kvsim/sglang_target/hybrid_capabilities.py), and the hunt turns off in each
// drawn unit only what that revision cannot run. At seed 002's parent (May 2026, FULL + SWA
// UnifiedRadixCache) the blind hunt draws SWA units on its own; at the newest snapshot (the
// August tree rewrite, which the hybrid target does not drive) it turns SWA off. Skips where
// Debian's torch or the SGLang bundle is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "sim/campaign/hunt.h"
#include "sim/campaign/target_fit.h"
#include "sim/model/sglang_cache.h"
#include "tests/support/sglang_env.h"

namespace kvsim::sim {
namespace {

class SglangTargetFit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
      GTEST_SKIP() << why;
    setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  }
  static Target at(const char* tag) {
    return Target{.kind = Target::Kind::kSglang, .sglang_src = std::string("bundle:") + tag};
  }
  // The first `n` swarm units of a blind hunt (base seed 1) of `target`, fitted to it.
  static std::vector<HuntUnit> swarm_units(const Target& target, uint64_t n) {
    HuntOptions o;
    o.target = target;
    std::vector<HuntUnit> units;
    for (uint64_t i = 0; units.size() < n; ++i)
      units.push_back(hunt_unit(o, i));
    return units;
  }
};

TEST_F(SglangTargetFit, TheDriverReportsWhatEachRevisionBuilds) {
  const nlohmann::json parent = sglang_capabilities(at("sglang-c016246b0f"));
  const nlohmann::json newest = sglang_capabilities(at("sglang-6ed5780c4f"));
  EXPECT_TRUE(parent.at("swa").get<bool>()) << parent.dump();
  EXPECT_FALSE(newest.at("swa").get<bool>()) << newest.dump();
  // FULL + Mamba (HiMambaRadixCache) is offered to the hunt where it runs with both drawn host
  // layouts (April-May 2026); the August snapshot builds it but its MambaPoolHost takes
  // page-first layouts only (python/kvsim/sglang_target/hybrid_capabilities.py).
  const nlohmann::json april = sglang_capabilities(at("sglang-21835fb0af"));
  EXPECT_TRUE(april.at("mamba_buildable").get<bool>()) << april.dump();
  EXPECT_TRUE(april.at("mamba").get<bool>()) << april.dump();
  EXPECT_TRUE(capabilities_of(at("sglang-21835fb0af")).mamba);
  EXPECT_TRUE(newest.at("mamba_buildable").get<bool>()) << newest.dump();
  EXPECT_FALSE(newest.at("mamba").get<bool>()) << newest.dump();
  EXPECT_TRUE(capabilities_of(at("sglang-c016246b0f")).swa);
  EXPECT_FALSE(capabilities_of(at("sglang-6ed5780c4f")).swa);
}

TEST_F(SglangTargetFit, TheBlindHuntDrawsSwaUnitsOnlyWhereTheRevisionRunsThem) {
  const auto with_swa = [](const std::vector<HuntUnit>& units) {
    return std::count_if(units.begin(), units.end(),
                         [](const HuntUnit& u) { return u.scenario.cache.has_swa(); });
  };
  const std::vector<HuntUnit> parent = swarm_units(at("sglang-c016246b0f"), 60);
  const std::vector<HuntUnit> newest = swarm_units(at("sglang-6ed5780c4f"), 60);
  EXPECT_GT(with_swa(parent), 0);
  EXPECT_EQ(with_swa(newest), 0);
  for (const HuntUnit& u : parent) {
    if (!u.scenario.cache.has_swa()) continue;
    // What the FULL + SWA tree runs beside: HiCache, no storage tier, no Mamba.
    EXPECT_TRUE(u.scenario.cache.hierarchical) << u.index;
    EXPECT_FALSE(u.scenario.storage) << u.index;
    EXPECT_FALSE(u.scenario.cache.has_mamba()) << u.index;
  }
  // The same seeds draw the same units: the revision decides only what is turned off.
  for (size_t i = 0; i < parent.size(); ++i) {
    EXPECT_EQ(parent[i].seed, newest[i].seed);
    if (!parent[i].scenario.cache.has_swa()) continue;
    Scenario drawn = parent[i].scenario;
    const std::vector<std::string> off = fit_to_target(drawn, at("sglang-6ed5780c4f"));
    EXPECT_NE(std::find(off.begin(), off.end(), "swa"), off.end()) << i;
  }
}

}  // namespace
}  // namespace kvsim::sim
