// Shrinking: delta debugging (Zeller's ddmin) over a failing op trace, keeping the same
// violation — the same invariant and, for assertions and content failures, the same site — so
// a failure found after thousands of ops replays from a handful.
//
// Passes, repeated until nothing changes or the replay budget runs out (every candidate that
// fails the same way is cut after the op that failed):
//   1. shrink the configuration: the host and device pools by 1/2, 3/4, 7/8 while it still
//      fails (the shrunk trace's header carries the smaller configuration);
//   2. ddmin over whole requests (every op naming a request id), then over scheduler rounds
//      (a tick and the ops up to the next one);
//   3. drop every op of one kind; ddmin over the remaining ops, one sweep per chunk size (ops
//      that no longer make sense are skipped by the executor, so any subset is a valid trace);
//      windows of 2 and 3 adjacent ops;
//   4. merge adjacent steps and ticks; simplify single ops: shorter prompts and outputs,
//      smaller step counts.
// SGLang's target: candidates run with check.full_every 0 when the failure shows with it (the
// driver's tree walks are most of a replay); the result is checked under the recorded checks.
// Every candidate is checked by replaying it on a fresh executor (sim/campaign/runner.h
// replay_ops); for a trace whose failure is a crash ("crash": the run died by a signal) each replay
// runs in a child process (replay_isolated), and the written trace holds the ops that applied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/trace/trace.h"

namespace kvsim::sim {

struct ShrinkOptions {
  size_t max_replays = 20000;
  // Ops replayed in all, summed over the replays (0 = no limit): a deterministic bound on the
  // work, since one replay of a long liveness trace can take seconds.
  size_t max_replay_ops = 0;
  ExecutorSetup setup;  // applied to every replay (tests that plant a bug)
};

struct ShrinkResult {
  bool reproduced = false;  // the input trace failed as recorded (else nothing was shrunk)
  OpTrace trace;            // the smallest failing trace found
  size_t original_ops = 0;
  size_t replays = 0;
};

// The functions from here to shrink_in_child are in isolated_runs.cpp (child processes).
// A run that killed its process (a signal, or an exit without a verdict): the "crash"
// violation, detail "killed by signal N (name)" or "exited with status N", seen at op_index.
SimViolation crash_violation(int wait_status, size_t op_index);
bool is_crash(const SimViolation& v);

// Replays `trace` (leniently, as replay_ops does) in a child process, so that a crash of the
// code under test cannot take the caller with it. `applied` says per trace op whether it
// applied (ops after a crash: not reached); the crashing op counts as applied.
struct IsolatedReplay {
  std::optional<SimViolation> violation;
  std::vector<uint8_t> applied;
};
IsolatedReplay replay_isolated(const OpTrace& trace, const ExecutorSetup& setup = {});

// Crash evidence (docs/hunt.md, "Crashes"): re-runs (scenario, seed) in a child process that
// keeps every op as it starts and, on a fatal signal, writes them to `path` as an op trace
// whose violation is the crash. True when the child died by a signal and left the trace.
bool record_crash_trace(const Scenario& scenario, uint64_t seed, const ExecutorSetup& setup,
                        const std::string& path);

// Shrinks the failing trace at `trace` in a child process and writes the result to `out`:
// "" when it did, else why not (a shrink that crashes cannot take its caller with it).
std::string shrink_in_child(const std::string& trace, const std::string& out,
                            const ShrinkOptions& options);

// True when `v` is the same failure as `target` for shrinking purposes: the same invariant
// and, for assertions, content failures, crashes and SGLang's exceptions, the same site.
bool same_failure(const SimViolation& target, const SimViolation& v);

// The site of an sglang.exception detail ("<Type>: <message> at <file>:<line> (<function>)"):
// "<Type> at <file>:<line> (<function>)", so that an exception of another type or raised
// elsewhere is another failure; the whole detail when it has not that form.
std::string sglang_exception_site(const std::string& detail);

ShrinkResult shrink_trace(const OpTrace& failing, const ShrinkOptions& options = {});

// A failing trace whose ops were applied leniently (a fuzzer's, a shrinker's candidate) as a
// trace `kvsim replay` accepts strictly: only the ops that apply, with their hash chain and
// end figures, when it still fails the same way without the others; else `trace` unchanged.
OpTrace strict_trace(const OpTrace& trace, const ExecutorSetup& setup = {});

}  // namespace kvsim::sim
