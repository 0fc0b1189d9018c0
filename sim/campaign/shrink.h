// Shrinking: delta debugging (Zeller's ddmin) over a failing op trace, keeping the same
// violation — the same invariant and, for assertions and content failures, the same site — so
// a failure found after thousands of ops replays from a handful.
//
// Passes, repeated until nothing changes or the replay budget runs out:
//   1. cut everything after the op that failed;
//   2. drop whole requests (every op naming a request id);
//   3. ddmin over the remaining ops (ops that no longer make sense are skipped by the
//      executor, so any subset is a valid trace);
//   4. simplify single ops: shorter prompts and outputs, smaller step counts;
//   5. shrink the configuration: halve the host and device pools while it still fails (the
//      shrunk trace's header carries the smaller configuration).
// Every candidate is checked by replaying it on a fresh executor (sim/campaign/runner.h replay_ops).
#pragma once

#include <cstddef>
#include <functional>

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

// True when `v` is the same failure as `target` for shrinking purposes.
bool same_failure(const SimViolation& target, const SimViolation& v);

ShrinkResult shrink_trace(const OpTrace& failing, const ShrinkOptions& options = {});

// A failing trace whose ops were applied leniently (a fuzzer's, a shrinker's candidate) as a
// trace `kvsim replay` accepts strictly: only the ops that apply, with their hash chain and
// end figures, when it still fails the same way without the others; else `trace` unchanged.
OpTrace strict_trace(const OpTrace& trace, const ExecutorSetup& setup = {});

}  // namespace kvsim::sim
