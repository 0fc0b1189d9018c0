// `kvsim schema`: the JSON Schema and docs/scenario-reference.md, both generated from the
// parser's field table (sim/config/scenario_fields.cpp) and its rules between fields.
#include <climits>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/config/scenario_fields.h"

namespace kvsim::sim {
namespace {

// 2^N for large powers of two, 2^63-1 for INT64_MAX, else the number.
std::string int_text(int64_t v) {
  if (v == INT64_MAX) return "2^63-1";
  if (v >= (int64_t{1} << 16) && (v & (v - 1)) == 0) {
    int n = 0;
    while ((int64_t{1} << n) != v)
      ++n;
    return "2^" + std::to_string(n);
  }
  return std::to_string(v);
}

std::string number_text(double v) {
  return format_number(v);
}

// What the value must satisfy beyond its type, in words ("" if nothing).
std::string constraints(const FieldSpec& f) {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  if (f.type == FieldType::kInteger) {
    add(int_text(f.imin) + " to " + int_text(f.imax));
    if (f.multiple_of > 0) add("multiple of " + std::to_string(f.multiple_of));
    if (!f.multiple_of_field.empty()) add("multiple of `" + f.multiple_of_field + "`");
    if (!f.at_least_field.empty()) add("at least `" + f.at_least_field + "`");
  } else if (f.type == FieldType::kNumber) {
    add(number_text(f.dmin) + " to " + number_text(f.dmax));
  } else if (f.type == FieldType::kChoice) {
    std::string list;
    for (const FieldChoice& c : f.choices)
      list += (list.empty() ? "" : ", ") + ("`" + c.value + "`");
    add("one of " + list);
  }
  return out;
}

std::string type_text(const FieldSpec& f) {
  switch (f.type) {
    case FieldType::kInteger:
      return "integer";
    case FieldType::kNumber:
      return "number";
    case FieldType::kBoolean:
      return "boolean";
    case FieldType::kString:
      return "string";
    case FieldType::kChoice:
      return "string";
    case FieldType::kObject:
      return "object";
    case FieldType::kBoolOrObject:
      return "boolean or object";
  }
  return "?";
}

// The meaning with the choices' meanings and the section's notes, as one paragraph.
std::string full_meaning(const FieldSpec& f, bool markdown) {
  std::string m = f.meaning;
  for (const FieldChoice& c : f.choices) {
    m += " " + (markdown ? "`" + c.value + "`" : "\"" + c.value + "\"") + ": " + c.meaning + ".";
  }
  if (!f.notes.empty()) m += " " + f.notes;
  return m;
}

nlohmann::json section_schema(const std::string& section);

nlohmann::json field_schema(const FieldSpec& f) {
  nlohmann::json j;
  std::string description = full_meaning(f, false);
  const std::string c = constraints(f);
  if (!f.multiple_of_field.empty() || !f.at_least_field.empty()) {
    description += " (" + c + ")";
  }
  switch (f.type) {
    case FieldType::kInteger:
      j["type"] = "integer";
      j["minimum"] = f.imin;
      j["maximum"] = f.imax;
      if (f.multiple_of > 0) j["multipleOf"] = f.multiple_of;
      break;
    case FieldType::kNumber:
      j["type"] = "number";
      j["minimum"] = f.dmin;
      j["maximum"] = f.dmax;
      break;
    case FieldType::kBoolean:
      j["type"] = "boolean";
      break;
    case FieldType::kString:
      j["type"] = "string";
      break;
    case FieldType::kChoice: {
      j["type"] = "string";
      nlohmann::json values = nlohmann::json::array();
      for (const FieldChoice& ch : f.choices)
        values.push_back(ch.value);
      j["enum"] = values;
      break;
    }
    case FieldType::kObject:
      j = section_schema(f.path());
      break;
    case FieldType::kBoolOrObject:
      j["oneOf"] = {nlohmann::json{{"type", "boolean"}}, section_schema(f.path())};
      break;
  }
  j["description"] = description;
  const nlohmann::json d = f.default_value();
  if (!d.is_null()) j["default"] = d;
  return j;
}

nlohmann::json section_schema(const std::string& section) {
  nlohmann::json properties = nlohmann::json::object();
  nlohmann::json required = nlohmann::json::array();
  for (const FieldSpec& f : scenario_fields()) {
    if (f.section != section) continue;
    properties[f.name] = field_schema(f);
    if (f.required) required.push_back(f.name);
  }
  nlohmann::json j = {{"type", "object"}, {"properties", properties}};
  j["additionalProperties"] = false;
  if (!required.empty()) j["required"] = required;
  return j;
}

// GitHub's anchor of a heading "`cache.storage`".
std::string anchor(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c != '.') out += c;
  }
  return out;
}

std::string escape_cell(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

const char* kExample = R"({
  "name": "first_scenario",
  "description": "Multi-turn chat on a small two-tier cache with write-back and faults",
  "seed": 1,
  "cache": { "page_size": 4, "device_tokens": 512, "host_tokens": 1024,
             "write_policy": "write_back" },
  "workload": { "kind": "multi_turn", "requests": 100, "sessions": 6,
                "prompt_min": 8, "prompt_max": 32, "output_max": 16 },
  "scheduler": { "max_running": 6 },
  "faults": { "enabled": true }
})";

}  // namespace

nlohmann::json scenario_json_schema() {
  nlohmann::json j = section_schema("");
  j["$schema"] = "https://json-schema.org/draft/2020-12/schema";
  j["title"] = "kvsim scenario";
  nlohmann::json all = nlohmann::json::array();
  for (const FieldSpec& f : scenario_fields()) {
    if (!f.check_schema.is_null()) all.push_back(f.check_schema);
  }
  for (const ScenarioRule& r : scenario_rules()) {
    if (!r.schema.is_null()) all.push_back(r.schema);
  }
  if (!all.empty()) j["allOf"] = all;
  j["description"] =
      "A kvsim simulator scenario (kvsim run FILE). Generated by `kvsim schema` from the "
      "parser's field table; docs/scenario-reference.md has the same fields and every rule "
      "between fields (allOf holds those a JSON Schema can express).";
  return j;
}

std::string scenario_reference_markdown() {
  std::string md;
  md += "# Scenario reference\n\n";
  md +=
      "<!-- Generated from the parser's field table (sim/config/scenario_fields.cpp) by\n"
      "     `kvsim schema --markdown > docs/scenario-reference.md`: do not edit by hand. -->\n\n";
  md +=
      "A scenario is one JSON object in a file: `kvsim run FILE` runs it (`kvsim run - < FILE` "
      "reads standard input). Only `name` is required; every other field takes the default "
      "below when it is left out, and a section left out is all defaults. An unknown field, a "
      "wrong type, a value out of range or a rule below that does not hold is an error naming "
      "the file, line and field (`kvsim: FILE:LINE: field cache.page_size: ...`, exit 2).\n\n"
      "This page and `kvsim schema` (a JSON Schema, draft 2020-12, checked in as "
      "[scenario.schema.json](scenario.schema.json): point an editor at it with a top-level "
      "`\"$schema\": \"../docs/scenario.schema.json\"` in the file or VS Code's `json.schemas` "
      "setting) are generated from the table the parser reads the fields through, so "
      "they list exactly what the parser accepts, with its ranges and defaults. "
      "[scenarios/README.md](../scenarios/README.md) describes the named scenarios, which "
      "fields only scale cost, and sensible sizes.\n\n";
  md += "## A first scenario\n\n";
  md += "```json\n" + std::string(kExample) + "\n```\n\n";
  md +=
      "Save it as `first.json`: `kvsim run first.json` prints `first_scenario seed 1: ok`, what "
      "ran and what was checked, and the event hash; `kvsim run first.json --seeds 20` runs "
      "seeds 1 to 20 and counts those with violations (each one's invariant and trace to "
      "replay are printed; [cli.md](cli.md) says what `ok` checked and what the exit codes "
      "mean). The device pool (512 tokens) must hold the largest request the "
      "generator can make, 64 + 4 × 32 + 16 = 208 tokens (the rule on `cache.device_tokens` "
      "below); six running requests from six growing sessions fill it, so nodes are evicted "
      "to the host pool (written there only when evicted: `write_back`) and loaded back on a "
      "session's next turn. Every field left out takes its default; this is the same scenario "
      "with every field written out (what a trace header records):\n\n";
  {
    const Scenario s = parse_scenario(nlohmann::json::parse(kExample), "example");
    md += "```json\n" + to_json(s).dump(2) + "\n```\n\n";
  }
  // Sections in table order: the top level, then each object row.
  std::vector<std::pair<std::string, std::string>> sections = {{"", "The top level of the file."}};
  for (const FieldSpec& f : scenario_fields()) {
    if (f.type == FieldType::kObject || f.type == FieldType::kBoolOrObject) {
      sections.emplace_back(f.path(), full_meaning(f, true));
    }
  }
  for (const auto& [section, meaning] : sections) {
    md += section.empty() ? "## Top level\n\n" : "## `" + section + "`\n\n";
    md += meaning + "\n\n";
    md += "| field | type | range | default | meaning |\n|---|---|---|---|---|\n";
    for (const FieldSpec& f : scenario_fields()) {
      if (f.section != section) continue;
      const nlohmann::json d = f.default_value();
      std::string def = f.required ? "required" : d.is_null() ? "(section)" : "`" + d.dump() + "`";
      const bool is_section = f.type == FieldType::kObject || f.type == FieldType::kBoolOrObject;
      const std::string meaning_cell =
          is_section ? f.meaning + " See [`" + f.path() + "`](#" + anchor(f.path()) + ")."
                     : full_meaning(f, true);
      md += "| `" + f.name + "` | " + type_text(f) + " | " + escape_cell(constraints(f)) + " | " +
            escape_cell(def) + " | " + escape_cell(meaning_cell) + " |\n";
    }
    md += "\n";
  }
  md += "## Rules between fields\n\n";
  md +=
      "Checked after every field has been read; the error names the first field (and the "
      "other one with its line). Rules marked *scenario files only* are not applied to the "
      "scenario a trace header embeds; those marked *also in the JSON Schema* are flagged by "
      "an editor too (a schema cannot do arithmetic between fields, so the others are "
      "checked by kvsim only).\n\n";
  for (const ScenarioRule& r : scenario_rules()) {
    md += "- `" + r.field + "`" + (r.other.empty() ? "" : " (with `" + r.other + "`)") + ": " +
          r.doc + (r.run_only ? " *Scenario files only.*" : "") +
          (r.schema.is_null() ? "" : " *Also in the JSON Schema.*") + "\n";
  }
  md += "\n";
  return md;
}

}  // namespace kvsim::sim
