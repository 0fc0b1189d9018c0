// The rules between scenario fields (sim/config/scenario_fields.h): what one field's value asks
// of another, checked by the parser and written into the JSON Schema.
#include <string>
#include <vector>

#include "sim/config/scenario_fields.h"
#include "sim/config/scenario_schema_pieces.h"

namespace kvsim::sim {
namespace {

using schema::has;
using schema::positive;
using schema::when;

std::vector<ScenarioRule> make_rules() {
  std::vector<ScenarioRule> t;
  // The window is what makes a model hybrid SWA; the SWA pool sizes only size it.
  const std::string no_window =
      "a SWA pool without a SWA window is never used: set cache.swa_window_tokens";
  t.push_back({"cache.swa_device_tokens", "cache.swa_window_tokens", true,
               "A SWA pool size needs a SWA window.", [no_window](const Scenario& s, ScenarioUse) {
                 return s.cache.swa_window_tokens == 0 && s.cache.swa_device_tokens > 0
                            ? no_window
                            : std::string();
               }});
  t.push_back({"cache.swa_host_tokens", "cache.swa_window_tokens", true,
               "A SWA pool size needs a SWA window.", [no_window](const Scenario& s, ScenarioUse) {
                 return s.cache.swa_window_tokens == 0 && s.cache.swa_host_tokens > 0
                            ? no_window
                            : std::string();
               }});
  t.push_back({"cache.mamba_host_states", "cache.mamba_device_states", true,
               "Mamba host states need Mamba device states.", [](const Scenario& s, ScenarioUse) {
                 return s.cache.mamba_host_states > 0 && s.cache.mamba_device_states == 0
                            ? std::string("Mamba host states need Mamba device states")
                            : std::string();
               }});
  t.push_back({"cache.storage", "cache.hierarchical", true,
               "The storage tier sits below the host tier: it needs `hierarchical` true.",
               [](const Scenario& s, ScenarioUse) {
                 return s.storage && !s.cache.hierarchical
                            ? std::string(
                                  "the storage tier sits below the host tier: it needs "
                                  "hierarchical true")
                            : std::string();
               }});
  t.push_back({"workload.trace", "workload.kind", true,
               "A trace file is read by the mooncake workload only.",
               [](const Scenario& s, ScenarioUse) {
                 return !s.workload.trace_path.empty() && s.workload.kind != WorkloadKind::kMooncake
                            ? "a trace file is read by the mooncake workload only, not \"" +
                                  std::string(to_string(s.workload.kind)) + "\""
                            : std::string();
               }});
  t[0].schema = when(has("cache", "swa_device_tokens", positive()),
                     has("cache", "swa_window_tokens", positive()));
  t[1].schema = when(has("cache", "swa_host_tokens", positive()),
                     has("cache", "swa_window_tokens", positive()));
  t[2].schema = when(has("cache", "mamba_host_states", positive()),
                     has("cache", "mamba_device_states", positive()));
  t[3].schema =
      when(has("cache", "storage",
               nlohmann::json::parse(
                   R"({"anyOf": [{"const": true},
                            {"type": "object", "properties": {"enabled": {"const": true}}}]})")),
           nlohmann::json::parse(
               R"({"properties": {"cache": {"properties": {"hierarchical": {"const": true}}}}})"));
  t[4].schema = when(has("workload", "trace", nlohmann::json::object()),
                     has("workload", "kind", nlohmann::json::parse(R"({"const": "mooncake"})")));
  t.push_back({"cache.swa_window_tokens", "", false,
               "A SWA window is at least one page (`page_size`).",
               [](const Scenario& s, ScenarioUse) {
                 return s.cache.has_swa() && s.cache.swa_window_tokens < s.cache.page_size
                            ? std::string("must be at least one page")
                            : std::string();
               }});
  t.push_back(
      {"cache.device_tokens", "", false,
       "The device pool holds the largest request the workload makes: `system_prompt_tokens` + "
       "4 × `prompt_max` + `output_max` (an agentic conversation grows to 4 × `prompt_max`). "
       "Not checked for mooncake workloads, whose requests are the trace's.",
       [](const Scenario& s, ScenarioUse use) {
         // A trace's configuration may have been shrunk below its workload: its ops are what
         // replay.
         const int64_t largest =
             s.workload.kind == WorkloadKind::kMooncake || use == ScenarioUse::kReplay
                 ? 0
                 : s.workload.system_prompt_tokens + s.workload.prompt_max * 4 +
                       s.workload.output_max;
         return largest > s.cache.device_tokens
                    ? std::to_string(s.cache.device_tokens) +
                          " tokens cannot hold the largest request the workload makes (" +
                          std::to_string(largest) + " tokens)"
                    : std::string();
       }});
  t.push_back({"scheduler.mode", "", false,
               "pd mode models full-attention models (with an optional sparse index buffer) "
               "only: no SWA window, no Mamba states.",
               [](const Scenario& s, ScenarioUse) {
                 return s.scheduler.mode == SchedulerMode::kPd &&
                                (s.cache.has_mamba() || s.cache.has_swa())
                            ? std::string(
                                  "pd mode supports full-attention models (with a sparse "
                                  "index buffer) only; SWA and Mamba retract-resume are "
                                  "not modelled yet")
                            : std::string();
               }});
  t.back().schema = when(has("scheduler", "mode", nlohmann::json::parse(R"({"const": "pd"})")),
                         nlohmann::json::parse(R"({"properties": {"cache": {"properties": {
          "swa_window_tokens": {"const": 0}, "mamba_device_states": {"const": 0}}}}})"));
  t.push_back({"cache.sparse_index_bytes_per_page", "", false,
               "The sparse index buffer is modelled for pd mode only.",
               [](const Scenario& s, ScenarioUse) {
                 return s.sparse_index_bytes_per_page > 0 && s.scheduler.mode != SchedulerMode::kPd
                            ? std::string(
                                  "the sparse index buffer is modelled for pd mode only "
                                  "(HiCache does not back it up)")
                            : std::string();
               }});
  t.back().schema = when(has("cache", "sparse_index_bytes_per_page", positive()),
                         has("scheduler", "mode", nlohmann::json::parse(R"({"const": "pd"})")));
  t.push_back({"scheduler.mode", "", false, "pd mode runs without a storage tier.",
               [](const Scenario& s, ScenarioUse) {
                 return s.scheduler.mode == SchedulerMode::kPd && s.storage
                            ? std::string("pd decode instances run without a storage tier here")
                            : std::string();
               }});
  t.back().schema =
      when(has("scheduler", "mode", nlohmann::json::parse(R"({"const": "pd"})")),
           nlohmann::json::parse(R"({"properties": {"cache": {"properties": {"storage": {"anyOf": [
          {"const": false},
          {"type": "object", "properties": {"enabled": {"const": false}},
           "required": ["enabled"]}]}}}}})"));
  t.push_back({"cache.mamba_device_states", "", false,
               "With Mamba, `mamba_device_states` ≥ `scheduler.max_running` + 1.",
               [](const Scenario& s, ScenarioUse) {
                 return s.cache.has_mamba() &&
                                s.cache.mamba_device_states < s.scheduler.max_running + 1
                            ? std::string("needs one state per running request plus one")
                            : std::string();
               }});
  return t;
}

}  // namespace

const std::vector<ScenarioRule>& scenario_rules() {
  static const std::vector<ScenarioRule> rules = make_rules();
  return rules;
}

}  // namespace kvsim::sim
