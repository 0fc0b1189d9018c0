// Executor: applies ops to the cache under test (sim/model/cache_under_test.h: kvsim's core, or
// SGLang's own cache through its driver) and checks every invariant after each one. It is the
// only place the simulator touches a cache, so a run, a replayed op trace and a shrunk trace all
// execute the same code.
//
// The executor owns the model's side: each request's tokens and state, the logical clock, the
// liveness bound, the event hash and the first violation. What it checks itself: liveness (the
// oldest live request finishes within scenario.scheduler.liveness_ticks), the option contract
// and the trace header's round trip at the first op, and that every request is done at the end.
// The cache under test checks its own state (docs/invariants.md): after every op the cheap
// checks, at the scenario's spacing the full walk, on every model read the content oracle, and
// quiescence at the end. The event hash folds every op and its outcome; two runs with the same
// ops give the same hash.
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
#include "sim/config/scenario.h"
#include "sim/model/cache_under_test.h"
#include "sim/model/op.h"
#include "sim/model/request.h"
#include "sim/model/storage_tier.h"
#include "sim/model/target.h"

namespace kvsim::sim {

// "detail (node N, slot S)" of a core violation.
std::string describe(const Violation& v);

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
class KvsimCoreCache;
// Runs right after an executor is built, before any op: tests use it to plant a bug in a
// test-only component or backend hook, and replay and shrink must apply the same setup.
using ExecutorSetup = std::function<void(Executor&)>;

class Executor {
 public:
  // The cache under test is kvsim's core unless `target` names another (sim/model/target.h).
  Executor(const Scenario& scenario, uint64_t seed, const Target& target = {});
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
  const Target& target() const { return target_; }
  CacheUnderTest& cache_under_test() { return *cut_; }
  const CacheUnderTest& cache_under_test() const { return *cut_; }
  // kvsim's core when it is the cache under test, else null (pictures and timelines of the
  // core's state need it).
  KvsimCoreCache* core() { return core_; }
  // The core's parts; only when core() is not null (tests of the core).
  HiCache& cache();
  CpuBackend& backend();
  // The store as the core sees it (null without a storage tier or another target).
  StorageBackend* storage();
  const std::map<RequestId, SimRequest>& requests() const { return requests_; }
  const SimRequest* request(RequestId rid) const;
  // The storage tier's counters and contents now (enabled = false without one).
  StorageRunStats storage_stats() const { return cut_->storage_stats(); }
  // Tests: another cache under test (a stand-in, a differential of two cores), built from this
  // run's context (`seed`: the run's) before the first op.
  void replace_cache_under_test(
      const std::function<std::unique_ptr<CacheUnderTest>(CacheContext)>& make, uint64_t seed);
  void set_observer(ExecutorObserver* observer) { observer_ = observer; }
  ExecutorObserver* observer() const { return observer_; }
  void note_fault(std::string_view site) {
    if (observer_ != nullptr) observer_->on_fault(site);
  }

 private:
  CacheContext context(uint64_t seed);
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
  OpOutcome storage(uint32_t worker, int64_t fault);
  OpOutcome tick(int64_t now);
  OpOutcome liveness();
  void set_done(SimRequest& r);  // leaves the live set
  bool pd() const { return scenario_.scheduler.mode == SchedulerMode::kPd; }

  void extend_tokens(SimRequest& r);
  void release_request_memory(SimRequest& r);  // prefix_hash catches up with tokens
  void after_op(bool may_change_cache);
  void fail(std::string invariant, std::string detail);
  void mix(uint64_t v);

  Scenario scenario_;
  Target target_;
  ExecutorStats stats_;
  std::unique_ptr<CacheUnderTest> cut_;
  KvsimCoreCache* core_ = nullptr;  // cut_ when it is kvsim's core
  std::map<RequestId, SimRequest> requests_;
  std::set<std::pair<uint64_t, RequestId>> live_;  // (arrival tick, rid) of requests not done
  RequestId head_rid_ = 0;         // the oldest live request at the last liveness op
  uint64_t head_since_ = 0;        // when it became the oldest
  uint64_t head_finished_at_ = 0;  // when the previous oldest finished
  std::optional<SimViolation> violation_;
  uint64_t now_ = 0;
  uint64_t hash_ = 1469598103934665603ull;
  ExecutorObserver* observer_ = nullptr;
  std::vector<RequestId> awaiting_loads_;  // admitted with load_queued, in admission order
};

}  // namespace kvsim::sim
