// A hunt counts the clean units that checked nothing (runner.h's vacuous_reason) apart from the
// clean ones: a configuration it draws but cannot check shows in its report instead of passing
// for coverage.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "sim/campaign/hunt.h"

namespace kvsim::sim {
namespace {

// Every fault site on and firing at every chance: each request is aborted before it finishes.
Scenario every_request_aborted() {
  Scenario s = default_scenario();
  s.name = "every_request_aborted";
  s.workload.kind = WorkloadKind::kUniform;
  s.workload.requests = 3;
  s.faults.enabled = true;
  s.faults.site_probability = 1.0;
  s.faults.fire_probability = 1.0;
  return s;
}

TEST(HuntVacuous, CleanUnitsThatCheckedNothingAreCountedApart) {
  HuntOptions o;
  o.seed = 1;
  o.time_budget_s = 0;
  o.max_units = 4;  // units 1 and 3 run the named scenario
  o.named = {every_request_aborted()};
  o.trace_dir = ::testing::TempDir() + "/hunt-vacuous-" + std::to_string(::getpid());
  const HuntReport r = run_hunt(o);
  ASSERT_TRUE(r.failures.empty()) << r.failures.front().detail;
  ASSERT_EQ(r.units, 4u);
  EXPECT_EQ(r.vacuous.at("every_request_aborted: no request finished"), 2u);
  uint64_t vacuous_verdicts = 0;
  for (const HuntUnitRecord& u : r.unit_log) {
    if (u.source == "every_request_aborted") {
      EXPECT_EQ(u.verdict, "vacuous") << "unit " << u.unit;
      EXPECT_EQ(u.vacuous, "no request finished") << "unit " << u.unit;
    }
    vacuous_verdicts += u.verdict == "vacuous";
  }
  EXPECT_EQ(vacuous_verdicts, r.vacuous_units);
  const nlohmann::json j = hunt_json(r);
  EXPECT_EQ(j["hunt"]["vacuous_units"].get<uint64_t>(), r.vacuous_units);
  EXPECT_EQ(j["hunt"]["vacuous"]["every_request_aborted: no request finished"].get<uint64_t>(), 2u);
  EXPECT_NE(hunt_text(r).find("checked nothing (vacuous)"), std::string::npos);
}

}  // namespace
}  // namespace kvsim::sim
