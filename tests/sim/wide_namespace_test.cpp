// workload.wide_namespace_ids: tenants named by 63-bit ids (SGLang's extra_key is any string),
// so storage keys and namespace seeds meet ids past a byte (issue 28: a namespace seed that
// used only the low bits of an id survived every hunt while ids were 0-4).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/campaign/runner.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {
namespace {

Scenario tenants(bool wide) {
  Scenario s = default_scenario();
  s.workload.kind = WorkloadKind::kMultiTurn;
  s.workload.requests = 120;
  s.workload.namespaces = 3;
  s.workload.sessions = 6;
  s.workload.wide_namespace_ids = wide;
  return s;
}

TEST(WideNamespaceIds, TenantsKeepTheirPromptsAndGetDistinctLargeIds) {
  const std::vector<Arrival> narrow = generate_workload(tenants(false), 7);
  const std::vector<Arrival> wide = generate_workload(tenants(true), 7);
  ASSERT_EQ(narrow.size(), wide.size());
  std::map<Namespace, Namespace> id_of;  // narrow id -> wide id
  for (size_t i = 0; i < narrow.size(); ++i) {
    // The same draws: only the ids differ, and each index maps to one id.
    EXPECT_EQ(narrow[i].prompt.vec(), wide[i].prompt.vec());
    EXPECT_EQ(narrow[i].tick, wide[i].tick);
    const auto [it, fresh] = id_of.emplace(narrow[i].ns, wide[i].ns);
    EXPECT_EQ(it->second, wide[i].ns) << "namespace " << narrow[i].ns << " got two ids";
  }
  ASSERT_EQ(id_of.size(), 3u);
  EXPECT_EQ(id_of.at(0), 0u);  // the default tenant stays 0
  std::set<Namespace> ids;
  for (const auto& [index, id] : id_of) {
    ids.insert(id);
    if (index == 0) continue;
    EXPECT_GT(id, Namespace{1} << 32) << "namespace " << index;
    EXPECT_LE(id, static_cast<Namespace>(INT64_MAX)) << "traces hold ids up to INT64_MAX";
  }
  EXPECT_EQ(ids.size(), 3u);
}

// With storage, the run's checks (storage.hash_chain recomputes every key from the namespace
// seed; the content oracle depends on the namespace) hold for wide ids.
TEST(WideNamespaceIds, AStorageRunWithWideIdsIsClean) {
  Scenario s = tenants(true);
  s.cache.host_tokens = 128;
  s.cache.prefetch_threshold_tokens = 8;
  s.storage = true;
  s.workload.arrival_rate = 0.3;
  s.faults.enabled = false;  // every request finishes
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 3});
  ASSERT_TRUE(r.ok()) << r.violation->invariant << ": " << r.violation->detail;
  EXPECT_EQ(r.stats.finished, s.workload.requests);
  EXPECT_GT(r.storage.hit_pages, 0) << "no prefetch read a page: the run did not reach storage";
}

}  // namespace
}  // namespace kvsim::sim
