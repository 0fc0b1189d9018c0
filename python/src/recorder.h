// CallRecorder: writes a tree's calls as a kvsim call trace (sim/call_trace.h), for
// `kvsim replay` / `kvsim shrink`. Lines are formatted by hand (std::to_chars), not through a
// JSON library; token and slot arrays go to a binary sidecar (<trace>.bin) that the lines name
// by offset, and an insert whose key is a prefix of the last match's key names that call. The
// format is the one sim/call_trace_replay.cpp reads.
//
// Flushing: lines and sidecar bytes go to in-memory buffers handed to a writer thread every
// 8 MiB (the calling thread does not wait for the disk unless the previous hand-off is still
// being written); they are written synchronously when a call fails a core assertion, when the
// recording closes (tree destroyed, close_recording(), interpreter exit through the module's
// atexit hook) and from kvsim.flush_recordings().
// Bound: after `max_calls` calls the recording ends with a footer marked "truncated" (it keeps
// the first calls: a window of the last calls would need a tree snapshot to replay from).
#pragma once

#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/call_trace.h"

namespace kvsim::python {

class CallRecorder {
 public:
  CallRecorder(std::string path, int32_t page_size, EvictionPolicy policy, uint64_t max_calls)
      : path_(std::move(path)), max_calls_(max_calls) {
    file_ = std::fopen(path_.c_str(), "w");
    if (file_ == nullptr) throw std::runtime_error("cannot open recording file " + path_);
    blob_path_ = path_ + ".bin";
    blob_file_ = std::fopen(blob_path_.c_str(), "wb");
    if (blob_file_ == nullptr) {
      std::fclose(file_);
      file_ = nullptr;
      throw std::runtime_error("cannot open recording file " + blob_path_);
    }
    nlohmann::json header = sim::call_trace_header(page_size, policy, "kvsim python module");
    const size_t slash = blob_path_.find_last_of('/');
    header["blob"] = slash == std::string::npos ? blob_path_ : blob_path_.substr(slash + 1);
    buf_ = header.dump();
    buf_ += '\n';
    flush();
  }
  ~CallRecorder() {
    flush();
    {
      std::lock_guard<std::mutex> g(wmu_);
      stop_ = true;
    }
    wcv_.notify_all();
    if (writer_.joinable()) writer_.join();
    if (file_ != nullptr) std::fclose(file_);
    if (blob_file_ != nullptr) std::fclose(blob_file_);
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
  // Token and slot arrays go to the binary sidecar (<trace>.bin, little-endian) and the line
  // names them by [byte offset, count]: formatting millions of numbers as text would cost more
  // than the calls. An insert whose key is a prefix of the last match's key names that call.
  void begin_match(Namespace ns, std::span<const Token> tokens) {
    buf_ += "{\"op\":\"match\",\"ns\":";
    num(ns);
    buf_ += ",\"tok\":";
    last_match_ = next_index();
    last_match_ns_ = ns;
    last_match_off_ = blob_pos();
    last_match_len_ = tokens.size();
    blob_ref(tokens.data(), tokens.size());
  }
  void begin_insert(Namespace ns, std::span<const Token> tokens, std::span<const SlotIndex> value) {
    buf_ += "{\"op\":\"insert\",\"ns\":";
    num(ns);
    if (last_match_ >= 0 && ns == last_match_ns_ && tokens.size() <= last_match_len_ &&
        same_as_blob(last_match_off_, tokens)) {
      buf_ += ",\"tok_of\":[";
      num(last_match_);
      buf_ += ',';
      num(tokens.size());
      buf_ += ']';
    } else {
      buf_ += ",\"tok\":";
      blob_ref(tokens.data(), tokens.size());
    }
    // Slots as runs (start, length): allocators hand out pages of consecutive slots.
    runs_.clear();
    for (size_t i = 0; i < value.size();) {
      size_t j = i + 1;
      while (j < value.size() && value[j] == value[j - 1] + 1)
        ++j;
      runs_.push_back(value[i]);
      runs_.push_back(static_cast<int64_t>(j - i));
      i = j;
    }
    buf_ += ",\"val_runs\":";
    blob_ref(runs_.data(), runs_.size() / 2, 2);
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
    if (buf_.size() + blob_.size() > (8u << 20)) hand_off();
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

  // Synchronous: everything recorded so far is in the files when it returns (a raising call,
  // close, exit, kvsim.flush_recordings()).
  void flush() {
    if (file_ == nullptr) return;
    std::unique_lock<std::mutex> g(wmu_);
    wcv_.wait(g, [&] { return !writing_; });
    blob_written_ += blob_.size();
    write_out(blob_, buf_);
  }

 private:
  // The sidecar first: a line never names bytes that are not in the file yet.
  void write_out(std::string& blob, std::string& lines) {
    if (!blob.empty()) {
      std::fwrite(blob.data(), 1, blob.size(), blob_file_);
      std::fflush(blob_file_);
      blob.clear();
    }
    if (!lines.empty()) {
      std::fwrite(lines.data(), 1, lines.size(), file_);
      std::fflush(file_);
      lines.clear();
    }
  }
  // Asynchronous: hands the buffers to the writer thread so the calling thread does not wait
  // for the disk (it waits only if the previous hand-off is still being written).
  void hand_off() {
    std::unique_lock<std::mutex> g(wmu_);
    wcv_.wait(g, [&] { return !writing_; });
    if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
    blob_written_ += blob_.size();
    pending_blob_.swap(blob_);
    pending_lines_.swap(buf_);
    writing_ = true;
    g.unlock();
    wcv_.notify_all();
  }
  void writer_loop() {
    std::unique_lock<std::mutex> g(wmu_);
    for (;;) {
      wcv_.wait(g, [&] { return writing_ || stop_; });
      if (writing_) {
        std::string blob;
        std::string lines;
        blob.swap(pending_blob_);
        lines.swap(pending_lines_);
        g.unlock();
        write_out(blob, lines);
        g.lock();
        pending_blob_.swap(blob);  // keep the capacity for the next hand-off
        pending_lines_.swap(lines);
        writing_ = false;
        wcv_.notify_all();
      } else if (stop_) {
        return;
      }
    }
  }
  size_t blob_pos() const { return blob_written_ + blob_.size(); }
  // Appends `count` items (runs: pairs) to the sidecar and writes [offset,count] in the line.
  template <typename T>
  void blob_ref(const T* data, size_t count, size_t items_per_count = 1) {
    const size_t items = count * items_per_count;
    buf_ += '[';
    num(blob_pos());
    buf_ += ',';
    num(count);
    buf_ += ']';
    const auto* bytes = reinterpret_cast<const char*>(data);
    blob_.append(bytes, bytes + items * sizeof(T));
  }
  bool same_as_blob(size_t offset, std::span<const Token> tokens) const {
    const size_t bytes = tokens.size() * sizeof(Token);
    if (offset < blob_written_) return false;  // already flushed: do not read the file back
    const size_t at = offset - blob_written_;
    return at + bytes <= blob_.size() && std::memcmp(blob_.data() + at, tokens.data(), bytes) == 0;
  }
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
  std::string blob_path_;
  std::FILE* file_ = nullptr;
  std::FILE* blob_file_ = nullptr;
  std::string blob_;
  size_t blob_written_ = 0;
  std::vector<int64_t> runs_;
  std::thread writer_;
  std::mutex wmu_;
  std::condition_variable wcv_;
  std::string pending_blob_;
  std::string pending_lines_;
  bool writing_ = false;
  bool stop_ = false;
  int64_t last_match_ = -1;
  Namespace last_match_ns_ = 0;
  size_t last_match_off_ = 0;
  size_t last_match_len_ = 0;
  std::string buf_;
  uint64_t calls_ = 0;
  uint64_t max_calls_ = 0;
  uint64_t hash_ = sim::kCallHashSeed;
  bool ended_ = false;
  std::map<NodeId, int64_t> producer_;
};

}  // namespace kvsim::python
