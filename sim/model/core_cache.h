// KvsimCoreCache: kvsim's own core as the cache under test — HiCache on the deterministic CPU
// backend, with RequestKV for the scheduler's side of each request, the storage tier, the
// sparse index buffer and (PD decode) MetadataBuffers and CPU copies.
//
// Its checks (what the executor reported before the seam, unchanged):
//  - after every op: backend stream-lifetime violations, the storage contract and statistics,
//    pool conservation ("slots.conservation": allocated device tokens == tree device tokens +
//    request-held tokens), all O(1);
//  - every `full_every` ops (or amortized, see CheckOptions): HiCache::sanity_check, then
//    (PD mode) MetadataBuffers::sanity_check and the backend's CachingAllocator::check;
//  - on every model read (admit, start_loads, resume): the bytes of every pool the model reads —
//    full KV of the prefix, the SWA window, the Mamba state, the sparse index — against the
//    content oracle. Reads go through the compute stream, in stream order, into pinned scratch
//    memory, so a read that does not wait for a load-back reads what was there before and fails;
//  - quiescence: no locks, no host protection, no pending transfers or prefetches, no queued op.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"
#include "core/pools/cpu_copy.h"
#include "core/pools/metadata_buffers.h"
#include "core/pools/sparse_index_buffer.h"
#include "sim/base/rng.h"
#include "sim/config/scenario.h"
#include "sim/model/cache_under_test.h"

namespace kvsim::sim {

class KvsimCoreCache final : public CacheUnderTest {
 public:
  explicit KvsimCoreCache(CacheContext ctx);
  ~KvsimCoreCache() override;

  std::vector<uint32_t> progress_streams() const override;
  size_t stream_count() const override { return backend_.stream_count(); }
  bool storage_enabled() const override { return cache_->storage_enabled(); }
  bool storage_reads_pending() const override;
  int64_t admission_budget() const override;
  bool loads_queued() const override { return cache_->controller().queued_loads() > 0; }

  bool arrive(SimRequest& r, uint64_t now) override;
  std::optional<int64_t> prefetch_done(SimRequest& r, uint64_t now) override;
  std::optional<AdmitDecision> admit(SimRequest& r, bool load_back, bool defer_load,
                                     std::optional<int64_t> quota) override;
  void start_loads() override;
  bool compute(SimRequest& r, size_t target, bool oom) override;
  void finish(SimRequest& r) override;
  // finish() of a prefill's middle chunk, inserted as SGLang's cache_unfinished_req(chunked=True)
  // inserts it: no hit counts, no write-through (the differential's shadow, normal mode only).
  void finish_chunk(SimRequest& r);
  // When the forward waits, run the load stream (what it waits on: a load-back) before any
  // other, as a device synchronizing on the load's event does; off, a runnable stream is drawn
  // at random (the core target's model). The differential's shadow turns it on.
  void set_compute_waits_on_loads_only(bool on) { compute_waits_on_loads_only_ = on; }
  // An inject of target 0 leaves the main host pool more room than the device pool has, where
  // there is no storage tier: what the SGLang target's driver does (it has no holder of host
  // pages outside its tree then; progress_calls.py, _host_hold_limit). The differential's shadow.
  void set_host_hold_leaves_device_room(bool on) { host_hold_leaves_device_room_ = on; }
  void retract(SimRequest& r) override;
  void abort(SimRequest& r) override;
  void offload(SimRequest& r) override;
  bool resume(SimRequest& r) override;
  void verify_resumed(SimRequest& r) override;

  void poll() override { cache_->check_hicache_events(); }
  void flush() override { cache_->flush(); }
  int64_t step(uint32_t stream, int64_t n) override;
  OpOutcome storage(uint32_t worker, int64_t fault) override;
  OpOutcome inject(const Op& op) override;
  void release_injected() override;

  bool read_prefix(SimRequest& r) override;
  void check_after_op(bool may_change_cache) override;
  void check_quiescent() override;
  StorageRunStats storage_stats() const override;

  // The core itself, for tests, pictures and timelines.
  HiCache& cache() { return *cache_; }
  CpuBackend& backend() { return backend_; }
  // PD mode's metadata slots (null outside PD mode).
  MetadataBuffers* metadata_buffers() { return metadata_.get(); }
  // The store as the core sees it (null without a storage tier); faults are armed only inside
  // a storage op, so reads from outside one see the store as it is.
  StorageBackend* storage_backend() { return storage_ ? storage_->backend() : nullptr; }

 private:
  // The core's side of one request.
  struct CoreRequest {
    std::unique_ptr<RequestKV> kv;
    // PD decode: the metadata the prefill side sent (a copy, seed 003), and the CPU copy that
    // holds the request's KV and side buffers while it is retracted.
    MetadataSnapshot metadata;
    std::optional<CpuCopy> cpu_copy;
    size_t offloaded_slots = 0;
  };
  CoreRequest& state(const SimRequest& r) { return requests_[r.rid]; }
  bool pd() const { return scenario_.scheduler.mode == SchedulerMode::kPd; }
  void fail(std::string invariant, std::string detail) {
    ctx_.fail(std::move(invariant), std::move(detail));
  }

  void forward(SimRequest& r, RequestKV& kv, size_t from, size_t to);
  // Runs the compute stream to empty; when it waits on another stream, steps that one.
  void drive_compute();
  // How a model read reaches the pools (core_cache_reads.cpp): copies on the compute stream,
  // run to completion (admission), or the bytes as they are now, adding no stream op (finish).
  enum class ReadPath : uint8_t { kComputeStream, kInPlace };
  struct ModelRead {
    ReadPath path = ReadPath::kComputeStream;
    const char* what = "";  // "full KV", "SWA window", ...
    const char* when = "";  // appended to a failure's detail
  };
  // Items `slots` (all layers) of `view`, layer-major, read by `path`.
  const std::byte* gather(const KVPoolView& view, std::span<const SlotIndex> slots, ReadPath path);
  // Reads items `slots` (all layers) of `view` and compares item i with the oracle's bytes of
  // position positions[i], or of position i when `positions` is empty (kind: ContentKind).
  bool read_pool_range(const KVPoolView& view, std::span<const SlotIndex> slots,
                       std::span<const size_t> positions, const SimRequest& r, int kind,
                       const ModelRead& read);
  // Positions 0..r.computed-1 (and the SWA window before r.computed, the index pages, the
  // Mamba state checkpoint of position state_at - 1 when state_at > 0); false after a failure.
  bool read_sequence(const SimRequest& r, size_t state_at, ReadPath path);
  // The last forward's read, at finish: r's whole computed sequence, in place (no stream op,
  // so the run is the same with it), when the compute stream has nothing queued.
  void read_final(const SimRequest& r);
  // The host copies on `r`'s path that a finished prefetch just filled from storage, read
  // against the content oracle (content: "host KV after prefetch"): a page the store returned
  // damaged is caught when it arrives, not only if a later request loads it back. Nodes whose
  // host write is still in flight are skipped; false after a failure.
  bool check_prefetched_host(const SimRequest& r);
  Block& scratch(size_t bytes);
  std::string storage_stats_disagree() const;
  // The full check's part outside HiCache: metadata slots (PD) and the caching allocator.
  void check_side_structures();
  MetadataRecord expected_metadata(const SimRequest& r) const;
  bool check_metadata(const SimRequest& r);
  CpuCopyPools cpu_copy_pools();

  CacheContext ctx_;
  const Scenario& scenario_;
  Rng gpu_rng_;
  CpuBackend backend_;
  std::unique_ptr<StorageTier> storage_;  // when the scenario has a storage tier
  std::unique_ptr<HiCache> cache_;
  std::unique_ptr<SparseIndexBuffer> sparse_;  // when the scenario has one
  std::unique_ptr<MetadataBuffers> metadata_;  // PD mode
  std::map<RequestId, CoreRequest> requests_;
  int64_t since_full_check_ = 0;
  bool compute_waits_on_loads_only_ = false;
  bool host_hold_leaves_device_room_ = false;
  Block scratch_;
  std::vector<std::byte> expected_scratch_;  // read_pool_range's expected bytes
  std::vector<std::byte> in_place_scratch_;  // gather's bytes on ReadPath::kInPlace
  int64_t host_hold_limit() const;
  // Pages an inject op holds until the end of the next op: (allocator, pages).
  std::vector<std::pair<PagedSlotAllocator*, IndexVector>> injected_;
};

}  // namespace kvsim::sim
