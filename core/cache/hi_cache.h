// HiCache: the hierarchical KV cache a scheduler calls — a radix tree over a device pool, a
// pinned host pool and an optional storage tier, with the cache controller moving pages
// between them. Names follow SGLang's HiRadixCache.
//
// Scheduler protocol (one thread; every asynchronous effect lands at a poll point):
//   match_prefix → (admission) lock(last_device_node) → init_load_back(best_match_node)
//   → ready_to_load_host_cache() → forward (LayerDoneCounter::wait_until per layer)
//   → insert(tokens, request slots) → free the duplicates → unlock.
//   check_hicache_events() every iteration consumes write/load acks and storage progress.
//   Request-held device slots come from alloc_device() and go back through free_device() or
//   into the tree through insert().
//
// Invariants (sanity_check reports each by name; see docs/invariants.md):
//  1. [slots.device_ownership] every allocated device slot has exactly one owner: a tree node
//     or a request; no free slot has one;
//  2. [slots.host_ownership] every allocated host slot has exactly one owner: a tree node or a
//     prefetch; no free slot has one;
//  3. [residency] every index vector held by the tree or an operation is host-resident;
//  4. [inflight.locked] a node with a pending load or write is on device and locked, and a
//     pending load's nodes are host-protected;
//  4b.[inflight.load_sources] every host slot a queued or issued load reads (any pool) is held
//     until the load's ack by a tree node no eviction can remove: host-protected or locked, or
//     above such a node (recomputed from the controller's loads, not the cache's list);
//  5. [prefetch.accounting] prefetch_tokens_occupied equals the sum over live prefetches, and
//     every prefetch's host slots are page-aligned with completed <= allocated;
//  6. [stream_lifetime] the backend saw no buffer reused while a copy still used it;
//  6b.[prefetch.abandoned_with_free_memory] no prefetch was given up for lack of host memory
//     while at least a threshold's worth of whole pages was free (seed 004);
//  6c.[evict.over_eviction] an eviction made to fit an allocation stops once it fits: the
//     free space it leaves beyond the allocation is smaller than its last victim (victims are
//     whole nodes, so page rounding is within that tolerance);
//  6d.[transfers.index_buffers_returned] no transfer index buffer outlives its copy's enqueue
//     (CacheController::live_index_buffers() == 0 at every poll point);
//  6e.[load_back.window_whole] after a load-back every component's state on the new anchor is
//     on device: the whole SWA window ending there, the Mamba state of the anchor (KV_ASSERT);
//  7. [slots.swa_* / slots.mamba_*] side pools: the ownership rules of 1 and 2 per pool;
//  8. [slots.request_count] each pool's count of request-held pages equals its held marks;
//  9. [storage.hash_chain] every page hash a node caches equals its recomputation from the
//     namespace seed and the tokens of its path (hash_pages);
// 10. [slots.held_at_quiescence] (check_quiescent only) with no request live, no slot of any
//     pool, side pools included, is held by a request;
//  plus every RadixTree invariant and each pool allocator's own check.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/cache/hi_cache_options.h"
#include "core/cache/request_slots.h"
#include "core/cache/side_pool.h"
#include "core/common/sanity.h"
#include "core/pools/device_kv_pool.h"
#include "core/pools/host_kv_pool.h"
#include "core/pools/paged_allocator.h"
#include "core/tiers/cache_controller.h"
#include "core/tiers/storage_backend.h"
#include "core/tree/radix_tree.h"

namespace kvsim {

struct LoadBackResult {
  IndexVector device_indices{Tier::kDevice, {}};  // newly loaded slots, root→leaf
  TreeNode* last_node = nullptr;                  // the request's new device anchor
  bool loaded = false;                            // false: nothing was (or could be) loaded
  int64_t swa_loaded_tokens = 0;                  // SWA slots loaded for the window
  bool mamba_loaded = false;                      // the anchor's state was loaded
};

// A prefetch from storage into the host pool (SGLang's PrefetchOperation).
struct PrefetchOp {
  enum class State : uint8_t { kQuery = 0, kHit = 1, kTransfer = 2, kRevoked = 3 };
  RequestId rid = 0;
  NodeId anchor = 0;
  Namespace ns = 0;
  std::vector<Token> tokens;       // page-aligned continuation of the anchor's path
  std::vector<PageDigest> hashes;  // one per page of tokens (truncated to the hit)
  State state = State::kQuery;
  int64_t occupied_tokens = 0;  // counted against the rate limit
  int64_t hit_tokens = 0;
  std::optional<IndexVector> host_indices;
  int64_t completed_tokens = 0;  // frozen once terminated
  bool terminated = false;
  uint64_t start_tick = 0;
};

struct HiCacheStats {
  int64_t load_back_tokens = 0;
  int64_t write_through_tokens = 0;
  // The part of write_through_tokens the write policy wrote for hit nodes (apply_write_policy);
  // a caller's own write_backup is not counted. Always 0 under write-back (sanity_check:
  // "stats.write_back_on_evict").
  int64_t policy_write_tokens = 0;
  // The part written for device victims at eviction (evict_one_write_back). Only the
  // hierarchical write-back policy writes there: write-through drops a victim without a copy
  // and a flat cache has no host tier (sanity_check: "stats.write_back_on_evict").
  int64_t evict_write_tokens = 0;
  int64_t evicted_device_tokens = 0;
  int64_t evicted_host_tokens = 0;
  int64_t prefetched_tokens = 0;
  int64_t backed_up_pages = 0;
  int64_t prefetch_shrunk = 0;  // prefetches shrunk to fit free host memory (seed 004)
  int64_t prefetch_revoked = 0;
  // Prefetches revoked for lack of host memory while a worthwhile amount was free: always 0
  // on a correct core (sanity_check: "prefetch.abandoned_with_free_memory").
  int64_t prefetch_abandoned_with_free_memory = 0;
  // Storage tier (pages; bytes are payload bytes). docs/storage.md.
  int64_t storage_query_hit_pages = 0;  // pages a hit query found (before any read)
  int64_t storage_hit_pages = 0;        // pages read back intact
  int64_t storage_read_bytes = 0;       // their bytes
  int64_t storage_miss_pages = 0;       // query said yes, the read found nothing (evicted)
  int64_t storage_corrupt_pages = 0;    // read back damaged or of the wrong size: removed
  int64_t storage_read_errors = 0;      // reads that failed (the page is kept)
  int64_t storage_write_failures = 0;   // set() failed; the backup stopped there
  int64_t storage_written_bytes = 0;    // bytes of pages set() accepted (deduplicated too)
  // Tokens (slots) freed by evictions made to fit an allocation beyond its shortfall plus the
  // last victim's size: always 0 on a correct core (sanity_check: "evict.over_eviction").
  int64_t over_evicted_tokens = 0;
  // Allocations that failed while the eviction before them had not run out of victims (it
  // was skipped, or stopped short of the shortfall): always 0 on a correct core
  // (sanity_check: "evict.under_eviction").
  int64_t under_evicted_allocations = 0;
  // Prefetch admissions whose rate-limit decision differs from the reference's (a plain
  // recomputation from the live prefetches' tokens): always 0 on a correct core
  // (sanity_check: "prefetch.rate_limit").
  int64_t prefetch_rate_divergences = 0;
  // Evictions that freed slots for an allocation whose pool already had room for it before
  // the eviction started (an eviction must follow a first attempt that fell short, in both
  // eviction modes): always 0 on a correct core (sanity_check: "evict.needless").
  int64_t needless_evictions = 0;
  // Progress checks whose prefetch deadline differs from the reference's (base + per-KiB-token
  // ticks, capped at the maximum) and storage queries whose keep-or-revoke decision differs
  // from the reference's (nothing hit, or less than the threshold): always 0 on a correct core
  // (sanity_check: "prefetch.deadline", "prefetch.query_threshold").
  int64_t prefetch_deadline_divergences = 0;
  int64_t prefetch_query_divergences = 0;
  // Tokens of finished prefetches handed to their requests (pop_prefetch_loaded_tokens) or
  // dropped with an aborted request: with those still waiting in prefetch_loaded_, exactly
  // prefetched_tokens (sanity_check: "prefetch.reported_tokens").
  int64_t prefetch_reported_tokens = 0;
};

class HiCache {
 public:
  // `storage` may be null (no storage tier). Both must outlive the cache. Pool sizes that are
  // not page multiples are rounded down to whole pages (SGLang's allocator does the same; the
  // rounded sizes are in options()); a page_size <= 0 or a pool below one page throws
  // std::invalid_argument naming the field.
  HiCache(Backend& backend, HiCacheOptions options, StorageBackend* storage = nullptr);
  ~HiCache();
  HiCache(const HiCache&) = delete;
  HiCache& operator=(const HiCache&) = delete;

  const HiCacheOptions& options() const { return options_; }
  RadixTree& tree() { return *tree_; }
  const RadixTree& tree() const { return *tree_; }
  CacheController& controller() { return *controller_; }
  Backend& backend() { return backend_; }
  PagedSlotAllocator& device_slots() { return *device_slots_; }
  PagedSlotAllocator& host_slots() { return *host_slots_; }
  DeviceKVPool& device_pool() { return *device_pool_; }
  HostKVPool& host_pool() { return *host_pool_; }
  const HiCacheStats& stats() const { return stats_; }

  // --- Tree operations ---
  MatchResult match_prefix(Namespace ns, std::span<const Token> tokens);
  // Inserts the request's KV; applies the write policy to the nodes it hit. Slots of `value`
  // beyond prefix_len that the tree adopted stop being request-owned.
  // Hybrid models pass `aux` (see AuxInsertValues): the request's SWA slots and Mamba state
  // that the tree does not adopt are freed here.
  InsertResult insert(Namespace ns, std::span<const Token> tokens, const IndexVector& value,
                      const AuxInsertValues& aux = {});
  LockRecord lock(TreeNode& node) { return tree_->lock(node); }
  void unlock(const LockRecord& record) { tree_->unlock(record); }

  // --- Device slots held by requests ---
  // Evicts the shortfall from the tree, then allocates; nullopt if it still does not fit.
  // Caller mistakes are values: alloc_device(0) returns an empty vector (a no-op), a negative
  // or non-page-multiple count returns nullopt without evicting; free_device of an empty
  // vector does nothing. The same holds for alloc_swa / free_swa.
  std::optional<IndexVector> alloc_device(int64_t tokens);
  void free_device(const IndexVector& slots);
  int64_t available_device_size() const;  // free device tokens (not counting evictable)
  int64_t request_held_tokens() const {   // device tokens held by requests
    return request_slots_->held_pages() * options_.page_size;
  }

  // --- Hybrid side pools (absent unless the options enable the component) ---
  SidePool* side_pool(ComponentType type) { return side_[index_of(type)].get(); }
  const SidePool* side_pool(ComponentType type) const { return side_[index_of(type)].get(); }
  // SWA slots along the path to `node`, one per token; 0 where the node holds a tombstone.
  IndexVector path_swa_slots(const TreeNode& node) const;
  // Request-held SWA slots (page multiples) and Mamba states; evict the shortfall first.
  std::optional<IndexVector> alloc_swa(int64_t tokens);
  void free_swa(const IndexVector& slots);
  std::optional<SlotIndex> alloc_mamba_state();
  void free_mamba_state(SlotIndex slot);
  // Copy-on-write of a matched state into the request's own slot, on the compute stream.
  void copy_mamba_state(SlotIndex src, SlotIndex dst);
  // Tombstones unlocked aux values (LRU first); a victim that is a device leaf is evicted
  // whole. Return slots freed.
  int64_t evict_swa(int64_t slots) { return evict_aux(ComponentType::kSwa, slots); }
  int64_t evict_mamba(int64_t states) { return evict_aux(ComponentType::kMamba, states); }

  // --- Eviction ---
  int64_t evict(int64_t device_tokens);     // returns device tokens freed
  int64_t evict_host(int64_t host_tokens);  // returns host tokens freed
  // SGLang's eviction amounts where its first allocation fails: a backup evicts the node's
  // whole length from host (write_backup: evict_host(len(node.value))), a load-back the load's
  // whole length from device (load_back: evict(len(host_indices))), not the shortfall. Off by
  // default (HiCacheOptions::sglang_eviction_amounts; evict.over_eviction counts such
  // over-eviction); the differential's shadow runs it, the swarm draws it.
  // Both modes account every such eviction (note_eviction, note_host_eviction); only while this
  // is on is the surplus excused (tally_over_eviction).
  void set_sglang_eviction_amounts(bool on) { options_.sglang_eviction_amounts = on; }
  // Backs `node` up to host (write-through modes need a backed-up parent); returns tokens.
  int64_t write_backup(TreeNode& node);
  // [backup.result] "" when `written` (write_backup's result for `node`) is the host copy the
  // node now holds (0 without one) and write_through_tokens moved by it from `counted_before`, with
  // a write queued exactly when a copy was made. write_backup asserts it (hi_cache.cpp).
  std::string check_backup_result(const TreeNode& node, int64_t written,
                                  int64_t counted_before) const;

  // --- Load-back (host → device) ---
  // Loads the evicted segment ending at `best_match_node` (SGLang's init_load_back). On
  // failure or below the threshold, returns no indices and the first device ancestor.
  LoadBackResult init_load_back(TreeNode& best_match_node,
                                std::optional<int64_t> mem_quota = std::nullopt);
  // Issues every queued load as one batch and returns its producer for wait_for_load (-1:
  // nothing to wait for). Loads a read already issued early (wait_for_loads_of) belong to
  // the batch too: with nothing left to issue it returns their producer, so the batch's
  // forward still waits for them (one load stream: a later producer covers earlier ones).
  int ready_to_load_host_cache();
  // [load_back.result] "" when `result` (init_load_back's at `best_match_node`) agrees with the
  // cache: a load is anchored on the match, queued once and counted (load_back_tokens moves
  // from `counted_before` by its slot count); no load reports no slots, counts and queues nothing,
  // and falls back to the first device node up the path. init_load_back asserts it.
  std::string check_load_back_result(const TreeNode& best_match_node, const LoadBackResult& result,
                                     int64_t counted_before, bool pending_before) const;
  // Makes the compute stream wait until every layer of load `producer` has landed, as a
  // forward that reads the loaded prefix does layer by layer (LayerDoneCounter::wait_until).
  void wait_for_load(int producer);
  // Makes the compute stream wait for any load of `node` still in flight, whoever started it:
  // a read of the node's loaded state (the Mamba copy-on-write of a later request that matched
  // it on device) must not overtake the copy that writes it. A load of `node` still queued
  // (a batching caller has not called ready_to_load_host_cache yet) is issued first.
  void wait_for_loads_of(const TreeNode& node);

  // --- Poll point: consumes completed acks and storage progress ---
  void check_hicache_events();
  // Blocks until all device↔host transfers have completed, then consumes their acks.
  void flush();

  // --- Storage tier ---
  bool storage_enabled() const { return storage_ != nullptr; }
  // In-flight transfers keyed by node (read only; tools draw them: sim/report/tree_picture.h).
  bool write_pending(NodeId node) const { return pending_writes_.count(node) != 0; }
  bool load_pending(NodeId node) const { return pending_loads_.count(node) != 0; }
  // Starts a prefetch of the part of `tokens` below `anchor` (normally last_host_node).
  // Returns false when it is not worth it (no storage, below threshold, rate limited).
  bool prefetch_from_storage(RequestId rid, Namespace ns, TreeNode& anchor,
                             std::span<const Token> tokens, uint64_t now_tick);
  // Admission gate: true when the request may proceed (prefetch finished, terminated, or
  // absent); the usable prefix is then in the tree as host-only nodes.
  bool check_prefetch_progress(RequestId rid, uint64_t now_tick);
  void release_aborted_request(RequestId rid);
  int64_t pop_prefetch_loaded_tokens(RequestId rid);
  // Emulated storage threads; each call does one unit of work, returns false when idle.
  bool storage_query_step();   // hit query of the oldest querying prefetch
  bool storage_io_step();      // one batch of page reads for the oldest transferring prefetch
  bool storage_backup_step();  // one batch of page writes for the oldest backup
  const std::map<RequestId, PrefetchOp>& prefetches() const { return prefetches_; }
  // What a storage call saw before it ran, for the checks of its result (storage.step_result,
  // prefetch.start_result; hi_cache_storage.cpp): each public call asserts its own.
  struct StorageStepBefore {
    HiCacheStats stats;
    size_t backups = 0;     // backup step: queued backups
    size_t finished = 0;    // backup step: acks waiting
    NodeId node = 0;        // backup step: the front backup's node
    size_t pages_done = 0;  // backup step: its pages done; I/O step: the read tokens
    size_t pages = 0;       // backup step: its pages
    size_t prefetches = 0;  // live (start), querying (query) or readable (I/O) prefetches
    RequestId rid = 0;      // query / I/O step: the prefetch served next
    bool had_prefetch = false;
    int64_t occupied = 0;    // start: prefetch_tokens_occupied
    int32_t host_locks = 0;  // start: the anchor's host_lock_ref
  };
  std::string check_prefetch_start(RequestId rid, Namespace ns, const TreeNode& anchor,
                                   std::span<const Token> tokens, uint64_t now_tick,
                                   const StorageStepBefore& before, bool started) const;
  StorageStepBefore check_prefetch_start_before(RequestId rid, const TreeNode& anchor) const;
  StorageStepBefore check_query_step_before() const;
  StorageStepBefore check_io_step_before() const;
  StorageStepBefore check_backup_step_before() const;
  std::string check_query_step(const StorageStepBefore& before, bool did) const;
  std::string check_io_step(const StorageStepBefore& before, bool did) const;
  std::string check_backup_step(const StorageStepBefore& before, bool did) const;
  int64_t prefetch_tokens_occupied() const { return prefetch_tokens_occupied_; }

  // Every invariant the core can see on its own.
  void sanity_check(SanityReport& report) const;
  // sanity_check with the storage page-hash recomputation (invariant 9, SHA-256 over every
  // backed-up token: most of a full check's cost) spread over kHashChainSlices calls: call
  // `round` recomputes the chains of the nodes whose id ≡ round (mod kHashChainSlices), so every
  // node is recomputed within that many calls. For a simulator's periodic check;
  // sanity_check and check_quiescent recompute them all.
  static constexpr uint64_t kHashChainSlices = 8;
  void sanity_check_sliced(SanityReport& report, uint64_t round) const;
  // For a driver whose requests have all finished or aborted: sanity_check plus invariant 10
  // (a slot a request still holds then is a leak, e.g. on an abort or rollback path).
  void check_quiescent(SanityReport& report) const;
  // Invariant 6e as a query: "" when every component's state at `anchor` is on device (the
  // whole SWA window ending there, the anchor's Mamba state). init_load_back asserts it.
  std::string check_load_back_window(TreeNode& anchor) const;
  // [prefetch.finish_reference] "" when the tokens a finished prefetch read are in the tree
  // under `anchor` with a host copy up to where a node without one refuses the rest, and
  // `present` + `inserted` (what finish_prefetch accounted) is exactly that part. finish_prefetch
  // verifies it (KV_VERIFY) before it lets the prefetch go (hi_cache_sanity.cpp).
  std::string check_finished_prefetch(const PrefetchOp& op, const TreeNode& anchor, size_t present,
                                      size_t inserted) const;
  // [swa.path_slots] "" when `slots` (path_swa_slots of `node`) holds, for each node from the
  // root down to `node`, that node's device SWA slots, or one 0 per token where the node has
  // none (a tombstone): RequestKV::admit verifies the window it starts from (KV_VERIFY).
  std::string check_path_swa_slots(TreeNode& node, const IndexVector& slots) const;
  // [write_policy.write_through] "" unless, under write-through, a finished (non-chunked)
  // insert left a node of its path on device with no host copy, no write in flight and no
  // backup tried (a host pool too full for it): the policy backs up everything a request
  // caches, whatever hit counts say. insert verifies it (KV_VERIFY, hi_cache_sanity.cpp).
  std::string check_write_through_path(const InsertResult& result) const;
  // Invariant 6c: called after evicting to fit an allocation of `need` slots, with
  // `free_before` slots free when the eviction started and `free_after` now; counts the surplus
  // when the latest eviction's last victim was not needed, and (evict.needless, in both
  // eviction modes) an eviction that freed slots although `free_before` already covered
  // `need`. Every allocation path of the core calls it; public so a planted allocator (a test)
  // can too.
  void note_eviction(int64_t need, int64_t free_before, int64_t free_after);
  // The same for the host pool, after evict_host made room for `need` host tokens.
  void note_host_eviction(int64_t need, int64_t free_before);
  // Invariant 6d: an allocation may fail only after eviction ran out of victims (none left,
  // or one that could not be written back). begin_allocation() starts an allocation attempt;
  // note_failed_allocation() counts the failure unless the last eviction since then was
  // exhausted.
  void begin_allocation() { eviction_exhausted_ = false; }
  void note_failed_allocation();

 private:
  // Adds an eviction's surplus to evict.over_eviction's counter, except where SGLang's eviction
  // amounts are on: they evict past the shortfall by design (hi_cache_sanity.cpp).
  void tally_over_eviction(int64_t surplus);
  struct PendingWrite {
    LockRecord lock;
  };
  struct PendingLoad {
    LockRecord lock;
    std::vector<NodeId> protected_nodes;
  };
  struct PendingBackup {
    NodeId node;
    std::vector<PageDigest> hashes;
    IndexVector host_indices;
    size_t pages_done = 0;
  };

  void apply_write_policy(const std::vector<TreeNode*>& hit_nodes);
  int64_t backup_node(TreeNode& node);  // write_backup's body (its result is checked)
  LoadBackResult load_back(TreeNode& best_match_node, std::optional<int64_t> mem_quota);
  // The storage calls' bodies (their results are checked by the public wrappers).
  bool start_prefetch(RequestId rid, Namespace ns, TreeNode& anchor, std::span<const Token> tokens,
                      uint64_t now_tick);
  bool query_once();
  bool io_once();
  bool backup_once();
  void release_aux_insert(const AuxInsertValues& aux, const InsertResult& result);
  int64_t evict_aux(ComponentType type, int64_t slots);
  // False when the victim cannot go now (write-back without host room, a protected descendant).
  bool evict_device_victim(TreeNode& victim);
  void free_released(const ReleasedSlots& released);
  std::optional<IndexVector> alloc_side_host(SidePool& pool, int64_t slots);
  std::vector<PoolTransfer> backup_transfers(TreeNode& node);
  void check_side_pools(SanityReport& report) const;
  std::optional<IndexVector> alloc_host(int64_t tokens);
  void finish_write_ack(const TransferAck& ack);
  void finish_load_ack(const TransferAck& ack);
  bool evict_one_write_back(TreeNode& victim);
  // Whether a node under `node` is locked or host-protected.
  bool has_locked_descendant(const TreeNode& node) const;
  void compute_node_hashes(TreeNode& node);
  PageDigest last_hash(TreeNode& node);
  void enqueue_storage_backup(TreeNode& node);
  void drain_prefetch_hits();
  void revoke_prefetch(PrefetchOp& op);
  void finish_prefetch(PrefetchOp& op);
  void drop_prefetch(RequestId rid);
  uint64_t prefetch_timeout_ticks(const PrefetchOp& op) const;
  size_t page_payload_bytes() const;
  std::vector<std::byte> read_host_page(const IndexVector& slots, size_t first) const;
  void write_host_page(const IndexVector& slots, size_t first, std::span<const std::byte> page);
  void check_slot_ownership(SanityReport& report) const;
  // hi_cache_sanity_inflight.cpp: the in-flight operations' markers and protections,
  // recomputed from the operation lists that own them.
  void check_inflight(SanityReport& report) const;
  void check_write_markers(SanityReport& report) const;
  void check_protect_once(SanityReport& report) const;
  void check_load_sources(SanityReport& report) const;
  // Every node's chain, or (slice) those whose id ≡ slice->first (mod slice->second).
  void check_hash_chains(SanityReport& report,
                         std::optional<std::pair<uint64_t, uint64_t>> slice = std::nullopt) const;
  void sanity_check_parts(SanityReport& report,
                          std::optional<std::pair<uint64_t, uint64_t>> hash_slice) const;

  Backend& backend_;
  HiCacheOptions options_;
  StorageBackend* storage_;
  std::unique_ptr<PagedSlotAllocator> device_slots_;
  std::unique_ptr<PagedSlotAllocator> host_slots_;
  std::unique_ptr<DeviceKVPool> device_pool_;
  std::unique_ptr<HostKVPool> host_pool_;
  std::unique_ptr<RadixTree> tree_;
  std::unique_ptr<CacheController> controller_;
  std::array<std::unique_ptr<SidePool>, kComponentTypesMax> side_;  // by ComponentType
  std::unique_ptr<RequestSlots> request_slots_;                     // device slots held by requests
  std::map<NodeId, PendingWrite> pending_writes_;
  std::map<NodeId, PendingLoad> pending_loads_;
  std::map<RequestId, PrefetchOp> prefetches_;
  std::map<RequestId, int64_t> prefetch_loaded_;
  std::vector<PendingBackup> backups_;  // FIFO
  std::vector<NodeId> finished_backups_;
  int64_t prefetch_tokens_occupied_ = 0;
  friend struct HiCacheTestPeer;   // tests plant stale counters to exercise the references
  friend struct InflightTestPeer;  // tests/core/cache/inflight_markers_test.cpp plants state
  int64_t segv_at_insert_ = 0;     // test-only crash hook (hi_cache.cpp insert); 0 = off
  int64_t inserts_ = 0;
  int64_t last_victim_ = 0;          // slots the last victim of the latest eviction freed (6c)
  int64_t last_host_victim_ = 0;     // the same for the latest evict_host
  bool eviction_exhausted_ = false;  // the latest eviction stopped short of its target (6d)
  int issued_early_producer_ = -1;   // loads a read issued before ready_to_load_host_cache
  HiCacheStats stats_;
};

}  // namespace kvsim
