// The differential's shadow run SGLang's way (docs/sglang-hunt.md, "Differential"): where kvsim's
// core and SGLang's cache differ by design, these run the core as SGLang's scheduler and cache
// would — arrival, eviction before an allocation, cache_unfinished_req, Mamba rows and forks, the
// storage workers' queues and revokes, and the poll's acks.
#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

#include "core/common/assert.h"
#include "sim/config/scenario.h"
#include "sim/model/differential_cache.h"
#include "sim/model/differential_side.h"
#include "sim/model/storage_faults.h"

namespace kvsim::sim {

bool DifferentialCache::sglang_arrive(SimRequest& r, uint64_t now) {
  // SGLang's scheduler at arrival: match all but the last token (as at admission), and prefetch
  // from storage what follows the host anchor only when the deepest device node is backed up;
  // kvsim's core arrive matches every token and prefetches below the host anchor regardless.
  if (shadow_->core == nullptr) return shadow_->cache->arrive(r, now);
  HiCache& core = shadow_->core->cache();
  if (!core.storage_enabled() || !ctx_.scenario.scheduler.prefetch || r.tokens.empty()) {
    return false;
  }
  const std::span<const Token> tokens(r.tokens);
  const MatchResult m = core.match_prefix(r.ns, tokens.first(tokens.size() - 1));
  if (!m.last_device_node->is_root() && !m.last_device_node->backed_up()) return false;
  return core.prefetch_from_storage(r.rid, r.ns, *m.last_host_node, tokens, now);
}

void DifferentialCache::sglang_request_slot() {
  // SGLang's alloc_req_slots with Mamba: before a request takes its row, the tree evicts Mamba
  // states until 3 are free (MAMBA_STATE_PER_REQ_PREFIX_CACHE; the driver's
  // mamba_admission.evict_for_request_slot); kvsim's core allocates a request's state alone.
  constexpr int64_t kMambaStatesPerRequest = 3;
  if (shadow_->core == nullptr) return;
  HiCache& core = shadow_->core->cache();
  if (SidePool* mamba = core.side_pool(ComponentType::kMamba)) {
    const int64_t free_states = mamba->device_slots().available_size();
    if (free_states < kMambaStatesPerRequest)
      core.evict_mamba(kMambaStatesPerRequest - free_states);
  }
}

bool DifferentialCache::mamba_fork_possible() const {
  // The SGLang target's Mamba model (mamba_admission.mamba_fork_free): a prefill step, whose
  // cache_unfinished_req forks the request's state, runs only while a state is free or
  // evictable; otherwise it is deferred (computed: false), kvsim's scheduler model's choice.
  if (primary_->core != nullptr || shadow_->core == nullptr) return true;
  const HiCache& core = shadow_->core->cache();
  const SidePool* mamba = core.side_pool(ComponentType::kMamba);
  if (mamba == nullptr) return true;
  return mamba->device_slots().available_size() +
             core.tree().aux_evictable_size(ComponentType::kMamba) >=
         1;
}

void DifferentialCache::evict_before_alloc(size_t computed, size_t target) {
  // SGLang's scheduler evicts before it allocates (alloc_paged_token_slots_extend ->
  // evict_from_tree_cache), asking for the new pages' tokens plus one page per request (its
  // over-estimate), as the driver does; kvsim's core evicts at allocation only the shortfall of
  // the pages it allocates. The shadow asks what SGLang asks first; its allocation then finds
  // the room. When the pool is short, the revision's helper evicts the shortfall (August 2026)
  // or the whole ask (earlier): the driver's capability evict_before_alloc says which.
  if (primary_->core != nullptr || shadow_->core == nullptr) return;
  const auto page = static_cast<size_t>(ctx_.scenario.cache.page_size);
  const size_t allocated = (computed + page - 1) / page * page;  // the core allocates pages
  if (target <= allocated) return;
  const auto ask = static_cast<int64_t>(target - allocated + (page > 1 ? page : 0));
  HiCache& core = shadow_->core->cache();
  const int64_t available = core.available_device_size();
  if (const SidePool* swa = core.side_pool(ComponentType::kSwa); swa != nullptr) {
    // The hybrid arm (SWATokenToKVPoolAllocator): the shortfall of each pool, in one eviction.
    const int64_t swa_available = swa->device_slots().available_size();
    if (available < ask || swa_available < ask) {
      core.evict(std::max<int64_t>(0, ask - available));
      core.evict_swa(std::max<int64_t>(0, ask - swa_available));
    }
    return;
  }
  if (available < ask) core.evict(sglang_evicts_whole_ask_ ? ask : ask - available);
}

bool DifferentialCache::cache_unfinished(SimRequest& r, size_t computed, bool chunked) {
  // SGLang's scheduler caches a prefill's prefix as each chunk ends (cache_unfinished_req):
  // a request running beside it hits it, and write-through counts it. kvsim's core inserts at
  // finish only, so the shadow does what cache_unfinished_req does with its own protocol —
  // insert what was computed and unlock (finish), then take the tree's prefix back (admit,
  // nothing loaded) and compute the unaligned tail again.
  // A middle chunk inserts as SGLang's chunked=True does: no hit counts, no write-through.
  Side& s = *shadow_;
  // With Mamba, SGLang's cache_unfinished_req takes the slot for the request's forked state
  // (_alloc_mamba_slot) before its insert, whose write-through then locks the inserted nodes'
  // states until their acks; the shadow's request gets its new state at the re-admission after
  // the insert, so it holds that slot from before the insert.
  std::optional<SlotIndex> fork_slot;
  if (s.core != nullptr && s.core->cache().side_pool(ComponentType::kMamba) != nullptr) {
    fork_slot = s.core->cache().alloc_mamba_state();
  }
  {
    ShadowComputed view(r, computed);
    if (s.core != nullptr && chunked) {
      s.core->finish_chunk(r);
    } else {
      s.cache->finish(r);
    }
  }
  if (fork_slot) s.core->cache().free_mamba_state(*fork_slot);
  // SGLang matches the page-aligned prefix it inserted (match_prefix(page_aligned_token_ids)):
  // a longer prefix another request cached does not extend this request's.
  std::optional<AdmitDecision> again;
  {
    const auto page = static_cast<size_t>(ctx_.scenario.cache.page_size);
    TokensCut aligned(r, computed / page * page);
    again = s.cache->admit(r, /*load_back=*/false, /*defer_load=*/false, std::nullopt);
  }
  // With Mamba it fails where kvsim's core has no state for the request (all held or locked,
  // after evicting one as SGLang's fork does) while SGLang's fork found one: a difference in the
  // caches' Mamba state, reported by the caller as this compute's decision.
  if (!again) return false;
  size_t have = again->owned_from;
  if (have < computed) {
    ShadowComputed view(r, have);
    KV_ASSERT(s.cache->compute(r, computed, false), "the shadow could not recompute a tail");
    have = computed;
  }
  shadow_computed_[r.rid] = have;
  return true;
}

bool DifferentialCache::dead_query_turn(int64_t fault) {
  if (dead_queries_.empty() || shadow_->core == nullptr) return false;
  if (static_cast<StorageFault>(fault & 0xff) == StorageFault::kSlowIo) return false;  // no turn
  // SGLang's prefetch_queue is FIFO in arrival (request id) order, the core's query step takes
  // the lowest querying id: the dead operation's turn comes when no live one is older.
  const RequestId dead = *dead_queries_.begin();
  for (const auto& [rid, op] : shadow_->core->cache().prefetches()) {
    if (op.state == PrefetchOp::State::kQuery && rid < dead) return false;
  }
  dead_queries_.erase(dead_queries_.begin());
  return true;
}

void DifferentialCache::release_revoked_prefetches() {
  revoked_unpolled_.clear();
  if (primary_->core != nullptr || shadow_->core == nullptr) return;
  HiCache& core = shadow_->core->cache();
  std::vector<RequestId> revoked;
  for (const auto& [rid, op] : core.prefetches()) {
    if (op.state == PrefetchOp::State::kRevoked) revoked.push_back(rid);
  }
  // A revoked operation ends at its progress check whatever the time (check_prefetch_progress).
  for (RequestId rid : revoked)
    KV_ASSERT(core.check_prefetch_progress(rid, 0), "revoke pending");
}

void DifferentialCache::catch_up(int64_t write_acks, int64_t load_acks) {
  Side& s = *shadow_;
  if (s.core == nullptr) {
    s.polled([&] { s.cache->poll(); });
    return;
  }
  // Polls, then runs the shadow's copy streams an op at a time, polling after each, until it
  // has consumed as many acks as the primary did (or has nothing left to run).
  const std::vector<uint32_t> streams = s.cache->progress_streams();
  const uint32_t compute = streams.at(0), write = streams.at(1), load = streams.at(2);
  const auto [w0, l0] = s.acks_pending();
  // Load acks the core consumed before this poll (note_early_load_acks) count as this poll's.
  const int64_t early = std::min(early_load_acks_, load_acks);
  early_load_acks_ -= early;
  int64_t w = 0, l = 0;
  for (bool ran = true; ran;) {
    s.cache->poll();
    const auto [w1, l1] = s.acks_pending();
    w = w0 - w1;
    l = l0 - l1 + early;
    ran = false;
    if (w < write_acks) ran = s.cache->step(write, 1) > 0;
    if (!ran && l < load_acks) ran = s.cache->step(load, 1) > 0;
    // A copy waits on the compute stream's ops queued before it (the index uploads a write or
    // load enqueues there); with the primary's step ops not forwarded, they run here.
    if (!ran && (w < write_acks || l < load_acks)) ran = s.cache->step(compute, 1) > 0;
  }
  if (w > 0) s.noted["write_acks"] = w;
  if (l > 0) s.noted["load_acks"] = l;
}

void DifferentialCache::note_early_load_acks(std::string_view call) {
  // kvsim's core consumes every ack when it synchronizes inside a call (a write-back eviction's
  // flush waits for its write and then runs check_hicache_events); SGLang's write-back eviction
  // handles its write acks only (writing_check(write_back=True)) and leaves load acks to the
  // poll. Load acks the core consumed outside a poll are counted toward the next poll's.
  // An admission adds the load of its load-back (one transfer) before it may consume others.
  if (shadow_->core == nullptr || primary_->core != nullptr) return;
  if (call == "poll" || call == "flush" || call == "start_loads") return;
  const int64_t added = call == "admit" && shadow_->core->cache().stats().load_back_tokens >
                                               shadow_->before.load_back_tokens
                            ? 1
                            : 0;
  const int64_t consumed = loads_before_call_ + added - shadow_->acks_pending().second;
  if (consumed > 0) early_load_acks_ += consumed;
}

}  // namespace kvsim::sim
