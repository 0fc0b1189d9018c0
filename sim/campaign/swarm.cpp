#include "sim/campaign/swarm.h"

#include <algorithm>
#include <initializer_list>

#include "sim/base/rng.h"
#include "sim/campaign/covering_array.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {
namespace {

template <typename T>
T pick(Rng& rng, std::initializer_list<T> options) {
  return *(options.begin() + rng.below(options.size()));
}

int64_t round_up(int64_t n, int64_t page) {
  return std::max<int64_t>(page, (n + page - 1) / page * page);
}

// The longest request the workload makes (validate() sizes the device pool from it).
int64_t largest_request(const WorkloadOptions& w) {
  return w.system_prompt_tokens + w.prompt_max * 4 + w.output_max;
}

// The workload kind of a tree shape (covering array factor tree_shape): wide fan-out under
// shared system prompts, deep chains of turns, forks and adversarial shapes, a mix, or page
// mosaics (whole pages recombined: divergences inside nodes whose children begin with the
// diverging page).
WorkloadKind draw_kind(Rng& rng, size_t tree_shape) {
  switch (tree_shape) {
    case 0:
      return WorkloadKind::kSharedPrompt;
    case 1:
      return pick(rng, {WorkloadKind::kMultiTurn, WorkloadKind::kAgentic});
    case 2:
      return pick(rng,
                  {WorkloadKind::kFork, WorkloadKind::kAdversarial, WorkloadKind::kAdversarial});
    case 3:
      return pick(rng, {WorkloadKind::kMixed, WorkloadKind::kUniform});
    default:
      return WorkloadKind::kPageMosaic;
  }
}

void draw_workload(Rng& rng, const std::vector<size_t>& row, WorkloadOptions& w) {
  w.kind = draw_kind(rng, row[kFactorTreeShape]);
  w.requests = rng.between(20, 120);
  w.arrival_rate = pick(rng, {0.1, 0.5, 1.0, 2.0, 4.0});
  w.prompt_min = rng.between(1, 16);
  w.prompt_max = w.prompt_min + rng.between(0, rng.chance(0.2) ? 120 : 40);
  w.output_min = rng.between(1, 4);
  // Long decodes under retract pressure, sometimes.
  w.output_max = w.output_min + (rng.chance(0.2) ? rng.between(32, 160) : rng.between(0, 20));
  w.system_prompts = rng.between(1, 6);
  w.system_prompt_tokens = rng.between(1, 96);
  w.sessions = rng.between(1, 16);
  w.namespaces = row[kFactorNamespaces] == 0 ? 1 : rng.between(2, 4);
  w.cross_namespace = row[kFactorNamespaces] == 2;
  // Small vocabularies make unrelated prompts share prefixes of a few tokens.
  w.vocab = rng.chance(0.3) ? rng.between(2, 12) : (rng.chance(0.3) ? rng.between(13, 500) : 50000);
  w.burst = rng.chance(0.3) ? rng.between(2, 16) : 1;
}

// The storage tier as users configure it (covering array factor storage: none, memory,
// memory_budget, file_budget): SGLang's defaults or small I/O batches, short prefetch timeouts,
// a tight prefetch share of the host pool; a byte budget smaller than the working set, so the
// store evicts (storage.budget_order); a file store in a private temporary directory.
void draw_storage(Rng& rng, size_t level, Scenario& s) {
  HiCacheOptions& c = s.cache;
  s.storage = level != 0;
  if (level == 0) return;
  if (level >= 2) {
    // 8 to 128 (memory) or 512 (file) stored pages, in steps of two.
    const auto payload = static_cast<int64_t>(page_payload_bytes(s));  // one stored page
    s.store.capacity_bytes = rng.between(4, level == 2 ? 64 : 256) * 2 * payload;
    // Now and then a budget at the edge of one stored page (valid settings): below it every
    // write is refused; at one page, or one and a half, the store holds a single page and
    // evicts at every write.
    if (Rng tiny = rng_stream(s.seed, "swarm.tiny_store"); tiny.chance(0.15))
      s.store.capacity_bytes = pick<int64_t>(tiny, {payload / 2, payload, payload + payload / 2});
  }
  if (level == 3) s.store.backend = StorageKind::kFile;
  if (rng.chance(0.5)) return;  // SGLang's defaults otherwise
  c.storage_batch_pages = pick<int64_t>(rng, {1, 2, 3, 8, 128});
  c.prefetch_capacity_fraction = pick(rng, {0.1, 0.25, 0.5, 1.0});
  if (rng.chance(0.5)) {
    c.prefetch_timeout_base_ticks = pick<uint64_t>(rng, {0, 1, 5, 50, 500});
    c.prefetch_timeout_per_ki_token_ticks = pick<uint64_t>(rng, {0, 10, 100});
    c.prefetch_timeout_max_ticks = pick<uint64_t>(rng, {10, 1000, 30000});
  }
}

// Page sizes by covering array level: one, odd, a small power of two, large.
int32_t draw_page_size(Rng& rng, size_t level) {
  switch (level) {
    case 0:
      return 1;
    case 1:
      return pick(rng, {3, 5});
    case 2:
      return pick(rng, {2, 4, 4, 8});
    default:
      return pick(rng, {16, 32, 64});
  }
}

}  // namespace

void repair(Scenario& s) {
  HiCacheOptions& c = s.cache;
  WorkloadOptions& w = s.workload;
  SchedulerOptions& o = s.scheduler;
  c.page_size = std::clamp<int32_t>(c.page_size, 1, 128);
  const int64_t page = c.page_size;
  w.prompt_min = std::max<int64_t>(w.prompt_min, 1);
  w.prompt_max = std::max(w.prompt_max, w.prompt_min);
  w.output_min = std::max<int64_t>(w.output_min, 1);
  w.output_max = std::max(w.output_max, w.output_min);
  if (o.mode == SchedulerMode::kPd) {
    c.swa_window_tokens = 0;
    c.mamba_device_states = 0;
    s.storage = false;
  } else {
    s.sparse_index_bytes_per_page = 0;
  }
  s.sparse_index_bytes_per_page = s.sparse_index_bytes_per_page / 8 * 8;
  if (!c.hierarchical) s.storage = false;
  c.device_tokens = round_up(std::max(c.device_tokens, largest_request(w)), page);
  c.host_tokens = round_up(c.host_tokens, page);
  if (c.has_swa()) {
    c.swa_window_tokens = std::max<int64_t>(c.swa_window_tokens, page);
    if (c.swa_device_tokens != 0) {
      c.swa_device_tokens = round_up(std::max(c.swa_device_tokens, largest_request(w)), page);
    }
    if (c.swa_host_tokens != 0) c.swa_host_tokens = round_up(c.swa_host_tokens, page);
  } else {
    c.swa_window_tokens = c.swa_device_tokens = c.swa_host_tokens = 0;
  }
  if (c.has_mamba()) {
    c.mamba_device_states = std::max(c.mamba_device_states, o.max_running + 1);
  } else {
    c.mamba_host_states = 0;
  }
}

Scenario draw_scenario(uint64_t seed) {
  Rng rng = rng_stream(seed, "swarm");
  Scenario s = default_scenario();
  s.name = "swarm";
  s.description = "kvsim hunt: a configuration drawn from swarm seed " + std::to_string(seed);
  s.seed = seed;
  HiCacheOptions& c = s.cache;
  SchedulerOptions& o = s.scheduler;

  // The feature settings the covering array gives this seed (covering_array.h); the rest is
  // drawn on the seed's own coins.
  const std::vector<size_t>& row = swarm_row(seed);
  const size_t components = row[kFactorComponents];  // full, swa, mamba, swa_mamba, pd
  o.mode = components == 4 ? SchedulerMode::kPd : SchedulerMode::kNormal;
  draw_workload(rng, row, s.workload);
  c.page_size = draw_page_size(rng, row[kFactorPage]);
  // Each on its own stream, so adding the draw moved no other setting of any seed:
  // a real model's vocabulary (token ids past 2^16, as every storage key encodes them), and
  // pages of 128 tokens (a page's hash input past one 256-byte chunk) with prompts of
  // several such pages.
  if (Rng v = rng_stream(seed, "swarm.vocab"); v.chance(0.15)) {
    s.workload.vocab = pick<int64_t>(v, {128256, 151936, 256000});
  }
  if (s.workload.namespaces > 1 && rng_stream(seed, "swarm.wide_namespaces").chance(0.5)) {
    s.workload.wide_namespace_ids = true;  // tenants named by 63-bit ids, as extra_keys hash
  }
  if (row[kFactorPage] == 3 && rng_stream(seed, "swarm.page128").chance(0.25)) {
    c.page_size = 128;
    s.workload.prompt_max = std::max(s.workload.prompt_max, s.workload.prompt_min + 3 * 128);
  }
  const int64_t page = c.page_size;
  if (s.workload.kind == WorkloadKind::kPageMosaic) {
    // Prompts of several pages at any page size; an alphabet of 2 to 8 pages, on its own
    // stream (no other draw of the seed moves).
    s.workload.prompt_max = std::max(s.workload.prompt_max, s.workload.prompt_min + 3 * page);
    Rng alphabet = rng_stream(seed, "swarm.page_alphabet");
    s.workload.page_alphabet = pick<int64_t>(alphabet, {2, 2, 3, 3, 4, 6, 8});
  }
  c.layer_count = static_cast<int32_t>(rng.between(1, 3));
  c.item_bytes = pick<size_t>(rng, {8, 16, 24});
  // A storage tier needs the host tier.
  c.hierarchical = row[kFactorStorage] != 0 || !rng.chance(0.08);
  c.host_layout = rng.chance(0.5) ? KVLayout::kPageFirst : KVLayout::kLayerFirst;
  constexpr WritePolicy kPolicies[] = {
      WritePolicy::kWriteThrough, WritePolicy::kWriteThroughSelective, WritePolicy::kWriteBack};
  c.write_policy = kPolicies[row[kFactorWritePolicy]];
  c.eviction_policy = row[kFactorEviction] == 0 ? EvictionPolicy::kLru : EvictionPolicy::kLfu;
  c.load_back_threshold_tokens = pick<int64_t>(rng, {0, 1, page, 4, 8, 64});
  // On its own stream, so adding the draw moved no other setting of any seed.
  c.sglang_eviction_amounts = rng_stream(seed, "swarm.eviction_amounts").chance(0.25);

  o.max_running = pick<int64_t>(rng, {1, 2, 4, 8, 16});
  o.chunk_tokens = pick<int64_t>(rng, {1, page, 7, 32, 64, 1 << 20});
  // At least 2: with 0 or 1 the scheduler model (no decaying new-token ratio, unlike SGLang)
  // can admit more than it can decode and retract-thrash without end on a starved pool — a
  // liveness failure of the model, not of the core.
  o.decode_reserve_tokens = pick<int64_t>(rng, {2, 4, 8});
  o.metadata_slots = rng.between(1, 16);
  o.cpu_copy_chunk_tokens = pick<int64_t>(rng, {1, 7, 16, 8192});
  o.load_back = !rng.chance(0.1);
  o.prefetch = !rng.chance(0.1);
  o.batch_load_backs = rng.chance(0.5);
  o.load_back_quota = rng.chance(0.3);

  // Pools (covering array factor pressure): starved (the largest request fits about once),
  // roomy, or a host pool smaller than the device pool.
  const int64_t largest = largest_request(s.workload);
  const size_t pressure = row[kFactorPressure];
  const double device_factor = pressure == 0   ? pick(rng, {1.0, 1.0, 1.3})
                               : pressure == 1 ? pick(rng, {2.0, 4.0, 8.0})
                                               : pick(rng, {1.0, 1.3, 2.0, 4.0, 8.0});
  c.device_tokens =
      round_up(static_cast<int64_t>(static_cast<double>(largest) * device_factor), page);
  const double host_factor =
      pressure == 2 ? pick(rng, {0.1, 0.25, 0.5}) : pick(rng, {1.0, 2.0, 4.0});
  c.host_tokens =
      round_up(static_cast<int64_t>(static_cast<double>(c.device_tokens) * host_factor), page);

  // The prefetch threshold (covering array factor prefetch_threshold): 0 (a valid edge: any hit
  // of a page is worth a prefetch), within one page, or beyond it. Drawn for PD too, where no
  // storage reads it, so every row's setting shows in its scenario.
  const size_t threshold = row[kFactorPrefetchThreshold];
  c.prefetch_threshold_tokens =
      threshold == 0 ? pick<int64_t>(rng, {0, 0})
      : threshold == 1
          ? pick<int64_t>(rng, {1, page})
          : pick<int64_t>(rng, {std::max<int64_t>(16, 2 * page), std::max<int64_t>(256, 4 * page)});

  // Components.
  if (o.mode == SchedulerMode::kPd) {
    if (rng.chance(0.6)) s.sparse_index_bytes_per_page = pick<int64_t>(rng, {8, 32, 64});
  } else {
    if (components == 1 || components == 3) {
      // Mostly a few pages; sometimes longer than most prompts, so a window reaches the root.
      c.swa_window_tokens = rng.chance(0.25)
                                ? rng.between(32, 512)
                                : rng.between(page, std::max<int64_t>(page, 4 * page + 3));
      c.swa_device_tokens = rng.chance(0.5) ? 0 : c.device_tokens / 2;
      c.swa_host_tokens = rng.chance(0.5) ? 0 : c.host_tokens / 2;
    }
    if (components >= 2) {
      c.mamba_device_states = o.max_running + 1 + rng.between(0, 2 * o.max_running);
      c.mamba_host_states = rng.chance(0.4) ? 0 : rng.between(1, 2 * c.mamba_device_states);
      c.mamba_layer_count = static_cast<int32_t>(rng.between(1, 3));
      c.mamba_state_bytes = pick<size_t>(rng, {8, 32, 64});
    }
    c.prefetch_stop_policy =
        pick(rng, {PrefetchStopPolicy::kBestEffort, PrefetchStopPolicy::kWaitComplete,
                   PrefetchStopPolicy::kTimeout});
    draw_storage(rng, row[kFactorStorage], s);
  }

  // Faults (covering array factor faults): off, sparse (few sites, rarely fired), dense.
  const size_t faults = row[kFactorFaults];
  s.faults.enabled = faults != 0;
  s.faults.site_probability = faults == 1 ? 0.25 : pick(rng, {0.5, 1.0});
  s.faults.fire_probability = faults == 1 ? pick(rng, {0.05, 0.2}) : pick(rng, {0.2, 0.5});
  s.check.full_every = 1;
  s.check.content = true;
  repair(s);
  return s;
}

std::vector<std::string> features(const Scenario& s) {
  const HiCacheOptions& c = s.cache;
  const WorkloadOptions& w = s.workload;
  std::vector<std::string> f;
  auto tag = [&](bool on, const char* name) {
    if (on) f.emplace_back(name);
  };
  tag(c.page_size == 1, "page1");
  tag(c.page_size > 1 && (c.page_size & (c.page_size - 1)) != 0, "page_odd");
  tag(c.page_size >= 16, "page>=16");
  tag(c.page_size > 64, "page>64");
  tag(!c.hierarchical, "flat");
  tag(c.host_tokens < c.device_tokens, "host<device");
  tag(c.host_layout == KVLayout::kLayerFirst, "layer_first");
  tag(c.write_policy == WritePolicy::kWriteBack, "write_back");
  tag(c.write_policy == WritePolicy::kWriteThroughSelective, "write_through_selective");
  tag(c.eviction_policy == EvictionPolicy::kLfu, "lfu");
  tag(c.hierarchical && c.sglang_eviction_amounts, "sglang_amounts");
  tag(c.has_swa(), "swa");
  tag(c.has_mamba(), "mamba");
  tag(s.scheduler.mode == SchedulerMode::kPd, "pd");
  tag(s.scheduler.batch_load_backs, "batched_load_backs");
  tag(s.scheduler.load_back_quota, "load_back_quota");
  tag(s.sparse_index_bytes_per_page > 0, "sparse_index");
  tag(s.storage, "storage");
  tag(s.storage && s.store.capacity_bytes > 0, "storage_budget");
  tag(s.storage && s.store.backend == StorageKind::kFile, "file_store");
  tag(s.storage && c.storage_batch_pages < 128, "small_io_batches");
  tag(s.storage && c.prefetch_timeout_base_ticks < 2000, "short_prefetch_timeout");
  tag(c.has_swa() && c.swa_window_tokens >= 32, "long_window");
  tag(w.namespaces > 1, "namespaces>1");
  tag(w.cross_namespace, "cross_namespace");
  tag(w.namespaces > 1 && w.wide_namespace_ids, "wide_namespace_ids");
  tag(w.vocab <= 12, "small_vocab");
  tag(w.vocab > 65536, "large_vocab");
  tag(w.burst > 1, "burst");
  tag(w.kind == WorkloadKind::kFork || w.kind == WorkloadKind::kAdversarial, "fork");
  tag(w.kind == WorkloadKind::kPageMosaic, "page_mosaic");
  tag(w.output_max >= 32, "long_decode");
  tag(c.device_tokens < 2 * (w.system_prompt_tokens + 4 * w.prompt_max + w.output_max),
      "starved_device");
  tag(s.faults.enabled, "faults");
  return f;
}

}  // namespace kvsim::sim
