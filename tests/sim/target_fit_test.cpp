// Fitting a drawn unit to what a target can run (sim/campaign/target_fit.h), without SGLang: the
// capabilities are given, as an SGLang revision's driver would report them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace kvsim::sim
