#include "sim/model/scheduler.h"

#include <algorithm>
#include <array>

namespace kvsim::sim {

Scheduler::Scheduler(const Scenario& scenario, uint64_t seed,
                     std::unique_ptr<ArrivalSource> arrivals, OpSink sink,
                     const ExecutorSetup& setup, const Target& target)
    : scenario_(scenario),
      executor_(scenario, seed, target),
      faults_(scenario.faults, seed),
      rng_(rng_stream(seed, "scheduler")),
      arrivals_(std::move(arrivals)),
      sink_(std::move(sink)) {
  if (setup) setup(executor_);
  if (executor_.observer() != nullptr) {
    faults_.set_on_fire([this](FaultSite site) { executor_.note_fault(to_string(site)); });
  }
  pull_arrival();
}

void Scheduler::pull_arrival() {
  Arrival a;
  if (arrivals_->next(a)) {
    // Recorded aborts (imported dumps) are known once the request has arrived.
    if (a.abort_at >= 0) abort_at_[a.rid] = a.abort_at;
    next_arrival_ = std::move(a);
  } else {
    next_arrival_.reset();
  }
}

bool Scheduler::emit(const Op& op, OpOutcome* out) {
  const OpOutcome o = executor_.apply(op);
  if (sink_) sink_(op, o, executor_.event_hash());
  if (out != nullptr) *out = o;
  return !executor_.failed();
}

RunResult Scheduler::run() {
  while (!executor_.failed() && !violation_) {
    if (!iteration()) break;
  }
  if (!executor_.failed() && !violation_) drain();
  RunResult result;
  result.violation = executor_.failed() ? executor_.violation() : violation_;
  result.event_hash = executor_.event_hash();
  result.target = executor_.target();
  result.stats = executor_.stats();
  result.storage = executor_.storage_stats();
  result.ticks = static_cast<int64_t>(executor_.now());  // the last tick op: what replay sees
  for (size_t i = 0; i < kFaultSites; ++i)
    result.faults_fired[i] = faults_.fired(static_cast<FaultSite>(i));
  for (const auto& [rid, r] : executor_.requests()) {
    if (r.first_device_hit >= 0) {
      result.request_hits.push_back({rid, r.first_device_hit, r.first_host_hit});
    }
  }
  return result;
}

// One scheduler iteration; false when the workload is done.
bool Scheduler::iteration() {
  if (!next_arrival_ && waiting_.empty() && running_.empty() && offloaded_.empty()) {
    return false;
  }
  // An idle server jumps to the next arrival instead of spinning.
  if (waiting_.empty() && running_.empty() && offloaded_.empty() && next_arrival_->tick > now_) {
    now_ = next_arrival_->tick;
  }
  if (!emit(Op{.kind = OpKind::kTick, .n = static_cast<int64_t>(now_)})) return false;
  while (next_arrival_ && next_arrival_->tick <= now_) {
    const RequestId rid = next_arrival_->rid;
    // The op takes the arrival's prompt (shared, not copied).
    const bool ok = emit(Op{.kind = OpKind::kArrive,
                            .rid = rid,
                            .ns = next_arrival_->ns,
                            .prompt = std::move(next_arrival_->prompt),
                            .output_len = next_arrival_->output_len});
    pull_arrival();
    if (!ok) return false;
    waiting_.push_back(rid);
  }
  if (!faults_.fire(FaultSite::kAckDefer)) {
    if (!inject(FaultSite::kHostFullPrefetch, 0) || !inject(FaultSite::kEventQueryDelay, 2)) {
      return false;
    }
    if (!emit(Op{.kind = OpKind::kPoll})) return false;
  }
  progress_copies_and_storage();
  if (executor_.failed()) return false;
  inject_aborts();
  if (executor_.failed()) return false;
  deferred_admits_ = 0;
  admit_waiting();
  if (executor_.failed()) return false;
  // Batched load-backs (SGLang's scheduler): the admits queued theirs; one call issues them.
  if (deferred_admits_ > 0 && !emit(Op{.kind = OpKind::kStartLoads})) return false;
  if (!faults_.fire(FaultSite::kComputeStall)) forward_running();
  if (executor_.failed()) return false;
  if (!check_liveness()) return false;
  ++now_;
  // The executor judges max_ticks at the tick op (so a replay judges it too).
  if (static_cast<int64_t>(now_) > scenario_.scheduler.max_ticks) {
    emit(Op{.kind = OpKind::kTick, .n = static_cast<int64_t>(now_)});
    return false;
  }
  return true;
}

void Scheduler::progress_copies_and_storage() {
  // The GPU runs every stream on its own, compute included (index uploads and the start
  // events of copies are queued there even when no forward runs this iteration).
  for (uint32_t stream : executor_.cache_under_test().progress_streams()) {
    if (faults_.fire(FaultSite::kCopyDelay)) continue;
    const int64_t n = 1 + static_cast<int64_t>(rng_.below(8));
    if (!emit(Op{.kind = OpKind::kStep, .n = n, .target = stream})) return;
  }
  if (!executor_.cache_under_test().storage_enabled() || faults_.fire(FaultSite::kStorageStall)) {
    return;
  }
  for (uint32_t worker = 0; worker < 3; ++worker) {
    const uint64_t units = rng_.below(3);
    for (uint64_t i = 0; i < units; ++i) {
      const StorageFault fault = storage_fault(worker);
      int64_t code = static_cast<int64_t>(fault);
      if (fault >= StorageFault::kReadError && fault <= StorageFault::kWrongSize) {
        code |= static_cast<int64_t>(rng_.below(4)) << kStorageFaultSkipShift;  // a later page
      }
      if (!emit(Op{.kind = OpKind::kStorage, .n = code, .target = worker})) return;
    }
  }
}

// True when a prefetch has pages left to read: a read fault now meets a read.
bool Scheduler::reading_storage() {
  return executor_.cache_under_test().storage_reads_pending();
}

// At most one storage fault per step, of a kind the worker meets: reads for the I/O worker,
// writes for the backup worker; any worker may be slow.
StorageFault Scheduler::storage_fault(uint32_t worker) {
  if (faults_.fire(FaultSite::kStorageSlowIo)) return StorageFault::kSlowIo;
  if (worker == 1 && reading_storage()) {
    static constexpr std::array<std::pair<FaultSite, StorageFault>, 4> kReadFaults{{
        {FaultSite::kStorageReadError, StorageFault::kReadError},
        {FaultSite::kStorageVanish, StorageFault::kVanish},
        {FaultSite::kStorageCorrupt, StorageFault::kCorrupt},
        {FaultSite::kStorageWrongSize, StorageFault::kWrongSize},
    }};
    // The read sites are tried from a random one on: in a fixed order the first enabled site
    // took most reads, and a damaged page was read from a memory store about once in 100 s of
    // hunting (issue 28). With at most one read site enabled nothing changes (no draw).
    const auto enabled = std::count_if(kReadFaults.begin(), kReadFaults.end(),
                                       [&](const auto& f) { return faults_.enabled(f.first); });
    const size_t first = enabled >= 2 ? rng_.below(kReadFaults.size()) : 0;
    for (size_t i = 0; i < kReadFaults.size(); ++i) {
      const auto& [site, fault] = kReadFaults[(first + i) % kReadFaults.size()];
      if (faults_.fire(site)) return fault;
    }
  } else if (worker == 2) {
    if (faults_.fire(FaultSite::kStorageWriteError)) return StorageFault::kWriteError;
    if (faults_.fire(FaultSite::kStorageTornWrite)) return StorageFault::kTornWrite;
  }
  return StorageFault::kNone;
}

void Scheduler::inject_aborts() {
  if (!offloaded_.empty() && faults_.fire(FaultSite::kAbortWaiting)) {
    const RequestId rid = offloaded_.front();
    offloaded_.pop_front();
    if (!emit(Op{.kind = OpKind::kAbort, .rid = rid})) return;
  }
  if (!waiting_.empty() && faults_.fire(FaultSite::kAbortWaiting)) {
    const size_t i = rng_.below(waiting_.size());
    const RequestId rid = waiting_[i];
    waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
    if (!emit(Op{.kind = OpKind::kAbort, .rid = rid})) return;
  }
  if (!running_.empty() && faults_.fire(FaultSite::kAbortRunning)) {
    const size_t i = rng_.below(running_.size());
    const RequestId rid = running_[i];
    running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
    if (!emit(Op{.kind = OpKind::kAbort, .rid = rid})) return;
  }
  // Never the oldest running request: like the OOM retracts, a forced one leaves the oldest
  // to move on (at a high fire rate a request whose progress is cached only in whole pages of
  // 64 could otherwise never cross a page: swarm seed 55, a liveness failure of the model).
  if (running_.size() > 1 && faults_.fire(FaultSite::kForcedRetract)) {
    const RequestId oldest = oldest_running();
    std::vector<RequestId> others;
    for (RequestId rid : running_) {
      if (rid != oldest) others.push_back(rid);
    }
    preempt(others[rng_.below(others.size())]);
  }
}

bool Scheduler::inject(FaultSite site, uint32_t what) {
  if (!faults_.fire(site)) return true;
  // Event queries: 1-4 delayed. Pools: full (half the time) or 1-8 pages left free.
  const int64_t n = what == 2          ? 1 + static_cast<int64_t>(rng_.below(4))
                    : rng_.chance(0.5) ? 0
                                       : 1 + static_cast<int64_t>(rng_.below(8));
  return emit(Op{.kind = OpKind::kInject, .n = n, .target = what});
}

// Request ids follow arrival order: the oldest running request is the smallest id. The model
// keeps it moving (never the retract victim), so some request always finishes.
RequestId Scheduler::oldest_running() const {
  return *std::min_element(running_.begin(), running_.end());
}

bool Scheduler::preempt(RequestId rid) {
  running_.erase(std::find(running_.begin(), running_.end(), rid));
  if (pd()) {
    offloaded_.push_back(rid);
    return emit(Op{.kind = OpKind::kOffload, .rid = rid});
  }
  waiting_.push_front(rid);
  return emit(Op{.kind = OpKind::kRetract, .rid = rid});
}

void Scheduler::admit_waiting() {
  const SchedulerOptions& o = scenario_.scheduler;
  const CacheUnderTest& cache = executor_.cache_under_test();
  // A running request went without memory in the last forward: admitting or resuming more
  // would take the room it waits for (SGLang's PrefillAdder stops admitting when memory runs
  // short). Without this a starved pool livelocks the model: the request retracted (or
  // offloaded) to make room is admitted again first and the starving one fails again (swarm
  // seeds 161 and 1625).
  if (starved_ && !running_.empty()) return;
  while (!offloaded_.empty() && static_cast<int64_t>(running_.size()) < o.max_running) {
    const RequestId rid = offloaded_.front();
    OpOutcome out;
    if (!emit(Op{.kind = OpKind::kResume, .rid = rid}, &out)) return;
    if (!out.ok) return;  // no room yet: nothing new is admitted before it
    offloaded_.pop_front();
    running_.push_back(rid);
  }
  if (!offloaded_.empty()) return;
  for (size_t i = 0; i < waiting_.size();) {
    if (static_cast<int64_t>(running_.size()) >= o.max_running) return;
    const RequestId rid = waiting_[i];
    const SimRequest* r = executor_.request(rid);
    OpOutcome gate;
    if (!emit(Op{.kind = OpKind::kPrefetchCheck, .rid = rid}, &gate)) return;
    if (!gate.ok) {  // still prefetching: later requests may go first
      ++i;
      continue;
    }
    // Budget: what is free or evictable, minus what running requests will still need.
    const int64_t reserved = static_cast<int64_t>(running_.size()) * o.decode_reserve_tokens;
    const int64_t budget = cache.admission_budget() - reserved;
    const int64_t first_chunk =
        std::min<int64_t>(o.chunk_tokens, static_cast<int64_t>(r->tokens.size()));
    if (budget < first_chunk + o.decode_reserve_tokens && !running_.empty()) return;
    OpOutcome admitted;
    if (o.load_back &&
        (!inject(FaultSite::kHostFullLoadBack, 0) || !inject(FaultSite::kDeviceFullLoadBack, 1))) {
      return;
    }
    const Op admit{.kind = OpKind::kAdmit,
                   .rid = rid,
                   .target = o.batch_load_backs ? 1u : 0u,
                   .flag = o.load_back,
                   .quota = o.load_back_quota ? std::max<int64_t>(0, budget) : -1};
    if (!emit(admit, &admitted)) return;
    if (!admitted.ok) return;  // no state slot: wait for running requests to finish
    if (o.batch_load_backs) ++deferred_admits_;
    waiting_.erase(waiting_.begin() + static_cast<ptrdiff_t>(i));
    running_.push_back(rid);
  }
}

void Scheduler::forward_running() {
  const SchedulerOptions& o = scenario_.scheduler;
  starved_ = false;
  const std::vector<RequestId> batch = running_;
  for (RequestId rid : batch) {
    if (std::find(running_.begin(), running_.end(), rid) == running_.end()) continue;
    const SimRequest* r = executor_.request(rid);
    if (r->computed < r->tokens.size()) {  // chunked prefill (or re-prefill after a retract)
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(r->computed) + o.chunk_tokens,
                                          static_cast<int64_t>(r->tokens.size()));
      OpOutcome out;
      const bool oom = faults_.fire(FaultSite::kAllocFail);
      if (!inject(FaultSite::kHostFullBackup, 0)) return;
      if (!emit(Op{.kind = OpKind::kCompute, .rid = rid, .n = n, .flag = oom}, &out)) return;
      // An injected failure is retried next iteration, as in decode: preempting on it threw
      // the chunk progress away, and at a high fire rate with small chunks no prompt could
      // ever finish its prefill (swarm seed 345: a liveness failure of the model, not the
      // core). Retract mid-prefill is still reached by real OOMs and by forced_retract.
      if (!out.ok && oom) continue;
      if (!out.ok) starved_ = true;
      if (!out.ok && running_.size() > 1) {  // no room for this chunk now
        // The oldest running request keeps its progress and the youngest makes room, so the
        // oldest always moves on. Preempting whoever hit the OOM let a starved pool's prefills
        // retract one another without end (swarm seed 149 once the storage draws moved the
        // stream: a liveness failure of the model, not the core).
        const RequestId oldest = oldest_running();
        const RequestId victim =
            rid == oldest ? *std::max_element(running_.begin(), running_.end()) : rid;
        if (!preempt(victim)) return;
      } else if (!out.ok &&
                 static_cast<int64_t>(r->tokens.size()) > scenario_.cache.device_tokens) {
        // Alone, and larger than the whole device pool: it can never run (otherwise in-flight
        // copies still pin what it needs, and it retries next iteration).
        running_.erase(std::find(running_.begin(), running_.end(), rid));
        if (!emit(Op{.kind = OpKind::kAbort, .rid = rid})) return;
      }
      continue;
    }
    // A request the recording saw unfinished or aborted ends as an abort at that state.
    const auto abort_at = abort_at_.find(rid);
    if (abort_at != abort_at_.end() && r->generated >= abort_at->second) {
      running_.erase(std::find(running_.begin(), running_.end(), rid));
      if (!emit(Op{.kind = OpKind::kAbort, .rid = rid})) return;
      continue;
    }
    if (r->generated >= r->output_len) {
      running_.erase(std::find(running_.begin(), running_.end(), rid));
      if (!inject(FaultSite::kHostFullBackup, 0)) return;
      if (!emit(Op{.kind = OpKind::kFinish, .rid = rid})) return;
      continue;
    }
    if (!decode_or_retract(rid)) return;
  }
}

// One decode token for `rid`; on OOM retracts others (fewest generated first, the oldest
// running request last), keeping `rid`;
// aborts `rid` when even alone it cannot grow. False when the run failed.
bool Scheduler::decode_or_retract(RequestId rid) {
  for (;;) {
    const SimRequest* r = executor_.request(rid);
    OpOutcome out;
    const bool oom = faults_.fire(FaultSite::kAllocFail);
    if (!emit(Op{.kind = OpKind::kCompute,
                 .rid = rid,
                 .n = static_cast<int64_t>(r->computed) + 1,
                 .flag = oom},
              &out)) {
      return false;
    }
    if (out.ok || oom) return true;  // an injected failure is simply retried next iteration
    starved_ = true;
    std::vector<RequestId> victims;
    for (RequestId other : running_) {
      if (other != rid) victims.push_back(other);
    }
    if (victims.empty()) {
      running_.erase(std::find(running_.begin(), running_.end(), rid));
      return emit(Op{.kind = OpKind::kAbort, .rid = rid});
    }
    // The oldest running request goes last: otherwise a long prefill (it has generated
    // nothing yet) is the first victim of every decode OOM and never finishes (swarm seed
    // 6837: retracted 215 times, a liveness failure of the model, not the core).
    const RequestId oldest = oldest_running();
    std::sort(victims.begin(), victims.end(), [&](RequestId a, RequestId b) {
      if ((a == oldest) != (b == oldest)) return b == oldest;
      const SimRequest* ra = executor_.request(a);
      const SimRequest* rb = executor_.request(b);
      if (ra->generated != rb->generated) return ra->generated < rb->generated;
      return a > b;  // the later arrival first
    });
    if (!preempt(victims.front())) return false;
  }
}

// The executor checks the bound (the oldest live request), so a replayed op trace reaches the
// same liveness verdict as the run that recorded it.
bool Scheduler::check_liveness() {
  return emit(Op{.kind = OpKind::kLiveness});
}

// After the last request: every transfer lands, every ack is consumed, storage goes idle.
bool Scheduler::drain() {
  if (!emit(Op{.kind = OpKind::kFlush})) return false;
  if (executor_.cache_under_test().storage_enabled()) {
    for (int rounds = 0; rounds < 1000000; ++rounds) {
      OpOutcome a, b, c;
      if (!emit(Op{.kind = OpKind::kStorage, .target = 0}, &a)) return false;
      if (!emit(Op{.kind = OpKind::kStorage, .target = 1}, &b)) return false;
      if (!emit(Op{.kind = OpKind::kStorage, .target = 2}, &c)) return false;
      if (!a.ok && !b.ok && !c.ok) break;
    }
    if (!emit(Op{.kind = OpKind::kFlush})) return false;
  }
  executor_.check_quiescent();
  return !executor_.failed();
}

}  // namespace kvsim::sim
