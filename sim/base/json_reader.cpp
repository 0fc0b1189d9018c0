#include "sim/base/json_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

namespace kvsim::sim {
namespace {

const nlohmann::json& empty_object() {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return kEmpty;
}

std::string type_name(const nlohmann::json& v) {
  return v.is_null() ? "null" : std::string(v.type_name());
}

// Walks valid JSON text (nlohmann parsed it already) and records the line of every object
// key under its dotted path; a key repeated in one object is an InputError.
class KeyScanner {
 public:
  KeyScanner(const std::string& text, const std::string& source, size_t first_line,
             JsonLines* lines)
      : text_(text), source_(source), line_(first_line), lines_(lines) {}

  void run() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '\n') {
        ++line_;
        ++pos_;
      } else if (c == '{' || c == '[') {
        frames_.push_back(Frame{.object = c == '{', .path = value_path()});
        ++pos_;
      } else if (c == '}' || c == ']') {
        if (!frames_.empty()) frames_.pop_back();
        ++pos_;
      } else if (c == '"') {
        const size_t start_line = line_;
        std::string s = string_token();
        if (!frames_.empty() && frames_.back().object && frames_.back().expect_key) {
          key(std::move(s), start_line);
        }
      } else if (c == ':') {
        if (!frames_.empty()) frames_.back().expect_key = false;
        ++pos_;
      } else if (c == ',') {
        if (!frames_.empty()) {
          Frame& f = frames_.back();
          if (f.object)
            f.expect_key = true;
          else
            ++f.index;
        }
        ++pos_;
      } else {
        ++pos_;
      }
    }
  }

 private:
  struct Frame {
    bool object = false;
    std::string path;
    bool expect_key = true;
    size_t index = 0;
    std::string key;
    std::map<std::string, size_t> keys;  // key → line
  };

  std::string value_path() const {
    if (frames_.empty()) return "";
    const Frame& f = frames_.back();
    if (f.object) return f.path.empty() ? f.key : f.path + "." + f.key;
    return f.path + "[" + std::to_string(f.index) + "]";
  }

  void key(std::string k, size_t line) {
    Frame& f = frames_.back();
    const std::string path = f.path.empty() ? k : f.path + "." + k;
    auto [it, fresh] = f.keys.emplace(k, line);
    if (!fresh) {
      throw InputError(source_ + ":" + std::to_string(line) + ": field " + path +
                       ": duplicate key (first given on line " + std::to_string(it->second) + ")");
    }
    if (lines_ != nullptr) lines_->add(path, line);
    f.key = std::move(k);
  }

  // The decoded key (escapes other than \" and \\ are kept as written: keys are ASCII).
  std::string string_token() {
    std::string out;
    ++pos_;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
        ++pos_;
        if (text_[pos_] != '"' && text_[pos_] != '\\') out += '\\';
      }
      out += text_[pos_++];
    }
    ++pos_;
    return out;
  }

  const std::string& text_;
  const std::string& source_;
  size_t line_;
  JsonLines* lines_;
  size_t pos_ = 0;
  std::vector<Frame> frames_;
};

}  // namespace

size_t JsonLines::line(std::string path) const {
  while (true) {
    auto it = lines_.find(path);
    if (it != lines_.end()) return it->second;
    const size_t dot = path.find_last_of(".[");
    if (dot == std::string::npos) return 0;
    path.resize(dot);
  }
}

std::string format_number(double v) {
  char buf[64];
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

nlohmann::json parse_json(const std::string& text, const std::string& source, size_t first_line,
                          JsonLines* lines) {
  try {
    nlohmann::json doc = nlohmann::json::parse(text);
    KeyScanner(text, source, first_line, lines).run();
    return doc;
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
  if (path == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (std::cin.bad()) throw InputError("-: read error on standard input");
    return text;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open file: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": cannot read: " + std::strerror(EISDIR));
  }
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path + ": read error: " + std::strerror(err));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

JsonReader::JsonReader(const nlohmann::json& object, std::string where, std::string path,
                       const JsonLines* lines)
    : object_(object), where_(std::move(where)), lines_(lines), path_(std::move(path)) {
  if (!object_.is_object()) {
    throw InputError(where_ + ": " + (path_.empty() ? "document" : "field " + path_) +
                     ": expected an object, got " + type_name(object_));
  }
}

void JsonReader::fail(const std::string& key, const std::string& problem) const {
  const size_t line = lines_ == nullptr ? 0 : lines_->line(field(key));
  throw InputError(where_ + (line > 0 ? ":" + std::to_string(line) : "") + ": field " + field(key) +
                   ": " + problem);
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
  // Above INT64_MAX (nlohmann keeps it unsigned): out of every range this reader takes, said
  // with the value as written, never clamped or wrapped.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail(key, std::to_string(v->get<uint64_t>()) + " is out of range [" + std::to_string(min) +
                  ", " + std::to_string(max) + "]");
  }
  const int64_t x = v->get<int64_t>();
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
    fail(key, format_number(x) + " is out of range [" + format_number(min) + ", " +
                  format_number(max) + "]");
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
    if (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(at, std::to_string(e.get<uint64_t>()) + " is out of range");
    }
    const int64_t x = e.get<int64_t>();
    if (x < min || x > max) fail(at, std::to_string(x) + " is out of range");
    out.push_back(x);
  }
  return out;
}

JsonReader JsonReader::object(const std::string& key) {
  const nlohmann::json* v = get(key);
  return JsonReader(v == nullptr ? empty_object() : *v, where_, field(key), lines_);
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

std::vector<std::string> JsonReader::unread() const {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object_.items()) {
    if (read_.count(key) == 0) keys.push_back(key);
  }
  return keys;
}

}  // namespace kvsim::sim
