// JsonReader: strict, path-aware access to a parsed JSON object, for scenario and trace files.
//
// Every error names the source (file, and line for JSON Lines) and the field path
// ("cache.page_size"), and is thrown as InputError; finish() rejects fields nobody read, so a
// misspelt option is an error rather than a silently ignored default.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvsim::sim {

// Bad input: a message for the user that names the file, line and field.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where each field of a JSON document is: "cache.page_size" → its line (from a scan of the
// text), so an error about a field names its line.
class JsonLines {
 public:
  void add(const std::string& path, size_t line) { lines_.emplace(path, line); }
  // The line of `path`, else of its nearest enclosing field; 0 when unknown.
  size_t line(std::string path) const;
  size_t exact_line(const std::string& path) const {
    auto it = lines_.find(path);
    return it == lines_.end() ? 0 : it->second;
  }

 private:
  std::map<std::string, size_t> lines_;
};

// Parses `text` as one JSON document; syntax errors name "source:line:column", counting lines
// from `first_line` (a JSON Lines reader passes the line's number). A key given twice in one
// object is an error naming both lines. `lines`, when given, receives each field's line.
nlohmann::json parse_json(const std::string& text, const std::string& source, size_t first_line = 1,
                          JsonLines* lines = nullptr);
// Reads a whole file ("-": standard input); a missing, unreadable file or a directory is an
// InputError naming it and the system's reason.
std::string read_text_file(const std::string& path);
// A number as a person reads it: integers in full, others in at most 6 significant digits.
std::string format_number(double v);

class JsonReader {
 public:
  // `where` names the source, e.g. "scenarios/x.json" or "trace.jsonl:12".
  JsonReader(const nlohmann::json& object, std::string where, std::string path = "",
             const JsonLines* lines = nullptr);

  bool has(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max);
  int64_t required_integer(const std::string& key, int64_t min, int64_t max);
  double number(const std::string& key, double fallback, double min, double max);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  std::string required_string(const std::string& key);
  // One of `choices`.
  std::string choice(const std::string& key, const std::string& fallback,
                     const std::vector<std::string>& choices);
  std::vector<int64_t> integer_array(const std::string& key, int64_t min, int64_t max);
  JsonReader object(const std::string& key);  // {} when absent
  const nlohmann::json& raw(const std::string& key);

  // Throws if the object has a field that was never read.
  void finish() const;
  // The object's fields that were never read, in key order.
  std::vector<std::string> unread() const;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  std::string field(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

 private:
  const nlohmann::json* get(const std::string& key);

  const nlohmann::json& object_;
  std::string where_;
  const JsonLines* lines_ = nullptr;
  std::string path_;
  std::set<std::string> read_;
};

}  // namespace kvsim::sim
