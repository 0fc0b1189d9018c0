// The model's side of a run: a request as the scheduler model sees it, the executor's counters,
// an op's outcome and a violation. Nothing here knows which cache is under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace kvsim::sim {

struct SimViolation {
  std::string invariant;  // a stable name (docs/invariants.md) or "core.assert", "content", ...
  std::string detail;
  size_t op_index = 0;  // the op after which it was seen
};

enum class RequestState : uint8_t { kWaiting = 0, kRunning = 1, kOffloaded = 2, kDone = 3 };

struct SimRequest {
  RequestId rid = 0;
  Namespace ns = 0;
  std::vector<Token> tokens;          // prompt, then the outputs generated so far
  std::vector<uint64_t> prefix_hash;  // content-oracle hash of tokens[0..i]
  size_t prompt_len = 0;
  int64_t output_len = 1;
  int64_t generated = 0;
  size_t computed = 0;  // tokens whose KV has been written or reused
  uint64_t arrival_tick = 0;
  RequestState state = RequestState::kWaiting;
  bool prefetching = false;
  bool load_queued = false;  // admitted with its load-back queued: read at the next kStartLoads
  int64_t retracts = 0;
  int64_t first_device_hit = -1;  // prefix hit at the first admission (-1: never admitted)
  int64_t first_host_hit = -1;
};

struct ExecutorStats {
  int64_t ops = 0;
  int64_t finished = 0;
  int64_t aborted = 0;
  int64_t retracted = 0;
  int64_t prompt_tokens = 0;
  int64_t device_hit_tokens = 0;
  int64_t host_hit_tokens = 0;
  int64_t content_checks = 0;
  int64_t offloaded = 0;
  int64_t resumed = 0;
  int64_t max_tree_nodes = 0;      // the largest the radix tree grew
  int64_t rejected = 0;            // ops that did not apply (replay of a shrunk or edited trace)
  int64_t invariant_checks = 0;    // after-op checks (stream lifetime, slot conservation)
  int64_t full_checks = 0;         // full sanity-check walks
  int64_t storage_hit_tokens = 0;  // tokens prefetched from the storage tier
};

struct OpOutcome {
  bool applied = false;  // false: rejected (the op made no sense in the current state)
  bool ok = true;        // op-specific success (admit got slots, compute fitted, gate open)
  std::string why;       // when rejected: why, e.g. "request 7 is not running"
};

}  // namespace kvsim::sim
