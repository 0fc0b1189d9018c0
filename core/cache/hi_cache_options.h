// Options of HiCache, with SGLang's defaults where SGLang has one.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/backend/backend.h"
#include "core/tree/eviction_policy.h"

namespace kvsim {

// Do not renumber: embedded in traces and scenario files.
enum class WritePolicy : uint8_t {
  kWriteThrough = 0,           // back up on the first hit (SGLang's default)
  kWriteThroughSelective = 1,  // back up once a node has been hit twice
  kWriteBack = 2,              // back up only when the node is evicted from the device
};
// Do not renumber: embedded in traces and scenario files.
enum class PrefetchStopPolicy : uint8_t { kBestEffort = 0, kWaitComplete = 1, kTimeout = 2 };

std::string_view to_string(WritePolicy policy);
std::string_view to_string(PrefetchStopPolicy policy);
bool parse_write_policy(std::string_view text, WritePolicy* out);
bool parse_prefetch_stop_policy(std::string_view text, PrefetchStopPolicy* out);

struct HiCacheOptions {
  int32_t page_size = 1;
  // false: a single-tier radix cache (SGLang without --enable-hierarchical-cache): nothing is
  // backed up, evicted nodes are dropped, nothing is loaded back. The host pool stays idle.
  bool hierarchical = true;
  int32_t layer_count = 2;
  size_t item_bytes = 16;        // bytes of one token's KV in one layer; a multiple of 8
  int64_t device_tokens = 1024;  // usable device slots (the pool adds one reserved page)
  int64_t host_tokens = 2048;    // usable host slots; SGLang sizes this 2× the device pool
  KVLayout host_layout = KVLayout::kPageFirst;
  WritePolicy write_policy = WritePolicy::kWriteThrough;
  EvictionPolicy eviction_policy = EvictionPolicy::kLru;
  int64_t load_back_threshold_tokens = 10;  // smaller load-backs are recomputed instead
  // SGLang's eviction amounts where a first allocation fails
  // (HiCache::set_sglang_eviction_amounts): a backup evicts the node's whole length from host, a
  // load-back the load's whole length from device, instead of the shortfall. The differential's
  // shadow runs it; the swarm draws it.
  bool sglang_eviction_amounts = false;

  // Storage tier (used only when HiCache is given a StorageBackend).
  int64_t prefetch_threshold_tokens = 256;  // shorter prefetches are not worth it
  double prefetch_capacity_fraction = 0.5;  // of the host pool, across all prefetches
  PrefetchStopPolicy prefetch_stop_policy = PrefetchStopPolicy::kTimeout;
  uint64_t prefetch_timeout_base_ticks = 2000;         // 2 s in logical milliseconds
  uint64_t prefetch_timeout_per_ki_token_ticks = 100;  // 0.1 s per 1024 tokens
  uint64_t prefetch_timeout_max_ticks = 30000;         // 30 s cap
  int64_t storage_batch_pages = 128;                   // pages per storage I/O batch

  // Hybrid models (0 = component absent). SWA KV lives in its own pools with the main pool's
  // layer count and item size; a Mamba state is mamba_layer_count × mamba_state_bytes.
  int64_t swa_window_tokens = 0;
  int64_t swa_device_tokens = 0;  // 0: same as device_tokens
  int64_t swa_host_tokens = 0;    // 0: same as host_tokens
  int64_t mamba_device_states = 0;
  int64_t mamba_host_states = 0;  // 0: twice mamba_device_states
  int32_t mamba_layer_count = 2;
  size_t mamba_state_bytes = 64;  // per layer; a multiple of 8

  bool has_swa() const { return swa_window_tokens > 0; }
  bool has_mamba() const { return mamba_device_states > 0; }

  int64_t write_through_threshold() const {
    return write_policy == WritePolicy::kWriteThroughSelective ? 2 : 1;
  }
};

}  // namespace kvsim
