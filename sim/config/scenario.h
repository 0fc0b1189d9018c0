// Scenario: everything one simulator run depends on besides its seed — the cache
// configuration, the workload, the scheduler's knobs, the fault sites and the checking level.
// A scenario file is JSON (scenarios/*.json); a trace header embeds the same object, so a trace
// replays with exactly the configuration that recorded it.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cache/hi_cache_options.h"

namespace kvsim::sim {

class JsonLines;

enum class WorkloadKind : uint8_t {
  kMixed = 0,         // shared prompts + multi-turn sessions + agentic loops + uniform
  kSharedPrompt = 1,  // a few system prompts, each followed by a fresh question
  kMultiTurn = 2,     // sessions that grow by one turn per request
  kAgentic = 3,       // long prefixes that grow by tool outputs, re-sent each step
  kUniform = 4,       // unrelated random prompts
  kMooncake = 5,      // a Mooncake trace file (hash ids expanded to tokens)
  kFork = 6,          // an earlier prompt cut at a random token offset, then a fresh turn
  kAdversarial = 7,   // every generator above but Mooncake, forks included
  kPageMosaic = 8,    // whole pages of a small alphabet, recombined (sim/workload/page_mosaic.h)
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kMixed;
  int64_t requests = 200;
  double arrival_rate = 0.5;  // mean arrivals per tick (exponential inter-arrival times)
  int64_t prompt_min = 8, prompt_max = 64;  // fresh tokens per request
  int64_t output_min = 1, output_max = 16;
  int64_t system_prompts = 4;
  int64_t system_prompt_tokens = 64;
  int64_t sessions = 8;
  int64_t namespaces = 1;      // tenants (SGLang extra_key)
  std::string trace_path;      // kMooncake: resolved against the scenario file's folder
  int64_t block_tokens = 512;  // kMooncake: tokens per hash id
  double ms_per_tick = 1.0;    // kMooncake: timestamp scale
  // Adversarial knobs (the defaults reproduce the original generators draw for draw).
  int64_t vocab = 50000;         // tokens are drawn from [0, vocab)
  bool cross_namespace = false;  // shared prompts and forks pick any namespace
  int64_t burst = 1;             // each arrival brings 1..burst requests at once
  // Namespaces other than 0 get 63-bit ids (a fixed hash of 1, 2, ...) instead of 1, 2, ...:
  // SGLang's extra_key is any string, so a tenant's id is any value, not a small integer.
  bool wide_namespace_ids = false;
  int64_t page_alphabet = 4;  // kPageMosaic: distinct pages prompts are assembled from
};

enum class SchedulerMode : uint8_t { kNormal = 0, kPd = 1 };

struct SchedulerOptions {
  SchedulerMode mode = SchedulerMode::kNormal;
  int64_t max_running = 8;               // requests in the running batch
  int64_t chunk_tokens = 64;             // chunked prefill: tokens per request per iteration
  int64_t decode_reserve_tokens = 8;     // admission keeps this much room per running request
  int64_t metadata_slots = 64;           // PD: MetadataBuffers slots
  int64_t cpu_copy_chunk_tokens = 8192;  // PD: retract-resume CPU copy chunk
  int64_t liveness_ticks = 20000;        // a request must finish within this many ticks
  int64_t max_ticks = 1000000;           // the run stops (a liveness violation) after this
  bool load_back = true;
  // SGLang's way: every admit of an iteration queues its load-back, and one
  // ready_to_load_host_cache issues them together before the forward (else each admit issues
  // its own at once).
  bool batch_load_backs = false;
  // Each load-back gets the admission budget (free + evictable device tokens, minus the
  // running requests' decode reserve) as init_load_back's mem_quota.
  bool load_back_quota = false;
  bool prefetch = true;  // when storage is on
};

struct FaultOptions {
  bool enabled = true;
  double site_probability = 0.25;  // each site is enabled for this fraction of seeds
  double fire_probability = 0.2;   // an enabled site fires with this probability per chance
};

struct CheckOptions {
  // Full sanity_check every N ops; 0 = auto: every (tree nodes + pool pages) / 8 ops that may
  // change the cache (ticks, liveness checks and steps that ran nothing do not count), so the
  // O(tree) walk costs O(1) per state change amortized. The O(1) checks (stream lifetime, pool
  // conservation, content on every read) run after every op regardless.
  int64_t full_every = 1;
  bool content = true;  // model reads are checked against the content oracle
};

// cache.storage: `true`/`false`, or an object (docs/storage.md).
enum class StorageKind : uint8_t { kMemory = 0, kFile = 1 };

struct StorageOptions {
  StorageKind backend = StorageKind::kMemory;
  std::string dir;             // kFile: the directory (must exist, be writable)
  int64_t capacity_bytes = 0;  // 0 = unlimited; LRU eviction beyond it
  bool durable = false;        // kFile: fsync page and directory around the rename
  bool reuse = false;          // kFile: start on what the directory holds (else: emptied)
  std::string digest;          // set in traces of runs on a reused store (sim/model/storage_tier.h)
  bool operator==(const StorageOptions&) const = default;
};

struct Scenario {
  std::string name = "default";
  std::string description;
  std::string source;  // the file it came from ("" for built-in)
  uint64_t seed = 1;
  HiCacheOptions cache;
  bool storage = false;
  StorageOptions store;  // how the storage tier is built, when `storage`
  // A DSA/NSA sparse-attention index buffer next to the KV pool (0 = none): bytes per page.
  int64_t sparse_index_bytes_per_page = 0;
  WorkloadOptions workload;
  SchedulerOptions scheduler;
  FaultOptions faults;
  CheckOptions check;
};

// The built-in default: a mixed workload on a small hybrid-free cache under pressure.
Scenario default_scenario();
// Parses and validates; throws InputError naming the source and field.
// kRun: the scenario will generate a workload (every check); kReplay: a trace header whose ops
// replay (the check that the workload fits the pools is skipped: shrinking may have made the
// pools smaller than the generator's largest request).
enum class ScenarioUse : uint8_t { kRun = 0, kReplay = 1 };
// `lines` (from parse_json) lets every error name the field's line.
Scenario parse_scenario(const nlohmann::json& doc, const std::string& source,
                        ScenarioUse use = ScenarioUse::kRun, const JsonLines* lines = nullptr);
Scenario load_scenario(const std::string& path);
// The canonical JSON form (what traces embed); parse_scenario(to_json(s)) == s.
nlohmann::json to_json(const Scenario& s);
// nullopt when `s` survives the trip through a trace header (to_json, then parse_scenario as a
// replay reads it) unchanged; otherwise the first field that came back different, or why the
// header does not parse. A run whose header does not round-trip cannot be replayed faithfully.
std::optional<std::string> header_round_trip_problem(const Scenario& s);

std::string_view to_string(WorkloadKind kind);

}  // namespace kvsim::sim
