// The scenario field table at work: reading a section of a scenario document through its rows
// (with "did you mean" for a misspelt field) and writing one back.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/config/scenario_fields.h"

namespace kvsim::sim {
namespace {

// Levenshtein distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

void read_section(JsonReader& r, const std::string& sec, Scenario& s) {
  std::vector<std::string> names;
  for (const FieldSpec& f : scenario_fields()) {
    if (f.section != sec) continue;
    names.push_back(f.name);
    const nlohmann::json fallback = f.fixed_default ? *f.fixed_default : f.get ? f.get(s) : nullptr;
    switch (f.type) {
      case FieldType::kInteger: {
        const int64_t v = f.required ? r.required_integer(f.name, f.imin, f.imax)
                                     : r.integer(f.name, fallback.get<int64_t>(), f.imin, f.imax);
        if (f.multiple_of > 0 && v % f.multiple_of != 0) {
          r.fail(f.name, "must be a multiple of " + std::to_string(f.multiple_of));
        }
        f.set(s, v);
        if (!f.multiple_of_field.empty() || !f.at_least_field.empty()) {
          // The other field is an earlier row of this section: read already.
          for (const FieldSpec& o : scenario_fields()) {
            if (o.section != sec) continue;
            if (o.name == f.multiple_of_field && v % o.get(s).get<int64_t>() != 0) {
              r.fail(f.name, "must be a multiple of " + o.name);
            }
            if (o.name == f.at_least_field && v < o.get(s).get<int64_t>()) {
              r.fail(f.name, "is smaller than " + o.name);
            }
          }
        }
        break;
      }
      case FieldType::kNumber:
        f.set(s, r.number(f.name, fallback.get<double>(), f.dmin, f.dmax));
        break;
      case FieldType::kBoolean:
        f.set(s, r.boolean(f.name, fallback.get<bool>()));
        break;
      case FieldType::kString:
        f.set(s, f.required ? r.required_string(f.name)
                            : r.string(f.name, fallback.get<std::string>()));
        break;
      case FieldType::kChoice: {
        std::vector<std::string> values;
        for (const FieldChoice& c : f.choices)
          values.push_back(c.value);
        f.set(s, r.choice(f.name, fallback.get<std::string>(), values));
        break;
      }
      case FieldType::kObject: {
        JsonReader sub = r.object(f.name);
        read_section(sub, f.path(), s);
        if (f.check) f.check(sub, s);
        sub.finish();
        break;
      }
      case FieldType::kBoolOrObject: {
        if (!r.has(f.name) || !r.raw(f.name).is_object()) {
          f.set(s, r.boolean(f.name, fallback.is_boolean() && fallback.get<bool>()));
          break;
        }
        JsonReader sub = r.object(f.name);
        read_section(sub, f.path(), s);
        if (f.check) f.check(sub, s);
        sub.finish();
        break;
      }
    }
  }
  // Unknown fields: named with the nearest known one when it is close (a misspelling).
  for (const std::string& key : r.unread()) {
    std::string best;
    size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
    for (const std::string& n : names) {
      if (key.size() > 64) break;  // not a misspelling; keep the distance cheap
      const size_t d = distance(key, n);
      if (d < best_d) best_d = d, best = n;
    }
    r.fail(key, best.empty() ? "unknown field" : "unknown field (did you mean " + best + "?)");
  }
}

nlohmann::json write_section(const Scenario& s, const std::string& sec) {
  nlohmann::json j = nlohmann::json::object();
  for (const FieldSpec& f : scenario_fields()) {
    if (f.section != sec) continue;
    if (f.type == FieldType::kObject) {
      j[f.name] = write_section(s, f.path());
      continue;
    }
    nlohmann::json v = f.get(s);
    if (f.omit_when_empty && v.is_string() && v.get<std::string>().empty()) continue;
    j[f.name] = std::move(v);
  }
  return j;
}

}  // namespace kvsim::sim
