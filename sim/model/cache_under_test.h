// CacheUnderTest: what the executor needs from a cache — the seam between the simulator and the
// cache it hunts. The executor keeps the model's side of every request (its tokens, its state,
// the liveness clock, the event hash) and asks the cache under test to do the cache's side: the
// scheduler's protocol of SGLang (admit = match + lock + load back, extend + forward, finish =
// insert + free + unlock, retract, abort), the device's streams and the storage workers, and the
// checks that read the cache's own state.
//
// Two implementations: KvsimCoreCache (sim/model/core_cache.h) runs kvsim's core (HiCache on the
// deterministic CPU backend); SglangCache (sim/model/sglang_cache.h) runs SGLang's own Python
// cache in a driver process over docs/sglang-target-protocol.md. Everything above the model — the
// scheduler, traces, replay, shrink, sweeps, hunts — is the same for both.
//
// Contract: every call is deterministic in the calls before it (no clock, no thread timing), so
// one op sequence gives one sequence of decisions; a broken invariant is reported through the
// CacheContext's `fail` (the first one is kept), never thrown; a core assertion may be thrown as
// AssertionFailure and the executor turns it into a "core.assert" violation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/op.h"
#include "sim/model/request.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {

struct Scenario;

// What the cache under test reports back into the run: violations and the shared counters.
struct CacheContext {
  const Scenario& scenario;
  uint64_t seed = 0;
  std::function<void(std::string invariant, std::string detail)> fail;
  ExecutorStats& stats;
};

// The cache's decision at admission: how much of the prompt it already holds.
struct AdmitDecision {
  int64_t device_hit_tokens = 0;
  int64_t host_hit_tokens = 0;
  size_t owned_from = 0;  // tokens the request reuses (its compute starts here)
};

class CacheUnderTest {
 public:
  virtual ~CacheUnderTest() = default;

  // --- What the scheduler model reads between ops.
  // The streams the scheduler advances every iteration, in order: compute, write, load.
  virtual std::vector<uint32_t> progress_streams() const = 0;
  virtual size_t stream_count() const = 0;
  virtual bool storage_enabled() const = 0;
  // A prefetch has pages left to read (a read fault now meets a read).
  virtual bool storage_reads_pending() const = 0;
  // Free plus evictable device tokens: the admission budget before the decode reserve.
  virtual int64_t admission_budget() const = 0;
  // Load-backs admitted with defer_load and not yet issued.
  virtual bool loads_queued() const = 0;

  // --- The request protocol. `r` is the model's request; the cache keeps its own per-request
  // state keyed by r.rid.
  // At arrival: starts a storage prefetch when the cache has storage and the scenario asks for
  // prefetching; true when one is live for the request.
  virtual bool arrive(SimRequest& r, uint64_t now) = 0;
  // The admission gate of a prefetching request: the tokens it loaded once it is done.
  virtual std::optional<int64_t> prefetch_done(SimRequest& r, uint64_t now) = 0;
  // Match, lock, load back (deferred to start_loads when `defer_load`); nullopt: no room now,
  // nothing changed.
  virtual std::optional<AdmitDecision> admit(SimRequest& r, bool load_back, bool defer_load,
                                             std::optional<int64_t> quota) = 0;
  // Issues every deferred load-back and makes the compute stream wait for them.
  virtual void start_loads() = 0;
  // Allocates room for r.tokens[r.computed, target) and forwards it (writes its KV); false when
  // there is no room (or `oom` injects that), with nothing changed.
  virtual bool compute(SimRequest& r, size_t target, bool oom) = 0;
  // The request's computed prefix goes into the cache, the rest is freed, its lock released.
  virtual void finish(SimRequest& r) = 0;
  virtual void retract(SimRequest& r) = 0;
  // Drops the request wherever it is: running (free + unlock), offloaded, prefetching.
  virtual void abort(SimRequest& r) = 0;
  // PD decode: copy the request's KV and side buffers to CPU and free its slots; resume: new
  // slots, copy back (false: no room now, nothing changed), then verify what came back.
  virtual void offload(SimRequest& r) = 0;
  virtual bool resume(SimRequest& r) = 0;
  virtual void verify_resumed(SimRequest& r) = 0;

  // --- Progress the simulator owns.
  virtual void poll() = 0;                               // check_hicache_events
  virtual void flush() = 0;                              // every transfer lands, every ack consumed
  virtual int64_t step(uint32_t stream, int64_t n) = 0;  // ops run (stream < stream_count())
  virtual OpOutcome storage(uint32_t worker, int64_t fault) = 0;
  virtual OpOutcome inject(const Op& op) = 0;
  virtual void release_injected() = 0;

  // --- Checks.
  // The model's read of the request's computed prefix, checked against the content oracle.
  virtual bool read_prefix(SimRequest& r) = 0;
  // After every applied op (cheap checks; the full check at the scenario's spacing).
  virtual void check_after_op(bool may_change_cache) = 0;
  // At the end of a run, after the model found every request done.
  virtual void check_quiescent() = 0;
  virtual StorageRunStats storage_stats() const = 0;

  // What the cache decided since the last take, by name (docs/sglang-hunt.md, "Differential"):
  // what the differential compares against kvsim's core. Empty for a cache that reports none.
  virtual std::map<std::string, int64_t> take_decisions() { return {}; }
};

}  // namespace kvsim::sim
