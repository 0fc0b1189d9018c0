// The scenario field table (sim/config/scenario_fields.h): every field the parser reads, with its
// range, default and meaning. Rows are grouped by section, in reading order.
#include "sim/config/scenario_fields.h"

#include <algorithm>
#include <climits>
#include <set>
#include <type_traits>

#include "sim/base/json_reader.h"
#include "sim/config/scenario_schema_pieces.h"

namespace kvsim::sim {
namespace {

using schema::has;
using schema::positive;
using schema::when;

constexpr int64_t kBig = int64_t{1} << 40;

// Row builders. `ref` is a lambda returning a reference to the member in a Scenario.
FieldSpec row(std::string section, std::string name, FieldType type, std::string meaning) {
  FieldSpec f;
  f.section = std::move(section);
  f.name = std::move(name);
  f.type = type;
  f.meaning = std::move(meaning);
  return f;
}

template <typename Ref>
FieldSpec integer(std::string section, std::string name, int64_t min, int64_t max, Ref ref,
                  std::string meaning) {
  FieldSpec f = row(std::move(section), std::move(name), FieldType::kInteger, std::move(meaning));
  f.imin = min;
  f.imax = max;
  // The member's own type in JSON (size_t and uint64_t stay unsigned, as traces have them).
  f.get = [ref](const Scenario& s) { return nlohmann::json(ref(const_cast<Scenario&>(s))); };
  f.set = [ref](Scenario& s, const nlohmann::json& v) {
    using T = std::remove_reference_t<decltype(ref(s))>;
    ref(s) = static_cast<T>(v.get<int64_t>());
  };
  return f;
}

template <typename Ref>
FieldSpec number(std::string section, std::string name, double min, double max, Ref ref,
                 std::string meaning) {
  FieldSpec f = row(std::move(section), std::move(name), FieldType::kNumber, std::move(meaning));
  f.dmin = min;
  f.dmax = max;
  f.get = [ref](const Scenario& s) { return nlohmann::json(ref(const_cast<Scenario&>(s))); };
  f.set = [ref](Scenario& s, const nlohmann::json& v) { ref(s) = v.get<double>(); };
  return f;
}

template <typename Ref>
FieldSpec boolean(std::string section, std::string name, Ref ref, std::string meaning) {
  FieldSpec f = row(std::move(section), std::move(name), FieldType::kBoolean, std::move(meaning));
  f.get = [ref](const Scenario& s) { return nlohmann::json(ref(const_cast<Scenario&>(s))); };
  f.set = [ref](Scenario& s, const nlohmann::json& v) { ref(s) = v.get<bool>(); };
  return f;
}

template <typename Ref>
FieldSpec string(std::string section, std::string name, Ref ref, std::string meaning) {
  FieldSpec f = row(std::move(section), std::move(name), FieldType::kString, std::move(meaning));
  f.get = [ref](const Scenario& s) { return nlohmann::json(ref(const_cast<Scenario&>(s))); };
  f.set = [ref](Scenario& s, const nlohmann::json& v) { ref(s) = v.get<std::string>(); };
  return f;
}

// An enum member named by strings: `to` gives the text of the current value, `from` stores one.
template <typename To, typename From>
FieldSpec choice(std::string section, std::string name, std::vector<FieldChoice> choices, To to,
                 From from, std::string meaning) {
  FieldSpec f = row(std::move(section), std::move(name), FieldType::kChoice, std::move(meaning));
  f.choices = std::move(choices);
  f.get = [to](const Scenario& s) { return nlohmann::json(std::string(to(s))); };
  f.set = [from](Scenario& s, const nlohmann::json& v) { from(s, v.get<std::string>()); };
  return f;
}

FieldSpec section(std::string parent, std::string name, std::string meaning) {
  return row(std::move(parent), std::move(name), FieldType::kObject, std::move(meaning));
}

// The boolean form of cache.storage when it says everything (older traces and scenarios keep
// their text).
nlohmann::json scenario_storage_json(const Scenario& s) {
  const StorageOptions& o = s.store;
  if (o == StorageOptions{}) return s.storage;
  nlohmann::json j = {{"enabled", s.storage},
                      {"backend", o.backend == StorageKind::kFile ? "file" : "memory"},
                      {"capacity_bytes", o.capacity_bytes}};
  if (o.backend == StorageKind::kFile) {
    j["dir"] = o.dir;
    j["durable"] = o.durable;
    j["reuse"] = o.reuse;
  }
  if (!o.digest.empty()) j["digest"] = o.digest;
  return j;
}

std::vector<FieldChoice> workload_kind_choices() {
  return {
      {"mixed", "shared prompts, multi-turn sessions, agentic loops and unrelated prompts"},
      {"shared_prompt",
       "a few system prompts (`system_prompts`), each followed by a fresh question"},
      {"multi_turn",
       "sessions (`sessions`) that grow by one turn per request, up to 2 × `prompt_max` tokens, "
       "then start a new conversation"},
      {"agentic",
       "prefixes that grow by short tool outputs and are re-sent each step, up to 4 × "
       "`prompt_max` tokens"},
      {"uniform", "unrelated random prompts (little reuse)"},
      {"mooncake", "the requests of a Mooncake trace file (`trace`), hash ids expanded to tokens"},
      {"fork",
       "an earlier prompt cut at a random token offset (inside a node, off page boundaries), "
       "then a fresh turn"},
      {"adversarial",
       "each request from one of the generators above but mooncake, forks "
       "included"},
      {"page_mosaic",
       "whole pages of a small alphabet (`page_alphabet`), recombined: forks inside a node "
       "diverging with a page that begins its child, suffixes, repeats (docs/hunt.md)"},
  };
}

std::vector<FieldSpec> make_fields() {
  std::vector<FieldSpec> t;
  auto add = [&t](FieldSpec f) { t.push_back(std::move(f)); };

  // --- top level ---
  {
    FieldSpec f = string(
        "", "name", [](Scenario & s) -> auto& { return s.name; },
        "The scenario's name: printed in every result line (`NAME seed N: ok`) and recorded in "
        "traces.");
    f.required = true;
    add(std::move(f));
  }
  add(string(
      "", "description", [](Scenario & s) -> auto& { return s.description; },
      "What the scenario stresses, for people (not used by the run)."));
  add(integer(
      "", "seed", 0, INT64_MAX, [](Scenario & s) -> auto& { return s.seed; },
      "The first seed (`kvsim run --seeds N` runs seed, seed+1, ...; `--seed` overrides it). "
      "Every random choice of a run flows from it."));

  {
    // Editors associate a file with its schema through this key; the run ignores it.
    FieldSpec f = row("", "$schema", FieldType::kString,
                      "For editors: the path or URL of the schema `kvsim schema` prints (e.g. "
                      "docs/scenario.schema.json). Ignored by kvsim and not recorded in traces.");
    f.get = [](const Scenario&) { return nlohmann::json(""); };
    f.set = [](Scenario&, const nlohmann::json&) {};
    f.omit_when_empty = true;
    add(std::move(f));
  }

  // --- cache ---
  add(section("", "cache",
              "The HiCache configuration: pools, page size, write and eviction policy, hybrid "
              "side pools (SWA, Mamba), the storage tier."));
  add(integer(
      "cache", "page_size", 1, 1 << 16, [](Scenario & s) -> auto& { return s.cache.page_size; },
      "Tokens per page: the unit of matching, allocation, eviction and transfer."));
  add(boolean(
      "cache", "hierarchical", [](Scenario & s) -> auto& { return s.cache.hierarchical; },
      "true: HiCache with a host tier (backup, load-back). false: a single-tier radix cache "
      "(nothing is backed up; evicted nodes are dropped)."));
  add(integer(
      "cache", "layer_count", 1, 1024, [](Scenario & s) -> auto& { return s.cache.layer_count; },
      "Model layers of KV per token. Only scales cost (bytes copied and checked), see "
      "scenarios/README.md."));
  {
    FieldSpec f = integer(
        "cache", "item_bytes", 8, 1 << 20, [](Scenario & s) -> auto& { return s.cache.item_bytes; },
        "Bytes of one token's KV in one layer. Only scales cost.");
    f.multiple_of = 8;
    add(std::move(f));
  }
  {
    FieldSpec f = integer(
        "cache", "device_tokens", 1, kBig,
        [](Scenario & s) -> auto& { return s.cache.device_tokens; },
        "Usable device (GPU) KV slots. Concurrency against this pool is what creates eviction "
        "pressure.");
    f.multiple_of_field = "page_size";
    add(std::move(f));
  }
  {
    FieldSpec f = integer(
        "cache", "host_tokens", 1, kBig, [](Scenario & s) -> auto& { return s.cache.host_tokens; },
        "Usable host (CPU) KV slots. SGLang sizes the host pool 2x the device pool.");
    f.multiple_of_field = "page_size";
    add(std::move(f));
  }
  add(choice(
      "cache", "host_layout",
      {{"layer_first", "one buffer per layer"}, {"page_first", "one buffer per page, all layers"}},
      [](const Scenario& s) { return to_string(s.cache.host_layout); },
      [](Scenario& s, const std::string& v) {
        s.cache.host_layout = v == "page_first" ? KVLayout::kPageFirst : KVLayout::kLayerFirst;
      },
      "Memory layout of the host pool."));
  add(choice(
      "cache", "write_policy",
      {{"write_through", "back a node up to host on its first hit (SGLang's default)"},
       {"write_through_selective", "back a node up once it has been hit twice"},
       {"write_back", "back a node up only when it is evicted from the device"}},
      [](const Scenario& s) { return to_string(s.cache.write_policy); },
      [](Scenario& s, const std::string& v) { parse_write_policy(v, &s.cache.write_policy); },
      "When device nodes are written to the host tier."));
  add(choice(
      "cache", "eviction_policy",
      {{"lru", "least recently used first"}, {"lfu", "least frequently used first"}},
      [](const Scenario& s) { return to_string(s.cache.eviction_policy); },
      [](Scenario& s, const std::string& v) { parse_eviction_policy(v, &s.cache.eviction_policy); },
      "Which unlocked leaves are evicted first."));
  add(boolean(
      "cache", "sglang_eviction_amounts",
      [](Scenario & s) -> auto& { return s.cache.sglang_eviction_amounts; },
      "true: where a first allocation fails, a backup evicts the node's whole length "
      "from host and a load-back the load's whole length from device, as SGLang "
      "does (HiCache::set_sglang_eviction_amounts); false (default): the shortfall."));
  add(integer(
      "cache", "load_back_threshold_tokens", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.load_back_threshold_tokens; },
      "A host-resident prefix shorter than this is recomputed instead of loaded back."));
  add(integer(
      "cache", "swa_window_tokens", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.swa_window_tokens; },
      "Sliding-window attention window (0 = no SWA component). With a window the model is "
      "hybrid SWA: SWA KV lives in its own pools and only the window is kept per request."));
  {
    FieldSpec f = integer(
        "cache", "swa_device_tokens", 0, kBig,
        [](Scenario & s) -> auto& { return s.cache.swa_device_tokens; },
        "Device SWA pool slots (0 = the size of device_tokens). Needs swa_window_tokens.");
    f.multiple_of_field = "page_size";
    add(std::move(f));
  }
  {
    FieldSpec f = integer(
        "cache", "swa_host_tokens", 0, kBig,
        [](Scenario & s) -> auto& { return s.cache.swa_host_tokens; },
        "Host SWA pool slots (0 = the size of host_tokens). Needs swa_window_tokens.");
    f.multiple_of_field = "page_size";
    add(std::move(f));
  }
  add(integer(
      "cache", "mamba_device_states", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.mamba_device_states; },
      "Device Mamba state slots (0 = no Mamba component). A hybrid Mamba model keeps one "
      "recurrent state per cached prefix end; needs one per running request plus one."));
  add(integer(
      "cache", "mamba_host_states", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.mamba_host_states; },
      "Host Mamba state slots (0 = twice mamba_device_states)."));
  add(integer(
      "cache", "mamba_layer_count", 1, 1024,
      [](Scenario & s) -> auto& { return s.cache.mamba_layer_count; },
      "Mamba layers per state. Only scales cost."));
  {
    FieldSpec f = integer(
        "cache", "mamba_state_bytes", 8, int64_t{1} << 24,
        [](Scenario & s) -> auto& { return s.cache.mamba_state_bytes; },
        "Bytes of one Mamba state per layer. Only scales cost.");
    f.multiple_of = 8;
    add(std::move(f));
  }
  {
    FieldSpec f = row("cache", "storage", FieldType::kBoolOrObject,
                      "The storage tier below the host tier (HiCache's L3): `true` for the "
                      "in-memory store, or an object choosing the backend (docs/storage.md).");
    f.get = scenario_storage_json;
    f.set = [](Scenario& s, const nlohmann::json& v) { s.storage = v.get<bool>(); };
    f.check = [](JsonReader& r, const Scenario& s) {
      const StorageOptions& o = s.store;
      if (o.reuse && o.dir.empty()) {
        r.fail("reuse",
               "needs a dir (without one the file store is a private temporary directory)");
      }
      if (o.backend == StorageKind::kMemory && (!o.dir.empty() || o.durable || o.reuse)) {
        r.fail(!o.dir.empty() ? "dir"
               : o.durable    ? "durable"
                              : "reuse",
               "applies to the file backend only");
      }
    };
    f.notes = "`dir`, `durable` and `reuse` apply to the file backend only; `reuse` needs `dir`.";
    add(std::move(f));
  }
  {
    FieldSpec f = boolean(
        "cache.storage", "enabled", [](Scenario & s) -> auto& { return s.storage; },
        "Whether the tier is on (the object form alone means on).");
    f.fixed_default = true;
    add(std::move(f));
  }
  add(choice(
      "cache.storage", "backend",
      {{"memory", "pages in process memory"},
       {"file", "one file per page in a directory (`dir`), written by temp file and rename"}},
      [](const Scenario& s) { return s.store.backend == StorageKind::kFile ? "file" : "memory"; },
      [](Scenario& s, const std::string& v) {
        s.store.backend = v == "file" ? StorageKind::kFile : StorageKind::kMemory;
      },
      "Where stored pages live."));
  add(string(
      "cache.storage", "dir", [](Scenario & s) -> auto& { return s.store.dir; },
      "file backend: an existing, writable directory (\"\" = a private temporary directory per "
      "run). `kvsim run --storage-dir` overrides it."));
  add(integer(
      "cache.storage", "capacity_bytes", 0, int64_t{1} << 50,
      [](Scenario & s) -> auto& { return s.store.capacity_bytes; },
      "Store budget in bytes (0 = unlimited); least recently used pages are evicted beyond it."));
  add(boolean(
      "cache.storage", "durable", [](Scenario & s) -> auto& { return s.store.durable; },
      "file backend: fsync the page and the directory around the rename."));
  add(boolean(
      "cache.storage", "reuse", [](Scenario & s) -> auto& { return s.store.reuse; },
      "file backend: start on the pages `dir` holds (else it is emptied first); needs `dir`."));
  add(string(
      "cache.storage", "digest", [](Scenario & s) -> auto& { return s.store.digest; },
      "Written by kvsim into traces of runs on a reused store (the store's SHA-256); a replay "
      "refuses a store that differs. Not set by hand."));
  {
    FieldSpec f = integer(
        "cache", "sparse_index_bytes_per_page", 0, 1 << 20,
        [](Scenario & s) -> auto& { return s.sparse_index_bytes_per_page; },
        "A DSA/NSA sparse-attention index buffer next to the KV pool, in bytes per page (0 = "
        "none). pd mode only.");
    f.multiple_of = 8;
    add(std::move(f));
  }
  add(integer(
      "cache", "prefetch_threshold_tokens", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.prefetch_threshold_tokens; },
      "Storage tier: a prefetch shorter than this is not started."));
  add(choice(
      "cache", "prefetch_stop_policy",
      {{"best_effort", "admit with whatever has arrived"},
       {"wait_complete", "wait until the whole prefetch has arrived"},
       {"timeout", "wait, up to a timeout that grows with the prefetch's length"}},
      [](const Scenario& s) { return to_string(s.cache.prefetch_stop_policy); },
      [](Scenario& s, const std::string& v) {
        parse_prefetch_stop_policy(v, &s.cache.prefetch_stop_policy);
      },
      "Storage tier: when a request waiting on a prefetch is admitted."));
  add(number(
      "cache", "prefetch_capacity_fraction", 0.0, 1.0,
      [](Scenario & s) -> auto& { return s.cache.prefetch_capacity_fraction; },
      "Storage tier: the share of the host pool all running prefetches may occupy together; "
      "a prefetch past it waits (rate limit)."));
  add(integer(
      "cache", "prefetch_timeout_base_ticks", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.prefetch_timeout_base_ticks; },
      "Storage tier, `timeout` policy: ticks (logical ms) a prefetch may take before its "
      "request is admitted with what arrived, plus the per-1024-token share below."));
  add(integer(
      "cache", "prefetch_timeout_per_ki_token_ticks", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.prefetch_timeout_per_ki_token_ticks; },
      "Storage tier, `timeout` policy: extra ticks per 1024 prefetched tokens."));
  add(integer(
      "cache", "prefetch_timeout_max_ticks", 0, kBig,
      [](Scenario & s) -> auto& { return s.cache.prefetch_timeout_max_ticks; },
      "Storage tier, `timeout` policy: the cap on a prefetch's timeout."));
  add(integer(
      "cache", "storage_batch_pages", 1, 1 << 20,
      [](Scenario & s) -> auto& { return s.cache.storage_batch_pages; },
      "Storage tier: pages per storage I/O batch (a backup or prefetch read moves at most this "
      "many pages per step)."));

  // --- workload ---
  {
    FieldSpec f =
        section("", "workload", "How requests are generated (each seed draws a different stream).");
    f.check = [](JsonReader& r, const Scenario& s) {
      if (s.workload.kind == WorkloadKind::kMooncake && s.workload.trace_path.empty()) {
        r.fail("trace", "a mooncake workload needs a trace file");
      }
    };
    f.notes = "A mooncake workload needs `trace`.";
    f.check_schema =
        when(has("workload", "kind", nlohmann::json::parse(R"({"const": "mooncake"})")),
             has("workload", "trace", nlohmann::json::object()));
    add(std::move(f));
  }
  add(choice(
      "workload", "kind", workload_kind_choices(),
      [](const Scenario& s) { return to_string(s.workload.kind); },
      [](Scenario& s, const std::string& v) {
        const std::vector<FieldChoice> kinds = workload_kind_choices();
        for (size_t i = 0; i < kinds.size(); ++i) {
          if (kinds[i].value == v) s.workload.kind = static_cast<WorkloadKind>(i);
        }
      },
      "The request generator."));
  add(integer(
      "workload", "requests", 1, 10'000'000,
      [](Scenario & s) -> auto& { return s.workload.requests; },
      "Requests per run (mooncake: at most this many of the trace's)."));
  add(number(
      "workload", "arrival_rate", 1e-6, 1e6,
      [](Scenario & s) -> auto& { return s.workload.arrival_rate; },
      "Mean arrivals per tick (exponential inter-arrival times)."));
  add(integer(
      "workload", "prompt_min", 1, 1 << 24,
      [](Scenario & s) -> auto& { return s.workload.prompt_min; },
      "Fewest fresh prompt tokens per request."));
  {
    FieldSpec f = integer(
        "workload", "prompt_max", 1, 1 << 24,
        [](Scenario & s) -> auto& { return s.workload.prompt_max; },
        "Most fresh prompt tokens per request.");
    f.at_least_field = "prompt_min";
    add(std::move(f));
  }
  add(integer(
      "workload", "output_min", 1, 1 << 20,
      [](Scenario & s) -> auto& { return s.workload.output_min; },
      "Fewest output (decode) tokens per request."));
  {
    FieldSpec f = integer(
        "workload", "output_max", 1, 1 << 20,
        [](Scenario & s) -> auto& { return s.workload.output_max; },
        "Most output (decode) tokens per request.");
    f.at_least_field = "output_min";
    add(std::move(f));
  }
  add(integer(
      "workload", "system_prompts", 1, 1 << 16,
      [](Scenario & s) -> auto& { return s.workload.system_prompts; },
      "Distinct shared system prompts (shared_prompt, mixed)."));
  add(integer(
      "workload", "system_prompt_tokens", 1, 1 << 24,
      [](Scenario & s) -> auto& { return s.workload.system_prompt_tokens; },
      "Tokens per system prompt."));
  add(integer(
      "workload", "sessions", 1, 1 << 20, [](Scenario & s) -> auto& { return s.workload.sessions; },
      "Concurrent multi-turn sessions and agentic loops (multi_turn, agentic, mixed)."));
  add(integer(
      "workload", "namespaces", 1, 1 << 16,
      [](Scenario & s) -> auto& { return s.workload.namespaces; },
      "Tenants (SGLang's extra_key): equal tokens in different namespaces never share a "
      "prefix."));
  {
    FieldSpec f = string(
        "workload", "trace", [](Scenario & s) -> auto& { return s.workload.trace_path; },
        "mooncake: the Mooncake JSONL trace, relative to the scenario file's folder.");
    f.omit_when_empty = true;
    add(std::move(f));
  }
  add(integer(
      "workload", "block_tokens", 1, 1 << 20,
      [](Scenario & s) -> auto& { return s.workload.block_tokens; },
      "mooncake: tokens per hash id of the trace."));
  add(number(
      "workload", "ms_per_tick", 1e-6, 1e9,
      [](Scenario & s) -> auto& { return s.workload.ms_per_tick; },
      "mooncake: trace milliseconds per simulator tick."));
  // Adversarial knobs (kvsim hunt's swarm draws them; the defaults reproduce the original
  // generators draw for draw).
  add(integer(
      "workload", "vocab", 1, 1 << 30, [](Scenario & s) -> auto& { return s.workload.vocab; },
      "Generated tokens are drawn from [0, vocab): a small vocabulary makes unrelated prompts "
      "share prefixes by chance."));
  add(boolean(
      "workload", "cross_namespace",
      [](Scenario & s) -> auto& { return s.workload.cross_namespace; },
      "Shared prompts and forks pick any namespace (equal tokens in different namespaces)."));
  add(integer(
      "workload", "burst", 1, 1 << 16, [](Scenario & s) -> auto& { return s.workload.burst; },
      "Each arrival brings 1 to burst requests at once."));
  add(boolean(
      "workload", "wide_namespace_ids",
      [](Scenario & s) -> auto& { return s.workload.wide_namespace_ids; },
      "Namespaces other than 0 get 63-bit ids (a fixed hash of 1, 2, ...) instead of "
      "1, 2, ...: a tenant's id (SGLang's extra_key) is any value, and storage keys and "
      "namespace seeds must use all of its bits."));
  add(integer(
      "workload", "page_alphabet", 1, 1 << 16,
      [](Scenario & s) -> auto& { return s.workload.page_alphabet; },
      "page_mosaic: distinct pages (of `cache.page_size` tokens) prompts are assembled from."));

  // --- scheduler ---
  add(section("", "scheduler", "The SGLang scheduler model."));
  add(choice(
      "scheduler", "mode",
      {{"normal", "one instance: prefill and decode"},
       {"pd", "a PD-disaggregated decode instance: retracts requests to CPU and resumes them"}},
      [](const Scenario& s) { return s.scheduler.mode == SchedulerMode::kPd ? "pd" : "normal"; },
      [](Scenario& s, const std::string& v) {
        s.scheduler.mode = v == "pd" ? SchedulerMode::kPd : SchedulerMode::kNormal;
      },
      "Scheduler model."));
  add(integer(
      "scheduler", "max_running", 1, 1 << 20,
      [](Scenario & s) -> auto& { return s.scheduler.max_running; },
      "Requests in the running batch at most."));
  add(integer(
      "scheduler", "chunk_tokens", 1, kBig,
      [](Scenario & s) -> auto& { return s.scheduler.chunk_tokens; },
      "Chunked prefill: tokens per request per iteration."));
  add(integer(
      "scheduler", "decode_reserve_tokens", 0, kBig,
      [](Scenario & s) -> auto& { return s.scheduler.decode_reserve_tokens; },
      "Admission keeps this much device room per running request for its decode."));
  add(integer(
      "scheduler", "metadata_slots", 1, 1 << 20,
      [](Scenario & s) -> auto& { return s.scheduler.metadata_slots; },
      "pd: MetadataBuffers slots (fewer than running requests: slots are reused at once)."));
  add(integer(
      "scheduler", "cpu_copy_chunk_tokens", 1, int64_t{1} << 30,
      [](Scenario & s) -> auto& { return s.scheduler.cpu_copy_chunk_tokens; },
      "pd: tokens per chunk of the retract/resume CPU copy."));
  add(integer(
      "scheduler", "liveness_ticks", 1, kBig,
      [](Scenario & s) -> auto& { return s.scheduler.liveness_ticks; },
      "A request must finish within this many ticks of arriving (else: a liveness "
      "violation)."));
  add(integer(
      "scheduler", "max_ticks", 1, kBig,
      [](Scenario & s) -> auto& { return s.scheduler.max_ticks; },
      "The run stops after this many ticks (a liveness violation)."));
  add(boolean(
      "scheduler", "load_back", [](Scenario & s) -> auto& { return s.scheduler.load_back; },
      "Load host-resident prefixes back to the device on a hit."));
  add(boolean(
      "scheduler", "batch_load_backs",
      [](Scenario & s) -> auto& { return s.scheduler.batch_load_backs; },
      "SGLang's way: the admits of an iteration queue their load-backs and one "
      "ready_to_load_host_cache issues them together before the forward (false: each admit "
      "issues its own at once)."));
  add(boolean(
      "scheduler", "load_back_quota",
      [](Scenario & s) -> auto& { return s.scheduler.load_back_quota; },
      "Give each load-back the admission budget (free + evictable device tokens minus the "
      "running requests' decode reserve) as init_load_back's mem_quota: a larger one is "
      "declined."));
  add(boolean(
      "scheduler", "prefetch", [](Scenario & s) -> auto& { return s.scheduler.prefetch; },
      "Prefetch from the storage tier on arrival (when storage is on)."));

  // --- faults ---
  add(section("", "faults",
              "BUGGIFY-style fault injection: delayed copies, deferred acks, failed allocations "
              "and storage I/O (docs/invariants.md)."));
  add(boolean(
      "faults", "enabled", [](Scenario & s) -> auto& { return s.faults.enabled; },
      "Fault injection on or off."));
  add(number(
      "faults", "site_probability", 0, 1,
      [](Scenario & s) -> auto& { return s.faults.site_probability; },
      "Each fault site is enabled for this fraction of seeds."));
  add(number(
      "faults", "fire_probability", 0, 1,
      [](Scenario & s) -> auto& { return s.faults.fire_probability; },
      "An enabled site fires with this probability at each chance."));

  // --- check ---
  add(section("", "check", "How thoroughly the run is checked."));
  add(integer(
      "check", "full_every", 0, kBig, [](Scenario & s) -> auto& { return s.check.full_every; },
      "The O(tree) sanity walk every N ops (0 = amortized: every (tree nodes + pool pages) / 8 "
      "ops). The O(1) checks run after every op regardless."));
  add(boolean(
      "check", "content", [](Scenario & s) -> auto& { return s.check.content; },
      "Check every model read against the content oracle (byte for byte)."));
  return t;
}

}  // namespace

const std::vector<FieldSpec>& scenario_fields() {
  static const std::vector<FieldSpec> fields = make_fields();
  return fields;
}

const Scenario& scenario_base() {
  static const Scenario base = [] {
    Scenario s = default_scenario();
    s.description.clear();
    return s;
  }();
  return base;
}

nlohmann::json FieldSpec::default_value() const {
  if (required || type == FieldType::kObject) return nullptr;
  if (fixed_default) return *fixed_default;
  return get(scenario_base());
}

}  // namespace kvsim::sim
