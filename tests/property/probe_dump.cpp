// The property tests drive the core through its API directly (locks on any node, init_load_back
// without a scheduler), so they reach probes no simulator run reaches. With KVSIM_PROBE_REPORT
// set to a path, this binary writes the probes its tests reached there as kvsim's own JSON
// probe report (one {"probe_report": ...} line), for tools/probe_sweep.sh to add in.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/common/probe.h"
#include "tools/kvsim/probe_report.h"

namespace kvsim {
namespace {

class ProbeDump : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = std::getenv("KVSIM_PROBE_REPORT");
    if (path == nullptr || *path == '\0') return;
    std::ofstream(path) << tools::probe_report_json(probes::snapshot(), 1).dump() << "\n";
  }
};

const ::testing::Environment* const kProbeDump = ::testing::AddGlobalTestEnvironment(new ProbeDump);

}  // namespace
}  // namespace kvsim
