// Internals the differential's two files share (differential_cache.cpp: the calls and the
// comparison; differential_sglang.cpp: SGLang's protocol run on the shadow): one side of the
// differential, and what the shadow takes from SGLang's sizes. Not for use elsewhere.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/cache/hi_cache.h"
#include "sim/model/core_cache.h"
#include "sim/model/differential_cache.h"

namespace kvsim::sim {

// One side: its cache and, for kvsim's core, the counters its decisions are read from (the
// core reports none itself; SGLang's driver does, through take_decisions).
struct DifferentialCache::Side {
  std::unique_ptr<CacheUnderTest> cache;
  KvsimCoreCache* core = nullptr;
  HiCacheStats before;
  Decisions noted;  // what the differential saw of this call (return values, acks)

  void begin() {
    noted.clear();
    if (core != nullptr) {
      before = core->cache().stats();
    } else {
      cache->take_decisions();  // nothing from before this call
    }
  }
  Decisions take() {
    Decisions d = core != nullptr ? Decisions{} : cache->take_decisions();
    if (core != nullptr) {
      const HiCacheStats& now = core->cache().stats();
      auto delta = [&](const char* key, int64_t a, int64_t b) {
        if (b != a) d[key] = b - a;
      };
      delta("evicted_device", before.evicted_device_tokens, now.evicted_device_tokens);
      delta("evicted_host", before.evicted_host_tokens, now.evicted_host_tokens);
      delta("loaded", before.load_back_tokens, now.load_back_tokens);
    }
    for (const auto& [k, v] : noted)
      d[k] = v;
    return d;
  }
  // Acks waiting to be consumed (the core's; SGLang's driver counts its own).
  std::pair<int64_t, int64_t> acks_pending() const {
    if (core == nullptr) return {0, 0};
    const CacheController& c = core->cache().controller();
    return {static_cast<int64_t>(c.pending_writes()),
            static_cast<int64_t>(c.pending_loads() - c.queued_loads())};
  }
  // Runs a polling call, noting the acks it consumed on the core.
  template <typename Fn>
  void polled(Fn&& fn) {
    const auto [w0, l0] = acks_pending();
    fn();
    const auto [w1, l1] = acks_pending();
    if (w0 > w1) noted["write_acks"] = w0 - w1;
    if (l0 > l1) noted["load_acks"] = l0 - l1;
  }
};

// SGLang's STORAGE_BATCH_SIZE (mem_cache/hicache_storage.py, every revision in the bundle).
inline constexpr int64_t kSglangStorageBatchPages = 128;

// SGLang has no knob for the Mamba host pool: MambaPoolHost takes int(device states * ratio)
// + 1 slots (page size 1) at the hicache_ratio the SGLang target gives the KV host pool
// (python/kvsim/sglang_target/target.py: (host_tokens - page + 0.5) / device_tokens), whatever
// the scenario's mamba_host_states says; the shadow's host pool holds as many.
inline int64_t sglang_mamba_host_states(const HiCacheOptions& c) {
  if (c.mamba_device_states <= 0 || c.device_tokens <= 0) return c.mamba_host_states;
  const double ratio =
      (static_cast<double>(std::max<int64_t>(c.host_tokens - c.page_size, 0)) + 0.5) /
      static_cast<double>(c.device_tokens);
  return static_cast<int64_t>(static_cast<double>(c.mamba_device_states) * ratio) + 1;
}

// Keeps the shadow's own `computed` in the request while one of its calls runs.
class ShadowComputed {
 public:
  ShadowComputed(SimRequest& r, size_t computed) : r_(r), saved_(r.computed) {
    r_.computed = computed;
  }
  ~ShadowComputed() { r_.computed = saved_; }
  ShadowComputed(const ShadowComputed&) = delete;
  ShadowComputed& operator=(const ShadowComputed&) = delete;

 private:
  SimRequest& r_;
  size_t saved_;
};

// Shows only a request's first `n` tokens while the shadow matches it (SGLang's
// cache_unfinished_req matches the page-aligned prefix it inserted, not the whole request).
class TokensCut {
 public:
  TokensCut(SimRequest& r, size_t n) : r_(r) {
    if (n < r_.tokens.size()) {
      rest_.assign(r_.tokens.begin() + static_cast<std::ptrdiff_t>(n), r_.tokens.end());
      r_.tokens.resize(n);
    }
  }
  ~TokensCut() { r_.tokens.insert(r_.tokens.end(), rest_.begin(), rest_.end()); }
  TokensCut(const TokensCut&) = delete;
  TokensCut& operator=(const TokensCut&) = delete;

 private:
  SimRequest& r_;
  std::vector<Token> rest_;
};

}  // namespace kvsim::sim
