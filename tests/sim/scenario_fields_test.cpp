// The scenario field table (sim/config/scenario_fields.h) is what the parser reads: every row's
// range and default are the ones the parser applies, every field the parser accepts has a row, and
// the generated schema and reference show each row.
#include <gtest/gtest.h>

#include <climits>
#include <set>

#include "sim/base/json_reader.h"
#include "sim/config/scenario_fields.h"

namespace kvsim::sim {
namespace {

// A scenario document with `value` at the row's path (sections created as needed).
nlohmann::json with_field(const FieldSpec& f, const nlohmann::json& value) {
  nlohmann::json doc = {{"name", "t"}};
  nlohmann::json* at = &doc;
  if (!f.section.empty()) {
    size_t start = 0;
    const std::string& sec = f.section;
    while (start <= sec.size()) {
      const size_t dot = sec.find('.', start);
      const std::string part = sec.substr(start, dot == std::string::npos ? dot : dot - start);
      if (!at->contains(part)) (*at)[part] = nlohmann::json::object();
      at = &(*at)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  (*at)[f.name] = value;
  return doc;
}

// The same document without the field itself (its sections kept: an empty cache.storage
// object means "storage on, defaults").
nlohmann::json without_field(const FieldSpec& f) {
  nlohmann::json doc = with_field(f, nullptr);
  nlohmann::json* at = &doc;
  if (!f.section.empty()) {
    size_t start = 0;
    const std::string& sec = f.section;
    while (true) {
      const size_t dot = sec.find('.', start);
      at = &(*at)[sec.substr(start, dot == std::string::npos ? dot : dot - start)];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  }
  at->erase(f.name);
  return doc;
}

std::string error_of(const nlohmann::json& doc) {
  try {
    parse_scenario(doc, "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ScenarioFields, EveryRowIsDocumentedAndUnique) {
  std::set<std::string> paths;
  for (const FieldSpec& f : scenario_fields()) {
    EXPECT_TRUE(paths.insert(f.path()).second) << f.path() << " twice";
    EXPECT_GE(f.meaning.size(), 10u) << f.path() << " has no meaning";
    if (f.type != FieldType::kObject) {
      EXPECT_TRUE(f.get && f.set) << f.path();
    }
    if (!f.section.empty()) {
      EXPECT_TRUE(paths.count(f.section)) << f.path() << ": its section comes after it";
    }
    for (const FieldChoice& c : f.choices)
      EXPECT_FALSE(c.meaning.empty()) << f.path();
  }
  EXPECT_GT(paths.size(), 50u);
}

// A field given explicitly at its documented default parses to the same scenario as the field
// left out: the default the reference shows is the one the parser uses.
TEST(ScenarioFields, DocumentedDefaultIsTheParsersDefault) {
  int checked = 0;
  for (const FieldSpec& f : scenario_fields()) {
    const nlohmann::json d = f.default_value();
    if (d.is_null()) continue;
    const Scenario given = parse_scenario(with_field(f, d), "s.json");
    const Scenario left_out = parse_scenario(without_field(f), "s.json");
    EXPECT_EQ(to_json(given), to_json(left_out)) << f.path() << " default " << d.dump();
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

// Just outside the documented range is an error naming the field; the bounds themselves pass
// the range check (they may still break a rule between fields, which names another problem).
TEST(ScenarioFields, DocumentedRangeIsTheParsersRange) {
  int checked = 0;
  for (const FieldSpec& f : scenario_fields()) {
    if (f.type == FieldType::kInteger) {
      if (f.imin > INT64_MIN) {
        const std::string e = error_of(with_field(f, f.imin - 1));
        EXPECT_NE(
            e.find("field " + f.path() + ": " + std::to_string(f.imin - 1) + " is out of range"),
            std::string::npos)
            << e;
      }
      if (f.imax < INT64_MAX) {
        const std::string e = error_of(with_field(f, f.imax + 1));
        EXPECT_NE(
            e.find("field " + f.path() + ": " + std::to_string(f.imax + 1) + " is out of range"),
            std::string::npos)
            << e;
      }
      for (int64_t bound : {f.imin, f.imax}) {
        EXPECT_EQ(error_of(with_field(f, bound)).find("out of range"), std::string::npos)
            << f.path() << " " << bound;
      }
      ++checked;
    } else if (f.type == FieldType::kNumber) {
      const double below = f.dmin - (f.dmin == 0 ? 0.5 : f.dmin / 2);
      EXPECT_NE(error_of(with_field(f, below)).find("field " + f.path() + ": "), std::string::npos)
          << f.path();
      EXPECT_NE(error_of(with_field(f, f.dmax * 2)).find("is out of range"), std::string::npos)
          << f.path();
      ++checked;
    } else if (f.type == FieldType::kChoice) {
      EXPECT_NE(error_of(with_field(f, "no_such_choice"))
                    .find("field " + f.path() + ": \"no_such_choice\" is not one of"),
                std::string::npos)
          << f.path();
      for (const FieldChoice& c : f.choices) {
        EXPECT_EQ(error_of(with_field(f, c.value)).find("is not one of"), std::string::npos)
            << f.path() << " " << c.value;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(ScenarioFields, ConstraintsFromTheTableAreEnforced) {
  for (const FieldSpec& f : scenario_fields()) {
    if (f.multiple_of > 0) {
      const std::string e = error_of(with_field(f, f.imin + f.multiple_of / 2));
      EXPECT_NE(
          e.find("field " + f.path() + ": must be a multiple of " + std::to_string(f.multiple_of)),
          std::string::npos)
          << e;
    }
    if (!f.at_least_field.empty()) {
      nlohmann::json doc = with_field(f, 5);
      doc[f.section][f.at_least_field] = 6;
      EXPECT_NE(error_of(doc).find("field " + f.path() + ": is smaller than " + f.at_least_field),
                std::string::npos)
          << f.path();
    }
  }
}

// The parser accepts exactly the table's fields: an unknown one is named, with the nearest
// known name when it looks like a misspelling.
TEST(ScenarioFields, UnknownFieldSuggestsTheNearestName) {
  EXPECT_NE(error_of({{"name", "t"}, {"cache", {{"devcie_tokens", 512}}}})
                .find("field cache.devcie_tokens: unknown field (did you mean device_tokens?)"),
            std::string::npos);
  EXPECT_NE(error_of({{"name", "t"}, {"workload", {{"sesions", 2}}}})
                .find("field workload.sesions: unknown field (did you mean sessions?)"),
            std::string::npos);
  const std::string far = error_of({{"name", "t"}, {"zzz_not_a_field", 1}});
  EXPECT_NE(far.find("field zzz_not_a_field: unknown field"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

// to_json writes every row (and nothing else) of a scenario whose optional fields are set.
TEST(ScenarioFields, CanonicalJsonHasEveryRow) {
  Scenario s = scenario_base();
  s.name = "t";
  s.workload.trace_path = "x.jsonl";
  s.storage = true;
  s.store.backend = StorageKind::kFile;
  s.store.digest = "d";
  const nlohmann::json j = to_json(s);
  std::set<std::string> written;
  auto walk = [&](auto&& self, const nlohmann::json& o, const std::string& prefix) -> void {
    for (const auto& [k, v] : o.items()) {
      const std::string path = prefix.empty() ? k : prefix + "." + k;
      written.insert(path);
      if (v.is_object()) self(self, v, path);
    }
  };
  walk(walk, j, "");
  std::set<std::string> rows;
  for (const FieldSpec& f : scenario_fields()) {
    if (f.path() != "$schema") rows.insert(f.path());  // for editors only: never recorded
  }
  EXPECT_EQ(written, rows);
}

// A file that names its schema for an editor runs as the same scenario.
TEST(ScenarioFields, SchemaKeyIsAcceptedAndNotRecorded) {
  const nlohmann::json plain = {{"name", "t"}, {"cache", {{"device_tokens", 512}}}};
  nlohmann::json named = plain;
  named["$schema"] = "../docs/scenario.schema.json";
  EXPECT_EQ(to_json(parse_scenario(named, "s.json")), to_json(parse_scenario(plain, "s.json")));
  named["$schema"] = 3;
  EXPECT_NE(error_of(named).find("field $schema: expected a string"), std::string::npos);
}

TEST(ScenarioFields, SchemaAndReferenceShowEveryRow) {
  const nlohmann::json schema = scenario_json_schema();
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  const std::string md = scenario_reference_markdown();
  for (const FieldSpec& f : scenario_fields()) {
    const nlohmann::json* at = &schema;
    if (!f.section.empty()) {
      size_t start = 0;
      while (true) {
        const size_t dot = f.section.find('.', start);
        const std::string part =
            f.section.substr(start, dot == std::string::npos ? dot : dot - start);
        at = &(*at)["properties"][part];
        if (at->contains("oneOf")) at = &(*at)["oneOf"][1];
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
    }
    ASSERT_TRUE((*at)["properties"].contains(f.name)) << f.path();
    const nlohmann::json& p = (*at)["properties"][f.name];
    EXPECT_EQ(p.value("description", "").substr(0, f.meaning.size()), f.meaning) << f.path();
    if (f.type == FieldType::kInteger) {
      EXPECT_EQ(p["minimum"], f.imin) << f.path();
      EXPECT_EQ(p["maximum"], f.imax) << f.path();
    }
    if (!f.default_value().is_null()) {
      EXPECT_EQ(p["default"], f.default_value()) << f.path();
    }
    EXPECT_NE(md.find("| `" + f.name + "` |"), std::string::npos) << f.path();
  }
  for (const ScenarioRule& r : scenario_rules()) {
    EXPECT_NE(md.find(r.doc), std::string::npos) << r.field;
  }
}

// Every rule between fields fires on a scenario that breaks it and names its field.
TEST(ScenarioFields, EveryRuleNamesItsField) {
  const std::vector<nlohmann::json> breaking = {
      {{"cache", {{"swa_device_tokens", 64}}}},
      {{"cache", {{"swa_host_tokens", 64}}}},
      {{"cache", {{"mamba_host_states", 8}}}},
      {{"cache", {{"storage", true}, {"hierarchical", false}}}},
      {{"workload", {{"trace", "x.jsonl"}}}},
      {{"cache", {{"swa_window_tokens", 2}}}},
      {{"cache", {{"device_tokens", 64}}}},
      {{"cache", {{"swa_window_tokens", 16}}}, {"scheduler", {{"mode", "pd"}}}},
      {{"cache", {{"sparse_index_bytes_per_page", 32}}}},
      {{"cache", {{"storage", true}}}, {"scheduler", {{"mode", "pd"}}}},
      {{"cache", {{"mamba_device_states", 4}}}},
  };
  ASSERT_EQ(breaking.size(), scenario_rules().size());
  for (size_t i = 0; i < breaking.size(); ++i) {
    nlohmann::json doc = breaking[i];
    doc["name"] = "t";
    const ScenarioRule& r = scenario_rules()[i];
    const std::string e = error_of(doc);
    EXPECT_NE(e.find("field " + r.field + ": "), std::string::npos) << i << ": " << e;
    EXPECT_TRUE(r.problem(scenario_base(), ScenarioUse::kRun).empty())
        << r.field << " fires on the defaults";
  }
}

}  // namespace
}  // namespace kvsim::sim
