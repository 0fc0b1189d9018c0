#include "sim/model/executor.h"

#include <algorithm>
#include <utility>

#include "core/common/assert.h"
#include "sim/model/api_contract.h"
#include "sim/model/content_oracle.h"
#include "sim/model/core_cache.h"
#include "sim/model/differential_cache.h"
#include "sim/model/option_contract.h"
#include "sim/model/sglang_cache.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

Executor::Executor(const Scenario& scenario, uint64_t seed, const Target& target)
    : scenario_(scenario), target_(target) {
  CacheContext ctx = context(seed);
  if (target_.is_kvsim()) {
    auto core = std::make_unique<KvsimCoreCache>(std::move(ctx));
    core_ = core.get();
    cut_ = std::move(core);
  } else if (target_.differential) {
    cut_ = make_sglang_differential(std::move(ctx), target_);
  } else {
    cut_ = make_sglang_cache(std::move(ctx), target_);
  }
  mix(seed);
}

CacheContext Executor::context(uint64_t seed) {
  return CacheContext{
      .scenario = scenario_,
      .seed = seed,
      .fail = [this](std::string invariant,
                     std::string detail) { fail(std::move(invariant), std::move(detail)); },
      .stats = stats_};
}

void Executor::replace_cache_under_test(
    const std::function<std::unique_ptr<CacheUnderTest>(CacheContext)>& make, uint64_t seed) {
  KV_ASSERT(stats_.ops == 0, "the cache under test is replaced before the first op only");
  core_ = nullptr;
  cut_.reset();
  cut_ = make(context(seed));
  core_ = dynamic_cast<KvsimCoreCache*>(cut_.get());
}

Executor::~Executor() {
  if (observer_ != nullptr) observer_->on_executor_gone();
}

HiCache& Executor::cache() {
  KV_ASSERT(core_ != nullptr, "the cache under test is not kvsim's core");
  return core_->cache();
}

CpuBackend& Executor::backend() {
  KV_ASSERT(core_ != nullptr, "the cache under test is not kvsim's core");
  return core_->backend();
}

StorageBackend* Executor::storage() {
  return core_ != nullptr ? core_->storage_backend() : nullptr;
}

std::string describe(const Violation& v) {
  std::string s = v.detail;
  if (v.node) s += " (node " + std::to_string(*v.node) + ")";
  if (v.slot) s += " (slot " + std::to_string(*v.slot) + ")";
  return s;
}

const SimRequest* Executor::request(RequestId rid) const {
  auto it = requests_.find(rid);
  return it == requests_.end() ? nullptr : &it->second;
}

void Executor::mix(uint64_t v) {
  hash_ = (hash_ ^ v) * 1099511628211ull;
}

void Executor::fail(std::string invariant, std::string detail) {
  if (violation_) return;
  violation_ =
      SimViolation{std::move(invariant), std::move(detail), static_cast<size_t>(stats_.ops)};
}

OpOutcome Executor::apply(const Op& op) {
  // A cache under test can fail before the first op (SGLang raising while its cache is built):
  // then every op is refused and the run ends with that violation.
  if (violation_) return OpOutcome{.why = "the run failed already: " + violation_->invariant};
  ++stats_.ops;
  const size_t index = static_cast<size_t>(stats_.ops - 1);
  if (observer_ != nullptr) observer_->before_op(index, op);
  if (index == 0) {
    // Once per run and per replay, before anything else: the option contract at the API edge
    // (sim/model/option_contract.h), on small caches of this run's shape. A violation ends the run
    // at its first op, so a trace of any length replays it.
    if (const std::optional<std::string> broken = check_option_contract(scenario_.cache)) {
      fail("options.contract", *broken);
      mix(0x6f7074);
      return OpOutcome{.applied = true, .ok = false};
    }
    // The API contract (sim/model/api_contract.h): the public calls no driver makes (root locks,
    // auxiliary setters, held_locks_problem, a decode admit), on small trees of this run's shape.
    if (const std::optional<std::string> broken = check_api_contract(scenario_.cache)) {
      fail("api.contract", *broken);
      mix(0x617069);
      return OpOutcome{.applied = true, .ok = false};
    }
    // The run's configuration as its trace header records it must read back the same, or a
    // replay would run another configuration (a parser that maps "lfu" to LRU, say).
    if (const std::optional<std::string> broken = header_round_trip_problem(scenario_)) {
      fail("trace.header_round_trip", *broken);
      mix(0x686472);
      return OpOutcome{.applied = true, .ok = false};
    }
  }
  OpOutcome out;
  {
    ScopedThrowingAsserts asserts;
    try {
      out = dispatch(op);
    } catch (const AssertionFailure& e) {
      fail("core.assert", e.what());
      out = OpOutcome{.applied = true, .ok = false};  // it ran, and failed: not a rejection
    }
    if (op.kind != OpKind::kInject) {
      try {
        cut_->release_injected();
      } catch (const AssertionFailure& e) {
        fail("core.assert", e.what());
      }
    }
  }
  mix(static_cast<uint64_t>(op.kind) << 56 ^ op.rid << 8 ^ (out.applied ? 2u : 0u) ^
      (out.ok ? 1u : 0u));
  if (!out.applied) ++stats_.rejected;
  // A rejected op changed nothing: the checks (and the full-check period) count applied ops. An
  // inject op's held pages are owned by nobody until the next op ends: checks run after that one.
  // Ticks, liveness checks and backend steps that found nothing to run leave the cache as it
  // was: the auto full-check period (CheckOptions::full_every 0) does not count them.
  const bool may_change_cache = op.kind != OpKind::kTick && op.kind != OpKind::kLiveness &&
                                !(op.kind == OpKind::kStep && out.applied && !out.ok);
  if (!violation_ && out.applied && op.kind != OpKind::kInject) after_op(may_change_cache);
  if (observer_ != nullptr) observer_->after_op(index, op, out);
  return out;
}

namespace {

OpOutcome reject(std::string why) {
  return OpOutcome{.applied = false, .ok = true, .why = std::move(why)};
}

const char* state_name(RequestState s) {
  switch (s) {
    case RequestState::kWaiting:
      return "waiting";
    case RequestState::kRunning:
      return "running";
    case RequestState::kOffloaded:
      return "offloaded";
    case RequestState::kDone:
      return "done";
  }
  return "?";
}

OpOutcome wrong_state(const SimRequest& r, const char* needed) {
  return reject("request " + std::to_string(r.rid) + " is " + state_name(r.state) + ", not " +
                needed);
}

}  // namespace

void Executor::set_done(SimRequest& r) {
  if (!live_.empty() && live_.begin()->second == r.rid) head_finished_at_ = now_;
  live_.erase({r.arrival_tick, r.rid});
  r.state = RequestState::kDone;
}

OpOutcome Executor::tick(int64_t now) {
  if (static_cast<uint64_t>(now) < now_) {
    return reject("tick " + std::to_string(now) + " goes backwards (the clock is at " +
                  std::to_string(now_) + ")");
  }
  now_ = static_cast<uint64_t>(now);
  if (now > scenario_.scheduler.max_ticks) {
    fail("liveness",
         "run exceeded max_ticks (" + std::to_string(scenario_.scheduler.max_ticks) + ")");
  }
  return {true, true};
}

OpOutcome Executor::liveness() {
  if (live_.empty()) return {true, true};
  // The oldest live request must finish within the bound of becoming the oldest: a stuck or
  // starved request eventually is the oldest and fails here, while a queue that is merely
  // long (an overloaded workload: each request waits for every earlier one) does not.
  const auto [arrival, rid] = *live_.begin();
  if (rid != head_rid_) {
    head_rid_ = rid;
    head_since_ = std::max(arrival, head_finished_at_);
  }
  const int64_t bound = scenario_.scheduler.liveness_ticks;
  if (static_cast<int64_t>(now_ - head_since_) > bound) {
    fail("liveness", "request " + std::to_string(rid) + " still " +
                         state_name(requests_.at(rid).state) + " after " + std::to_string(bound) +
                         " ticks as the oldest live request (arrived at tick " +
                         std::to_string(arrival) + ")");
  }
  return {true, true};
}

void Executor::after_op(bool may_change_cache) {
  ++stats_.invariant_checks;
  cut_->check_after_op(may_change_cache);
}

OpOutcome Executor::dispatch(const Op& op) {
  if (op.kind == OpKind::kArrive) return arrive(op);
  if (op.kind == OpKind::kPoll) {
    cut_->poll();
    return {true, true};
  }
  if (op.kind == OpKind::kFlush) {
    // A flush lands every transfer, queued load-backs included (a trace shrunk without its
    // start_loads op still reaches quiescence).
    if (cut_->loads_queued()) start_loads();
    cut_->flush();
    return {true, true};
  }
  if (op.kind == OpKind::kStartLoads) return start_loads();
  if (op.kind == OpKind::kStep) return step(op.target, op.n);
  if (op.kind == OpKind::kStorage) return storage(op.target, op.n);
  if (op.kind == OpKind::kInject) return cut_->inject(op);
  if (op.kind == OpKind::kTick) return tick(op.n);
  if (op.kind == OpKind::kLiveness) return liveness();
  auto it = requests_.find(op.rid);
  if (it == requests_.end()) return reject("no request " + std::to_string(op.rid) + " arrived");
  SimRequest& r = it->second;
  switch (op.kind) {
    case OpKind::kPrefetchCheck:
      return prefetch_check(r);
    case OpKind::kAdmit:
      return admit(r, op);
    case OpKind::kCompute:
      return compute(r, op.n, op.flag);
    case OpKind::kFinish:
      return finish(r);
    case OpKind::kAbort:
      return abort(r);
    case OpKind::kRetract:
      return retract(r);
    case OpKind::kOffload:
      return offload(r);
    case OpKind::kResume:
      return resume(r);
    default:
      return reject("not a request op");
  }
}

OpOutcome Executor::arrive(const Op& op) {
  if (requests_.count(op.rid) != 0) {
    return reject("request " + std::to_string(op.rid) + " arrived already");
  }
  if (op.prompt.empty()) return reject("the prompt is empty");
  SimRequest& r = requests_[op.rid];
  r.rid = op.rid;
  r.ns = op.ns;
  r.prompt_len = op.prompt.size();
  r.output_len = std::max<int64_t>(op.output_len, 1);
  r.arrival_tick = now_;
  live_.insert({r.arrival_tick, r.rid});
  r.tokens.reserve(op.prompt.size() + static_cast<size_t>(r.output_len));
  r.tokens.assign(op.prompt.begin(), op.prompt.end());
  extend_tokens(r);
  stats_.prompt_tokens += static_cast<int64_t>(op.prompt.size());
  r.prefetching = cut_->arrive(r, now_);
  return {true, true};
}

void Executor::release_request_memory(SimRequest& r) {
  // A finished request keeps its counters only: long traces hold millions of tokens.
  std::vector<Token>().swap(r.tokens);
  std::vector<uint64_t>().swap(r.prefix_hash);
}

void Executor::extend_tokens(SimRequest& r) {
  uint64_t h = r.prefix_hash.empty() ? PrefixHash(r.ns).value() : r.prefix_hash.back();
  for (size_t i = r.prefix_hash.size(); i < r.tokens.size(); ++i) {
    h = PrefixHash::step(h, r.tokens[i]);
    r.prefix_hash.push_back(h);
  }
}

OpOutcome Executor::prefetch_check(SimRequest& r) {
  if (r.state != RequestState::kWaiting) return wrong_state(r, "waiting");
  if (!r.prefetching) return {true, true};
  const std::optional<int64_t> done = cut_->prefetch_done(r, now_);
  if (!done) return {true, false};
  r.prefetching = false;
  const int64_t loaded = *done;
  stats_.storage_hit_tokens += loaded;
  mix(static_cast<uint64_t>(loaded));
  return {true, true};
}

OpOutcome Executor::admit(SimRequest& r, const Op& op) {
  if (r.state != RequestState::kWaiting) return wrong_state(r, "waiting");
  if (r.prefetching) return {true, false};  // the gate (prefetch_check) has not opened
  const bool defer_load = op.target == 1;
  const std::optional<AdmitDecision> out =
      cut_->admit(r, /*load_back=*/op.flag, defer_load,
                  op.quota >= 0 ? std::optional<int64_t>(op.quota) : std::nullopt);
  if (!out) return {true, false};
  r.state = RequestState::kRunning;
  r.computed = out->owned_from;
  if (r.retracts == 0) {  // hit rates count each request's first admission only
    stats_.device_hit_tokens += out->device_hit_tokens;
    stats_.host_hit_tokens += out->host_hit_tokens;
    r.first_device_hit = out->device_hit_tokens;
    r.first_host_hit = out->host_hit_tokens;
  }
  mix(static_cast<uint64_t>(out->device_hit_tokens) << 20 ^
      static_cast<uint64_t>(out->host_hit_tokens));
  if (defer_load) {
    // The batch's loads are issued together before its forward: until then this prefix may
    // hold slots a queued load (its own or another admit's) has yet to write.
    r.load_queued = true;
    awaiting_loads_.push_back(r.rid);
  } else if (scenario_.check.content) {
    cut_->read_prefix(r);
  }
  return {true, true};
}

OpOutcome Executor::start_loads() {
  // SGLang's forward: one ready_to_load_host_cache for the batch, then every layer waits.
  cut_->start_loads();
  for (RequestId rid : std::exchange(awaiting_loads_, {})) {
    SimRequest& r = requests_.at(rid);
    if (!r.load_queued) continue;  // retracted or aborted before its first forward
    r.load_queued = false;
    if (scenario_.check.content) cut_->read_prefix(r);
  }
  return {true, true};
}

OpOutcome Executor::compute(SimRequest& r, int64_t n, bool oom) {
  if (r.state != RequestState::kRunning) return wrong_state(r, "running");
  if (n <= static_cast<int64_t>(r.computed)) {
    return reject("n " + std::to_string(n) + " is not past the " + std::to_string(r.computed) +
                  " tokens computed");
  }
  const size_t target = static_cast<size_t>(n);
  // Decode: the tokens past the prompt are generated one by one.
  if (target > r.tokens.size()) {
    const size_t new_outputs = target - r.tokens.size();
    if (r.generated + static_cast<int64_t>(new_outputs) > r.output_len) {
      return reject("n " + std::to_string(n) + " exceeds the prompt (" +
                    std::to_string(r.prompt_len) + ") plus output_len (" +
                    std::to_string(r.output_len) + ")");
    }
    for (size_t i = 0; i < new_outputs; ++i) {
      r.tokens.push_back(output_token(r.rid, static_cast<size_t>(r.generated++)));
    }
    extend_tokens(r);
  }
  if (r.load_queued) start_loads();  // a forward reads the prefix: the batch's loads go first
  if (!cut_->compute(r, target, oom)) return {true, false};
  r.computed = target;
  return {true, true};
}

OpOutcome Executor::finish(SimRequest& r) {
  if (r.state != RequestState::kRunning) return wrong_state(r, "running");
  r.load_queued = false;
  cut_->finish(r);
  set_done(r);
  release_request_memory(r);
  ++stats_.finished;
  return {true, true};
}

OpOutcome Executor::abort(SimRequest& r) {
  if (r.state == RequestState::kDone) return wrong_state(r, "live");
  r.load_queued = false;
  cut_->abort(r);
  r.prefetching = false;
  set_done(r);
  release_request_memory(r);
  ++stats_.aborted;
  return {true, true};
}

OpOutcome Executor::retract(SimRequest& r) {
  if (r.state != RequestState::kRunning) return wrong_state(r, "running");
  // Cache what was computed (the resumed request will match it), free the rest.
  r.load_queued = false;
  cut_->retract(r);
  r.computed = 0;
  r.state = RequestState::kWaiting;
  ++r.retracts;
  ++stats_.retracted;
  return {true, true};
}

OpOutcome Executor::step(uint32_t stream, int64_t n) {
  if (stream >= cut_->stream_count()) {
    return reject("stream " + std::to_string(stream) + " does not exist (the backend has " +
                  std::to_string(cut_->stream_count()) + ")");
  }
  const int64_t ran = cut_->step(stream, n);
  mix(static_cast<uint64_t>(ran));
  return {true, ran > 0};
}

OpOutcome Executor::storage(uint32_t worker, int64_t fault) {
  if (!cut_->storage_enabled()) return reject("the scenario has no storage tier");
  return cut_->storage(worker, fault);
}

OpOutcome Executor::offload(SimRequest& r) {
  if (!pd()) return OpOutcome{.why = "offload is a pd-mode op; the scenario is not pd"};
  if (r.state != RequestState::kRunning) {
    return OpOutcome{.why = "request " + std::to_string(r.rid) + " is not running"};
  }
  cut_->offload(r);
  r.state = RequestState::kOffloaded;
  ++stats_.offloaded;
  return {true, true};
}

OpOutcome Executor::resume(SimRequest& r) {
  if (r.state != RequestState::kOffloaded) {
    return OpOutcome{.why = "request " + std::to_string(r.rid) + " was not offloaded"};
  }
  if (!cut_->resume(r)) return {true, false};
  r.state = RequestState::kRunning;
  ++stats_.resumed;
  cut_->verify_resumed(r);
  return {true, true};
}

void Executor::check_quiescent() {
  if (violation_) return;
  for (const auto& [rid, r] : requests_) {
    if (r.state != RequestState::kDone) {
      fail("quiescence", "request " + std::to_string(rid) + " never finished");
    }
  }
  cut_->check_quiescent();
}

}  // namespace kvsim::sim
