// Runner: the entry points the CLI and the tests use — run a scenario for a seed (optionally
// on given arrivals, optionally recording the op trace), replay an op trace, and the JSON and
// text summaries of a run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/model/scheduler.h"
#include "sim/trace/trace.h"

namespace kvsim::sim {

struct RunRequest {
  const Scenario* scenario = nullptr;
  uint64_t seed = 1;
  const std::vector<Arrival>* arrivals = nullptr;  // null: generated from scenario + seed
  std::vector<Op>* record = nullptr;               // non-null: every op is appended
  std::vector<OpCheck>* checks = nullptr;          // non-null: each op's outcome and hash
  ExecutorSetup setup;                             // test hook (see executor.h)
  Target target;                                   // the cache under test (default: kvsim's)
  // Called every 65,536 ops with the op count and the tick (the CLI's progress line).
  std::function<void(int64_t ops, int64_t tick)> progress;
};

RunResult run_scenario(const RunRequest& request);

// Applies the trace's ops to a fresh executor (no scheduler); after the last op, checks
// quiescence. The result's violation and hash are what the trace reproduces. Ops that do not
// apply are rejected and skipped (shrinking's candidates); replay_trace is the checked form.
RunResult replay_ops(const OpTrace& trace, const ExecutorSetup& setup = {});

// The first op whose replay disagrees with the trace: rejected (`why`), or (with a hash chain)
// an outcome or event hash other than the recorded one.
struct ReplayProblem {
  size_t index = 0;  // into trace.ops
  size_t line = 0;   // in the trace file (0: built in memory)
  Op op;
  bool rejected = false;
  std::string why;                  // when rejected
  std::optional<OpCheck> expected;  // what the trace recorded (with a hash chain)
  OpCheck actual;
};

struct ReplayOptions {
  ExecutorSetup setup;
  bool stop_at_problem = true;  // stop at the first ReplayProblem (kvsim replay)
  bool check_chain = true;      // false: a recorded hash or outcome that differs is no problem
};

struct ReplayReport {
  RunResult result;
  std::optional<ReplayProblem> problem;  // the first
  int64_t rejected = 0;                  // ops that did not apply (when not stopped)
  std::vector<OpCheck> checks;           // per applied op (the chain a re-written trace gets)
  std::vector<bool> applied;             // per op of the trace
};
ReplayReport replay_trace(const OpTrace& trace, const ReplayOptions& options = {});
// "<source>:<line>: op <kind>: <why>" of a problem (the first line of kvsim replay's report).
std::string describe(const OpTrace& trace, const ReplayProblem& p);
nlohmann::json problem_json(const OpTrace& trace, const ReplayProblem& p);

// A clean run that checked nothing worth the name: no request finished, or (content checking
// on) no model read was checked. Empty when the run was not vacuous.
std::string vacuous_reason(const Scenario& s, const RunResult& r);

nlohmann::json summary_json(const Scenario& s, uint64_t seed, const RunResult& r);
std::string summary_text(const Scenario& s, uint64_t seed, const RunResult& r);

}  // namespace kvsim::sim
