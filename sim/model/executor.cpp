#include "sim/model/executor.h"

#include <algorithm>
#include <utility>

#include "core/common/assert.h"
#include "sim/model/content_oracle.h"
#include "sim/model/option_contract.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

Executor::Executor(const Scenario& scenario, uint64_t seed)
    : scenario_(scenario), gpu_rng_(rng_stream(seed, "executor.gpu")) {
  if (scenario_.storage) storage_ = std::make_unique<StorageTier>(scenario_);
  cache_ = std::make_unique<HiCache>(backend_, scenario_.cache,
                                     storage_ ? storage_->backend() : nullptr);
  const HiCacheOptions& c = scenario_.cache;
  if (scenario_.sparse_index_bytes_per_page > 0) {
    sparse_ = std::make_unique<SparseIndexBuffer>(
        backend_, c.device_tokens / c.page_size + 1, c.layer_count,
        static_cast<size_t>(scenario_.sparse_index_bytes_per_page), c.page_size);
  }
  if (pd()) {
    metadata_ = std::make_unique<MetadataBuffers>(MetadataBuffersOptions{
        .slot_count = static_cast<int32_t>(scenario_.scheduler.metadata_slots),
        .hidden_state_bytes = 32});
  }
  mix(seed);
}

Executor::~Executor() {
  if (observer_ != nullptr) observer_->on_executor_gone();
  // Requests still holding slots are dropped without checks: the run is over.
  for (auto& [rid, r] : requests_) {
    if (r.kv && r.kv->active()) {
      ScopedThrowingAsserts asserts;
      try {
        r.kv->abort();
      } catch (const AssertionFailure&) {
        r.kv->detach();  // the cache is broken already: drop the bookkeeping only
      }
    }
  }
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
  KV_ASSERT(!violation_, "apply after a violation");
  ++stats_.ops;
  const size_t index = static_cast<size_t>(stats_.ops - 1);
  if (observer_ != nullptr) observer_->before_op(index, op);
  if (index == 0) {
    // Once per run and per replay, before anything else: the option contract at the API edge
    // (sim/model/option_contract.h), on small caches of this run's shape. A violation ends the run at
    // its first op, so a trace of any length replays it.
    if (const std::optional<std::string> broken = check_option_contract(scenario_.cache)) {
      fail("options.contract", *broken);
      mix(0x6f7074);
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
        release_injected();
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
  if (!backend_.violations().empty()) {
    const BackendViolation& v = backend_.violations().front();
    fail("stream_lifetime", v.kind + ": " + v.detail);
    return;
  }
  if (storage_) {
    if (storage_->faults().contract_broken()) {
      fail("storage.contract", *storage_->faults().contract_broken());
      return;
    }
    if (const std::string wrong = storage_stats_disagree(); !wrong.empty()) {
      fail("storage.stats", wrong);
      return;
    }
  }
  const HiCache& cache = *cache_;
  stats_.max_tree_nodes =
      std::max(stats_.max_tree_nodes, static_cast<int64_t>(cache.tree().node_count()));
  const int64_t allocated = cache.options().device_tokens - cache.available_device_size();
  const int64_t accounted =
      cache.tree().evictable_size() + cache.tree().protected_size() + cache.request_held_tokens();
  if (allocated != accounted) {
    fail("slots.conservation", "device pool: " + std::to_string(allocated) +
                                   " tokens allocated but tree + requests account for " +
                                   std::to_string(accounted));
    return;
  }
  // Auto: the walk visits every node and every page, so run it once per (nodes + pages) / 8
  // ops that may change the cache — a constant amortized cost per state change, whatever the
  // size of the tree. An explicit full_every counts every applied op.
  const bool automatic = scenario_.check.full_every <= 0;
  if (automatic && !may_change_cache) return;
  const int64_t walk_cost = static_cast<int64_t>(cache.tree().node_count()) +
                            cache.options().device_tokens / cache.options().page_size +
                            cache.options().host_tokens / cache.options().page_size;
  const int64_t every =
      automatic ? std::max<int64_t>(1, walk_cost / 8) : scenario_.check.full_every;
  if (++since_full_check_ < every) return;
  since_full_check_ = 0;
  ++stats_.full_checks;
  SanityReport report;
  ScopedThrowingAsserts asserts;
  try {
    cache_->sanity_check(report);
  } catch (const AssertionFailure& e) {
    fail("core.assert", e.what());
    return;
  }
  if (!report.ok()) {
    const Violation& v = *report.first();
    fail(v.invariant, describe(v));
  }
}

OpOutcome Executor::dispatch(const Op& op) {
  if (op.kind == OpKind::kArrive) return arrive(op);
  if (op.kind == OpKind::kPoll) {
    cache_->check_hicache_events();
    return {true, true};
  }
  if (op.kind == OpKind::kFlush) {
    // A flush lands every transfer, queued load-backs included (a trace shrunk without its
    // start_loads op still reaches quiescence).
    if (cache_->controller().queued_loads() > 0) start_loads();
    cache_->flush();
    return {true, true};
  }
  if (op.kind == OpKind::kStartLoads) return start_loads();
  if (op.kind == OpKind::kStep) return step(op.target, op.n);
  if (op.kind == OpKind::kStorage) return storage(op.target, op.n);
  if (op.kind == OpKind::kInject) return inject(op);
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
  if (cache_->storage_enabled() && scenario_.scheduler.prefetch) {
    MatchResult m = cache_->match_prefix(r.ns, r.tokens);
    r.prefetching = cache_->prefetch_from_storage(r.rid, r.ns, *m.last_host_node, r.tokens, now_);
  }
  return {true, true};
}

void Executor::release_request_memory(SimRequest& r) {
  // A finished request keeps its counters only: long traces hold millions of tokens.
  std::vector<Token>().swap(r.tokens);
  std::vector<uint64_t>().swap(r.prefix_hash);
  r.metadata.reset();
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
  if (!cache_->check_prefetch_progress(r.rid, now_)) return {true, false};
  r.prefetching = false;
  const int64_t loaded = cache_->pop_prefetch_loaded_tokens(r.rid);
  stats_.storage_hit_tokens += loaded;
  mix(static_cast<uint64_t>(loaded));
  return {true, true};
}

OpOutcome Executor::admit(SimRequest& r, const Op& op) {
  if (r.state != RequestState::kWaiting) return wrong_state(r, "waiting");
  if (r.prefetching) return {true, false};  // the gate (prefetch_check) has not opened
  const bool load_back = op.flag;
  const bool defer_load = op.target == 1;
  auto kv = std::make_unique<RequestKV>(*cache_, r.ns);
  const int64_t loaded_before = cache_->stats().load_back_tokens;
  // PD decode receives the KV from a prefill instance: no prefix matching on this side.
  std::optional<AdmitOutcome> out =
      kv->admit(r.tokens, load_back, /*use_prefix_cache=*/!pd(), /*start_load=*/!defer_load,
                op.quota >= 0 ? std::optional<int64_t>(op.quota) : std::nullopt);
  if (!out) return {true, false};
  // RequestKV's contract: without allow_load_back nothing comes back from host.
  if (!load_back &&
      (out->host_hit_tokens != 0 || cache_->stats().load_back_tokens != loaded_before)) {
    fail("admit.contract",
         "request " + std::to_string(r.rid) + " was admitted without load-back, yet " +
             std::to_string(cache_->stats().load_back_tokens - loaded_before) +
             " token(s) were loaded back (host hit " + std::to_string(out->host_hit_tokens) + ")");
  }
  if (pd()) {
    // The prefill side publishes the request's metadata; the decode side reads it once and
    // the slot goes back to the pool (the request keeps its copy).
    std::optional<MetadataSlot> slot = metadata_->alloc();
    if (!slot) {
      kv->abort();
      return {true, false};
    }
    metadata_->set_buf(*slot, expected_metadata(r));
    r.metadata = metadata_->get_buf(*slot);
    metadata_->free(*slot);
  }
  r.kv = std::move(kv);
  r.state = RequestState::kRunning;
  r.computed = r.kv->owned_from();
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
    read_prefix(r);
  }
  return {true, true};
}

OpOutcome Executor::start_loads() {
  // SGLang's forward: one ready_to_load_host_cache for the batch, then every layer waits.
  cache_->wait_for_load(cache_->ready_to_load_host_cache());
  for (RequestId rid : std::exchange(awaiting_loads_, {})) {
    SimRequest& r = requests_.at(rid);
    if (!r.load_queued) continue;  // retracted or aborted before its first forward
    r.load_queued = false;
    if (scenario_.check.content) read_prefix(r);
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
  if (oom || !r.kv->extend(target)) return {true, false};
  forward(r, r.computed, target);
  r.computed = target;
  drive_compute();
  return {true, true};
}

OpOutcome Executor::finish(SimRequest& r) {
  if (r.state != RequestState::kRunning) return wrong_state(r, "running");
  if (pd()) {
    check_metadata(r);
    r.kv->abort();  // a decode instance releases its slots; nothing goes into the tree
    r.kv.reset();
    set_done(r);
    release_request_memory(r);
    ++stats_.finished;
    return {true, true};
  }
  r.load_queued = false;
  r.kv->finish(std::span<const Token>(r.tokens).first(r.computed));
  r.kv.reset();
  set_done(r);
  release_request_memory(r);
  ++stats_.finished;
  return {true, true};
}

OpOutcome Executor::abort(SimRequest& r) {
  if (r.state == RequestState::kDone) return wrong_state(r, "live");
  r.load_queued = false;
  if (r.state == RequestState::kRunning) {
    r.kv->abort();
    r.kv.reset();
  }
  r.cpu_copy.reset();
  if (r.prefetching) {
    cache_->release_aborted_request(r.rid);
    r.prefetching = false;
  }
  set_done(r);
  release_request_memory(r);
  ++stats_.aborted;
  return {true, true};
}

OpOutcome Executor::retract(SimRequest& r) {
  if (r.state != RequestState::kRunning) return wrong_state(r, "running");
  // Cache what was computed (the resumed request will match it), free the rest.
  r.load_queued = false;
  r.kv->finish(std::span<const Token>(r.tokens).first(r.computed));
  r.kv.reset();
  r.computed = 0;
  r.state = RequestState::kWaiting;
  ++r.retracts;
  ++stats_.retracted;
  return {true, true};
}

OpOutcome Executor::step(uint32_t stream, int64_t n) {
  if (stream >= backend_.stream_count()) {
    return reject("stream " + std::to_string(stream) + " does not exist (the backend has " +
                  std::to_string(backend_.stream_count()) + ")");
  }
  int64_t ran = 0;
  while (ran < n && backend_.step(stream))
    ++ran;
  mix(static_cast<uint64_t>(ran));
  return {true, ran > 0};
}

// The cache's storage statistics against what the store answered it (FaultyStorage counts):
// "" when they agree. A page read back short counts as corrupt in the cache.
std::string Executor::storage_stats_disagree() const {
  const StorageCallCounts& c = storage_->faults().calls();
  const HiCacheStats& s = cache_->stats();
  const struct {
    const char* stat;
    int64_t cache;
    uint64_t store;
  } pairs[] = {
      {"backed_up_pages (sets answered ok)", s.backed_up_pages, c.set_ok},
      {"storage_write_failures (sets that failed)", s.storage_write_failures, c.set_failed},
      {"storage_hit_pages (gets answered ok, whole)", s.storage_hit_pages, c.get_ok},
      {"storage_miss_pages (gets answered miss)", s.storage_miss_pages, c.get_miss},
      {"storage_read_errors (gets answered io_error)", s.storage_read_errors, c.get_io_error},
      {"storage_corrupt_pages (gets answered corrupt or short)", s.storage_corrupt_pages,
       c.get_corrupt + c.get_short},
  };
  for (const auto& p : pairs) {
    if (p.cache != static_cast<int64_t>(p.store)) {
      return std::string(p.stat) + ": the cache counts " + std::to_string(p.cache) +
             ", the store answered " + std::to_string(p.store);
    }
  }
  return "";
}

StorageRunStats Executor::storage_stats() const {
  return storage_ ? storage_->summary(cache_->stats()) : StorageRunStats{};
}

OpOutcome Executor::storage(uint32_t worker, int64_t fault) {
  if (!cache_->storage_enabled()) return reject("the scenario has no storage tier");
  const int64_t code = fault & 0xff;
  const auto skip = static_cast<uint32_t>((fault >> kStorageFaultSkipShift) & 0xff);
  const auto f = code > 0 && code < static_cast<int64_t>(kStorageFaults)
                     ? static_cast<StorageFault>(code)
                     : StorageFault::kNone;
  if (f == StorageFault::kSlowIo) {
    storage_->faults().count_slow_io();
    return {true, false};  // the worker is busy with a slow request: no progress this step
  }
  storage_->faults().arm(f, skip);
  struct Disarm {
    FaultyStorage& faults;
    ~Disarm() { faults.disarm(); }
  } disarm{storage_->faults()};
  bool did = false;
  switch (worker) {
    case 0:
      did = cache_->storage_query_step();
      break;
    case 1:
      did = cache_->storage_io_step();
      break;
    case 2:
      did = cache_->storage_backup_step();
      break;
    default:
      return reject("no storage worker " + std::to_string(worker));
  }
  return {true, did};
}

void Executor::drive_compute() {
  const StreamId compute = backend_.compute_stream();
  while (backend_.pending_ops(compute) > 0) {
    if (backend_.step(compute)) continue;
    // Compute waits on an event of another stream: advance a runnable one, chosen at random.
    std::vector<StreamId> runnable;
    for (StreamId s : backend_.streams()) {
      if (s != compute && backend_.runnable(s)) runnable.push_back(s);
    }
    KV_ASSERT(!runnable.empty(),
              "compute stream deadlocked: " + backend_.head_description(compute));
    backend_.step(runnable[gpu_rng_.below(runnable.size())]);
  }
}

void Executor::forward(SimRequest& r, size_t from, size_t to) {
  const StreamId compute = backend_.compute_stream();
  std::vector<std::byte> bytes;
  auto write_runs = [&](KVPool& pool, const IndexVector& slots, ContentKind kind) {
    const KVPoolView& view = pool.view();
    for (int32_t layer = 0; layer < view.layer_count; ++layer) {
      slots.for_each_run(from, to, [&](size_t i, size_t j) {
        bytes.resize((j - i) * view.item_bytes);
        fill_items(r.prefix_hash, i, j - i, layer, kind, view.item_bytes, bytes.data());
        backend_.upload_async(compute, view.block, view.offset(layer, slots[i]), bytes, "forward");
      });
    }
  };
  write_runs(cache_->device_pool(), r.kv->kv(), ContentKind::kFull);
  if (sparse_) {  // indexer keys of each page this forward completes
    const auto page = static_cast<size_t>(scenario_.cache.page_size);
    bytes.assign(sparse_->bytes_per_page(), std::byte{0});
    for (size_t end = (from / page + 1) * page; end <= to; end += page) {
      const int64_t p = r.kv->kv()[end - page] / static_cast<SlotIndex>(page);
      for (int32_t layer = 0; layer < sparse_->layer_count(); ++layer) {
        fill_item(r.prefix_hash[end - 1], end - 1, layer, ContentKind::kIndexer, bytes);
        sparse_->write_page_async(compute, layer, p, bytes);
      }
    }
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    write_runs(swa->device_pool(), *r.kv->swa(), ContentKind::kSwa);
  }
  if (SidePool* mamba = cache_->side_pool(ComponentType::kMamba)) {
    // The state checkpoint at the last page boundary (what the tree may adopt at finish).
    const auto page = static_cast<size_t>(scenario_.cache.page_size);
    const size_t aligned = to / page * page;
    const KVPoolView& view = mamba->device_pool().view();
    for (int32_t layer = 0; layer < view.layer_count; ++layer) {
      bytes.assign(view.item_bytes, std::byte{0});
      if (aligned > 0) {
        fill_item(r.prefix_hash[aligned - 1], aligned - 1, layer, ContentKind::kMamba, bytes);
      }
      backend_.upload_async(compute, view.block, view.offset(layer, *r.kv->mamba_state()), bytes,
                            "forward state");
    }
  }
}

OpOutcome Executor::inject(const Op& op) {
  if (!cache_->options().hierarchical && op.target == 0) return {};
  // Targets 0 and 1 leave `n` pages free (0: none): a pool full, or nearly full.
  auto hold = [&](PagedSlotAllocator& slots) {
    const int64_t free = slots.available_size() - op.n * slots.page_size();
    if (free <= 0) return;
    std::optional<IndexVector> pages = slots.alloc(free);
    KV_ASSERT(pages.has_value(), "a pool's free pages could not be allocated");
    injected_.emplace_back(&slots, std::move(*pages));
  };
  switch (op.target) {
    case 0:  // host pools full: the main one and the side pools'
      hold(cache_->host_slots());
      for (ComponentType t : {ComponentType::kSwa, ComponentType::kMamba}) {
        if (SidePool* p = cache_->side_pool(t)) hold(p->host_slots());
      }
      return {true, true};
    case 1:
      hold(cache_->device_slots());
      return {true, true};
    case 2:
      backend_.delay_event_queries(op.n);
      return {true, true};
    default:
      return {};
  }
}

void Executor::release_injected() {
  backend_.delay_event_queries(0);
  // Last held, first given back.
  while (!injected_.empty()) {
    auto [slots, pages] = std::move(injected_.back());
    injected_.pop_back();
    slots->free(pages);
  }
}

}  // namespace kvsim::sim
