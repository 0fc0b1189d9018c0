// CallRecorder's call lines besides the keys: the op of a lock, an unlock or an evict (naming
// what the segment can name), a call's outcome and its fold into the event hash, and the
// dropping of a call the core refused.
#include <optional>

#include "python/src/recorder.h"
#include "python/src/recorder_lines.h"
#include "sim/base/hex64.h"

namespace kvsim::python {

void CallRecorder::drop_call() {
  lines_.len = mark_lines_;
  blob_.len = mark_blob_;
  value_seen_ = false;
  value_gap_ = false;
}

bool CallRecorder::begin_lock_of(NodeId node) {
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

bool CallRecorder::begin_unlock_of(int64_t call, const LockRecord& record) {
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

void CallRecorder::begin_evict(int64_t n) {
  room(64);
  text("{\"op\":\"evict\",\"n\":");
  num(n);
}

void CallRecorder::finish_call(sim::CallKind kind, const sim::CallOutcome* out) {
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

}  // namespace kvsim::python
