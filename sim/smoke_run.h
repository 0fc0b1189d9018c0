// SmokeRun: a small deterministic driver of the real core — the built-in default job of
// `kvsim run` until the full scheduler simulator lands (issue 4).
//
// One seed fixes everything: the requests (shared system prompts, multi-turn growth, random
// one-offs), the order in which the CPU backend's streams are advanced, and when acks are
// polled. After every step it runs HiCache::sanity_check; after every load-back it checks the
// loaded bytes against the content oracle. It stops at the first violation.
#pragma once

#include <cstdint>
#include <string>

#include "core/cache/hi_cache_options.h"

namespace kvsim::sim {

struct SmokeOptions {
  uint64_t seed = 1;
  int64_t requests = 200;
  HiCacheOptions cache;
};

struct SmokeSummary {
  bool ok = true;
  std::string violation;  // "invariant: detail" of the first failure
  int64_t step = 0;       // steps run (a step = one core call or one stream advance)
  int64_t requests_done = 0;
  int64_t prompt_tokens = 0;
  int64_t device_hit_tokens = 0;
  int64_t host_hit_tokens = 0;
  int64_t load_back_tokens = 0;
  int64_t evicted_device_tokens = 0;
  uint64_t event_log_hash = 0;  // FNV-1a over every decision the run made
};

SmokeOptions default_smoke_options();
SmokeSummary run_smoke(const SmokeOptions& options);

}  // namespace kvsim::sim
