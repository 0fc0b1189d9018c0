// Workloads: the requests a run serves, as arrivals on the logical clock. Generators build
// them from the scenario's knobs and the "workload" random stream; the Mooncake importer
// (mooncake.h) builds them from a trace file. Either way a run depends only on this list,
// the scenario and the seed — which is what a workload trace records.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/types.h"
#include "sim/config/scenario.h"
#include "sim/workload/prompt.h"

namespace kvsim::sim {

// What the serving system reported for a request it served (an imported SGLang dump): the
// prefix-cache hit it saw, to compare with the simulator's (sim/report/fidelity.h). -1 = not
// reported.
struct ReportedCache {
  int64_t cached_tokens = -1;
  int64_t device = -1, host = -1, storage = -1;  // --enable-cache-report's split by tier
  int64_t prompt_tokens = -1;
  std::string sglang_rid;  // the request's id in the dump ("" = none)
  bool stand_in = false;   // the prompt is a stand-in tokenisation of its text
  bool operator==(const ReportedCache&) const = default;
};

// The prompt is `prompt` when set; otherwise the expansion of `recipe`, done only when the
// request arrives (a workload trace read from disk holds recipes, not tokens). Generated and
// imported arrivals carry both, so a trace writer can store the recipe.
struct Arrival {
  RequestId rid = 0;
  uint64_t tick = 0;
  Namespace ns = 0;
  Tokens prompt;
  PromptRecipe recipe;
  int64_t output_len = 1;
  // >= 0: the request did not finish where it was recorded (a crash caught it, or it was
  // aborted); the scheduler aborts it, once prefilled, after this many output tokens.
  int64_t abort_at = -1;
  std::optional<ReportedCache> reported;
};

// The arrival's prompt tokens (expanding its recipe when the tokens are not held).
Tokens prompt_of(const Arrival& a);

// Arrivals in tick order, one at a time: a run holds only the requests in flight, never the
// whole workload (10^7 requests start in the memory of one).
class ArrivalSource {
 public:
  virtual ~ArrivalSource() = default;
  // The next arrival, its prompt expanded; false when there are none left.
  virtual bool next(Arrival& out) = 0;
};

// The scenario's workload for `seed`: the generator (or the Mooncake import), streamed. The
// source reads the scenario's workload options as it goes: the scenario must outlive it.
std::unique_ptr<ArrivalSource> workload_source(const Scenario& scenario, uint64_t seed);
// The arrivals of a list (borrowed: it must outlive the source).
std::unique_ptr<ArrivalSource> list_source(const std::vector<Arrival>& arrivals);

// The token a request generates at output position i: a pure function, so a multi-turn
// generator can append a turn's answer to the session without running the model.
Token output_token(RequestId rid, size_t i);

// The whole workload at once (`kvsim gen`, tests); a run streams it (workload_source).
std::vector<Arrival> generate_workload(const Scenario& scenario, uint64_t seed);

}  // namespace kvsim::sim
