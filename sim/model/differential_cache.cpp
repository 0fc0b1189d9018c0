#include "sim/model/differential_cache.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "core/common/assert.h"
#include "sim/config/scenario.h"
#include "sim/model/core_cache.h"
#include "sim/model/differential_side.h"
#include "sim/model/sglang_cache.h"

namespace kvsim::sim {

namespace {

// Decisions one side reports and the other cannot: shown in a divergence's detail, not
// compared. host_hit: SGLang's is the match's host length whether or not it was loaded back;
// the core's admission reports only what it loaded (compared as `loaded`).
constexpr std::string_view kOneSided[] = {"host_hit"};

// What a by-design row may look at: the two values and what the differential knows of the run.
struct ByDesignContext {
  const Scenario& scenario;
  int64_t primary;
  int64_t shadow;
  // Prefetch operations of requests aborted while prefetching that SGLang's storage workers
  // have not dequeued yet (as far as the differential knows: at most one step each).
  int64_t dead_prefetch_ops;
};

// Differences by design (docs/sglang-hunt.md, "Differential"): a difference in `key` of `call`
// ("" = any call) is excused where `holds` says so, and only there. Most differences by design
// are handled by running the shadow SGLang's way instead (the table in the docs), which keeps
// both caches in the same state; a row here is for what the shadow cannot run.
struct ByDesign {
  std::string_view call;
  std::string_view key;
  bool (*holds)(const ByDesignContext& c);
  std::string_view why;
};

constexpr std::array<ByDesign, 1> kByDesign{{
    {.call = "storage",
     .key = "did",
     .holds =
         [](const ByDesignContext& c) {
           return c.primary == 1 && c.shadow == 0 && c.dead_prefetch_ops > 0;
         },
     .why = "SGLang's storage worker still dequeues the prefetch operation of a request aborted "
            "while prefetching (release_aborted_request leaves it queued; the worker drops it "
            "when it comes to it), while kvsim's core removes it at the abort: one step that "
            "does something in SGLang and nothing in the core, per such request"},
}};

const ByDesign* by_design(std::string_view call, std::string_view key, const ByDesignContext& c) {
  for (const ByDesign& d : kByDesign) {
    if ((d.call.empty() || d.call == call) && d.key == key && d.holds(c)) return &d;
  }
  return nullptr;
}

std::string format(const Decisions& d) {
  std::string s = "{";
  for (const auto& [k, v] : d) {
    if (s.size() > 1) s += ", ";
    s += k + ": " + std::to_string(v);
  }
  return s + "}";
}

int64_t get(const Decisions& d, const std::string& key) {
  const auto it = d.find(key);
  return it == d.end() ? 0 : it->second;
}

// Hides a request's last token while the shadow admits it: SGLang matches at most len - 1
// tokens (the last one is computed again for its logits), kvsim's core matches them all.
class LastTokenHidden {
 public:
  LastTokenHidden(SimRequest& r, bool hide) : r_(r), hidden_(hide && !r.tokens.empty()) {
    if (hidden_) {
      last_ = r_.tokens.back();
      r_.tokens.pop_back();
    }
  }
  ~LastTokenHidden() {
    if (hidden_) r_.tokens.push_back(last_);
  }
  LastTokenHidden(const LastTokenHidden&) = delete;
  LastTokenHidden& operator=(const LastTokenHidden&) = delete;

 private:
  SimRequest& r_;
  bool hidden_;
  Token last_{};
};

}  // namespace

DifferentialCache::DifferentialCache(CacheContext ctx, const CacheFactory& primary,
                                     const CacheFactory& shadow)
    : ctx_(std::move(ctx)), primary_(std::make_unique<Side>()), shadow_(std::make_unique<Side>()) {
  CacheContext primary_ctx = ctx_;
  primary_ctx.fail = [this](std::string invariant, std::string detail) {
    shadow_stopped_ = true;  // the run ends here: nothing more to compare
    ctx_.fail(std::move(invariant), std::move(detail));
  };
  primary_->cache = primary(std::move(primary_ctx));
  primary_->core = dynamic_cast<KvsimCoreCache*>(primary_->cache.get());
  // Beside SGLang's cache the shadow's storage workers move SGLang's batch per step: a whole
  // operation of up to STORAGE_BATCH_SIZE (128) pages (_page_transfer, _page_backup loop over
  // the batches in one dequeue); kvsim's scenario knob is not SGLang's, the driver ignores it.
  shadow_scenario_ = ctx_.scenario;
  if (primary_->core == nullptr) {
    shadow_scenario_.cache.storage_batch_pages = kSglangStorageBatchPages;
    shadow_scenario_.cache.mamba_host_states = sglang_mamba_host_states(ctx_.scenario.cache);
    // SGLang's Mamba tree (MambaRadixCache, HiMambaRadixCache) evicts by its LRU lists only; it
    // has no eviction policy to set, so an LFU draw is LRU there.
    if (ctx_.scenario.cache.mamba_device_states > 0) {
      shadow_scenario_.cache.eviction_policy = EvictionPolicy::kLru;
    }
  }
  CacheContext shadow_ctx{.scenario = shadow_scenario_,
                          .seed = ctx_.seed,
                          .fail =
                              [this](std::string invariant, std::string detail) {
                                if (!shadow_violation_) {
                                  shadow_violation_ = invariant + ": " + detail;
                                }
                              },
                          .stats = shadow_stats_};
  shadow_->cache = shadow(std::move(shadow_ctx));
  shadow_->core = dynamic_cast<KvsimCoreCache*>(shadow_->cache.get());
  // Beside SGLang's cache, the core evicts SGLang's amounts at a backup and a load-back, and its
  // forward waits on its load stream only, as the fake device's does; a host-full inject leaves
  // the room the driver's does.
  if (primary_->core == nullptr && shadow_->core != nullptr) {
    shadow_->core->cache().set_sglang_eviction_amounts(true);
    shadow_->core->set_compute_waits_on_loads_only(true);
    shadow_->core->set_host_hold_leaves_device_room(true);
  }
}

DifferentialCache::~DifferentialCache() = default;

template <typename Fn>
void DifferentialCache::on_shadow(Fn&& fn) {
  if (shadow_stopped_) return;
  {
    ScopedThrowingAsserts asserts;
    try {
      fn();
    } catch (const AssertionFailure& e) {
      if (!shadow_violation_) shadow_violation_ = std::string("core.assert: ") + e.what();
    }
  }
  if (shadow_violation_) {
    shadow_stopped_ = true;
    ctx_.fail("differential.shadow",
              "kvsim's core, run beside the cache under test, failed its own check: " +
                  *shadow_violation_);
  }
}

void DifferentialCache::begin_call() {
  primary_->begin();
  if (!shadow_stopped_) {
    shadow_->begin();
    loads_before_call_ = shadow_->acks_pending().second;
  }
}

Decisions DifferentialCache::take(Side& side) {
  return side.take();
}

void DifferentialCache::compare(const char* call, const SimRequest* r, Decisions p, Decisions s) {
  if (shadow_stopped_) return;
  note_early_load_acks(call);
  ++compared_;
  std::vector<std::string> keys;
  for (const Decisions* d : {&p, &s}) {
    for (const auto& [k, v] : *d) {
      if (std::find(std::begin(kOneSided), std::end(kOneSided), k) != std::end(kOneSided)) continue;
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
  }
  std::sort(keys.begin(), keys.end());
  std::string diff;
  for (const std::string& k : keys) {
    const int64_t a = get(p, k), b = get(s, k);
    if (a == b) continue;
    const ByDesignContext c{.scenario = ctx_.scenario,
                            .primary = a,
                            .shadow = b,
                            .dead_prefetch_ops = dead_prefetch_ops_};
    if (const ByDesign* d = by_design(call, k, c); d != nullptr) {
      ++excused_;
      if (d->key == "did") --dead_prefetch_ops_;  // that request's operation is gone now
      continue;
    }
    diff += (diff.empty() ? "" : "; ") + k + ": " + std::to_string(a) + " vs " + std::to_string(b);
  }
  if (diff.empty()) return;
  shadow_stopped_ = true;
  std::string who = r != nullptr ? " of request " + std::to_string(r->rid) : "";
  ctx_.fail("differential.decision",
            std::string(call) + who + ": " + diff + " (cache under test vs kvsim's core; all of " +
                "the call's decisions: " + format(p) + " vs " + format(s) + ")");
}

std::vector<uint32_t> DifferentialCache::progress_streams() const {
  return primary_->cache->progress_streams();
}
size_t DifferentialCache::stream_count() const {
  return primary_->cache->stream_count();
}
bool DifferentialCache::storage_enabled() const {
  return primary_->cache->storage_enabled();
}
bool DifferentialCache::storage_reads_pending() const {
  return primary_->cache->storage_reads_pending();
}
int64_t DifferentialCache::admission_budget() const {
  return primary_->cache->admission_budget();
}
bool DifferentialCache::loads_queued() const {
  return primary_->cache->loads_queued();
}

bool DifferentialCache::arrive(SimRequest& r, uint64_t now) {
  begin_call();
  const bool p = primary_->cache->arrive(r, now);
  primary_->noted["prefetching"] = p;
  on_shadow([&] {
    shadow_->noted["prefetching"] =
        primary_->core == nullptr ? sglang_arrive(r, now) : shadow_->cache->arrive(r, now);
  });
  compare("arrive", &r, take(*primary_), take(*shadow_));
  return p;
}

std::optional<int64_t> DifferentialCache::prefetch_done(SimRequest& r, uint64_t now) {
  begin_call();
  const std::optional<int64_t> p = primary_->cache->prefetch_done(r, now);
  primary_->noted["prefetch_done"] = p.has_value();
  on_shadow([&] {
    // A prefetch whose storage query revoked it since the last poll is still SGLang's ongoing
    // operation (the revoke waits in prefetch_revoke_queue): with host memory never committed,
    // only best_effort ends it here; wait_complete waits for completion, and timeout for a
    // clock that, in the SGLang target, moves only by the reads' nanoseconds.
    const bool sglang_waits =
        revoked_unpolled_.count(r.rid) != 0 &&
        ctx_.scenario.cache.prefetch_stop_policy != PrefetchStopPolicy::kBestEffort;
    std::optional<int64_t> s;
    if (!sglang_waits) {
      s = shadow_->cache->prefetch_done(r, now);
      if (s) revoked_unpolled_.erase(r.rid);
    }
    shadow_->noted["prefetch_done"] = s.has_value();
    if (shadow_->core != nullptr && s) shadow_->noted["prefetch_loaded"] = *s;
  });
  if (primary_->core != nullptr && p) primary_->noted["prefetch_loaded"] = *p;
  compare("prefetch_check", &r, take(*primary_), take(*shadow_));
  return p;
}

std::optional<AdmitDecision> DifferentialCache::admit(SimRequest& r, bool load_back,
                                                      bool defer_load,
                                                      std::optional<int64_t> quota) {
  begin_call();
  const std::optional<AdmitDecision> p = primary_->cache->admit(r, load_back, defer_load, quota);
  // The admission gate (room for the request) is the scheduler's in kvsim and the driver's in
  // SGLang: a request the cache under test turned away is not offered to the shadow.
  if (!p) return p;
  if (primary_->core != nullptr) primary_->noted["device_hit"] = p->device_hit_tokens;
  primary_->noted["admitted"] = 1;
  on_shadow([&] {
    std::optional<AdmitDecision> s;
    {
      if (primary_->core == nullptr) sglang_request_slot();
      LastTokenHidden sglang_match(
          r, primary_->core == nullptr && ctx_.scenario.scheduler.mode != SchedulerMode::kPd);
      s = shadow_->cache->admit(r, load_back, defer_load, quota);
    }
    shadow_->noted["admitted"] = s.has_value();
    if (s) {
      if (shadow_->core != nullptr) shadow_->noted["device_hit"] = s->device_hit_tokens;
      shadow_computed_[r.rid] = s->owned_from;
      prefill_len_[r.rid] = r.tokens.size();
    }
  });
  compare("admit", &r, take(*primary_), take(*shadow_));
  return p;
}

void DifferentialCache::start_loads() {
  begin_call();
  primary_->cache->start_loads();
  on_shadow([&] { shadow_->cache->start_loads(); });
  compare("start_loads", nullptr, take(*primary_), take(*shadow_));
}

bool DifferentialCache::compute(SimRequest& r, size_t target, bool oom) {
  begin_call();
  const bool p = primary_->cache->compute(r, target, oom);
  primary_->noted["computed"] = p;
  on_shadow([&] {
    const auto it = shadow_computed_.find(r.rid);
    const size_t computed = it != shadow_computed_.end() ? it->second : r.computed;
    bool s = true;
    const auto prefill = prefill_len_.find(r.rid);
    const size_t prefill_len = prefill != prefill_len_.end() ? prefill->second : r.prompt_len;
    if (computed < target && computed < prefill_len && !mamba_fork_possible()) {
      s = false;  // the SGLang target defers a prefill step whose fork finds no Mamba slot
    } else if (computed < target) {  // an excused difference can have the shadow ahead
      if (!oom) evict_before_alloc(computed, target);
      ShadowComputed view(r, computed);
      s = shadow_->cache->compute(r, target, oom);
    }
    if (s) shadow_computed_[r.rid] = std::max(computed, target);
    if (s && primary_->core == nullptr && computed < std::min(target, prefill_len) &&
        ctx_.scenario.scheduler.mode != SchedulerMode::kPd) {
      s = cache_unfinished(r, target, target < prefill_len);
    }
    shadow_->noted["computed"] = s;
  });
  compare("compute", &r, take(*primary_), take(*shadow_));
  return p;
}

void DifferentialCache::finish(SimRequest& r) {
  begin_call();
  primary_->cache->finish(r);
  on_shadow([&] {
    const auto it = shadow_computed_.find(r.rid);
    ShadowComputed view(r, it != shadow_computed_.end() ? it->second : r.computed);
    shadow_->cache->finish(r);
  });
  shadow_computed_.erase(r.rid);
  prefill_len_.erase(r.rid);
  compare("finish", &r, take(*primary_), take(*shadow_));
}

void DifferentialCache::retract(SimRequest& r) {
  begin_call();
  primary_->cache->retract(r);
  on_shadow([&] {
    const auto it = shadow_computed_.find(r.rid);
    ShadowComputed view(r, it != shadow_computed_.end() ? it->second : r.computed);
    // SGLang's retract is release_kv_cache(is_insert=False): nothing new goes into the tree.
    // kvsim's core retract caches what was computed; the shadow runs SGLang's (an abort).
    if (primary_->core == nullptr) {
      shadow_->cache->abort(r);
    } else {
      shadow_->cache->retract(r);
    }
  });
  shadow_computed_.erase(r.rid);
  prefill_len_.erase(r.rid);
  compare("retract", &r, take(*primary_), take(*shadow_));
}

void DifferentialCache::abort(SimRequest& r) {
  begin_call();
  if (primary_->core == nullptr && r.prefetching && storage_enabled()) {
    // SGLang's query worker still dequeues the operation of a request aborted before its query
    // (release_aborted_request only marks it): the shadow's query steps take their turn on it.
    bool querying = false;
    if (shadow_->core != nullptr) {
      const auto& ops = shadow_->core->cache().prefetches();
      const auto it = ops.find(r.rid);
      querying = it != ops.end() && it->second.state == PrefetchOp::State::kQuery;
    }
    if (querying) {
      dead_queries_.insert(r.rid);
    } else {
      ++dead_prefetch_ops_;
    }
  }
  primary_->cache->abort(r);
  on_shadow([&] {
    // SGLang ends an aborted running request through release_kv_cache(is_insert=True): what it
    // computed goes into the tree. kvsim's core abort frees it; the shadow runs SGLang's.
    const auto it = shadow_computed_.find(r.rid);
    if (primary_->core == nullptr && r.state == RequestState::kRunning &&
        it != shadow_computed_.end()) {
      ShadowComputed view(r, it->second);
      shadow_->cache->finish(r);
    } else {
      shadow_->cache->abort(r);
    }
  });
  shadow_computed_.erase(r.rid);
  prefill_len_.erase(r.rid);
  revoked_unpolled_.erase(r.rid);
  compare("abort", &r, take(*primary_), take(*shadow_));
}

void DifferentialCache::offload(SimRequest& r) {
  begin_call();
  primary_->cache->offload(r);
  on_shadow([&] { shadow_->cache->offload(r); });
  compare("offload", &r, take(*primary_), take(*shadow_));
}

bool DifferentialCache::resume(SimRequest& r) {
  begin_call();
  const bool p = primary_->cache->resume(r);
  primary_->noted["resumed"] = p;
  on_shadow([&] { shadow_->noted["resumed"] = shadow_->cache->resume(r); });
  compare("resume", &r, take(*primary_), take(*shadow_));
  return p;
}

void DifferentialCache::verify_resumed(SimRequest& r) {
  primary_->cache->verify_resumed(r);
  on_shadow([&] { shadow_->cache->verify_resumed(r); });
}

void DifferentialCache::poll() {
  begin_call();
  primary_->polled([&] { primary_->cache->poll(); });
  Decisions p = take(*primary_);
  on_shadow([&] {
    release_revoked_prefetches();  // SGLang drains its revokes first (_drain_revoke)
    catch_up(get(p, "write_acks"), get(p, "load_acks"));
    // A prefetch revoked in the poll (no host room for its hits) SGLang ends at once.
    release_revoked_prefetches();
  });
  compare("poll", nullptr, std::move(p), take(*shadow_));
}

void DifferentialCache::flush() {
  begin_call();
  primary_->polled([&] { primary_->cache->flush(); });
  on_shadow([&] { shadow_->polled([&] { shadow_->cache->flush(); }); });
  compare("flush", nullptr, take(*primary_), take(*shadow_));
}

int64_t DifferentialCache::step(uint32_t stream, int64_t n) {
  // How far a stream has run is the device's timing, not a cache decision, and the two devices
  // queue different units of work (a fake CUDA op per kernel and layer, a CPU backend op per
  // transfer): the shadow's streams run at polls instead, as far as the primary's acks went.
  return primary_->cache->step(stream, n);
}

OpOutcome DifferentialCache::storage(uint32_t worker, int64_t fault) {
  begin_call();
  const OpOutcome p = primary_->cache->storage(worker, fault);
  primary_->noted["did"] = p.applied && p.ok;
  on_shadow([&] {
    // The prefetches still querying before the step: one the step revokes is SGLang's queued
    // revoke until the next poll (revoked_unpolled_).
    std::vector<RequestId> querying;
    if (primary_->core == nullptr && shadow_->core != nullptr) {
      for (const auto& [rid, op] : shadow_->core->cache().prefetches()) {
        if (op.state == PrefetchOp::State::kQuery) querying.push_back(rid);
      }
    }
    if (worker == 0 && dead_query_turn(fault)) {
      shadow_->noted["did"] = 1;  // SGLang's worker revokes the dead operation: one step
      return;
    }
    const OpOutcome s = shadow_->cache->storage(worker, fault);
    shadow_->noted["did"] = s.applied && s.ok;
    for (RequestId rid : querying) {
      const auto& ops = shadow_->core->cache().prefetches();
      const auto it = ops.find(rid);
      if (it != ops.end() && it->second.state == PrefetchOp::State::kRevoked) {
        revoked_unpolled_.insert(rid);
      }
    }
  });
  compare("storage", nullptr, take(*primary_), take(*shadow_));
  return p;
}

OpOutcome DifferentialCache::inject(const Op& op) {
  begin_call();
  const OpOutcome p = primary_->cache->inject(op);
  // A slow GPU (target 2) is device timing: the shadow's streams follow the primary's acks.
  if (op.target != 2) on_shadow([&] { shadow_->cache->inject(op); });
  compare("inject", nullptr, take(*primary_), take(*shadow_));
  return p;
}

void DifferentialCache::release_injected() {
  primary_->cache->release_injected();
  on_shadow([&] { shadow_->cache->release_injected(); });
}

bool DifferentialCache::read_prefix(SimRequest& r) {
  const bool p = primary_->cache->read_prefix(r);
  on_shadow([&] {
    const auto it = shadow_computed_.find(r.rid);
    ShadowComputed view(r, it != shadow_computed_.end() ? it->second : r.computed);
    shadow_->cache->read_prefix(r);
  });
  return p;
}

void DifferentialCache::check_after_op(bool may_change_cache) {
  primary_->cache->check_after_op(may_change_cache);
  on_shadow([&] { shadow_->cache->check_after_op(may_change_cache); });
}

void DifferentialCache::check_quiescent() {
  primary_->cache->check_quiescent();
  on_shadow([&] { shadow_->cache->check_quiescent(); });
}

StorageRunStats DifferentialCache::storage_stats() const {
  return primary_->cache->storage_stats();
}

Decisions DifferentialCache::take_decisions() {
  return primary_->cache->take_decisions();
}

std::unique_ptr<CacheUnderTest> make_sglang_differential(CacheContext ctx, Target& target) {
  auto d = std::make_unique<DifferentialCache>(
      std::move(ctx), [&target](CacheContext c) { return make_sglang_cache(std::move(c), target); },
      [](CacheContext c) { return std::make_unique<KvsimCoreCache>(std::move(c)); });
  // The loaded revision's eviction amount before an allocation (python/kvsim/sglang_target/
  // eviction_amounts.py); absent or null (an older driver, a helper it cannot probe): shortfall.
  const nlohmann::json caps = sglang_capabilities(target);
  const auto it = caps.find("evict_before_alloc");
  d->set_sglang_evicts_whole_ask(it != caps.end() && it->is_string() && *it == "whole");
  return d;
}

}  // namespace kvsim::sim
