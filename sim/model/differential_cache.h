// DifferentialCache: the same op stream through two caches at once — the primary (SGLang's own
// cache, what the run hunts) and a shadow (kvsim's core, configured from the same scenario) —
// with every call's decisions compared (docs/sglang-hunt.md, "Differential"): device hit and
// load-back lengths at admission, tokens evicted from device and host, write and load acks
// consumed, prefetched tokens, and whether an allocation, a stream step or a storage step went
// through. The model follows the primary only: every value the executor reads is the
// primary's. The first call whose decisions differ is a "differential.decision" violation at
// that op, naming the call and both sides' values, so a failing trace replays and shrinks to
// it like any other; a violation of the shadow's own checks is "differential.shadow".
//
// Differences that are SGLang's by design are listed in one table (differential_cache.cpp,
// kByDesign), each with its reason, and excused only where its condition holds; nothing else
// is loosened.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "sim/config/scenario.h"
#include "sim/model/cache_under_test.h"
#include "sim/model/target.h"

namespace kvsim::sim {

class KvsimCoreCache;

// Builds one side from its context (the primary gets the run's, the shadow its own).
using CacheFactory = std::function<std::unique_ptr<CacheUnderTest>(CacheContext)>;

// A call's decisions by name (tokens or counts; an absent name is 0).
using Decisions = std::map<std::string, int64_t>;

class DifferentialCache final : public CacheUnderTest {
 public:
  DifferentialCache(CacheContext ctx, const CacheFactory& primary, const CacheFactory& shadow);
  ~DifferentialCache() override;

  std::vector<uint32_t> progress_streams() const override;
  size_t stream_count() const override;
  bool storage_enabled() const override;
  bool storage_reads_pending() const override;
  int64_t admission_budget() const override;
  bool loads_queued() const override;

  bool arrive(SimRequest& r, uint64_t now) override;
  std::optional<int64_t> prefetch_done(SimRequest& r, uint64_t now) override;
  std::optional<AdmitDecision> admit(SimRequest& r, bool load_back, bool defer_load,
                                     std::optional<int64_t> quota) override;
  void start_loads() override;
  bool compute(SimRequest& r, size_t target, bool oom) override;
  void finish(SimRequest& r) override;
  void retract(SimRequest& r) override;
  void abort(SimRequest& r) override;
  void offload(SimRequest& r) override;
  bool resume(SimRequest& r) override;
  void verify_resumed(SimRequest& r) override;

  void poll() override;
  void flush() override;
  int64_t step(uint32_t stream, int64_t n) override;
  OpOutcome storage(uint32_t worker, int64_t fault) override;
  OpOutcome inject(const Op& op) override;
  void release_injected() override;

  bool read_prefix(SimRequest& r) override;
  void check_after_op(bool may_change_cache) override;
  void check_quiescent() override;
  StorageRunStats storage_stats() const override;
  Decisions take_decisions() override;

  // Beside SGLang's cache: its eviction before an allocation asks the tree for the whole amount
  // when the pool is short (SGLang before August 2026), not the shortfall.
  void set_sglang_evicts_whole_ask(bool on) { sglang_evicts_whole_ask_ = on; }

  // Calls whose decisions were compared, and differences the by-design table excused.
  int64_t compared() const { return compared_; }
  int64_t excused() const { return excused_; }

 private:
  struct Side;
  // Runs `fn` on the shadow unless it has stopped (a divergence or its own violation), turning
  // a core assertion into "differential.shadow".
  template <typename Fn>
  void on_shadow(Fn&& fn);
  // Compares the call's decisions of both sides (each side's taken since the last compare).
  void compare(const char* call, const SimRequest* r, Decisions primary, Decisions shadow);
  Decisions take(Side& side);
  void begin_call();
  // The shadow's arrival as SGLang's scheduler does it (a prefetch decision).
  bool sglang_arrive(SimRequest& r, uint64_t now);
  // Whether this query step of the shadow is the turn of an aborted request's operation that
  // SGLang's query worker still dequeues (dead_queries_); takes it off the list when it is.
  bool dead_query_turn(int64_t fault);
  // Load acks the shadow consumed in a call other than a poll (differential_cache.cpp).
  void note_early_load_acks(std::string_view call);
  // Whether a prefill step's Mamba fork can find a state in the shadow (SGLang target's test).
  bool mamba_fork_possible() const;
  // SGLang's request-row allocation on the shadow (Mamba: free states first).
  void sglang_request_slot();
  // The shadow's poll, its copy streams run until it consumed as many acks as the primary.
  void catch_up(int64_t write_acks, int64_t load_acks);
  // SGLang's poll drains its storage revokes (drain_storage_control_queues): the shadow ends
  // every prefetch its core has revoked, as SGLang's _revoke_pending_prefetch does, so that
  // host protection and the prefetch budget come back at the same call on both sides.
  void release_revoked_prefetches();
  // SGLang's eviction before an allocation, on the shadow (kvsim's core) before its compute of
  // positions [computed, target).
  void evict_before_alloc(size_t computed, size_t target);
  // The shadow's cache_unfinished_req of a prefill that has computed `computed` tokens
  // (chunked: a middle chunk, computed short of the prefill). False: the shadow could not take
  // the request's prefix back (no Mamba state for it).
  bool cache_unfinished(SimRequest& r, size_t computed, bool chunked);

  CacheContext ctx_;
  Scenario shadow_scenario_;  // the run's, with what the shadow runs SGLang's way
  ExecutorStats shadow_stats_;
  std::unique_ptr<Side> primary_;
  std::unique_ptr<Side> shadow_;
  bool shadow_stopped_ = false;
  std::optional<std::string> shadow_violation_;
  // The shadow's own `computed` of each admitted request (an excused difference at admission
  // leaves it at another length than the primary's).
  std::map<RequestId, size_t> shadow_computed_;
  // The tokens each request was admitted with: SGLang's prefill, which after a retract covers
  // the outputs generated before it too (the request comes back as prompt + outputs).
  std::map<RequestId, size_t> prefill_len_;
  // Requests aborted while prefetching whose operation SGLang's storage workers may still
  // dequeue (the by-design row for storage steps, differential_cache.cpp).
  int64_t dead_prefetch_ops_ = 0;
  // Requests aborted before their storage query: SGLang's query worker still dequeues each one's
  // operation in its turn (a step that only revokes it), the core dropped it at the abort.
  std::set<RequestId> dead_queries_;
  // Prefetches the shadow's storage query revoked since the last poll. SGLang's query worker
  // only queues such a revoke (prefetch_revoke_queue), which its poll drains; until then
  // check_prefetch_progress finds the operation and, unless the stop policy is best_effort,
  // answers not done. The shadow answers so too.
  std::set<RequestId> revoked_unpolled_;
  bool sglang_evicts_whole_ask_ = false;
  int64_t loads_before_call_ = 0;  // the shadow's unconsumed load acks when the call began
  int64_t early_load_acks_ = 0;    // load acks the shadow consumed outside a poll, not yet matched
  int64_t compared_ = 0;
  int64_t excused_ = 0;
};

// SGLang's cache (`target`, as make_sglang_cache builds it) as the primary and kvsim's core on
// the same scenario as the shadow.
std::unique_ptr<CacheUnderTest> make_sglang_differential(CacheContext ctx, Target& target);

}  // namespace kvsim::sim
