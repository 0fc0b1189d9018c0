// The scenario format's single source: one row per field (section, name, type, range, default,
// meaning). The parser (sim/config/scenario.cpp) reads every field through these rows, to_json
// writes them, and `kvsim schema` generates the JSON Schema and docs/scenario-reference.md from
// them: a field cannot be parsed without being documented, and the range and default the parser
// uses are the ones the reference shows.
//
// Adding a field: one row in scenario_fields.cpp (in the section's block, in reading order) and
// the member in sim/config/scenario.h; then regenerate docs/scenario-reference.md
// (`kvsim schema --markdown > docs/scenario-reference.md`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/scenario.h"

namespace kvsim::sim {

class JsonReader;

enum class FieldType : uint8_t {
  kInteger,
  kNumber,
  kBoolean,
  kString,
  kChoice,        // a string, one of `choices`
  kObject,        // a section: its rows are those whose section is this row's path
  kBoolOrObject,  // true/false, or an object with its own rows (cache.storage)
};

struct FieldChoice {
  std::string value;
  std::string meaning;
};

struct FieldSpec {
  std::string section;  // "" (top level), "cache", "cache.storage", "workload", ...
  std::string name;
  FieldType type = FieldType::kInteger;
  std::string meaning;
  // kInteger: [imin, imax]; kNumber: [dmin, dmax].
  int64_t imin = 0, imax = 0;
  double dmin = 0, dmax = 0;
  std::vector<FieldChoice> choices;  // kChoice
  int64_t multiple_of = 0;           // kInteger: the value must be a multiple of this
  std::string multiple_of_field;     // kInteger: ... of this earlier field of the section
  std::string at_least_field;        // kInteger: not smaller than this earlier field
  bool required = false;             // no default: the field must be given
  bool omit_when_empty = false;      // to_json leaves an empty string out
  // The default when the section's own base differs from the scenario's (cache.storage.enabled:
  // writing the object means "on").
  std::optional<nlohmann::json> fixed_default;
  // The value in a Scenario (for to_json and for the default: get(scenario_base())) and how a
  // parsed value is stored. Sections (kObject) have neither.
  std::function<nlohmann::json(const Scenario&)> get;
  std::function<void(Scenario&, const nlohmann::json&)> set;
  // Checks that need the section's fields together (after they are read, before unknown
  // fields are rejected); documented by `notes`.
  std::function<void(JsonReader&, const Scenario&)> check;
  std::string notes;
  nlohmann::json check_schema;  // `check` as a JSON Schema "if"/"then", where it can be said

  std::string path() const { return section.empty() ? name : section + "." + name; }
  nlohmann::json default_value() const;  // null for required fields and sections
};

// Every field, sections before their fields, each section's fields in reading order.
const std::vector<FieldSpec>& scenario_fields();
// What a field not given takes its value from: default_scenario() without its description.
const Scenario& scenario_base();

// Reads the rows of `section` from `r` into `s` (recursing into sections), then the section's
// checks; rejects fields of the object that no row names (suggesting the nearest name).
void read_section(JsonReader& r, const std::string& section, Scenario& s);
// The rows of `section` of `s` as JSON (the canonical form traces embed).
nlohmann::json write_section(const Scenario& s, const std::string& section);

// A rule between fields that a section's own reading cannot check (validate() in scenario.cpp).
struct ScenarioRule {
  ScenarioRule(std::string f, std::string o, bool run, std::string d,
               std::function<std::string(const Scenario&, ScenarioUse)> p)
      : field(std::move(f)),
        other(std::move(o)),
        run_only(run),
        doc(std::move(d)),
        problem(std::move(p)) {}
  std::string field;      // the field the error names
  std::string other;      // the other field involved, named with its line ("" = none)
  bool run_only = false;  // not applied to a trace header (kReplay)
  std::string doc;        // for the reference
  // The problem, or "" when the rule holds.
  std::function<std::string(const Scenario&, ScenarioUse)> problem;
  // The rule as a JSON Schema "if"/"then" over the whole document, for editors (null where a
  // schema cannot say it, e.g. arithmetic between fields). cli.scenario_schema_validates_scenarios
  // checks that the schema rejects the bad scenarios of tests/data that break these rules.
  nlohmann::json schema;
};
const std::vector<ScenarioRule>& scenario_rules();

// `kvsim schema`: a JSON Schema (draft 2020-12) of a scenario file.
nlohmann::json scenario_json_schema();
// `kvsim schema --markdown`: docs/scenario-reference.md.
std::string scenario_reference_markdown();

}  // namespace kvsim::sim
