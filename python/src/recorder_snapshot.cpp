// CallRecorder::write_snapshot: the snapshot record that starts a segment of a windowed
// recording (format: sim/trace/call_trace_snapshot.h), formatted by hand into the recorder's buffers
// like the calls are: keys as tokens or page hashes and slots as runs in the sidecar, named by
// [byte offset, count]. O(tree) once per segment, on the calling thread; the writer thread
// writes the buffers as they fill.
#include <string>
#include <utility>

#include "python/src/recorder.h"

namespace kvsim::python {

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
