#include "sim/campaign/target_fit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "sim/model/sglang_cache.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {

TargetCapabilities capabilities_of(const Target& target) {
  if (target.is_kvsim()) {
    return TargetCapabilities{.storage = true,
                              .hybrid = true,
                              .sparse_index = true,
                              .pd = true,
                              .file_store_budget = true,
                              .small_host = true};
  }
  // SGLang's target: what the loaded revision lets it build, as its driver reports it
  // (python/kvsim/sglang_target/hybrid_capabilities.py): FULL + SWA or FULL + Mamba beside
  // HiCache (hybrid.py), PD decode's retract-resume and the sparse index through SGLang's own
  // MetadataBuffers and NSA pool (retract.py).
  const nlohmann::json c = sglang_capabilities(target);
  TargetCapabilities can{.swa = c.value("swa", false),
                         .mamba = c.value("mamba", false),
                         .sparse_index = c.value("sparse_index", false),
                         .pd = c.value("pd", false)};
  // Absent (a driver from before the key): MambaPoolHost takes both layouts.
  if (c.contains("mamba_host_layouts"))
    can.mamba_host_layouts = host_layouts_from_json(c.at("mamba_host_layouts"));
  return can;
}

std::vector<KVLayout> host_layouts_from_json(const nlohmann::json& names) {
  if (!names.is_array())
    throw std::invalid_argument("capabilities.mamba_host_layouts: not a list: " + names.dump());
  std::vector<KVLayout> layouts;
  for (const nlohmann::json& name : names) {
    if (name == "layer_first") {
      layouts.push_back(KVLayout::kLayerFirst);
    } else if (name == "page_first") {
      layouts.push_back(KVLayout::kPageFirst);
    } else {
      throw std::invalid_argument("capabilities.mamba_host_layouts: unknown layout " + name.dump() +
                                  " (layer_first, page_first)");
    }
  }
  return layouts;
}

namespace {

// SGLang's hybrid trees (FULL + SWA, FULL + Mamba) run with HiCache and nothing beside them: no
// storage tier, no sparse index, no PD decode.
void fit_hybrid_tree_alone(Scenario& s, std::vector<std::string>& off) {
  if (s.storage) {
    s.storage = false;
    off.emplace_back("storage");
  }
  if (!s.cache.hierarchical) {
    s.cache.hierarchical = true;
    off.emplace_back("non_hierarchical");
  }
  if (s.sparse_index_bytes_per_page > 0) {
    s.sparse_index_bytes_per_page = 0;
    off.emplace_back("sparse_index");
  }
  if (s.scheduler.mode == SchedulerMode::kPd) {
    s.scheduler.mode = SchedulerMode::kNormal;
    off.emplace_back("pd");
  }
}

}  // namespace

std::vector<std::string> fit_to_target(Scenario& s, const Target& target) {
  std::vector<std::string> off = fit_to_capabilities(s, capabilities_of(target), target.is_kvsim());
  if (!target.is_kvsim() && fit_unit_length(s, kSglangUnitOps)) off.emplace_back("unit_length");
  return off;
}

// Why units of ~800 ops for SGLang's target (issue 27: at least 50 swarm units a minute on one
// core, so at most 1.2 s of one core a unit, its start included):
// - the driver answered ~930 calls a second of CPU on a recorded swarm unit (docs/benchmarks.md,
//   "The SGLang target's speed"; the checks after every call are most of it), and that unit made
//   0.81 driver calls an op (3,379 calls, 4,170 ops): ~1,150 ops a second; 30 swarm units at
//   sglang-6ed5780c4f with the fork server took 1.05 ms of CPU an op, all processes counted;
// - a unit starts with a forked driver and its hello (~0.15 s) and kvsim's own side of the ops;
// so 1 s of one core is ~850-1,000 ops. With the floor of kMinUnitRequests (a third of the units
// are at it: their requests are long) the mean unit of seeds 1-400 runs ~980 ops at a budget of
// 800 (kvsim's core, the same scenarios): ~1 s of one core.
// The ops per request, 2.5 x (10 + prefill chunks + mean output), is a fit to 400 swarm units
// (seeds 1-400, fitted to SGLang's capabilities, run on kvsim's core, whose op count for the same
// scenario is within ~1 % of SGLang's: 4,178 vs 4,170, 11,105 vs 11,213): each request costs an
// arrival, an admission and a finish, a compute per prefill chunk and per output token, and its
// share of each iteration's tick, poll, stream steps and liveness check. 2.5 makes the mean of
// ops / estimate 1 over the capped units (the median is 0.9; 5-95 %: 0.4-2; x1.6 with one
// running request, whose iterations are not shared), so the budget is the mean unit's length.
double estimated_ops_per_request(const Scenario& s) {
  const WorkloadOptions& w = s.workload;
  const double prompt = static_cast<double>(w.system_prompt_tokens) +
                        static_cast<double>(w.prompt_min + w.prompt_max) / 2;
  const double chunk = static_cast<double>(std::max<int64_t>(1, s.scheduler.chunk_tokens));
  const double output = static_cast<double>(w.output_min + w.output_max) / 2;
  constexpr double kOpsPerStep = 2.5;
  constexpr double kStepsPerRequest = 10;
  return kOpsPerStep * (kStepsPerRequest + std::ceil(prompt / chunk) + output);
}

namespace {

int64_t round_up_to(int64_t n, int64_t page) {
  return std::max<int64_t>(page, (n + page - 1) / page * page);
}

// `tokens` scaled by `f`, a page multiple no smaller than `floor`.
int64_t scaled(int64_t tokens, double f, int64_t floor, int64_t page) {
  const auto t = static_cast<int64_t>(std::ceil(static_cast<double>(tokens) * f));
  return round_up_to(std::max(t, floor), page);
}

// A unit cut to a fraction `f` of its requests has about `f` of its working set, so pools sized
// for the drawn unit would rarely fill: the states that need a full pool (eviction under
// pressure, a prefetch or backup finding no host room, a store over its budget) would go
// unreached. The pools shrink with the requests, each no smaller than the scenario validates
// (the device pool and the SWA device pool hold the largest request, as repair() sizes them)
// and the host pool larger than the device pool where the drawn one was.
void scale_pools(Scenario& s, double f) {
  HiCacheOptions& c = s.cache;
  const WorkloadOptions& w = s.workload;
  const int64_t page = std::max<int64_t>(1, c.page_size);
  const int64_t largest = w.system_prompt_tokens + w.prompt_max * 4 + w.output_max;
  const bool host_larger = c.host_tokens > c.device_tokens;
  c.device_tokens = scaled(c.device_tokens, f, largest, page);
  c.host_tokens = scaled(c.host_tokens, f, page, page);
  if (host_larger && c.host_tokens <= c.device_tokens) c.host_tokens = 2 * c.device_tokens;
  if (c.swa_device_tokens > 0) c.swa_device_tokens = scaled(c.swa_device_tokens, f, largest, page);
  if (c.swa_host_tokens > 0) c.swa_host_tokens = scaled(c.swa_host_tokens, f, page, page);
  if (s.store.capacity_bytes > 0) {
    const auto payload = static_cast<int64_t>(page_payload_bytes(s));  // one stored page
    // Never below one page, unless the draw was (a budget below one page refuses every write).
    s.store.capacity_bytes = std::max<int64_t>(
        std::min(payload, s.store.capacity_bytes),
        static_cast<int64_t>(std::ceil(static_cast<double>(s.store.capacity_bytes) * f)));
  }
}

}  // namespace

bool fit_unit_length(Scenario& s, int64_t ops) {
  const double per_request = estimated_ops_per_request(s);
  const auto fits = static_cast<int64_t>(static_cast<double>(ops) / per_request);
  const int64_t cap = std::max(kMinUnitRequests, fits);
  if (s.workload.requests <= cap) return false;
  scale_pools(s, static_cast<double>(cap) / static_cast<double>(s.workload.requests));
  s.workload.requests = cap;
  return true;
}

std::vector<std::string> fit_to_capabilities(Scenario& s, const TargetCapabilities& can,
                                             bool kvsim) {
  std::vector<std::string> off;
  if (!can.hybrid) {
    // SGLang's target: a component the revision cannot build goes first, then what its hybrid
    // tree (FULL + SWA or FULL + Mamba, never both) cannot have beside it. In this order a unit
    // drawn with SWA and Mamba at a revision that builds only one keeps no storage tier beside
    // the one it keeps.
    if (s.cache.has_swa() && !can.swa) {
      s.cache.swa_window_tokens = 0;
      s.cache.swa_device_tokens = 0;
      s.cache.swa_host_tokens = 0;
      off.emplace_back("swa");
    }
    if (s.cache.has_mamba() &&
        (!can.mamba || can.mamba_host_layouts.empty() || s.cache.has_swa())) {
      s.cache.mamba_device_states = 0;
      s.cache.mamba_host_states = 0;
      off.emplace_back("mamba");
    }
    if (s.cache.has_mamba() && s.cache.page_size != 1) {
      // HiMambaRadixCache without the Mamba extra buffer: 1-token pages.
      s.cache.page_size = 1;
      off.emplace_back("mamba_page_size");
    }
    // SGLang sizes its request pool max_mamba_cache_size // 3 (a request's state, the fork that
    // caches its prefill, a tree node's): with fewer than 3 states it would run no request, and a
    // 2-state unit stalls for good once the tree holds a locked state (swarm seed 4).
    constexpr int32_t kMambaStatesPerRequest = 3;
    if (s.cache.has_mamba() && s.cache.mamba_device_states < kMambaStatesPerRequest) {
      s.cache.mamba_device_states = kMambaStatesPerRequest;
      off.emplace_back("mamba_few_states");
    }
    if (s.cache.has_mamba() &&
        std::find(can.mamba_host_layouts.begin(), can.mamba_host_layouts.end(),
                  s.cache.host_layout) == can.mamba_host_layouts.end()) {
      // One host layout for every host pool (SGLang's hicache_mem_layout), so the FULL host pool
      // takes it too.
      s.cache.host_layout = can.mamba_host_layouts.front();
      off.emplace_back("mamba_host_layout");
    }
    if (s.cache.has_swa() || s.cache.has_mamba()) fit_hybrid_tree_alone(s, off);
  }
  if (!can.sparse_index && s.sparse_index_bytes_per_page > 0) {
    s.sparse_index_bytes_per_page = 0;
    off.emplace_back("sparse_index");
  }
  if (!kvsim && s.sparse_index_bytes_per_page > 0) {
    // SGLang's NSA pool asserts page_size 64 on CUDA, and HiRadixCache over it is SGLang's
    // hybrid NSA controller, which the SGLang target does not build: a sparse unit runs on 64-token
    // pages (pools rounded up) with the device tier only.
    constexpr int32_t kNsaPage = 64;
    if (s.cache.page_size != kNsaPage) {
      s.cache.page_size = kNsaPage;
      s.cache.device_tokens = (s.cache.device_tokens + kNsaPage - 1) / kNsaPage * kNsaPage;
      s.cache.host_tokens = (s.cache.host_tokens + kNsaPage - 1) / kNsaPage * kNsaPage;
      off.emplace_back("sparse_index_page_size");
    }
    if (s.cache.hierarchical) {
      s.cache.hierarchical = false;
      s.storage = false;
      off.emplace_back("sparse_index_host_tier");
    }
  }
  if (!can.pd && s.scheduler.mode == SchedulerMode::kPd) {
    s.scheduler.mode = SchedulerMode::kNormal;
    off.emplace_back("pd");
  }
  if (!can.file_store_budget && s.storage && s.store.backend == StorageKind::kFile &&
      (s.store.capacity_bytes > 0 || s.store.reuse)) {
    s.store.backend = StorageKind::kMemory;
    s.store.dir.clear();
    s.store.reuse = false;
    s.store.durable = false;
    off.emplace_back("file_store_budget");
  }
  if (!can.small_host && s.cache.hierarchical && s.cache.host_tokens <= s.cache.device_tokens) {
    s.cache.host_tokens = 2 * s.cache.device_tokens;
    off.emplace_back("small_host");
  }
  if (!can.storage && s.storage) {
    s.storage = false;
    off.emplace_back("storage");
  }
  return off;
}

}  // namespace kvsim::sim
