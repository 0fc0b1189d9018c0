// KvsimCoreCache: the request protocol and the progress the simulator owns, on kvsim's core.
#include "sim/model/core_cache.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "core/common/assert.h"
#include "sim/model/content_oracle.h"

namespace kvsim::sim {

KvsimCoreCache::KvsimCoreCache(CacheContext ctx)
    : ctx_(std::move(ctx)),
      scenario_(ctx_.scenario),
      gpu_rng_(rng_stream(ctx_.seed, "executor.gpu")) {
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
}

KvsimCoreCache::~KvsimCoreCache() {
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

std::vector<uint32_t> KvsimCoreCache::progress_streams() const {
  const CacheController& controller = cache_->controller();
  return {backend_.compute_stream(), controller.write_stream(), controller.load_stream()};
}

bool KvsimCoreCache::storage_reads_pending() const {
  for (const auto& [rid, op] : cache_->prefetches()) {
    if (op.state == PrefetchOp::State::kTransfer && !op.terminated &&
        op.completed_tokens < op.hit_tokens) {
      return true;
    }
  }
  return false;
}

int64_t KvsimCoreCache::admission_budget() const {
  return cache_->available_device_size() + cache_->tree().evictable_size();
}

bool KvsimCoreCache::arrive(SimRequest& r, uint64_t now) {
  if (!cache_->storage_enabled() || !scenario_.scheduler.prefetch) return false;
  MatchResult m = cache_->match_prefix(r.ns, r.tokens);
  return cache_->prefetch_from_storage(r.rid, r.ns, *m.last_host_node, r.tokens, now);
}

std::optional<int64_t> KvsimCoreCache::prefetch_done(SimRequest& r, uint64_t now) {
  if (!cache_->check_prefetch_progress(r.rid, now)) return std::nullopt;
  const int64_t loaded = cache_->pop_prefetch_loaded_tokens(r.rid);
  if (loaded > 0 && scenario_.check.content) check_prefetched_host(r);
  return loaded;
}

std::optional<AdmitDecision> KvsimCoreCache::admit(SimRequest& r, bool load_back, bool defer_load,
                                                   std::optional<int64_t> quota) {
  auto kv = std::make_unique<RequestKV>(*cache_, r.ns);
  const int64_t loaded_before = cache_->stats().load_back_tokens;
  // PD decode receives the KV from a prefill instance: no prefix matching on this side.
  std::optional<AdmitOutcome> out = kv->admit(r.tokens, load_back, /*use_prefix_cache=*/!pd(),
                                              /*start_load=*/!defer_load, quota);
  if (!out) return std::nullopt;
  // RequestKV's contract: without allow_load_back nothing comes back from host.
  if (!load_back &&
      (out->host_hit_tokens != 0 || cache_->stats().load_back_tokens != loaded_before)) {
    fail("admit.contract",
         "request " + std::to_string(r.rid) + " was admitted without load-back, yet " +
             std::to_string(cache_->stats().load_back_tokens - loaded_before) +
             " token(s) were loaded back (host hit " + std::to_string(out->host_hit_tokens) + ")");
  }
  // The prefix the request starts from is its device hit plus what came back from host.
  if (out->device_hit_tokens + out->host_hit_tokens != static_cast<int64_t>(kv->owned_from()) ||
      out->device_hit_tokens < 0 || out->host_hit_tokens < 0) {
    fail("admit.contract",
         "request " + std::to_string(r.rid) + " was admitted with a device hit of " +
             std::to_string(out->device_hit_tokens) + " and a host hit of " +
             std::to_string(out->host_hit_tokens) + " token(s), but starts from a prefix of " +
             std::to_string(kv->owned_from()));
  }
  CoreRequest& cr = state(r);
  if (pd()) {
    // The prefill side publishes the request's metadata; the decode side reads it once and
    // the slot goes back to the pool (the request keeps its copy).
    std::optional<MetadataSlot> slot = metadata_->alloc();
    if (!slot) {
      kv->abort();
      return std::nullopt;
    }
    metadata_->set_buf(*slot, expected_metadata(r));
    cr.metadata = metadata_->get_buf(*slot);
    metadata_->free(*slot);
  }
  const size_t owned_from = kv->owned_from();
  cr.kv = std::move(kv);
  return AdmitDecision{.device_hit_tokens = out->device_hit_tokens,
                       .host_hit_tokens = out->host_hit_tokens,
                       .owned_from = owned_from};
}

void KvsimCoreCache::start_loads() {
  // SGLang's forward: one ready_to_load_host_cache for the batch, then every layer waits.
  cache_->wait_for_load(cache_->ready_to_load_host_cache());
}

bool KvsimCoreCache::compute(SimRequest& r, size_t target, bool oom) {
  RequestKV& kv = *state(r).kv;
  if (oom || !kv.extend(target)) return false;
  forward(r, kv, r.computed, target);
  drive_compute();
  return true;
}

void KvsimCoreCache::finish(SimRequest& r) {
  CoreRequest& cr = state(r);
  read_final(r);
  if (pd()) {
    check_metadata(r);
    cr.kv->abort();  // a decode instance releases its slots; nothing goes into the tree
  } else {
    cr.kv->finish(std::span<const Token>(r.tokens).first(r.computed));
  }
  requests_.erase(r.rid);
}

void KvsimCoreCache::finish_chunk(SimRequest& r) {
  state(r).kv->finish(std::span<const Token>(r.tokens).first(r.computed), /*chunked=*/true);
  requests_.erase(r.rid);
}

void KvsimCoreCache::retract(SimRequest& r) {
  // Cache what was computed (the resumed request will match it), free the rest.
  CoreRequest& cr = state(r);
  cr.kv->finish(std::span<const Token>(r.tokens).first(r.computed));
  cr.kv.reset();
}

void KvsimCoreCache::abort(SimRequest& r) {
  auto it = requests_.find(r.rid);
  if (it != requests_.end()) {
    if (r.state == RequestState::kRunning) it->second.kv->abort();
    requests_.erase(it);  // an offloaded request's CPU copy goes with it
  }
  if (r.prefetching) cache_->release_aborted_request(r.rid);
}

int64_t KvsimCoreCache::step(uint32_t stream, int64_t n) {
  int64_t ran = 0;
  while (ran < n && backend_.step(stream))
    ++ran;
  return ran;
}

OpOutcome KvsimCoreCache::storage(uint32_t worker, int64_t fault) {
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
      return OpOutcome{.why = "no storage worker " + std::to_string(worker)};
  }
  return {true, did};
}

void KvsimCoreCache::drive_compute() {
  const StreamId compute = backend_.compute_stream();
  while (backend_.pending_ops(compute) > 0) {
    if (backend_.step(compute)) continue;
    if (compute_waits_on_loads_only_ && backend_.step(cache_->controller().load_stream())) continue;
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

void KvsimCoreCache::forward(SimRequest& r, RequestKV& kv, size_t from, size_t to) {
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
  write_runs(cache_->device_pool(), kv.kv(), ContentKind::kFull);
  if (sparse_) {  // indexer keys of each page this forward completes
    const auto page = static_cast<size_t>(scenario_.cache.page_size);
    bytes.assign(sparse_->bytes_per_page(), std::byte{0});
    for (size_t end = (from / page + 1) * page; end <= to; end += page) {
      const int64_t p = kv.kv()[end - page] / static_cast<SlotIndex>(page);
      for (int32_t layer = 0; layer < sparse_->layer_count(); ++layer) {
        fill_item(r.prefix_hash[end - 1], end - 1, layer, ContentKind::kIndexer, bytes);
        sparse_->write_page_async(compute, layer, p, bytes);
      }
    }
  }
  if (SidePool* swa = cache_->side_pool(ComponentType::kSwa)) {
    write_runs(swa->device_pool(), *kv.swa(), ContentKind::kSwa);
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
      backend_.upload_async(compute, view.block, view.offset(layer, *kv.mamba_state()), bytes,
                            "forward state");
    }
  }
}

OpOutcome KvsimCoreCache::inject(const Op& op) {
  if (!cache_->options().hierarchical && op.target == 0) return {};
  // Targets 0 and 1 leave `n` pages free (0: none): a pool full, or nearly full.
  auto hold = [&](PagedSlotAllocator& slots, int64_t limit = INT64_MAX) {
    const int64_t free = std::min(slots.available_size() - op.n * slots.page_size(), limit);
    if (free <= 0) return;
    std::optional<IndexVector> pages = slots.alloc(free);
    KV_ASSERT(pages.has_value(), "a pool's free pages could not be allocated");
    injected_.emplace_back(&slots, std::move(*pages));
  };
  switch (op.target) {
    case 0:  // host pools full: the main one and the side pools'
      hold(cache_->host_slots(), host_hold_limit());
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

int64_t KvsimCoreCache::host_hold_limit() const {
  if (!host_hold_leaves_device_room_ || cache_->storage_enabled()) return INT64_MAX;
  const PagedSlotAllocator& host = cache_->host_slots();
  int64_t held = 0;
  for (const auto& [slots, pages] : injected_) {
    if (slots == &host) held += static_cast<int64_t>(pages.size());
  }
  const int64_t room =
      host.capacity() - cache_->device_slots().capacity() - host.page_size() - held;
  return std::max<int64_t>(0, room / host.page_size() * host.page_size());
}

void KvsimCoreCache::release_injected() {
  backend_.delay_event_queries(0);
  // Last held, first given back.
  while (!injected_.empty()) {
    auto [slots, pages] = std::move(injected_.back());
    injected_.pop_back();
    slots->free(pages);
  }
}

}  // namespace kvsim::sim
