// HiCacheTestPeer: the one friend of HiCache that tests use to plant stale counters and
// state, so the references and checks that must report them can be exercised.
#pragma once

#include <cstdint>
#include <map>

#include "core/cache/hi_cache.h"

namespace kvsim {

struct HiCacheTestPeer {
  static int64_t& prefetch_occupied(HiCache& c) { return c.prefetch_tokens_occupied_; }
  static HiCacheStats& stats(HiCache& c) { return c.stats_; }
  static std::map<RequestId, PrefetchOp>& prefetches(HiCache& c) { return c.prefetches_; }
  static std::map<RequestId, int64_t>& prefetch_loaded(HiCache& c) { return c.prefetch_loaded_; }
};

}  // namespace kvsim
