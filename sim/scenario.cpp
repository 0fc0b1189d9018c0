#include "sim/scenario.h"

#include <filesystem>

#include "sim/json_reader.h"

namespace kvsim::sim {
namespace {

const std::vector<std::string> kWorkloadKinds = {"mixed",   "shared_prompt", "multi_turn",
                                                 "agentic", "uniform",       "mooncake",
                                                 "fork",    "adversarial"};

WorkloadKind workload_kind(const std::string& s) {
  for (size_t i = 0; i < kWorkloadKinds.size(); ++i) {
    if (kWorkloadKinds[i] == s) return static_cast<WorkloadKind>(i);
  }
  return WorkloadKind::kMixed;
}

constexpr int64_t kBig = int64_t{1} << 40;

// `storage`: a boolean (the in-memory store), or an object naming the backend.
void parse_storage(JsonReader& cache, Scenario& s) {
  if (!cache.has("storage") || !cache.raw("storage").is_object()) {
    s.storage = cache.boolean("storage", false);
    return;
  }
  JsonReader r = cache.object("storage");
  StorageOptions& o = s.store;
  s.storage = r.boolean("enabled", true);
  o.backend = r.choice("backend", "memory", {"memory", "file"}) == "file" ? StorageKind::kFile
                                                                          : StorageKind::kMemory;
  o.dir = r.string("dir", "");
  o.capacity_bytes = r.integer("capacity_bytes", 0, 0, int64_t{1} << 50);
  o.durable = r.boolean("durable", false);
  o.reuse = r.boolean("reuse", false);
  o.digest = r.string("digest", "");
  if (o.reuse && o.dir.empty()) {
    r.fail("reuse", "needs a dir (without one the file store is a private temporary directory)");
  }
  if (o.backend == StorageKind::kMemory && (!o.dir.empty() || o.durable || o.reuse)) {
    r.fail(!o.dir.empty() ? "dir"
           : o.durable    ? "durable"
                          : "reuse",
           "applies to the file backend only");
  }
  r.finish();
}

void parse_cache(JsonReader r, Scenario& s) {
  HiCacheOptions& c = s.cache;
  c.page_size = static_cast<int32_t>(r.integer("page_size", c.page_size, 1, 1 << 16));
  c.hierarchical = r.boolean("hierarchical", c.hierarchical);
  c.layer_count = static_cast<int32_t>(r.integer("layer_count", c.layer_count, 1, 1024));
  c.item_bytes =
      static_cast<size_t>(r.integer("item_bytes", static_cast<int64_t>(c.item_bytes), 8, 1 << 20));
  if (c.item_bytes % 8 != 0) r.fail("item_bytes", "must be a multiple of 8");
  c.device_tokens = r.integer("device_tokens", c.device_tokens, 1, kBig);
  c.host_tokens = r.integer("host_tokens", c.host_tokens, 1, kBig);
  if (c.device_tokens % c.page_size != 0)
    r.fail("device_tokens", "must be a multiple of page_size");
  if (c.host_tokens % c.page_size != 0) r.fail("host_tokens", "must be a multiple of page_size");
  c.host_layout = r.choice("host_layout", std::string(to_string(c.host_layout)),
                           {"layer_first", "page_first"}) == "page_first"
                      ? KVLayout::kPageFirst
                      : KVLayout::kLayerFirst;
  const std::string policy = r.choice("write_policy", std::string(to_string(c.write_policy)),
                                      {"write_through", "write_through_selective", "write_back"});
  parse_write_policy(policy, &c.write_policy);
  const std::string eviction =
      r.choice("eviction_policy", std::string(to_string(c.eviction_policy)), {"lru", "lfu"});
  parse_eviction_policy(eviction, &c.eviction_policy);
  c.load_back_threshold_tokens =
      r.integer("load_back_threshold_tokens", c.load_back_threshold_tokens, 0, kBig);
  c.swa_window_tokens = r.integer("swa_window_tokens", 0, 0, kBig);
  c.swa_device_tokens = r.integer("swa_device_tokens", 0, 0, kBig);
  c.swa_host_tokens = r.integer("swa_host_tokens", 0, 0, kBig);
  if (c.swa_device_tokens % c.page_size != 0) {
    r.fail("swa_device_tokens", "must be a multiple of page_size");
  }
  if (c.swa_host_tokens % c.page_size != 0) {
    r.fail("swa_host_tokens", "must be a multiple of page_size");
  }
  c.mamba_device_states = r.integer("mamba_device_states", 0, 0, kBig);
  c.mamba_host_states = r.integer("mamba_host_states", 0, 0, kBig);
  c.mamba_layer_count = static_cast<int32_t>(r.integer("mamba_layer_count", 2, 1, 1024));
  c.mamba_state_bytes =
      static_cast<size_t>(r.integer("mamba_state_bytes", 64, 8, int64_t{1} << 24));
  if (c.mamba_state_bytes % 8 != 0) r.fail("mamba_state_bytes", "must be a multiple of 8");
  parse_storage(r, s);
  s.sparse_index_bytes_per_page = r.integer("sparse_index_bytes_per_page", 0, 0, 1 << 20);
  if (s.sparse_index_bytes_per_page % 8 != 0) {
    r.fail("sparse_index_bytes_per_page", "must be a multiple of 8");
  }
  c.prefetch_threshold_tokens =
      r.integer("prefetch_threshold_tokens", c.prefetch_threshold_tokens, 0, kBig);
  const std::string stop =
      r.choice("prefetch_stop_policy", std::string(to_string(c.prefetch_stop_policy)),
               {"best_effort", "wait_complete", "timeout"});
  parse_prefetch_stop_policy(stop, &c.prefetch_stop_policy);
  r.finish();
}

void parse_workload(JsonReader r, Scenario& s) {
  WorkloadOptions& w = s.workload;
  w.kind = workload_kind(r.choice("kind", std::string(to_string(w.kind)), kWorkloadKinds));
  w.requests = r.integer("requests", w.requests, 1, 10'000'000);
  w.arrival_rate = r.number("arrival_rate", w.arrival_rate, 1e-6, 1e6);
  w.prompt_min = r.integer("prompt_min", w.prompt_min, 1, 1 << 24);
  w.prompt_max = r.integer("prompt_max", w.prompt_max, 1, 1 << 24);
  if (w.prompt_max < w.prompt_min) r.fail("prompt_max", "is smaller than prompt_min");
  w.output_min = r.integer("output_min", w.output_min, 1, 1 << 20);
  w.output_max = r.integer("output_max", w.output_max, 1, 1 << 20);
  if (w.output_max < w.output_min) r.fail("output_max", "is smaller than output_min");
  w.system_prompts = r.integer("system_prompts", w.system_prompts, 1, 1 << 16);
  w.system_prompt_tokens = r.integer("system_prompt_tokens", w.system_prompt_tokens, 1, 1 << 24);
  w.sessions = r.integer("sessions", w.sessions, 1, 1 << 20);
  w.namespaces = r.integer("namespaces", w.namespaces, 1, 1 << 16);
  w.trace_path = r.string("trace", "");
  w.block_tokens = r.integer("block_tokens", w.block_tokens, 1, 1 << 20);
  w.ms_per_tick = r.number("ms_per_tick", w.ms_per_tick, 1e-6, 1e9);
  w.vocab = r.integer("vocab", w.vocab, 1, 1 << 30);
  w.cross_namespace = r.boolean("cross_namespace", w.cross_namespace);
  w.burst = r.integer("burst", w.burst, 1, 1 << 16);
  if (w.kind == WorkloadKind::kMooncake && w.trace_path.empty()) {
    r.fail("trace", "a mooncake workload needs a trace file");
  }
  r.finish();
}

void parse_scheduler(JsonReader r, Scenario& s) {
  SchedulerOptions& o = s.scheduler;
  o.mode =
      r.choice("mode", o.mode == SchedulerMode::kPd ? "pd" : "normal", {"normal", "pd"}) == "pd"
          ? SchedulerMode::kPd
          : SchedulerMode::kNormal;
  o.max_running = r.integer("max_running", o.max_running, 1, 1 << 20);
  o.chunk_tokens = r.integer("chunk_tokens", o.chunk_tokens, 1, kBig);
  o.decode_reserve_tokens = r.integer("decode_reserve_tokens", o.decode_reserve_tokens, 0, kBig);
  o.metadata_slots = r.integer("metadata_slots", o.metadata_slots, 1, 1 << 20);
  o.cpu_copy_chunk_tokens =
      r.integer("cpu_copy_chunk_tokens", o.cpu_copy_chunk_tokens, 1, int64_t{1} << 30);
  o.liveness_ticks = r.integer("liveness_ticks", o.liveness_ticks, 1, kBig);
  o.max_ticks = r.integer("max_ticks", o.max_ticks, 1, kBig);
  o.load_back = r.boolean("load_back", o.load_back);
  o.prefetch = r.boolean("prefetch", o.prefetch);
  r.finish();
}

void parse_faults(JsonReader r, Scenario& s) {
  s.faults.enabled = r.boolean("enabled", s.faults.enabled);
  s.faults.site_probability = r.number("site_probability", s.faults.site_probability, 0, 1);
  s.faults.fire_probability = r.number("fire_probability", s.faults.fire_probability, 0, 1);
  r.finish();
}

void parse_check(JsonReader r, Scenario& s) {
  s.check.full_every = r.integer("full_every", s.check.full_every, 0, kBig);
  s.check.content = r.boolean("content", s.check.content);
  r.finish();
}

void validate(const Scenario& s, const std::string& source, ScenarioUse use,
              const JsonLines* lines) {
  const HiCacheOptions& c = s.cache;
  auto at = [&](const std::string& field) {
    const size_t line = lines == nullptr ? 0 : lines->line(field);
    return line > 0 ? source + ":" + std::to_string(line) : source;
  };
  auto fail = [&](const std::string& field, const std::string& problem) {
    throw InputError(at(field) + ": field " + field + ": " + problem);
  };
  // Settings that only mean something together: an error names both fields.
  auto conflict = [&](const std::string& field, const std::string& other,
                      const std::string& problem) {
    const size_t line = lines == nullptr ? 0 : lines->exact_line(other);
    fail(field,
         problem + " (" + other + (line > 0 ? " on line " + std::to_string(line) : "") + ")");
  };
  // (A trace header's scenario was checked when it was recorded; version 1 traces predate
  // these checks, so they apply to scenario files.) The window is what makes a model hybrid
  // SWA; the SWA pool sizes only size it (0: the main pools' sizes).
  if (use == ScenarioUse::kRun && c.swa_window_tokens == 0 && c.swa_device_tokens > 0) {
    conflict("cache.swa_device_tokens", "cache.swa_window_tokens",
             "a SWA pool without a SWA window is never used: set cache.swa_window_tokens");
  }
  if (use == ScenarioUse::kRun && c.swa_window_tokens == 0 && c.swa_host_tokens > 0) {
    conflict("cache.swa_host_tokens", "cache.swa_window_tokens",
             "a SWA pool without a SWA window is never used: set cache.swa_window_tokens");
  }
  if (use == ScenarioUse::kRun && c.mamba_host_states > 0 && c.mamba_device_states == 0) {
    conflict("cache.mamba_host_states", "cache.mamba_device_states",
             "Mamba host states need Mamba device states");
  }
  if (use == ScenarioUse::kRun && s.storage && !c.hierarchical) {
    conflict("cache.storage", "cache.hierarchical",
             "the storage tier sits below the host tier: it needs hierarchical true");
  }
  if (use == ScenarioUse::kRun && !s.workload.trace_path.empty() &&
      s.workload.kind != WorkloadKind::kMooncake) {
    conflict("workload.trace", "workload.kind",
             "a trace file is read by the mooncake workload only, not \"" +
                 std::string(to_string(s.workload.kind)) + "\"");
  }
  if (c.has_swa() && c.swa_window_tokens < c.page_size) {
    fail("cache.swa_window_tokens", "must be at least one page");
  }
  // The largest request must fit the device pool once, or it could never run. (A trace's
  // configuration may have been shrunk below its workload: its ops are what replay.)
  const int64_t largest =
      s.workload.kind == WorkloadKind::kMooncake || use == ScenarioUse::kReplay
          ? 0
          : s.workload.system_prompt_tokens + s.workload.prompt_max * 4 + s.workload.output_max;
  if (largest > c.device_tokens) {
    fail("cache.device_tokens", std::to_string(c.device_tokens) +
                                    " tokens cannot hold the largest request the workload "
                                    "makes (" +
                                    std::to_string(largest) + " tokens)");
  }
  if (s.scheduler.mode == SchedulerMode::kPd && (c.has_mamba() || c.has_swa())) {
    fail("scheduler.mode",
         "pd mode supports full-attention models (with a sparse index buffer) "
         "only; SWA and Mamba retract-resume are not modelled yet");
  }
  if (s.sparse_index_bytes_per_page > 0 && s.scheduler.mode != SchedulerMode::kPd) {
    fail("cache.sparse_index_bytes_per_page",
         "the sparse index buffer is modelled for pd mode only (HiCache does not back it up)");
  }
  if (s.scheduler.mode == SchedulerMode::kPd && s.storage) {
    fail("scheduler.mode", "pd decode instances run without a storage tier here");
  }
  if (c.has_mamba() && c.mamba_device_states < s.scheduler.max_running + 1) {
    fail("cache.mamba_device_states", "needs one state per running request plus one");
  }
}

}  // namespace

std::string_view to_string(WorkloadKind kind) {
  return kWorkloadKinds.at(static_cast<size_t>(kind));
}

Scenario default_scenario() {
  Scenario s;
  s.name = "default";
  s.description =
      "Mixed workload (shared prompts, multi-turn, agentic, uniform) on a small paged cache "
      "with write-through backup, load-back and fault injection; the built-in job of `kvsim run`.";
  s.cache = HiCacheOptions{.page_size = 4,
                           .layer_count = 2,
                           .item_bytes = 16,
                           .device_tokens = 1024,
                           .host_tokens = 2048,
                           .load_back_threshold_tokens = 8};
  return s;
}

Scenario parse_scenario(const nlohmann::json& doc, const std::string& source, ScenarioUse use,
                        const JsonLines* lines) {
  Scenario s = default_scenario();
  s.description.clear();
  s.source = source;
  JsonReader r(doc, source, "", lines);
  s.name = r.required_string("name");
  s.description = r.string("description", "");
  s.seed = static_cast<uint64_t>(r.integer("seed", 1, 0, INT64_MAX));
  parse_cache(r.object("cache"), s);
  parse_workload(r.object("workload"), s);
  parse_scheduler(r.object("scheduler"), s);
  parse_faults(r.object("faults"), s);
  parse_check(r.object("check"), s);
  r.finish();
  validate(s, source, use, lines);
  return s;
}

Scenario load_scenario(const std::string& path) {
  JsonLines lines;
  const nlohmann::json doc = parse_json(read_text_file(path), path, 1, &lines);
  Scenario s = parse_scenario(doc, path, ScenarioUse::kRun, &lines);
  if (!s.workload.trace_path.empty() &&
      std::filesystem::path(s.workload.trace_path).is_relative()) {
    s.workload.trace_path =
        (std::filesystem::path(path).parent_path() / s.workload.trace_path).lexically_normal();
  }
  return s;
}

// The boolean form when it says everything (older traces and scenarios keep their text).
static nlohmann::json storage_json(const Scenario& s) {
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

nlohmann::json to_json(const Scenario& s) {
  const HiCacheOptions& c = s.cache;
  nlohmann::json cache = {
      {"page_size", c.page_size},
      {"hierarchical", c.hierarchical},
      {"layer_count", c.layer_count},
      {"item_bytes", c.item_bytes},
      {"device_tokens", c.device_tokens},
      {"host_tokens", c.host_tokens},
      {"host_layout", to_string(c.host_layout)},
      {"write_policy", to_string(c.write_policy)},
      {"eviction_policy", to_string(c.eviction_policy)},
      {"load_back_threshold_tokens", c.load_back_threshold_tokens},
      {"swa_window_tokens", c.swa_window_tokens},
      {"swa_device_tokens", c.swa_device_tokens},
      {"swa_host_tokens", c.swa_host_tokens},
      {"mamba_device_states", c.mamba_device_states},
      {"mamba_host_states", c.mamba_host_states},
      {"mamba_layer_count", c.mamba_layer_count},
      {"mamba_state_bytes", c.mamba_state_bytes},
      {"storage", storage_json(s)},
      {"sparse_index_bytes_per_page", s.sparse_index_bytes_per_page},
      {"prefetch_threshold_tokens", c.prefetch_threshold_tokens},
      {"prefetch_stop_policy", to_string(c.prefetch_stop_policy)},
  };
  const WorkloadOptions& w = s.workload;
  nlohmann::json workload = {
      {"kind", to_string(w.kind)},
      {"requests", w.requests},
      {"arrival_rate", w.arrival_rate},
      {"prompt_min", w.prompt_min},
      {"prompt_max", w.prompt_max},
      {"output_min", w.output_min},
      {"output_max", w.output_max},
      {"system_prompts", w.system_prompts},
      {"system_prompt_tokens", w.system_prompt_tokens},
      {"sessions", w.sessions},
      {"namespaces", w.namespaces},
      {"block_tokens", w.block_tokens},
      {"ms_per_tick", w.ms_per_tick},
      {"vocab", w.vocab},
      {"cross_namespace", w.cross_namespace},
      {"burst", w.burst},
  };
  if (!w.trace_path.empty()) workload["trace"] = w.trace_path;
  const SchedulerOptions& o = s.scheduler;
  return nlohmann::json{
      {"name", s.name},
      {"description", s.description},
      {"seed", s.seed},
      {"cache", cache},
      {"workload", workload},
      {"scheduler",
       {{"mode", o.mode == SchedulerMode::kPd ? "pd" : "normal"},
        {"max_running", o.max_running},
        {"chunk_tokens", o.chunk_tokens},
        {"decode_reserve_tokens", o.decode_reserve_tokens},
        {"metadata_slots", o.metadata_slots},
        {"cpu_copy_chunk_tokens", o.cpu_copy_chunk_tokens},
        {"liveness_ticks", o.liveness_ticks},
        {"max_ticks", o.max_ticks},
        {"load_back", o.load_back},
        {"prefetch", o.prefetch}}},
      {"faults",
       {{"enabled", s.faults.enabled},
        {"site_probability", s.faults.site_probability},
        {"fire_probability", s.faults.fire_probability}}},
      {"check", {{"full_every", s.check.full_every}, {"content", s.check.content}}},
  };
}

}  // namespace kvsim::sim
