// JSON Schema pieces shared by the field table (scenario_fields.cpp) and its rules
// (scenario_rules.cpp): "the document has `section.field` matching `cond`" and "if A then B".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvsim::sim::schema {

inline nlohmann::json has(const std::string& section, const std::string& field,
                          nlohmann::json cond) {
  nlohmann::json inner = nlohmann::json::object();
  inner["properties"][field] = std::move(cond);
  inner["required"] = nlohmann::json::array({field});
  nlohmann::json j = nlohmann::json::object();
  j["properties"][section] = std::move(inner);
  j["required"] = nlohmann::json::array({section});
  return j;
}

inline nlohmann::json when(nlohmann::json if_, nlohmann::json then_) {
  nlohmann::json j = nlohmann::json::object();
  j["if"] = std::move(if_);
  j["then"] = std::move(then_);
  return j;
}

inline nlohmann::json positive() {
  return nlohmann::json::parse(R"({"exclusiveMinimum": 0})");
}

}  // namespace kvsim::sim::schema
