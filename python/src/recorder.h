// CallRecorder: writes a tree's calls as a kvsim call trace (sim/trace/call_trace.h), for
// `kvsim replay` / `kvsim shrink`. Lines are formatted by hand (std::to_chars), not through a
// JSON library; keys and slots go to a binary sidecar (<trace>.bin) that the lines name by
// [byte offset, count].
//
// Volume (docs/sglang.md "Recording"): the tree only ever compares whole pages, so with
// page_size >= kHashPagesFrom a key is recorded as one 64-bit hash per page ("pages"), and
// replay turns each distinct hash into a synthetic page: equal pages stay equal, different ones
// different (a hash collision, ~n^2/2^65 for n distinct pages, shows up as a divergence). The
// unaligned tail of a key, which the tree never reads, is not recorded. Smaller pages record the
// tokens ("tok"). A match keeps only its hit and the page where the walk stopped (finish_match).
// A key's leading part that an earlier call already holds is named by that call ("tok_of": a
// match names the call that last returned its node; an insert names the last match when they
// share leading pages). Slots are recorded as runs (start, length).
//
// Buffers and flushing: lines and sidecar bytes go to two fixed buffers (never reallocated
// inside a call); at a call boundary, a buffer that is full is handed to a writer thread, which
// writes it with pwrite() at its file offset, so the calling thread does not wait for the disk.
// They are written synchronously when a call fails a core assertion, when the recording closes
// (tree destroyed, close_recording(), interpreter exit) and from kvsim.flush_recordings().
// On SIGTERM / SIGABRT, signal_flush() writes every complete call recorded so far with pwrite()
// only (async-signal-safe; it changes no recorder state, so it may run more than once), then a
// footer {"end":{"calls":C,"event_hash":H,"cut_by_signal":N}} (the tree's sizes cannot be read
// in a handler): the file is a whole recording, honest about how it ended, and `kvsim replay`
// checks every recorded outcome and the event hash. A file without a footer is refused. If the
// process lives on (a handler of its own), later writes overwrite that footer and flush()
// truncates the file to what it wrote.
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
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/common/node_id_map.h"
#include "core/pools/index_vector.h"
#include "core/tree/token_run.h"
#include "core/tree/wide_ids.h"
#include "sim/trace/call_page_hash.h"
#include "sim/trace/call_trace.h"
#include "sim/base/hex64.h"

namespace kvsim::python {

// Pages of at least this many tokens are recorded as hashes.
inline constexpr int32_t kHashPagesFrom = 4;

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
    windowed_ = first_snapshot.has_value();
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
    commit(/*footer=*/true);
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

  // Locks taken by recorded calls and not yet released (by call index), for the snapshots that
  // start a window's segments (a recording without a window writes none, and keeps none).
  void held(int64_t call, const LockRecord& record) {
    if (windowed_)
      held_[call] = HeldLock{record.anchor, record.start[index_of(ComponentType::kFull)]};
  }
  void released(int64_t call) {
    if (windowed_) held_.erase(call);
  }

  // The index the next call gets.
  int64_t next_index() const { return static_cast<int64_t>(calls_); }
  void produced(NodeId node) { producer_.set(node, next_index() - 1); }
  std::optional<int64_t> producer_of(NodeId node) const {
    const int64_t* call = producer_.find(node);
    return call != nullptr ? std::optional<int64_t>(*call) : std::nullopt;
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
  }
  // The key of the match begun last, once the core ran it (out: its outcome, or null when it
  // failed an assertion). False, with the call's line dropped, when the ids it keeps past the
  // hit include one a trace's 32-bit tokens cannot hold: the caller ends the recording.
  //
  // What is kept of a key that went through: its hit and the one page past it where the walk
  // stopped. A replay of that cut key stops at the same page with the same outcome (the tree
  // never read further), and no later call names more of it: a match names at most the hit of
  // the call that returned its node, and an insert at most what the last match kept. So the
  // rest of a long miss is neither read nor hashed. A call that failed an assertion keeps all.
  bool finish_match(const sim::CallOutcome* out) {
    size_t hit = 0;  // the part named by the call that produced the hit node
    size_t kept = pending_.size;
    std::optional<int64_t> k;
    if (out != nullptr) {
      kept = std::min(pending_.size, static_cast<size_t>(out->amount) + page_);
      if (out->amount > 0) {
        k = producer_of(out->node);
        if (k) hit = static_cast<size_t>(out->amount);
      }
    }
    if (hash_pages_) {
      // The kept miss as page hashes, read from the caller's ids (no copy of them). A call that
      // failed an assertion is written even so, its ids cut to 32 bits (the failure is what
      // the recording is for); a call that went through is dropped instead.
      const size_t pages = (kept - hit) / page_;
      if (match_pages_.size() < pages) match_pages_.resize(pages);
      match_page_count_ = pages;
      if (!pending_.hash(hit, pages, page_, match_pages_.data()) && out != nullptr) {
        drop_call();
        last_match_ = -1;
        return false;
      }
      if (k) tok_of(*k, hit);
      if (pages > 0 || hit == 0) {  // a key names its tokens somehow
        text(",\"pages\":");
        blob_ref(match_pages_.data(), pages);
      }
    } else {
      // The buffer only grows (no zero fill of what the copy overwrites).
      miss_len_ = kept - hit;
      if (miss_buf_.size() < miss_len_) miss_buf_.resize(miss_len_);
      if (!pending_.copy(hit, kept, miss_buf_.data()) && out != nullptr) {
        drop_call();
        last_match_ = -1;
        return false;
      }
      if (k) tok_of(*k, hit);
      if (miss_len_ > 0 || hit == 0) {
        text(",\"tok\":");
        blob_ref(miss_buf_.data(), miss_len_);
      }
    }
    last_match_ = next_index();
    last_match_ns_ = pending_ns_;
    last_match_from_ = hit;  // from here to `kept`, the key is match_pages_ or miss_buf_
    last_match_node_ = hit > 0 ? std::optional<NodeId>(out->node) : std::nullopt;
    return true;
  }
  // A range of slots the core read for the insert in progress (ranges come in key order).
  // Its runs are taken at once (no copy of the index vector is kept).
  void note_value(size_t begin, const IndexVector& v) {
    if (!value_seen_) {
      value_seen_ = true;
      value_from_ = begin;
      value_size_ = 0;
      runs_.clear();
    } else if (begin != value_from_ + value_size_) {
      value_gap_ = true;  // a range not next to the last: not representable as one run list
      return;
    }
    append_value_runs(v.entries(), v.stride());
    value_size_ += v.size();
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
    if (!value_seen_) runs_.clear();
    text(",\"val_runs\":");
    blob_ref(runs_.data(), runs_.size() / 2, 2);
    value_seen_ = false;
    value_gap_ = false;
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
      if (hash_pages_) {
        spell_insert_pages(0, false, n);
      } else {
        spell_insert(0, n);
      }
      return;
    }
    // segments_ now holds the key as the tree's node keys, root first.
    const bool follows_match =
        last_match_ >= 0 && pending_ns_ == last_match_ns_ && path_covers_last_match();
    if (hash_pages_) {
      spell_insert_pages(follows_match ? last_match_from_ : 0, follows_match, n);
      return;
    }
    size_t shared = 0;
    if (follows_match) {
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
      if (shared < n) shared = shared / page_ * page_;
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
          sim::hex64(out->slots_hash, hex);
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
    commit(/*footer=*/true);
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
    // A signal footer written past this end (the process survived the signal) goes.
    if (::ftruncate(lines_fd_, static_cast<off_t>(lines_.file_off + lines_.len)) != 0) {
      // the recording stops growing here, as on a full disk (pwrite_all)
    }
    blob_.restart();
    lines_.restart();
  }

  // Async-signal-safe: writes the complete calls recorded so far (pwrite only, no allocation,
  // no lock, no change to the recorder). The writer thread may be writing the handed-off
  // buffers at the same time: writing them again at the same offsets is harmless.
  void signal_flush(int sig) const {
    if (lines_fd_ < 0 || rotating_.load()) return;
    if (writing_.load()) {
      write_region(blob_fd_, pblob_);
      write_region(lines_fd_, plines_);
    }
    const uint64_t blob_end = commit_blob_.load(std::memory_order_acquire);
    const uint64_t lines_end = commit_lines_.load(std::memory_order_acquire);
    if (blob_end > blob_.file_off)
      pwrite_all(blob_fd_, blob_.data, blob_end - blob_.file_off, blob_.file_off);
    if (lines_end > lines_.file_off)
      pwrite_all(lines_fd_, lines_.data, lines_end - lines_.file_off, lines_.file_off);
    if (commit_footer_.load(std::memory_order_acquire)) return;  // it ends with its footer
    char footer[128];
    const size_t n = signal_footer(footer, commit_calls_.load(std::memory_order_acquire),
                                   commit_hash_.load(std::memory_order_acquire), sig);
    pwrite_all(lines_fd_, footer, n, lines_end);
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
      // Touched now, so that no call pays for the first write to a page of it.
      std::memset(p + len, 0, want - len);
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

  // Appends a value's maximal runs of consecutive slots, (start, length) each, to runs_ (a run
  // that continues the last one extends it): from one slot per token (stride 1), or from the
  // first slots of whole pages (IndexVector::pages, snapshot values), one step per page.
  void append_value_runs(std::span<const SlotIndex> entries, int32_t stride) {
    const auto add = [&](SlotIndex start, int64_t len) {
      const size_t r = runs_.size();
      if (r >= 2 && runs_[r - 2] + runs_[r - 1] == start) {
        runs_[r - 1] += len;
      } else {
        runs_.push_back(start);
        runs_.push_back(len);
      }
    };
    if (stride == 1) {
      for_each_consecutive_run(
          entries, [&](size_t i, size_t j) { add(entries[i], static_cast<int64_t>(j - i)); });
      return;
    }
    const SlotIndex page = stride;
    for (size_t k = 0; k < entries.size();) {
      size_t m = k + 1;
      while (m < entries.size() && entries[m] == entries[m - 1] + page)
        ++m;
      add(entries[k], static_cast<int64_t>(m - k) * page);
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

  // {"end":{"calls":C,"event_hash":"H","cut_by_signal":N}}\n into `out` (128 bytes), with no
  // allocation (async-signal-safe); returns its length.
  static size_t signal_footer(char* out, uint64_t calls, uint64_t hash, int sig) {
    size_t n = 0;
    auto text = [&](const char* s) {
      while (*s != '\0') out[n++] = *s++;
    };
    auto number = [&](uint64_t v) {
      char digits[20];
      size_t k = 0;
      do {
        digits[k++] = static_cast<char>('0' + v % 10);
        v /= 10;
      } while (v != 0);
      while (k > 0) out[n++] = digits[--k];
    };
    text("{\"end\":{\"calls\":");
    number(calls);
    text(",\"event_hash\":\"");
    sim::hex64(hash, out + n);
    n += 16;
    text("\",\"cut_by_signal\":");
    number(static_cast<uint64_t>(sig));
    text("}}\n");
    return n;
  }

  // The end of the last complete call, as file offsets (read by signal_flush()), with the calls
  // and event hash a signal footer states; `footer`: what is committed ends with a footer.
  void commit(bool footer = false) {
    commit_calls_.store(segment_calls(), std::memory_order_relaxed);
    commit_hash_.store(hash_, std::memory_order_relaxed);
    commit_footer_.store(footer, std::memory_order_relaxed);
    // Release: a signal_flush() that acquires an offset sees the bytes before it (a plain
    // seq_cst store is an xchg, paid at every call).
    commit_blob_.store(blob_.file_off + blob_.len, std::memory_order_release);
    commit_lines_.store(lines_.file_off + lines_.len, std::memory_order_release);
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
  // Pages of at most kHashPagesFrom tokens: the insert's key (segments_, n tokens), the first
  // `shared` named by the last match, the rest spelled out token by token.
  void spell_insert(size_t shared, size_t n) {
    if (shared == n && shared > 0) {
      tok_of(last_match_, shared);
      return;
    }
    text(",\"tok\":[");
    num(blob_.file_off + blob_.len);
    text(",");
    num(n);
    text("]");
    for (const std::span<const Token> seg : segments_)
      blob_.append(seg.data(), seg.size() * sizeof(Token));
  }
  // Page hashes: the insert's key (segments_, n tokens, node keys of whole pages) past `from`
  // hashed page by page; when the insert follows the last match, its leading pages whose hashes
  // equal the match's miss pages are named by that match ("tok_of") with the hit before them.
  // To replay, equal hashes are equal pages: naming them or listing them gives the same key.
  void spell_insert_pages(size_t from, bool follows_match, size_t n) {
    const size_t pages = (n - from) / page_;
    if (pages_.size() < pages) pages_.resize(pages);
    size_t depth = 0;
    size_t at = 0;
    for (const std::span<const Token> seg : segments_) {
      const size_t begin = from > depth ? std::min(from - depth, seg.size()) : 0;
      depth += seg.size();
      const size_t count = (seg.size() - begin) / page_;
      sim::hash_token_pages(seg.data() + begin, count, page_, pages_.data() + at);
      at += count;
    }
    KV_ASSERT(at == pages, "recorder: an insert's path holds " + std::to_string(at) +
                               " pages past token " + std::to_string(from) + ", its key " +
                               std::to_string(pages));
    size_t same = 0;
    if (follows_match) {
      while (same < pages && same < match_page_count_ && pages_[same] == match_pages_[same])
        ++same;
    }
    const size_t shared = follows_match ? from + same * page_ : 0;
    if (shared > 0) tok_of(last_match_, shared);
    if (shared < n || shared == 0) {
      text(",\"pages\":");
      blob_ref(pages_.data() + same, pages - same);
    }
  }
  void hash_into(std::span<const Token> tokens, std::vector<uint64_t>* out) const {
    const size_t n = tokens.size() / page_;
    out->resize(n);
    sim::hash_token_pages(tokens.data(), n, page_, out->data());
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
  std::atomic<uint64_t> commit_calls_{0};
  std::atomic<uint64_t> commit_hash_{0};
  std::atomic<bool> commit_footer_{false};
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
    // The hashes of `pages` pages from `from` into out; false when a wide id does not fit
    // (out then holds the hashes of the cut ids).
    bool hash(size_t from, size_t pages, size_t page, uint64_t* out) const {
      if (narrow != nullptr) {
        sim::hash_token_pages(narrow + from, pages, page, out);
        return true;
      }
      return wide == nullptr || sim::hash_wide_pages(wide + from, pages, page, out);
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
  size_t value_size_ = 0;  // slots noted so far, from value_from_; their runs are in runs_
  // The last match's miss: page hashes [0, match_page_count_) with page hashes, else tokens
  // [0, miss_len_) (both grow only).
  std::vector<uint64_t> match_pages_;
  size_t match_page_count_ = 0;
  std::vector<Token> miss_buf_;
  size_t miss_len_ = 0;
  std::vector<const TreeNode*> path_nodes_;       // an insert's path, root first
  std::vector<std::span<const Token>> segments_;  // ... and its key, node by node
  std::vector<Token> rest_;                       // a failed insert's key, from the caller's ids
  uint64_t calls_ = 0;
  uint64_t max_calls_ = 0;
  uint64_t hash_ = sim::kCallHashSeed;
  bool ended_ = false;
  NodeIdMap<int64_t> producer_;
  // Windows: the segment's first call (calls are numbered from it in the file), its number,
  // the first node id it does not know from its snapshot (0: no snapshot), the locks held.
  uint64_t base_ = 0;
  uint64_t segment_ = 0;
  NodeId segment_first_id_ = 0;
  bool windowed_ = false;  // the first segment of a window: segments follow, with snapshots
  std::map<int64_t, HeldLock> held_;
};

}  // namespace kvsim::python
