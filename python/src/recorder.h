// CallRecorder: writes a tree's calls as a kvsim call trace (sim/call_trace.h), for
// `kvsim replay` / `kvsim shrink`. Lines are formatted by hand (std::to_chars), not through a
// JSON library; keys and slots go to a binary sidecar (<trace>.bin) that the lines name by
// [byte offset, count].
//
// Volume (docs/sglang.md "Recording"): the tree only ever compares whole pages, so with
// page_size >= kHashPagesFrom a key is recorded as one 64-bit hash per page ("pages"), and
// replay turns each distinct hash into a synthetic page: equal pages stay equal, different ones
// different (a hash collision, ~n^2/2^65 for n distinct pages, shows up as a divergence). The
// unaligned tail of a key, which the tree never reads, is not recorded. Smaller pages record the
// tokens ("tok"). A key's leading part that an earlier call already holds is named by that call
// ("tok_of": a match names the call that last returned its node; an insert names the last match
// when they share leading pages). Slots are recorded as runs (start, length).
//
// Buffers and flushing: lines and sidecar bytes go to two fixed buffers (never reallocated
// inside a call); at a call boundary, a buffer that is full is handed to a writer thread, which
// writes it with pwrite() at its file offset, so the calling thread does not wait for the disk.
// They are written synchronously when a call fails a core assertion, when the recording closes
// (tree destroyed, close_recording(), interpreter exit) and from kvsim.flush_recordings().
// On SIGTERM / SIGABRT, signal_flush() writes every complete call recorded so far with pwrite()
// only (async-signal-safe; it changes no recorder state, so it may run more than once): the
// file then ends without a footer and `kvsim replay` checks every recorded outcome.
// Bound: after `max_calls` calls the recording ends with a footer marked "truncated" (it keeps
// the first calls). Window (docs/sglang.md "Recording"): next_segment() ends the file with its
// footer and continues in a new one that starts with a snapshot of the tree (written by
// recorder_snapshot.cpp); call indices in a segment count from its first call, and what the
// segment's calls name from before it is named by node id (lock) or by the lock's record
// (unlock). The caller (PyTree, with a RecordingWindow) decides when and deletes old segments.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/pools/index_vector.h"
#include "core/tree/token_run.h"
#include "core/tree/wide_ids.h"
#include "sim/call_trace.h"

namespace kvsim::python {

// Pages of at least this many tokens are recorded as hashes.
inline constexpr int32_t kHashPagesFrom = 4;

// A 64-bit hash of one page of tokens: eight independent multiply-xorshift lanes over 64-bit
// words (one multiply per two tokens; the CPU overlaps the lanes), folded together. Only
// equality matters to replay, within one recording: nothing compares hashes across files.
inline uint64_t hash_page(const Token* t, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  constexpr uint64_t kFold = 0xC2B2AE3D27D4EB4FULL;
  uint64_t lane[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint64_t w[8];
    std::memcpy(w, t + i, sizeof w);
    for (size_t k = 0; k < 8; ++k) {
      const uint64_t h = (lane[k] ^ w[k]) * kMul;
      lane[k] = h ^ (h >> 32);
    }
  }
  for (; i < n; ++i) {
    const uint64_t h = (lane[0] ^ static_cast<uint32_t>(t[i])) * kMul;
    lane[0] = h ^ (h >> 32);
  }
  uint64_t h = n;
  for (const uint64_t l : lane)
    h = (h ^ l) * kFold, h ^= h >> 29;
  return h;
}

class CallRecorder {
 public:
  // `first_snapshot`: the file is the first segment of a window and starts with it.
  CallRecorder(std::string path, int32_t page_size, EvictionPolicy policy, uint64_t max_calls,
               std::optional<TreeSnapshot> first_snapshot = std::nullopt)
      : page_size_(page_size),
        policy_(policy),
        page_(static_cast<size_t>(page_size)),
        max_calls_(max_calls) {
    hash_pages_ = page_size >= kHashPagesFrom;
    const std::string error = open_files(path, &lines_fd_, &blob_fd_);
    if (!error.empty()) throw std::runtime_error(error);
    set_path(std::move(path));
    for (Region* r : {&lines_, &plines_})
      r->grow(kLinesCap);
    for (Region* r : {&blob_, &pblob_})
      r->grow(kBlobCap);
    write_header();
    if (first_snapshot) write_snapshot(std::move(*first_snapshot));
    commit();
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
    ::close(lines_fd_);
    ::close(blob_fd_);
  }
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  bool active() const { return lines_fd_ >= 0 && !ended_; }
  const std::string& path() const { return path_; }
  uint64_t calls() const { return calls_; }
  uint64_t segment_calls() const { return calls_ - base_; }

  // Ends this segment with its footer (the tree's sizes now) and goes on in a new file at
  // `path`, which starts with `snapshot` (the tree now). False when the new file cannot be
  // opened: the recording has then ended (the old file is complete).
  bool next_segment(const std::string& path, TreeSnapshot snapshot, size_t nodes, int64_t evictable,
                    int64_t protected_size) {
    if (!active()) return false;
    append_footer(nodes, evictable, protected_size, std::nullopt, false);
    commit();
    flush();
    int lines_fd = -1;
    int blob_fd = -1;
    if (!open_files(path, &lines_fd, &blob_fd).empty()) {
      ended_ = true;
      return false;
    }
    rotating_.store(true);  // signal_flush() stays off the files while they change
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ::close(lines_fd_);
    ::close(blob_fd_);
    lines_fd_ = lines_fd;
    blob_fd_ = blob_fd;
    set_path(path);
    for (Region* r : {&lines_, &blob_}) {
      r->file_off = 0;
      r->len = 0;
    }
    base_ = calls_;
    ++segment_;
    hash_ = sim::kCallHashSeed;
    producer_.clear();  // a segment's calls name only its own calls
    last_match_ = -1;
    write_header();
    write_snapshot(std::move(snapshot));
    commit();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rotating_.store(false);
    return true;
  }

  // Locks taken by recorded calls and not yet released (by call index), for the snapshots.
  void held(int64_t call, const LockRecord& record) {
    held_[call] = HeldLock{record.anchor, record.start[index_of(ComponentType::kFull)]};
  }
  void released(int64_t call) { held_.erase(call); }

  // The index the next call gets.
  int64_t next_index() const { return static_cast<int64_t>(calls_); }
  void produced(NodeId node) { producer_[node] = next_index() - 1; }
  std::optional<int64_t> producer_of(NodeId node) const {
    auto it = producer_.find(node);
    return it == producer_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

  // A call is written in two halves: its op before the core runs it, its key, value and
  // outcome after (finish_match / finish_insert, then finish_call; with a null outcome when
  // the core failed an assertion). Keys come as the caller passed them, 32-bit Tokens or wide
  // (int64) ids, and are written from what the core found: a match's hit is the path to the
  // node it returned, named by the call that produced that node ("tok_of"); an insert's key is
  // the path to its last node, which shares with the last match's key whatever lies on that
  // match's path (the tree compared those tokens already). So the recorder reads the caller's
  // ids only for a match's miss, and otherwise compares, hashes or copies the tree's keys.
  template <typename T>
  void begin_match(Namespace ns, std::span<const T> tokens) {
    const size_t aligned = tokens.size() / page_ * page_;
    // The tree never reads the unaligned tail; with page hashes it is not recorded.
    pending_ = PendingKey::of(hash_pages_ ? tokens.first(aligned) : tokens);
    room(pending_.size * sizeof(Token) + 64);
    mark();
    text("{\"op\":\"match\",\"ns\":");
    num(ns);
    pending_ns_ = ns;
  }
  // `tokens` is the page-aligned key; its value is written at finish_insert (the slots the
  // tree read).
  template <typename T>
  void begin_insert(Namespace ns, std::span<const T> tokens) {
    pending_ = PendingKey::of(tokens);
    room(tokens.size() * (sizeof(Token) + 2 * sizeof(int64_t)) + 64);
    mark();
    text("{\"op\":\"insert\",\"ns\":");
    num(ns);
    pending_ns_ = ns;
  }
  // Forgets the call begun last (a call the core refused without changing the tree). room()
  // reserved its bytes when it began, so nothing was handed to the writer since.
  void drop_call() {
    lines_.len = mark_lines_;
    blob_.len = mark_blob_;
    value_seen_ = false;
    value_gap_ = false;
    insert_value_ = IndexVector();
  }
  // The key of the match begun last, once the core ran it (out: its outcome, or null when it
  // failed an assertion). False, with the call's line dropped, when the ids past the hit
  // include one a trace's 32-bit tokens cannot hold: the caller ends the recording.
  bool finish_match(const sim::CallOutcome* out) {
    size_t hit = 0;
    std::optional<int64_t> k;
    if (out != nullptr && out->amount > 0) {
      k = producer_of(out->node);
      if (k) hit = static_cast<size_t>(out->amount);
    }
    // The buffer only grows (no zero fill of what the copy overwrites).
    miss_len_ = pending_.size - hit;
    if (miss_buf_.size() < miss_len_) miss_buf_.resize(miss_len_);
    const std::span<const Token> miss(miss_buf_.data(), miss_len_);
    // A call that failed an assertion is written even so, its ids cut to 32 bits (the failure
    // is what the recording is for); a call that went through is dropped instead.
    if (!pending_.copy(hit, pending_.size, miss_buf_.data()) && out != nullptr) {
      drop_call();
      last_match_ = -1;
      return false;
    }
    if (k) tok_of(*k, hit);
    if (hash_pages_) {
      if (!miss.empty() || hit == 0) {  // a key names its tokens somehow
        hash_into(miss, &pages_);
        text(",\"pages\":");
        blob_ref(pages_.data(), pages_.size());
      }
    } else if (!miss.empty() || hit == 0) {
      text(",\"tok\":");
      blob_ref(miss.data(), miss.size());
    }
    last_match_ = next_index();
    last_match_ns_ = pending_ns_;
    last_match_from_ = hit;  // miss_buf_[0, miss_len_) holds the key from here on
    last_match_node_ = hit > 0 ? std::optional<NodeId>(out->node) : std::nullopt;
    return true;
  }
  // A range of slots the core read for the insert in progress (ranges come in key order).
  void note_value(size_t begin, const IndexVector& v) {
    if (!value_seen_) {
      value_seen_ = true;
      value_from_ = begin;
      insert_value_ = v;
    } else if (begin == value_from_ + insert_value_.size()) {
      insert_value_.append(v);
    } else {
      value_gap_ = true;  // a range not next to the last: not representable as one run list
    }
  }
  // False when the ranges the core read cannot be written as one list from val_from on (the
  // caller then ends the recording before this call).
  bool value_recordable() const { return !value_gap_; }
  // The insert's value and key, once the core ran it: `last` ends its page-aligned key (the
  // root for an empty one); null when the core failed an assertion (the caller's ids are then
  // spelled out). The value is the slots the tree read, [val_from, key length), as runs
  // ("val_from" + "val_runs"): the duplicates of the part it already held are not recorded.
  void finish_insert(const TreeNode* last) {
    const size_t from = value_seen_ ? value_from_ : pending_.size;
    if (from > 0) {
      text(",\"val_from\":");
      num(from);
    }
    // Slots as runs (start, length): allocators hand out pages of consecutive slots.
    value_runs(insert_value_.entries(), insert_value_.stride());
    text(",\"val_runs\":");
    blob_ref(runs_.data(), runs_.size() / 2, 2);
    value_seen_ = false;
    value_gap_ = false;
    insert_value_ = IndexVector();
    finish_insert_key(last);
  }

 private:
  void finish_insert_key(const TreeNode* last) {
    const size_t n = pending_.size;
    segments_.clear();
    if (last == nullptr || !path_segments(*last, n)) {
      rest_.resize(n);
      pending_.copy(0, n, rest_.data());  // a failed call: ids that do not fit are cut
      segments_.assign(1, std::span<const Token>(rest_));
      spell_insert(0, n);
      return;
    }
    // segments_ now holds the key as the tree's node keys, root first.
    size_t shared = 0;
    if (last_match_ >= 0 && pending_ns_ == last_match_ns_ && path_covers_last_match()) {
      shared = last_match_from_;
      size_t depth = 0;
      size_t i = 0;  // into miss_buf_
      for (const std::span<const Token> seg : segments_) {
        const size_t end = depth + seg.size();
        depth = end;
        if (end <= last_match_from_) continue;
        const size_t len = std::min(seg.size(), miss_len_ - i);
        const size_t same = common_token_prefix(seg.data(), miss_buf_.data() + i, len);
        shared += same;
        i += same;
        if (same < seg.size()) break;
      }
      if (hash_pages_ || shared < n) shared = shared / page_ * page_;
    }
    spell_insert(shared, n);
  }

 public:
  // A lock of `node`: named by the call of this segment that returned it, else (a window's
  // segment) by its id when the segment's snapshot has it. False: it cannot be named.
  bool begin_lock_of(NodeId node) {
    room(64);
    if (const std::optional<int64_t> k = producer_of(node)) {
      text("{\"op\":\"lock\",\"of\":");
      num(*k - base_i());
      return true;
    }
    if (segment_first_id_ == 0 || node >= segment_first_id_) return false;
    text("{\"op\":\"lock\",\"node\":");
    num(node);
    return true;
  }
  // The release of the lock taken by call `call` (-1: not recorded; false, it cannot be named):
  // by that call in this segment, else by the lock's record.
  bool begin_unlock_of(int64_t call, const LockRecord& record) {
    if (call < 0) return false;
    room(128);
    if (call >= base_i()) {
      text("{\"op\":\"unlock\",\"of\":");
      num(call - base_i());
      return true;
    }
    text("{\"op\":\"unlock\",\"lock\":{\"call\":");
    num(call);
    text(",\"anchor\":");
    num(record.anchor);
    if (const std::optional<NodeId>& start = record.start[index_of(ComponentType::kFull)]) {
      text(",\"start\":");
      num(*start);
    }
    text("}");
    return true;
  }
  void begin_evict(int64_t n) {
    room(64);
    text("{\"op\":\"evict\",\"n\":");
    num(n);
  }
  // Ends the call begun last with its outcome (null: it failed a core assertion; a match's or
  // an insert's key is then written here, from the caller's ids).
  void finish_call(sim::CallKind kind, const sim::CallOutcome* out) {
    if (out == nullptr && kind == sim::CallKind::kMatch) finish_match(nullptr);
    if (out == nullptr && kind == sim::CallKind::kInsert) finish_insert(nullptr);
    if (out != nullptr) {
      switch (kind) {
        case sim::CallKind::kMatch:
        case sim::CallKind::kInsert:
          text(kind == sim::CallKind::kMatch ? ",\"out\":{\"hit\":" : ",\"out\":{\"prefix\":");
          num(out->amount);
          text(",\"node\":");
          num(out->node);
          text("}");
          break;
        case sim::CallKind::kEvict: {
          char hex[17];
          std::snprintf(hex, sizeof hex, "%016llx",
                        static_cast<unsigned long long>(out->slots_hash));
          text(",\"out\":{\"freed\":");
          num(out->amount);
          text(",\"slots\":\"");
          text(hex);
          text("\"}");
          break;
        }
        default:
          break;
      }
      hash_ = sim::fold_call(hash_, kind, *out);
    }
    text("}\n");
    ++calls_;
    commit();
  }
  void forget(NodeId node) { producer_.erase(node); }

  // The call just written failed a core assertion: footer with the violation, then close.
  void violation(const std::string& detail, size_t nodes, int64_t evictable,
                 int64_t protected_size) {
    finish(nodes, evictable, protected_size, std::make_pair(segment_calls() - 1, detail), false);
  }
  void finish(size_t nodes, int64_t evictable, int64_t protected_size,
              std::optional<std::pair<size_t, std::string>> violation = std::nullopt,
              bool truncated = false) {
    if (!active()) return;
    append_footer(nodes, evictable, protected_size, std::move(violation), truncated);
    commit();
    ended_ = true;
    flush();
  }
  bool at_bound() const { return max_calls_ != 0 && calls_ >= max_calls_; }

  // Synchronous: everything recorded so far is in the files when it returns (a raising call,
  // close, exit, kvsim.flush_recordings()).
  void flush() {
    if (lines_fd_ < 0) return;
    std::unique_lock<std::mutex> g(wmu_);
    wcv_.wait(g, [&] { return !writing_.load(); });
    write_region(blob_fd_, blob_);
    write_region(lines_fd_, lines_);
    blob_.restart();
    lines_.restart();
  }

  // Async-signal-safe: writes the complete calls recorded so far (pwrite only, no allocation,
  // no lock, no change to the recorder). The writer thread may be writing the handed-off
  // buffers at the same time: writing them again at the same offsets is harmless.
  void signal_flush() const {
    if (lines_fd_ < 0 || rotating_.load()) return;
    if (writing_.load()) {
      write_region(blob_fd_, pblob_);
      write_region(lines_fd_, plines_);
    }
    const uint64_t blob_end = commit_blob_.load();
    const uint64_t lines_end = commit_lines_.load();
    if (blob_end > blob_.file_off)
      pwrite_all(blob_fd_, blob_.data, blob_end - blob_.file_off, blob_.file_off);
    if (lines_end > lines_.file_off)
      pwrite_all(lines_fd_, lines_.data, lines_end - lines_.file_off, lines_.file_off);
  }

 private:
  // The snapshot record and node lines (recorder_snapshot.cpp).
  void write_snapshot(TreeSnapshot snapshot);

  static std::string open_files(const std::string& path, int* lines_fd, int* blob_fd) {
    *lines_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*lines_fd < 0) return "cannot open recording file " + path;
    *blob_fd = ::open((path + ".bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*blob_fd < 0) {
      ::close(*lines_fd);
      *lines_fd = -1;
      return "cannot open recording file " + path + ".bin";
    }
    return "";
  }
  void set_path(std::string path) {
    path_ = std::move(path);
    blob_path_ = path_ + ".bin";
  }
  void write_header() {
    nlohmann::json header =
        sim::call_trace_header(page_size_, policy_, "kvsim python module", sim::kSlotsHashLatest);
    const size_t slash = blob_path_.find_last_of('/');
    header["blob"] = slash == std::string::npos ? blob_path_ : blob_path_.substr(slash + 1);
    const std::string h = header.dump() + "\n";
    room(0);
    lines_.append(h.data(), h.size());
  }
  void append_footer(size_t nodes, int64_t evictable, int64_t protected_size,
                     std::optional<std::pair<size_t, std::string>> violation, bool truncated) {
    sim::CallTraceEnd end;
    end.calls = segment_calls();
    end.event_hash = hash_;
    end.nodes = nodes;
    end.evictable = evictable;
    end.protected_size = protected_size;
    end.violation = std::move(violation);
    end.truncated = truncated;
    const std::string f = sim::call_trace_footer(end).dump() + "\n";
    if (lines_.len + f.size() > lines_.cap) {
      hand_off();
      lines_.grow(f.size());
    }
    lines_.append(f.data(), f.size());
  }
  int64_t base_i() const { return static_cast<int64_t>(base_); }

  static constexpr size_t kLinesCap = size_t{1} << 20;
  static constexpr size_t kBlobCap = size_t{4} << 20;

  // A buffer bound to a file offset; it grows only at a call boundary (room()).
  struct Region {
    char* data = nullptr;
    size_t len = 0;
    size_t cap = 0;
    uint64_t file_off = 0;  // where data[0] goes in the file
    Region() = default;
    Region(const Region&) = delete;
    Region& operator=(const Region&) = delete;
    ~Region() { std::free(data); }
    void swap(Region& o) {
      std::swap(data, o.data);
      std::swap(len, o.len);
      std::swap(cap, o.cap);
      std::swap(file_off, o.file_off);
    }
    void grow(size_t want) {
      if (want <= cap) return;
      char* p = static_cast<char*>(std::malloc(want));
      if (p == nullptr) throw std::bad_alloc();
      if (len != 0) std::memcpy(p, data, len);
      std::free(data);
      data = p;
      cap = want;
    }
    void append(const void* p, size_t n) {
      std::memcpy(data + len, p, n);
      len += n;
    }
    void restart() {
      file_off += len;
      len = 0;
    }
  };

  // A value's maximal runs of consecutive slots, (start, length) each, into runs_: from one
  // slot per token (stride 1), or from the first slots of whole pages (IndexVector::pages,
  // snapshot values), the same runs one step per page.
  void value_runs(std::span<const SlotIndex> entries, int32_t stride) {
    runs_.clear();
    if (stride == 1) {
      for_each_consecutive_run(entries, [&](size_t i, size_t j) {
        runs_.push_back(entries[i]);
        runs_.push_back(static_cast<int64_t>(j - i));
      });
      return;
    }
    const SlotIndex page = stride;
    for (size_t k = 0; k < entries.size();) {
      size_t m = k + 1;
      while (m < entries.size() && entries[m] == entries[m - 1] + page)
        ++m;
      runs_.push_back(entries[k]);
      runs_.push_back(static_cast<int64_t>(m - k) * page);
      k = m;
    }
  }

  static void pwrite_all(int fd, const char* p, size_t n, uint64_t off) {
    while (n > 0) {
      const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;  // disk full or closed: the recording stops growing
      p += w;
      n -= static_cast<size_t>(w);
      off += static_cast<uint64_t>(w);
    }
  }
  static void write_region(int fd, const Region& r) {
    if (r.len != 0) pwrite_all(fd, r.data, r.len, r.file_off);
  }

  // The end of the last complete call, as file offsets (read by signal_flush()).
  void commit() {
    commit_blob_.store(blob_.file_off + blob_.len);
    commit_lines_.store(lines_.file_off + lines_.len);
  }

  // At a call boundary: makes room for a call of at most `blob_bytes` sidecar bytes (and a
  // line of at most 256 + a few bytes), handing full buffers to the writer thread.
  void room(size_t blob_bytes) {
    constexpr size_t kLine = 512;
    if (lines_.len + kLine <= lines_.cap && blob_.len + blob_bytes <= blob_.cap) return;
    hand_off();
    lines_.grow(kLine);
    blob_.grow(blob_bytes);  // a key larger than the buffer: this buffer grows once
  }
  void hand_off() {
    std::unique_lock<std::mutex> g(wmu_);
    wcv_.wait(g, [&] { return !writing_.load(); });
    if (!writer_.joinable()) writer_ = std::thread([this] { writer_loop(); });
    blob_.swap(pblob_);
    lines_.swap(plines_);
    blob_.file_off = pblob_.file_off + pblob_.len;
    blob_.len = 0;
    lines_.file_off = plines_.file_off + plines_.len;
    lines_.len = 0;
    writing_.store(true);
    g.unlock();
    wcv_.notify_all();
  }
  void writer_loop() {
    std::unique_lock<std::mutex> g(wmu_);
    for (;;) {
      wcv_.wait(g, [&] { return writing_.load() || stop_; });
      if (writing_.load()) {
        g.unlock();
        write_region(blob_fd_, pblob_);    // the sidecar first: a line never names bytes that
        write_region(lines_fd_, plines_);  // are not in the file yet
        g.lock();
        writing_.store(false);
        wcv_.notify_all();
      } else if (stop_) {
        return;
      }
    }
  }

  void mark() {
    mark_lines_ = lines_.len;
    mark_blob_ = blob_.len;
  }
  // The keys of the nodes on the path to `last`, root first, into segments_ (the nodes into
  // path_nodes_); false when they are not `n` tokens (the insert's key).
  bool path_segments(const TreeNode& last, size_t n) {
    path_nodes_.clear();
    size_t total = 0;
    for (const TreeNode* p = &last; !p->is_root(); p = p->parent) {
      path_nodes_.push_back(p);
      total += p->key.size();
    }
    if (total != n) return false;
    std::reverse(path_nodes_.begin(), path_nodes_.end());
    for (const TreeNode* p : path_nodes_)
      segments_.push_back(p->key.span());
    return true;
  }
  // Whether the last match's hit (the path to last_match_node_) starts the path in path_nodes_,
  // so that the insert's key equals the match's for last_match_from_ tokens.
  bool path_covers_last_match() const {
    if (!last_match_node_) return last_match_from_ == 0;
    size_t depth = 0;
    for (const TreeNode* p : path_nodes_) {
      depth += p->key.size();
      if (p->id == *last_match_node_) return depth == last_match_from_;
    }
    return false;
  }
  // The insert's key (segments_, n tokens): the first `shared` named by the last match, the
  // rest spelled out (page hashes, or every token when pages are small).
  void spell_insert(size_t shared, size_t n) {
    const bool spelled = hash_pages_ ? (shared < n || shared == 0) : !(shared == n && shared > 0);
    if (hash_pages_) {
      if (shared > 0) tok_of(last_match_, shared);
      if (!spelled) return;
      pages_.clear();
      size_t depth = 0;
      for (const std::span<const Token> seg : segments_) {  // node keys are whole pages
        const size_t from = shared > depth ? std::min(shared - depth, seg.size()) : 0;
        depth += seg.size();
        for (size_t k = from; k < seg.size(); k += page_)
          pages_.push_back(hash_page(seg.data() + k, page_));
      }
      text(",\"pages\":");
      blob_ref(pages_.data(), pages_.size());
    } else if (!spelled) {
      tok_of(last_match_, shared);
    } else {
      text(",\"tok\":[");
      num(blob_.file_off + blob_.len);
      text(",");
      num(n);
      text("]");
      for (const std::span<const Token> seg : segments_)
        blob_.append(seg.data(), seg.size() * sizeof(Token));
    }
  }
  void hash_into(std::span<const Token> tokens, std::vector<uint64_t>* out) const {
    const size_t n = tokens.size() / page_;
    out->resize(n);
    for (size_t k = 0; k < n; ++k)
      (*out)[k] = hash_page(tokens.data() + k * page_, page_);
  }
  void tok_of(int64_t call, size_t count) {
    text(",\"tok_of\":[");
    num(call - base_i());
    text(",");
    num(count);
    text("]");
  }
  // Appends `count` items (runs: pairs) to the sidecar and writes [offset,count] in the line.
  template <typename T>
  void blob_ref(const T* data, size_t count, size_t items_per_count = 1) {
    text("[");
    num(blob_.file_off + blob_.len);
    text(",");
    num(count);
    text("]");
    blob_.append(data, count * items_per_count * sizeof(T));
  }
  void text(const char* s) { lines_.append(s, std::strlen(s)); }
  template <typename T>
  void num(T v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    lines_.append(tmp, static_cast<size_t>(r.ptr - tmp));
  }

  std::string path_;
  std::string blob_path_;
  int32_t page_size_ = 1;
  EvictionPolicy policy_ = EvictionPolicy::kLru;
  size_t page_ = 1;
  bool hash_pages_ = false;
  int lines_fd_ = -1;
  int blob_fd_ = -1;
  Region lines_, blob_;    // being filled by the calling thread
  Region plines_, pblob_;  // handed to the writer thread (while writing_)
  std::atomic<uint64_t> commit_lines_{0};
  std::atomic<uint64_t> commit_blob_{0};
  std::atomic<bool> writing_{false};
  std::atomic<bool> rotating_{false};
  std::vector<int64_t> runs_;
  std::vector<uint64_t> pages_;
  std::thread writer_;
  std::mutex wmu_;
  std::condition_variable wcv_;
  bool stop_ = false;
  // The key of the call in progress as the caller passed it (valid until its finish).
  struct PendingKey {
    const Token* narrow = nullptr;
    const int64_t* wide = nullptr;
    size_t size = 0;
    static PendingKey of(std::span<const Token> t) { return {t.data(), nullptr, t.size()}; }
    static PendingKey of(std::span<const int64_t> t) { return {nullptr, t.data(), t.size()}; }
    // [from, to) into dst as Tokens; false when a wide id does not fit (dst then holds the
    // truncated ids).
    bool copy(size_t from, size_t to, Token* dst) const {
      if (narrow != nullptr) {
        std::copy(narrow + from, narrow + to, dst);
        return true;
      }
      return wide == nullptr || narrow_wide_ids(wide + from, to - from, dst);
    }
  };
  PendingKey pending_;
  Namespace pending_ns_ = 0;
  size_t mark_lines_ = 0;  // the region lengths where the call in progress began
  size_t mark_blob_ = 0;
  int64_t last_match_ = -1;
  Namespace last_match_ns_ = 0;
  size_t last_match_from_ = 0;             // the last match's key from here on is the miss
  std::optional<NodeId> last_match_node_;  // ... and before it, the path to this node
  bool value_seen_ = false;                // the insert in progress: the slots the core read
  bool value_gap_ = false;
  size_t value_from_ = 0;
  IndexVector insert_value_;
  std::vector<Token> miss_buf_;  // the last match's miss: [0, miss_len_) (grows only)
  size_t miss_len_ = 0;
  std::vector<const TreeNode*> path_nodes_;       // an insert's path, root first
  std::vector<std::span<const Token>> segments_;  // ... and its key, node by node
  std::vector<Token> rest_;                       // a failed insert's key, from the caller's ids
  uint64_t calls_ = 0;
  uint64_t max_calls_ = 0;
  uint64_t hash_ = sim::kCallHashSeed;
  bool ended_ = false;
  // Looked up and erased, never iterated: a hash map keeps the recording deterministic.
  std::unordered_map<NodeId, int64_t> producer_;
  // Windows: the segment's first call (calls are numbered from it in the file), its number,
  // the first node id it does not know from its snapshot (0: no snapshot), the locks held.
  uint64_t base_ = 0;
  uint64_t segment_ = 0;
  NodeId segment_first_id_ = 0;
  std::map<int64_t, HeldLock> held_;
};

}  // namespace kvsim::python
