// The property tests drive the core through its API directly (locks on any node, init_load_back
// without a scheduler), so they reach probes no simulator run reaches. With KVSIM_PROBE_REPORT
// set to a path, this binary writes the probes its tests reached there, in the format of
// `kvsim ... --json` (one {"probe_report": ...} line), for tools/probe_sweep.sh to add in.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/common/probe.h"

namespace kvsim {
namespace {

class ProbeDump : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = std::getenv("KVSIM_PROBE_REPORT");
    if (path == nullptr || *path == '\0') return;
    nlohmann::json probes = nlohmann::json::object();
    nlohmann::json expected = nlohmann::json::array();
    for (const probes::Count& c : probes::snapshot())
      probes[std::string(c.name)] = c.count;
    for (const probes::Info& info : probes::all()) {
      if (!info.expected_unreached.empty()) expected.push_back(std::string(info.name));
    }
    const nlohmann::json report = {{"probe_report",
                                    {{"enabled", probes::kEnabled},
                                     {"runs", 1},
                                     {"probes", probes},
                                     {"expected_unreached", expected}}}};
    std::ofstream(path) << report.dump() << "\n";
  }
};

const ::testing::Environment* const kProbeDump = ::testing::AddGlobalTestEnvironment(new ProbeDump);

}  // namespace
}  // namespace kvsim
