#include "sim/json_reader.h"

#include <fstream>
#include <sstream>

namespace kvsim::sim {
namespace {

const nlohmann::json& empty_object() {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return kEmpty;
}

std::string type_name(const nlohmann::json& v) {
  return v.is_null() ? "null" : std::string(v.type_name());
}

}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& source, size_t first_line) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based; turn it into line:column.
    size_t line = first_line;
    size_t column = 1;
    const size_t end = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string what = e.what();
    const size_t colon = what.find("parse error");
    if (colon != std::string::npos) what = what.substr(colon);
    throw InputError(source + ":" + std::to_string(line) + ":" + std::to_string(column) +
                     ": invalid JSON: " + what);
  } catch (const nlohmann::json::exception& e) {
    // e.g. a number literal too large for a double (out_of_range 406): no position is given.
    throw InputError(source + ":" + std::to_string(first_line) + ": invalid JSON: " + e.what());
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(path + ": read error");
  return ss.str();
}

JsonReader::JsonReader(const nlohmann::json& object, std::string where, std::string path)
    : object_(object), where_(std::move(where)), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw InputError(where_ + ": " + (path_.empty() ? "document" : "field " + path_) +
                     ": expected an object, got " + type_name(object_));
  }
}

void JsonReader::fail(const std::string& key, const std::string& problem) const {
  throw InputError(where_ + ": field " + field(key) + ": " + problem);
}

bool JsonReader::has(const std::string& key) const {
  return object_.contains(key);
}

const nlohmann::json* JsonReader::get(const std::string& key) {
  read_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

int64_t JsonReader::integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
  const nlohmann::json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer()) fail(key, "expected an integer, got " + type_name(*v));
  const int64_t x =
      v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX ? INT64_MAX : v->get<int64_t>();
  if (x < min || x > max) {
    fail(key, std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
                  std::to_string(max) + "]");
  }
  return x;
}

int64_t JsonReader::required_integer(const std::string& key, int64_t min, int64_t max) {
  if (!has(key)) fail(key, "missing");
  return integer(key, 0, min, max);
}

double JsonReader::number(const std::string& key, double fallback, double min, double max) {
  const nlohmann::json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail(key, "expected a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!(x >= min && x <= max)) {
    fail(key, std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
                  std::to_string(max) + "]");
  }
  return x;
}

bool JsonReader::boolean(const std::string& key, bool fallback) {
  const nlohmann::json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + type_name(*v));
  return v->get<bool>();
}

std::string JsonReader::string(const std::string& key, const std::string& fallback) {
  const nlohmann::json* v = get(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(key, "expected a string, got " + type_name(*v));
  return v->get<std::string>();
}

std::string JsonReader::required_string(const std::string& key) {
  if (!has(key)) fail(key, "missing");
  return string(key, "");
}

std::string JsonReader::choice(const std::string& key, const std::string& fallback,
                               const std::vector<std::string>& choices) {
  const std::string s = string(key, fallback);
  for (const std::string& c : choices) {
    if (c == s) return s;
  }
  std::string list;
  for (const std::string& c : choices)
    list += (list.empty() ? "" : ", ") + c;
  fail(key, "\"" + s + "\" is not one of: " + list);
}

std::vector<int64_t> JsonReader::integer_array(const std::string& key, int64_t min, int64_t max) {
  const nlohmann::json* v = get(key);
  if (v == nullptr) fail(key, "missing");
  if (!v->is_array()) fail(key, "expected an array, got " + type_name(*v));
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const nlohmann::json& e = (*v)[i];
    const std::string at = key + "[" + std::to_string(i) + "]";
    if (!e.is_number_integer()) fail(at, "expected an integer, got " + type_name(e));
    const int64_t x = e.get<int64_t>();
    if (x < min || x > max) fail(at, std::to_string(x) + " is out of range");
    out.push_back(x);
  }
  return out;
}

JsonReader JsonReader::object(const std::string& key) {
  const nlohmann::json* v = get(key);
  return JsonReader(v == nullptr ? empty_object() : *v, where_, field(key));
}

const nlohmann::json& JsonReader::raw(const std::string& key) {
  const nlohmann::json* v = get(key);
  return v == nullptr ? empty_object() : *v;
}

void JsonReader::finish() const {
  for (const auto& [key, value] : object_.items()) {
    if (read_.count(key) == 0) fail(key, "unknown field");
  }
}

}  // namespace kvsim::sim
