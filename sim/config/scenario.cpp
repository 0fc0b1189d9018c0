#include "sim/config/scenario.h"

#include <filesystem>

#include "sim/base/json_reader.h"
#include "sim/config/scenario_fields.h"

namespace kvsim::sim {
namespace {

void validate(const Scenario& s, const std::string& source, ScenarioUse use,
              const JsonLines* lines) {
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
  // The rules between fields (sim/config/scenario_fields.cpp). (A trace header's scenario was
  // checked when it was recorded; version 1 traces predate the run-only rules, so they apply to
  // scenario files.)
  for (const ScenarioRule& rule : scenario_rules()) {
    if (rule.run_only && use != ScenarioUse::kRun) continue;
    const std::string problem = rule.problem(s, use);
    if (problem.empty()) continue;
    if (rule.other.empty()) fail(rule.field, problem);
    conflict(rule.field, rule.other, problem);
  }
}

}  // namespace

// The kinds are the choices of the workload.kind row, in enum order.
std::string_view to_string(WorkloadKind kind) {
  for (const FieldSpec& f : scenario_fields()) {
    if (f.section == "workload" && f.name == "kind") {
      return f.choices.at(static_cast<size_t>(kind)).value;
    }
  }
  return "?";
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
  read_section(r, "", s);
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

std::optional<std::string> header_round_trip_problem(const Scenario& s) {
  const nlohmann::json written = to_json(s);
  nlohmann::json back;
  try {
    back = to_json(parse_scenario(written, "trace header", ScenarioUse::kReplay));
  } catch (const InputError& e) {
    return std::string("the header does not parse: ") + e.what();
  }
  if (back == written) return std::nullopt;
  // Flattened, both are maps of JSON pointers ("/cache/eviction_policy") in sorted order.
  const nlohmann::json a = written.flatten();
  const nlohmann::json b = back.flatten();
  for (const auto& [path, value] : a.items()) {
    if (!b.contains(path) || b.at(path) != value) {
      return "field " + path + " was written as " + value.dump() + " and reads back as " +
             (b.contains(path) ? b.at(path).dump() : std::string("nothing"));
    }
  }
  for (const auto& [path, value] : b.items()) {
    if (!a.contains(path))
      return "field " + path + " was not written but reads back as " + value.dump();
  }
  return std::nullopt;
}

nlohmann::json to_json(const Scenario& s) {
  return write_section(s, "");
}

}  // namespace kvsim::sim
