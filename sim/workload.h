// Workloads: the requests a run serves, as arrivals on the logical clock. Generators build
// them from the scenario's knobs and the "workload" random stream; the Mooncake importer
// (mooncake.h) builds them from a trace file. Either way a run depends only on this list,
// the scenario and the seed — which is what a workload trace records.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/types.h"
#include "sim/scenario.h"

namespace kvsim::sim {

struct Arrival {
  RequestId rid = 0;
  uint64_t tick = 0;
  Namespace ns = 0;
  std::vector<Token> prompt;
  int64_t output_len = 1;
};

// The token a request generates at output position i: a pure function, so a multi-turn
// generator can append a turn's answer to the session without running the model.
Token output_token(RequestId rid, size_t i);

std::vector<Arrival> generate_workload(const Scenario& scenario, uint64_t seed);

}  // namespace kvsim::sim
