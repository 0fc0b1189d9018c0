// Runner: the entry points the CLI and the tests use — run a scenario for a seed (optionally
// on given arrivals, optionally recording the op trace), replay an op trace, and the JSON and
// text summaries of a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scheduler.h"
#include "sim/trace.h"

namespace kvsim::sim {

struct RunRequest {
  const Scenario* scenario = nullptr;
  uint64_t seed = 1;
  const std::vector<Arrival>* arrivals = nullptr;  // null: generated from scenario + seed
  std::vector<Op>* record = nullptr;               // non-null: every op is appended
  ExecutorSetup setup;                             // test hook (see executor.h)
};

RunResult run_scenario(const RunRequest& request);

// Applies the trace's ops to a fresh executor (no scheduler); after the last op, checks
// quiescence. The result's violation and hash are what the trace reproduces.
RunResult replay_ops(const OpTrace& trace, const ExecutorSetup& setup = {});

nlohmann::json summary_json(const Scenario& s, uint64_t seed, const RunResult& r);
std::string summary_text(const Scenario& s, uint64_t seed, const RunResult& r);

}  // namespace kvsim::sim
