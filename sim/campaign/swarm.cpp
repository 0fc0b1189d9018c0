#include "sim/campaign/swarm.h"

#include <algorithm>
#include <initializer_list>

#include "sim/base/rng.h"

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

void draw_workload(Rng& rng, WorkloadOptions& w) {
  w.kind = pick(
      rng, {WorkloadKind::kMixed, WorkloadKind::kSharedPrompt, WorkloadKind::kMultiTurn,
            WorkloadKind::kAgentic, WorkloadKind::kUniform, WorkloadKind::kFork,
            WorkloadKind::kAdversarial, WorkloadKind::kAdversarial, WorkloadKind::kAdversarial});
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
  w.namespaces = rng.chance(0.5) ? 1 : rng.between(2, 4);
  w.cross_namespace = w.namespaces > 1 && rng.chance(0.6);
  // Small vocabularies make unrelated prompts share prefixes of a few tokens.
  w.vocab = rng.chance(0.3) ? rng.between(2, 12) : (rng.chance(0.3) ? rng.between(13, 500) : 50000);
  w.burst = rng.chance(0.3) ? rng.between(2, 16) : 1;
}

// The storage tier as users configure it: SGLang's defaults, or a byte budget smaller than the
// working set, small I/O batches, short prefetch timeouts, a tight prefetch share of the host
// pool; a file store (a private temporary directory) sometimes.
void draw_storage(Rng& rng, Scenario& s) {
  HiCacheOptions& c = s.cache;
  if (rng.chance(0.5)) return;  // the defaults
  c.storage_batch_pages = pick<int64_t>(rng, {1, 2, 3, 8, 128});
  c.prefetch_capacity_fraction = pick(rng, {0.1, 0.25, 0.5, 1.0});
  if (rng.chance(0.5)) {
    c.prefetch_timeout_base_ticks = pick<uint64_t>(rng, {0, 1, 5, 50, 500});
    c.prefetch_timeout_per_ki_token_ticks = pick<uint64_t>(rng, {0, 10, 100});
    c.prefetch_timeout_max_ticks = pick<uint64_t>(rng, {10, 1000, 30000});
  }
  if (rng.chance(0.4)) {
    // Roughly 4 to 256 pages of KV (aux bytes make a stored page somewhat larger).
    const int64_t page_bytes = c.page_size * c.layer_count * static_cast<int64_t>(c.item_bytes) * 2;
    s.store.capacity_bytes = rng.between(4, 256) * page_bytes;
  }
  if (rng.chance(0.15)) s.store.backend = StorageKind::kFile;
}

}  // namespace

void repair(Scenario& s) {
  HiCacheOptions& c = s.cache;
  WorkloadOptions& w = s.workload;
  SchedulerOptions& o = s.scheduler;
  c.page_size = std::clamp<int32_t>(c.page_size, 1, 64);
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

  o.mode = rng.chance(0.12) ? SchedulerMode::kPd : SchedulerMode::kNormal;
  draw_workload(rng, s.workload);
  c.page_size = pick(rng, {1, 1, 2, 3, 4, 4, 5, 8, 16, 32, 64});
  const int64_t page = c.page_size;
  c.layer_count = static_cast<int32_t>(rng.between(1, 3));
  c.item_bytes = pick<size_t>(rng, {8, 16, 24});
  c.hierarchical = !rng.chance(0.08);
  c.host_layout = rng.chance(0.5) ? KVLayout::kPageFirst : KVLayout::kLayerFirst;
  c.write_policy = pick(rng, {WritePolicy::kWriteThrough, WritePolicy::kWriteThroughSelective,
                              WritePolicy::kWriteBack});
  c.eviction_policy = rng.chance(0.8) ? EvictionPolicy::kLru : EvictionPolicy::kLfu;
  c.load_back_threshold_tokens = pick<int64_t>(rng, {0, 1, page, 4, 8, 64});

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

  // Pools, from starved (the largest request fits once) to roomy; the host pool is smaller
  // than the device pool sometimes.
  const int64_t largest = largest_request(s.workload);
  const double device_factor = pick(rng, {1.0, 1.0, 1.3, 2.0, 4.0, 8.0});
  c.device_tokens =
      round_up(static_cast<int64_t>(static_cast<double>(largest) * device_factor), page);
  const double host_factor = pick(rng, {0.1, 0.25, 0.5, 1.0, 2.0, 4.0});
  c.host_tokens =
      round_up(static_cast<int64_t>(static_cast<double>(c.device_tokens) * host_factor), page);

  // Components.
  if (o.mode == SchedulerMode::kPd) {
    if (rng.chance(0.6)) s.sparse_index_bytes_per_page = pick<int64_t>(rng, {8, 32, 64});
  } else {
    const uint64_t components = rng.below(4);  // 0 full, 1 SWA, 2 Mamba, 3 SWA + Mamba
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
    s.storage = rng.chance(0.3);
    c.prefetch_threshold_tokens = pick<int64_t>(rng, {0, 1, page, 16, 256});
    c.prefetch_stop_policy =
        pick(rng, {PrefetchStopPolicy::kBestEffort, PrefetchStopPolicy::kWaitComplete,
                   PrefetchStopPolicy::kTimeout});
    draw_storage(rng, s);
  }

  s.faults.enabled = !rng.chance(0.1);
  s.faults.site_probability = pick(rng, {0.25, 0.5, 0.5, 1.0});
  s.faults.fire_probability = pick(rng, {0.05, 0.2, 0.5});
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
  tag(!c.hierarchical, "flat");
  tag(c.host_tokens < c.device_tokens, "host<device");
  tag(c.host_layout == KVLayout::kLayerFirst, "layer_first");
  tag(c.write_policy == WritePolicy::kWriteBack, "write_back");
  tag(c.write_policy == WritePolicy::kWriteThroughSelective, "write_through_selective");
  tag(c.eviction_policy == EvictionPolicy::kLfu, "lfu");
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
  tag(w.vocab <= 12, "small_vocab");
  tag(w.burst > 1, "burst");
  tag(w.kind == WorkloadKind::kFork || w.kind == WorkloadKind::kAdversarial, "fork");
  tag(w.output_max >= 32, "long_decode");
  tag(c.device_tokens < 2 * (w.system_prompt_tokens + 4 * w.prompt_max + w.output_max),
      "starved_device");
  tag(s.faults.enabled, "faults");
  return f;
}

}  // namespace kvsim::sim
