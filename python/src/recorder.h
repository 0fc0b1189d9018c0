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
// footer and continues in a new one that starts with a snapshot of the tree; call indices in a
// segment count from its first call, and what the segment's calls name from before it is named
// by node id (lock) or by the lock's record (unlock). The caller (PyTree, with a
// RecordingWindow) decides when and deletes old segments.
//
// This header is the interface; the implementation is split by concern:
//   recorder_writer.cpp    files, buffers, the writer thread, flushing, header and footer
//   recorder_keys.cpp      match and insert keys: page hashes, "tok_of" sharing, value runs
//   recorder_calls.cpp     lock / unlock / evict lines, a call's outcome and the event hash
//   recorder_segments.cpp  a window's segments: the next file and the snapshot it starts with
//   recorder_lines.h       the inline appends to the current line and sidecar they all use
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/common/node_id_map.h"
#include "core/pools/index_vector.h"
#include "core/tree/radix_tree.h"
#include "python/src/recorded_key.h"
#include "python/src/recorder_buffer.h"
#include "sim/trace/call_trace.h"

namespace kvsim::python {

// Pages of at least this many tokens are recorded as hashes.
inline constexpr int32_t kHashPagesFrom = 4;

class CallRecorder {
 public:
  // `first_snapshot`: the file is the first segment of a window and starts with it.
  CallRecorder(std::string path, int32_t page_size, EvictionPolicy policy, uint64_t max_calls,
               std::optional<TreeSnapshot> first_snapshot = std::nullopt);
  ~CallRecorder();
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  bool active() const { return lines_fd_ >= 0 && !ended_; }
  const std::string& path() const { return path_; }
  uint64_t calls() const { return calls_; }
  uint64_t segment_calls() const { return calls_ - base_; }
  bool at_bound() const { return max_calls_ != 0 && calls_ >= max_calls_; }

  // Ends this segment with its footer (the tree's sizes now) and goes on in a new file at
  // `path`, which starts with `snapshot` (the tree now). False when the new file cannot be
  // opened: the recording has then ended (the old file is complete).
  bool next_segment(const std::string& path, TreeSnapshot snapshot, size_t nodes, int64_t evictable,
                    int64_t protected_size);

  // Locks taken by recorded calls and not yet released (by call index), for the snapshots that
  // start a window's segments (a recording without a window writes none, and keeps none).
  void held(int64_t call, const LockRecord& record);
  void released(int64_t call);

  // The index the next call gets.
  int64_t next_index() const { return static_cast<int64_t>(calls_); }
  void produced(NodeId node) { producer_.set(node, next_index() - 1); }
  std::optional<int64_t> producer_of(NodeId node) const {
    const int64_t* call = producer_.find(node);
    return call != nullptr ? std::optional<int64_t>(*call) : std::nullopt;
  }
  void forget(NodeId node) { producer_.erase(node); }

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
    begin_match_key(ns, PendingKey::of(tokens));
  }
  // `tokens` is the page-aligned key; its value is written at finish_insert (the slots the
  // tree read).
  template <typename T>
  void begin_insert(Namespace ns, std::span<const T> tokens) {
    begin_insert_key(ns, PendingKey::of(tokens));
  }
  // Forgets the call begun last (a call the core refused without changing the tree). room()
  // reserved its bytes when it began, so nothing was handed to the writer since.
  void drop_call();
  // The key of the match begun last, once the core ran it (out: its outcome, or null when it
  // failed an assertion). False, with the call's line dropped, when the ids it keeps past the
  // hit include one a trace's 32-bit tokens cannot hold: the caller ends the recording.
  //
  // What is kept of a key that went through: its hit and the one page past it where the walk
  // stopped. A replay of that cut key stops at the same page with the same outcome (the tree
  // never read further), and no later call names more of it: a match names at most the hit of
  // the call that returned its node, and an insert at most what the last match kept. So the
  // rest of a long miss is neither read nor hashed. A call that failed an assertion keeps all.
  bool finish_match(const sim::CallOutcome* out);
  // A range of slots the core read for the insert in progress (ranges come in key order).
  // Its runs are taken at once (no copy of the index vector is kept).
  void note_value(size_t begin, const IndexVector& v);
  // False when the ranges the core read cannot be written as one list from val_from on (the
  // caller then ends the recording before this call).
  bool value_recordable() const { return !value_gap_; }
  // The insert's value and key, once the core ran it: `last` ends its page-aligned key (the
  // root for an empty one); null when the core failed an assertion (the caller's ids are then
  // spelled out). The value is the slots the tree read, [val_from, key length), as runs
  // ("val_from" + "val_runs"): the duplicates of the part it already held are not recorded.
  void finish_insert(const TreeNode* last);

  // A lock of `node`: named by the call of this segment that returned it, else (a window's
  // segment) by its id when the segment's snapshot has it. False: it cannot be named.
  bool begin_lock_of(NodeId node);
  // The release of the lock taken by call `call` (-1: not recorded; false, it cannot be named):
  // by that call in this segment, else by the lock's record.
  bool begin_unlock_of(int64_t call, const LockRecord& record);
  void begin_evict(int64_t n);
  // Ends the call begun last with its outcome (null: it failed a core assertion; a match's or
  // an insert's key is then written here, from the caller's ids).
  void finish_call(sim::CallKind kind, const sim::CallOutcome* out);

  // The call just written failed a core assertion: footer with the violation, then close.
  void violation(const std::string& detail, size_t nodes, int64_t evictable,
                 int64_t protected_size);
  void finish(size_t nodes, int64_t evictable, int64_t protected_size,
              std::optional<std::pair<size_t, std::string>> violation = std::nullopt,
              bool truncated = false);

  // Synchronous: everything recorded so far is in the files when it returns (a raising call,
  // close, exit, kvsim.flush_recordings()).
  void flush();
  // Async-signal-safe: writes the complete calls recorded so far (pwrite only, no allocation,
  // no lock, no change to the recorder). The writer thread may be writing the handed-off
  // buffers at the same time: writing them again at the same offsets is harmless.
  void signal_flush(int sig) const;

 private:
  static constexpr size_t kLinesCap = size_t{1} << 20;
  static constexpr size_t kBlobCap = size_t{4} << 20;

  // Files, buffers and the writer thread (recorder_writer.cpp).
  static std::string open_files(const std::string& path, int* lines_fd, int* blob_fd);
  void set_path(std::string path);
  void write_header();
  void append_footer(size_t nodes, int64_t evictable, int64_t protected_size,
                     std::optional<std::pair<size_t, std::string>> violation, bool truncated);
  void hand_off();
  void writer_loop();
  static size_t signal_footer(char* out, uint64_t calls, uint64_t hash, int sig);

  // Keys and values (recorder_keys.cpp).
  void begin_match_key(Namespace ns, PendingKey key);
  void begin_insert_key(Namespace ns, PendingKey key);
  void finish_insert_key(const TreeNode* last);
  void append_value_runs(std::span<const SlotIndex> entries, int32_t stride);
  bool path_segments(const TreeNode& last, size_t n);
  bool path_covers_last_match() const;
  void spell_insert(size_t shared, size_t n);
  void spell_insert_pages(size_t from, bool follows_match, size_t n);
  void hash_into(std::span<const Token> tokens, std::vector<uint64_t>* out) const;
  void tok_of(int64_t call, size_t count);

  // The snapshot record and node lines that start a segment (recorder_segments.cpp).
  void write_snapshot(TreeSnapshot snapshot);

  // Appends to the current line and sidecar, at a call boundary (recorder_lines.h, inline).
  void commit(bool footer = false);
  void room(size_t blob_bytes);
  void mark();
  template <typename T>
  void blob_ref(const T* data, size_t count, size_t items_per_count = 1);
  void text(const char* s);
  template <typename T>
  void num(T v);
  int64_t base_i() const { return static_cast<int64_t>(base_); }

  std::string path_;
  std::string blob_path_;
  int32_t page_size_ = 1;
  EvictionPolicy policy_ = EvictionPolicy::kLru;
  size_t page_ = 1;
  bool hash_pages_ = false;
  int lines_fd_ = -1;
  int blob_fd_ = -1;
  FileRegion lines_, blob_;    // being filled by the calling thread
  FileRegion plines_, pblob_;  // handed to the writer thread (while writing_)
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
  PendingKey pending_;  // the key of the call in progress (valid until its finish)
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
