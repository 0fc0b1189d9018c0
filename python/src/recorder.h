// CallRecorder: writes a tree's calls as a kvsim call trace (sim/call_trace.h), for
// `kvsim replay` / `kvsim shrink`. Lines are formatted by hand (std::to_chars), not through a
// JSON library, to keep recording cheap; the format is the one sim/call_trace_replay.cpp reads.
//
// Flushing: lines go to an in-memory buffer written to the file when it exceeds 1 MiB, when a
// call fails a core assertion, when the recording closes (tree destroyed, close_recording(),
// interpreter exit through the module's atexit hook) and from kvsim.flush_recordings().
// Bound: after `max_calls` calls the recording ends with a footer marked "truncated" (it keeps
// the first calls: a window of the last calls would need a tree snapshot to replay from).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "sim/call_trace.h"

namespace kvsim::python {

class CallRecorder {
 public:
  CallRecorder(std::string path, int32_t page_size, EvictionPolicy policy, uint64_t max_calls)
      : path_(std::move(path)), max_calls_(max_calls) {
    file_ = std::fopen(path_.c_str(), "w");
    if (file_ == nullptr) throw std::runtime_error("cannot open recording file " + path_);
    buf_ = sim::call_trace_header(page_size, policy, "kvsim python module").dump();
    buf_ += '\n';
    flush();
  }
  ~CallRecorder() {
    if (file_ != nullptr) std::fclose(file_);
  }
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  bool active() const { return file_ != nullptr && !ended_; }
  const std::string& path() const { return path_; }
  uint64_t calls() const { return calls_; }

  // The index the next call gets.
  int64_t next_index() const { return static_cast<int64_t>(calls_); }
  void produced(NodeId node) { producer_[node] = next_index() - 1; }
  std::optional<int64_t> producer_of(NodeId node) const {
    auto it = producer_.find(node);
    return it == producer_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

  // A call is written in two halves: its inputs before the core runs it, its outcome after
  // (finish_call with null when the core failed an assertion instead).
  void begin_match(Namespace ns, std::span<const Token> tokens) {
    buf_ += "{\"op\":\"match\",\"ns\":";
    num(ns);
    buf_ += ",\"tokens\":";
    array(tokens);
  }
  void begin_insert(Namespace ns, std::span<const Token> tokens, std::span<const SlotIndex> value) {
    buf_ += "{\"op\":\"insert\",\"ns\":";
    num(ns);
    buf_ += ",\"tokens\":";
    array(tokens);
    buf_ += ",\"value\":";
    array(value);
  }
  void begin_lock(bool unlock, int64_t ref) {
    buf_ += unlock ? "{\"op\":\"unlock\",\"of\":" : "{\"op\":\"lock\",\"of\":";
    num(ref);
  }
  void begin_evict(int64_t n) {
    buf_ += "{\"op\":\"evict\",\"n\":";
    num(n);
  }
  void finish_call(sim::CallKind kind, const sim::CallOutcome* out) {
    if (out != nullptr) {
      switch (kind) {
        case sim::CallKind::kMatch:
        case sim::CallKind::kInsert:
          buf_ += kind == sim::CallKind::kMatch ? ",\"out\":{\"hit\":" : ",\"out\":{\"prefix\":";
          num(out->amount);
          buf_ += ",\"node\":";
          num(out->node);
          buf_ += '}';
          break;
        case sim::CallKind::kEvict: {
          char hex[17];
          std::snprintf(hex, sizeof hex, "%016llx",
                        static_cast<unsigned long long>(out->slots_hash));
          buf_ += ",\"out\":{\"freed\":";
          num(out->amount);
          buf_ += ",\"slots\":\"";
          buf_ += hex;
          buf_ += "\"}";
          break;
        }
        default:
          break;
      }
      hash_ = sim::fold_call(hash_, kind, *out);
    }
    buf_ += "}\n";
    ++calls_;
    if (buf_.size() > (1u << 20)) flush();
  }
  void forget(NodeId node) { producer_.erase(node); }

  // The call just written failed a core assertion: footer with the violation, then close.
  void violation(const std::string& detail, size_t nodes, int64_t evictable,
                 int64_t protected_size) {
    finish(nodes, evictable, protected_size, std::make_pair(calls_ - 1, detail), false);
  }
  void finish(size_t nodes, int64_t evictable, int64_t protected_size,
              std::optional<std::pair<size_t, std::string>> violation = std::nullopt,
              bool truncated = false) {
    if (!active()) return;
    sim::CallTraceEnd end;
    end.calls = calls_;
    end.event_hash = hash_;
    end.nodes = nodes;
    end.evictable = evictable;
    end.protected_size = protected_size;
    end.violation = std::move(violation);
    end.truncated = truncated;
    buf_ += sim::call_trace_footer(end).dump();
    buf_ += '\n';
    ended_ = true;
    flush();
  }
  bool at_bound() const { return max_calls_ != 0 && calls_ >= max_calls_; }

  void flush() {
    if (file_ == nullptr || buf_.empty()) return;
    std::fwrite(buf_.data(), 1, buf_.size(), file_);
    std::fflush(file_);
    buf_.clear();
  }

 private:
  template <typename T>
  void num(T v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }
  template <typename T>
  void array(std::span<const T> xs) {
    const size_t at = buf_.size();
    buf_.resize(at + 2 + xs.size() * 21);
    char* p = buf_.data() + at;
    *p++ = '[';
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i != 0) *p++ = ',';
      p = std::to_chars(p, p + 20, xs[i]).ptr;
    }
    *p++ = ']';
    buf_.resize(static_cast<size_t>(p - buf_.data()));
  }
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string buf_;
  uint64_t calls_ = 0;
  uint64_t max_calls_ = 0;
  uint64_t hash_ = sim::kCallHashSeed;
  bool ended_ = false;
  std::map<NodeId, int64_t> producer_;
};

}  // namespace kvsim::python
