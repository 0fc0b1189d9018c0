// Scheduler: a model of SGLang's scheduler loop that decides, tick by tick, which ops the
// executor applies — the only source of decisions in a run, drawing every choice from the seed.
//
// One iteration (tick):
//   arrivals → waiting queue (prefetch starts at arrival);
//   poll point (write/load acks, prefetch progress) — unless a fault defers it;
//   storage workers and copy streams make a random amount of progress (faults stall them);
//   admission: FIFO over the waiting queue, gated by prefetch progress, bounded by max_running
//     and the budget available + evictable − reserved (decode_reserve per running request);
//     admit = match_prefix + lock + load-back + the model's read of the prefix;
//   forward: each running request computes one prefill chunk or one decode token; a decode
//     that does not fit retracts others, fewest generated tokens first, keeping one, and a
//     request that cannot fit even alone is aborted (SGLang's retract_decode); finished
//     requests are inserted into the tree.
// PD mode models the decode instance: requests arrive with their KV (no prefix matching),
// metadata comes through MetadataBuffers, and a retract copies the request's KV and sparse
// index pages to CPU (get_cpu_copy) and frees its slots; resumes go before new admissions.
// The run ends when every request is done; then all in-flight work is drained and the
// executor checks quiescence. A request older than liveness_ticks is a "liveness" violation.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "sim/model/executor.h"
#include "sim/model/faults.h"
#include "sim/model/storage_faults.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

// One request's prefix-cache hit at its first admission (what SGLang reports as cached_tokens).
struct RequestHit {
  RequestId rid = 0;
  int64_t device = 0;
  int64_t host = 0;
};

struct RunResult {
  std::optional<SimViolation> violation;
  uint64_t event_hash = 0;
  ExecutorStats stats;
  int64_t ticks = 0;
  std::array<uint64_t, kFaultSites> faults_fired{};
  StorageRunStats storage;               // the storage tier at the end of the run
  std::vector<RequestHit> request_hits;  // by rid; requests that were never admitted are absent
  Target target;                         // the cache under test (with the commit it ran)
  bool ok() const { return !violation.has_value(); }
};

// Receives every op in order, after it applied, with its outcome and the event hash after it
// (trace recording); may be empty.
using OpSink = std::function<void(const Op&, const OpOutcome&, uint64_t)>;

class Scheduler {
 public:
  // Takes the arrivals from `arrivals` as the clock reaches them (one ahead).
  Scheduler(const Scenario& scenario, uint64_t seed, std::unique_ptr<ArrivalSource> arrivals,
            OpSink sink = {}, const ExecutorSetup& setup = {}, const Target& target = {});
  RunResult run();

 private:
  bool emit(const Op& op, OpOutcome* out = nullptr);
  bool iteration();
  void admit_waiting();
  void forward_running();
  bool decode_or_retract(RequestId rid);
  void inject_aborts();
  void progress_copies_and_storage();
  StorageFault storage_fault(uint32_t worker);
  bool reading_storage();
  bool drain();
  bool check_liveness();
  // Takes `rid` out of the running batch: PD offloads it to CPU, otherwise it is retracted
  // back to the waiting queue. False when the run failed.
  bool preempt(RequestId rid);
  RequestId oldest_running() const;  // running_ must not be empty
  // When `site` fires: an inject op (`what`, see OpKind::kInject) for the op that follows.
  // False when the run failed.
  bool inject(FaultSite site, uint32_t what);
  bool pd() const { return scenario_.scheduler.mode == SchedulerMode::kPd; }

  const Scenario& scenario_;
  Executor executor_;
  Faults faults_;
  Rng rng_;
  std::unique_ptr<ArrivalSource> arrivals_;
  std::optional<Arrival> next_arrival_;  // the next one to arrive; empty when none is left
  void pull_arrival();
  std::map<RequestId, int64_t> abort_at_;  // Arrival::abort_at of the requests that have one
  std::deque<RequestId> waiting_;
  std::deque<RequestId> offloaded_;  // PD: retracted to CPU, resumed before new admissions
  std::vector<RequestId> running_;
  bool starved_ = false;         // a running request went without memory in the last forward
  int64_t deferred_admits_ = 0;  // admits of this iteration that queued their load-back
  OpSink sink_;
  uint64_t now_ = 0;
  std::optional<SimViolation> violation_;
};

}  // namespace kvsim::sim
