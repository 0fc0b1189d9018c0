// SglangCache: SGLang's own Python cache (HiRadixCache, HiCacheController, host pools, storage)
// as the cache under test. Each call is a line of docs/sglang-target-protocol.md to a driver
// process (`python3 -m kvsim.sglang_target.driver`), which runs SGLang's unmodified code on
// kvsim's fake device and checks SGLang's state after every call; its violations come back in
// the replies and are reported like the core's.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "sim/model/cache_under_test.h"
#include "sim/model/target.h"

namespace kvsim::sim {

// Starts the driver for `target` (SGLang from target.sglang_src) and builds the scenario's cache
// in it; fills target.sglang_commit with the commit the driver loaded. Throws DriverError when
// the driver cannot start, and InputError when it refuses the scenario.
std::unique_ptr<CacheUnderTest> make_sglang_cache(CacheContext ctx, Target& target);

// What the SGLang revision `target` loads lets the SGLang target build: {"swa": bool, "mamba":
// bool, "pd": bool, "sparse_index": bool} (python/kvsim/sglang_target/hybrid_capabilities.py),
// from the fork server's greeting (one is started when this process has none); asked once per
// interpreter and source. Throws DriverError when the driver cannot load the source.
nlohmann::json sglang_capabilities(const Target& target);

}  // namespace kvsim::sim
