// Capability negotiation with the SGLang target: the driver reports what the revision it loads
// can build (python/kvsim/sglang_target/hybrid_capabilities.py), and the hunt turns off in each
// drawn unit only what that revision cannot run. At seed 002's parent (May 2026, FULL + SWA
// UnifiedRadixCache) and at the newest snapshot (its August rewrite) the blind hunt draws SWA
// units on its own; April 2026 (no SWA stack) turns SWA off. The snapshot runs Mamba units with a
// page-first host layout, the only one its MambaPoolHost takes. Skips where Debian's torch or the
// SGLang bundle is absent.
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
  EXPECT_TRUE(newest.at("swa").get<bool>()) << newest.dump();
  // FULL + Mamba (HiMambaRadixCache) runs with both drawn host layouts in April-May 2026; the
  // August snapshot's MambaPoolHost takes page-first layouts only
  // (python/kvsim/sglang_target/hybrid_capabilities.py).
  const nlohmann::json april = sglang_capabilities(at("sglang-21835fb0af"));
  EXPECT_TRUE(april.at("mamba_buildable").get<bool>()) << april.dump();
  EXPECT_TRUE(april.at("mamba").get<bool>()) << april.dump();
  EXPECT_EQ(capabilities_of(at("sglang-21835fb0af")).mamba_host_layouts,
            (std::vector<KVLayout>{KVLayout::kLayerFirst, KVLayout::kPageFirst}));
  EXPECT_TRUE(capabilities_of(at("sglang-21835fb0af")).mamba);
  EXPECT_TRUE(newest.at("mamba_buildable").get<bool>()) << newest.dump();
  EXPECT_TRUE(newest.at("mamba").get<bool>()) << newest.dump();
  EXPECT_EQ(capabilities_of(at("sglang-6ed5780c4f")).mamba_host_layouts,
            (std::vector<KVLayout>{KVLayout::kPageFirst}));
  EXPECT_TRUE(capabilities_of(at("sglang-c016246b0f")).swa);
  EXPECT_TRUE(capabilities_of(at("sglang-6ed5780c4f")).swa);
  EXPECT_FALSE(capabilities_of(at("sglang-21835fb0af")).swa);
}

TEST_F(SglangTargetFit, TheBlindHuntDrawsMambaUnitsAtTheNewestSnapshotPageFirst) {
  // The same seeds at April 2026 (both layouts taken) and at the August snapshot (page-first
  // only): the same units keep Mamba; at the snapshot each runs page-first.
  const std::vector<HuntUnit> april = swarm_units(at("sglang-21835fb0af"), 60);
  const std::vector<HuntUnit> newest = swarm_units(at("sglang-6ed5780c4f"), 60);
  int mamba = 0;
  int moved = 0;
  for (size_t i = 0; i < newest.size(); ++i) {
    const HiCacheOptions& a = april[i].scenario.cache;
    const HiCacheOptions& n = newest[i].scenario.cache;
    if (n.has_swa()) {  // drawn beside SWA, which the snapshot runs (April does not): one tree
      EXPECT_FALSE(n.has_mamba()) << i;
      continue;
    }
    EXPECT_EQ(a.has_mamba(), n.has_mamba()) << i;
    if (!n.has_mamba()) continue;
    ++mamba;
    EXPECT_EQ(n.host_layout, KVLayout::kPageFirst) << i;
    EXPECT_TRUE(n.hierarchical) << i;
    EXPECT_EQ(n.page_size, 1) << i;
    if (a.host_layout == KVLayout::kLayerFirst) ++moved;
  }
  EXPECT_GT(mamba, 0);
  EXPECT_GT(moved, 0);  // some were drawn layer-first: the fit, not the draw, made them page-first
}

TEST_F(SglangTargetFit, TheBlindHuntDrawsSwaUnitsOnlyWhereTheRevisionRunsThem) {
  const auto with_swa = [](const std::vector<HuntUnit>& units) {
    return std::count_if(units.begin(), units.end(),
                         [](const HuntUnit& u) { return u.scenario.cache.has_swa(); });
  };
  const std::vector<HuntUnit> parent = swarm_units(at("sglang-c016246b0f"), 60);
  const std::vector<HuntUnit> newest = swarm_units(at("sglang-6ed5780c4f"), 60);
  const std::vector<HuntUnit> april = swarm_units(at("sglang-21835fb0af"), 60);
  EXPECT_GT(with_swa(parent), 0);
  EXPECT_EQ(with_swa(newest), with_swa(parent));
  EXPECT_EQ(with_swa(april), 0);
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
    EXPECT_EQ(parent[i].scenario.cache.has_swa(), newest[i].scenario.cache.has_swa()) << i;
    if (!parent[i].scenario.cache.has_swa()) continue;
    Scenario drawn = parent[i].scenario;
    const std::vector<std::string> off = fit_to_target(drawn, at("sglang-21835fb0af"));
    EXPECT_NE(std::find(off.begin(), off.end(), "swa"), off.end()) << i;
  }
}

TEST_F(SglangTargetFit, TheHuntsUnitsForSglangAreSizedForItsThroughput) {
  // The hunt's units for SGLang's target, swarm and named, are capped to ~kSglangUnitOps ops
  // (fit_to_target); the same seeds for kvsim's core keep what was drawn.
  HuntOptions sglang;
  sglang.target = at("sglang-6ed5780c4f");
  sglang.named = {load_scenario(KVSIM_SOURCE_DIR "/scenarios/file_storage_budget.json"),
                  load_scenario(KVSIM_SOURCE_DIR "/scenarios/pd_retract_resume_sparse.json")};
  HuntOptions core = sglang;
  core.target = Target{};
  int shorter = 0;
  for (uint64_t i = 0; i < 40; ++i) {
    const HuntUnit a = hunt_unit(sglang, i);
    const HuntUnit k = hunt_unit(core, i);
    const int64_t r = a.scenario.workload.requests;
    EXPECT_LE(r, k.scenario.workload.requests) << i;
    if (r > kMinUnitRequests) {
      EXPECT_LE(static_cast<double>(r) * estimated_ops_per_request(a.scenario),
                static_cast<double>(kSglangUnitOps))
          << i;
    }
    shorter += r < k.scenario.workload.requests ? 1 : 0;
  }
  EXPECT_GT(shorter, 30);
}

}  // namespace
}  // namespace kvsim::sim
