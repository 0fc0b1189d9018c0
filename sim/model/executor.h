// Executor: applies ops to the real core (HiCache on the deterministic CPU backend) and checks
// every invariant after each one. It is the only place the simulator touches the core, so a
// run, a replayed op trace and a shrunk trace all execute the same code.
//
// What it checks (the first failure stops the run and is kept as `violation()`):
//  - after every op: backend stream-lifetime violations, core assertions (as "core.assert"),
//    and pool conservation ("slots.conservation": allocated device tokens == tree device
//    tokens + request-held tokens), all O(1);
//  - every `full_every` ops (or amortized over the ops that may change the cache, see
//    CheckOptions): HiCache::sanity_check;
//  - on every model read (admit, resume): the bytes of every pool the model reads — full KV of
//    the prefix, the SWA window, the Mamba state — against the content oracle ("content").
//    Reads go through the compute stream, in stream order, into pinned scratch memory, so a
//    read that does not wait for a load-back reads what was there before and fails;
//  - quiescence (check_quiescent) once the scheduler has drained: no locks, no request slots,
//    no pending transfers or prefetches.
// The event hash folds every op and its outcome; two runs with the same ops give the same hash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"
#include "core/pools/cpu_copy.h"
#include "core/pools/metadata_buffers.h"
#include "core/pools/sparse_index_buffer.h"
#include "sim/model/op.h"
#include "sim/base/rng.h"
#include "sim/config/scenario.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {

struct SimViolation {
  std::string invariant;  // a stable name (docs/invariants.md) or "core.assert", "content", ...
  std::string detail;
  size_t op_index = 0;  // the op after which it was seen
};

// "detail (node N, slot S)" of a core violation.
std::string describe(const Violation& v);

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
  std::unique_ptr<RequestKV> kv;
  int64_t retracts = 0;
  int64_t first_device_hit = -1;  // prefix hit at the first admission (-1: never admitted)
  int64_t first_host_hit = -1;
  // PD decode: the metadata the prefill side sent (a copy, seed 003), and the CPU copy that
  // holds the request's KV and side buffers while it is retracted.
  MetadataSnapshot metadata;
  std::optional<CpuCopy> cpu_copy;
  size_t offloaded_slots = 0;
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
  int64_t full_checks = 0;         // full HiCache::sanity_check walks
  int64_t storage_hit_tokens = 0;  // tokens prefetched from the storage tier
};

struct OpOutcome {
  bool applied = false;  // false: rejected (the op made no sense in the current state)
  bool ok = true;        // op-specific success (admit got slots, compute fitted, gate open)
  std::string why;       // when rejected: why, e.g. "request 7 is not running"
};

// Watches an executor (sim/report/timeline.h): every op before and after it is applied, and the
// fault sites the scheduler fires. Off (null) by default: one pointer test per op.
class ExecutorObserver {
 public:
  virtual ~ExecutorObserver() = default;
  virtual void before_op(size_t index, const Op& op) = 0;
  virtual void after_op(size_t index, const Op& op, const OpOutcome& outcome) = 0;
  virtual void on_fault(std::string_view site) = 0;
  virtual void on_executor_gone() = 0;  // from ~Executor: forget it
};

class Executor;
// Runs right after an executor is built, before any op: tests use it to plant a bug in a
// test-only component or backend hook, and replay and shrink must apply the same setup.
using ExecutorSetup = std::function<void(Executor&)>;

class Executor {
 public:
  Executor(const Scenario& scenario, uint64_t seed);
  ~Executor();

  OpOutcome apply(const Op& op);
  const std::optional<SimViolation>& violation() const { return violation_; }
  bool failed() const { return violation_.has_value(); }
  // Quiescence at the end of a run (after the scheduler drained everything).
  void check_quiescent();

  uint64_t event_hash() const { return hash_; }
  uint64_t now() const { return now_; }
  const ExecutorStats& stats() const { return stats_; }
  const Scenario& scenario() const { return scenario_; }
  HiCache& cache() { return *cache_; }
  CpuBackend& backend() { return backend_; }
  // The store as the core sees it (null without a storage tier); faults are armed only inside
  // a storage op, so reads from outside one see the store as it is.
  StorageBackend* storage() { return storage_ ? storage_->backend() : nullptr; }
  const std::map<RequestId, SimRequest>& requests() const { return requests_; }
  const SimRequest* request(RequestId rid) const;
  // The storage tier's counters and contents now (enabled = false without one).
  StorageRunStats storage_stats() const;
  void set_observer(ExecutorObserver* observer) { observer_ = observer; }
  ExecutorObserver* observer() const { return observer_; }
  void note_fault(std::string_view site) {
    if (observer_ != nullptr) observer_->on_fault(site);
  }

 private:
  OpOutcome dispatch(const Op& op);
  OpOutcome arrive(const Op& op);
  OpOutcome prefetch_check(SimRequest& r);
  OpOutcome admit(SimRequest& r, const Op& op);
  OpOutcome start_loads();
  OpOutcome compute(SimRequest& r, int64_t n, bool oom);
  OpOutcome finish(SimRequest& r);
  OpOutcome abort(SimRequest& r);
  OpOutcome retract(SimRequest& r);
  OpOutcome offload(SimRequest& r);
  OpOutcome resume(SimRequest& r);
  OpOutcome step(uint32_t stream, int64_t n);
  OpOutcome tick(int64_t now);
  OpOutcome liveness();
  void set_done(SimRequest& r);  // leaves the live set
  bool pd() const { return scenario_.scheduler.mode == SchedulerMode::kPd; }
  MetadataRecord expected_metadata(const SimRequest& r) const;
  bool check_metadata(const SimRequest& r);
  CpuCopyPools cpu_copy_pools();
  OpOutcome storage(uint32_t worker, int64_t fault);
  // kInject: holds every free page of a pool (or delays event queries) for the next op only.
  OpOutcome inject(const Op& op);
  void release_injected();

  void extend_tokens(SimRequest& r);
  void release_request_memory(SimRequest& r);  // prefix_hash catches up with tokens
  void forward(SimRequest& r, size_t from, size_t to);
  // Runs the compute stream to empty; when it waits on another stream, steps that one.
  void drive_compute();
  // Model reads, checked against the oracle; false after recording a "content" violation.
  bool read_prefix(SimRequest& r);
  // Reads items `slots` (all layers) of `view` and compares item i with the oracle's bytes of
  // position positions[i], or of position i when `positions` is empty (kind: ContentKind).
  bool read_pool_range(const KVPoolView& view, std::span<const SlotIndex> slots,
                       std::span<const size_t> positions, const SimRequest& r, int kind,
                       const char* what);
  Block& scratch(size_t bytes);
  void after_op(bool may_change_cache);
  std::string storage_stats_disagree() const;
  void fail(std::string invariant, std::string detail);
  void mix(uint64_t v);

  Scenario scenario_;
  Rng gpu_rng_;
  CpuBackend backend_;
  std::unique_ptr<StorageTier> storage_;  // when the scenario has a storage tier
  std::unique_ptr<HiCache> cache_;
  std::unique_ptr<SparseIndexBuffer> sparse_;  // when the scenario has one
  std::unique_ptr<MetadataBuffers> metadata_;  // PD mode
  std::map<RequestId, SimRequest> requests_;
  std::set<std::pair<uint64_t, RequestId>> live_;  // (arrival tick, rid) of requests not done
  RequestId head_rid_ = 0;         // the oldest live request at the last liveness op
  uint64_t head_since_ = 0;        // when it became the oldest
  uint64_t head_finished_at_ = 0;  // when the previous oldest finished
  std::optional<SimViolation> violation_;
  ExecutorStats stats_;
  uint64_t now_ = 0;
  uint64_t hash_ = 1469598103934665603ull;
  int64_t since_full_check_ = 0;
  Block scratch_;
  std::vector<std::byte> expected_scratch_;  // read_pool_range's expected bytes
  ExecutorObserver* observer_ = nullptr;
  // Pages an inject op holds until the end of the next op: (allocator, pages).
  std::vector<RequestId> awaiting_loads_;  // admitted with load_queued, in admission order
  std::vector<std::pair<PagedSlotAllocator*, IndexVector>> injected_;
};

}  // namespace kvsim::sim
