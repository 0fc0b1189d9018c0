// CallRecorder's windowed recording (recorder.h, "Window"): next_segment() ends a file with its
// footer and opens the next, which starts with the snapshot record (format:
// sim/trace/call_trace_snapshot.h), formatted by hand into the recorder's buffers like the
// calls are: keys as tokens or page hashes and slots as runs in the sidecar, named by
// [byte offset, count]. O(tree) once per segment, on the calling thread; the writer thread
// writes the buffers as they fill. The locks held across segments are kept for the snapshots.
#include <unistd.h>

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "python/src/recorder.h"
#include "python/src/recorder_lines.h"

namespace kvsim::python {

bool CallRecorder::next_segment(const std::string& path, TreeSnapshot snapshot, size_t nodes,
                                int64_t evictable, int64_t protected_size) {
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
  for (FileRegion* r : {&lines_, &blob_}) {
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

void CallRecorder::held(int64_t call, const LockRecord& record) {
  if (windowed_)
    held_[call] = HeldLock{record.anchor, record.start[index_of(ComponentType::kFull)]};
}

void CallRecorder::released(int64_t call) {
  if (windowed_) held_.erase(call);
}

void CallRecorder::write_snapshot(TreeSnapshot snapshot) {
  std::vector<HeldLock> held;
  held.reserve(held_.size());
  for (const auto& [call, lock] : held_)
    held.push_back(lock);
  snapshot.held_locks = std::move(held);
  const std::string disagree = held_locks_problem(snapshot);
  segment_first_id_ = snapshot.next_id;

  room(0);
  text("{\"snapshot\":{\"nodes\":");
  num(snapshot.nodes.size());
  text(",\"next_id\":");
  num(snapshot.next_id);
  text(",\"clock\":");
  num(snapshot.clock);
  text(",\"first_call\":");
  num(base_);
  text(",\"segment\":");
  num(segment_);
  text(",\"locks\":[");
  bool first = true;
  for (const auto& [call, lock] : held_) {
    room(0);
    text(first ? "{\"call\":" : ",{\"call\":");
    first = false;
    num(call);
    text(",\"anchor\":");
    num(lock.anchor);
    if (lock.start) {
      text(",\"start\":");
      num(*lock.start);
    }
    text("}");
  }
  text("]");
  if (!disagree.empty()) {
    // room() leaves a line 512 bytes; the message is one line of restore()'s, cut to fit.
    const std::string quoted = nlohmann::json(disagree.substr(0, 300)).dump();
    room(0);
    text(",\"locks_disagree\":");
    text(quoted.c_str());
  }
  text("}}\n");

  // A value's slots as runs, with its stride when page-granular (the reader rebuilds pages).
  auto value = [&](const std::optional<SnapshotValue>& v, const char* runs, const char* stride) {
    if (!v) return;
    runs_.clear();
    append_value_runs(v->entries, v->stride);
    text(runs);
    blob_ref(runs_.data(), runs_.size() / 2, 2);
    if (v->stride != 1) {
      text(stride);
      num(v->stride);
    }
  };
  for (const NodeSnapshot& n : snapshot.nodes) {
    const size_t key_bytes =
        hash_pages_ ? n.key.size() / page_ * sizeof(uint64_t) : n.key.size() * sizeof(Token);
    const size_t slot_bytes = ((n.value ? n.value->entries.size() : 0) +
                               (n.host_value ? n.host_value->entries.size() : 0)) *
                              2 * sizeof(int64_t);
    room(key_bytes + slot_bytes + 64);
    text("{\"node\":");
    num(n.id);
    text(",\"parent\":");
    num(n.parent);
    text(",\"ns\":");
    num(n.ns);
    if (hash_pages_) {
      hash_into(n.key, &pages_);
      text(",\"pages\":");
      blob_ref(pages_.data(), pages_.size());
    } else {
      text(",\"tok\":");
      blob_ref(n.key.data(), n.key.size());
    }
    value(n.value, ",\"val_runs\":", ",\"stride\":");
    value(n.host_value, ",\"host_runs\":", ",\"host_stride\":");
    if (n.lock_ref != 0) {
      text(",\"lock_ref\":");
      num(n.lock_ref);
    }
    if (n.host_lock_ref != 0) {
      text(",\"host_lock_ref\":");
      num(n.host_lock_ref);
    }
    text(",\"last_access\":");
    num(n.last_access);
    text(",\"creation\":");
    num(n.creation);
    text(",\"hit_count\":");
    num(n.hit_count);
    text("}\n");
  }
}

}  // namespace kvsim::python
