#include "sim/report/timeline.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "sim/base/json_reader.h"
#include "sim/trace/trace.h"

namespace kvsim::sim {
namespace {

constexpr int kPid = 1;
constexpr int kOpsTid = 1;
constexpr int kFaultsTid = 2;
constexpr int kStorageTid = 5;   // + worker (0 query, 1 io, 2 backup)
constexpr int kStreamTid = 100;  // + stream id
constexpr const char* kStorageNames[] = {"storage query", "storage io", "storage backup"};

std::string_view kind_name(CpuOpKind kind) {
  switch (kind) {
    case CpuOpKind::kCopy:
      return "copy";
    case CpuOpKind::kUpload:
      return "upload";
    case CpuOpKind::kTransfer:
      return "transfer";
    case CpuOpKind::kWait:
      return "wait";
    case CpuOpKind::kPoison:
      return "poison";
  }
  return "?";
}

// The op's fields without the prompt tokens (their count instead).
nlohmann::json op_args(size_t index, const Op& op) {
  nlohmann::json j = to_json(op);
  if (j.contains("prompt")) {
    j["prompt_len"] = op.prompt.size();
    j.erase("prompt");
  }
  j["op_number"] = index + 1;  // 1-based, as the run summary and tree pictures say
  return j;
}

}  // namespace

TimelineRecorder::~TimelineRecorder() {
  detach();
}

void TimelineRecorder::attach(Executor& executor) {
  executor_ = &executor;
  scenario_ = executor.scenario().name;
  executor.set_observer(this);
  // Stream tracks come from kvsim's CPU backend; another cache under test gets the op track.
  if (executor.core() != nullptr) executor.backend().set_observer(this);
  tracks_[kOpsTid] = "ops";
}

void TimelineRecorder::detach() {
  if (executor_ == nullptr) return;
  executor_->set_observer(nullptr);
  if (executor_->core() != nullptr) executor_->backend().set_observer(nullptr);
  executor_ = nullptr;
}

int TimelineRecorder::stream_tid(StreamId stream) {
  const int tid = kStreamTid + static_cast<int>(stream);
  if (!tracks_.count(tid) && executor_ != nullptr) {
    tracks_[tid] = "stream " + executor_->backend().stream_name(stream);
  }
  return tid;
}

void TimelineRecorder::add(nlohmann::json event) {
  event["pid"] = kPid;
  events_.push_back(std::move(event));
}

void TimelineRecorder::before_op(size_t index, const Op& op) {
  op_index_ = index;
  op_kind_ = op.kind;
  enqueued_during_op_.clear();
  add({{"ph", "B"},
       {"name", std::string(to_string(op.kind))},
       {"cat", "op"},
       {"tid", kOpsTid},
       {"ts", clock_++},
       {"args", op_args(index, op)}});
  if (op.kind == OpKind::kArrive) {
    add({{"ph", "b"},
         {"name", "request " + std::to_string(op.rid)},
         {"cat", "request"},
         {"id", op.rid},
         {"tid", kOpsTid},
         {"ts", clock_},
         {"args",
          {{"ns", op.ns}, {"prompt_len", op.prompt.size()}, {"output_len", op.output_len}}}});
    requests_[op.rid] = RequestSpan{.phase = "", .open = true};
    phase(op.rid, "waiting");
  }
}

void TimelineRecorder::phase(RequestId rid, const std::string& next) {
  auto it = requests_.find(rid);
  if (it == requests_.end() || !it->second.open || it->second.phase == next) return;
  if (!it->second.phase.empty()) {
    add({{"ph", "e"},
         {"name", it->second.phase},
         {"cat", "request"},
         {"id", rid},
         {"tid", kOpsTid},
         {"ts", clock_}});
  }
  it->second.phase = next;
  if (!next.empty()) {
    add({{"ph", "b"},
         {"name", next},
         {"cat", "request"},
         {"id", rid},
         {"tid", kOpsTid},
         {"ts", clock_}});
  }
}

void TimelineRecorder::request_instant(RequestId rid, const std::string& name,
                                       nlohmann::json args) {
  auto it = requests_.find(rid);
  if (it == requests_.end() || !it->second.open) return;
  nlohmann::json e = {{"ph", "n"}, {"name", name},   {"cat", "request"},
                      {"id", rid}, {"tid", kOpsTid}, {"ts", clock_}};
  if (!args.is_null()) e["args"] = std::move(args);
  add(std::move(e));
}

void TimelineRecorder::end_request(RequestId rid, const std::string& how) {
  auto it = requests_.find(rid);
  if (it == requests_.end() || !it->second.open) return;
  request_instant(rid, how);
  phase(rid, "");
  add({{"ph", "e"},
       {"name", "request " + std::to_string(rid)},
       {"cat", "request"},
       {"id", rid},
       {"tid", kOpsTid},
       {"ts", clock_},
       {"args", {{"end", how}}}});
  it->second.open = false;
}

void TimelineRecorder::after_op(size_t index, const Op& op, const OpOutcome& outcome) {
  if (op.kind == OpKind::kStorage && outcome.applied && op.target < 3) {
    const int tid = kStorageTid + static_cast<int>(op.target);
    tracks_[tid] = kStorageNames[op.target];
    add({{"ph", "X"},
         {"name", outcome.ok ? "work" : "idle"},
         {"cat", "storage"},
         {"tid", tid},
         {"ts", clock_++},
         {"dur", 1},
         {"args", {{"op_number", index + 1}}}});
  }
  if (outcome.applied && op.rid != 0) {
    switch (op.kind) {
      case OpKind::kAdmit:
        if (outcome.ok) {
          const auto load = std::find_if(
              enqueued_during_op_.begin(), enqueued_during_op_.end(),
              [&](const auto& kv) { return executor_->backend().stream_name(kv.first) == "load"; });
          request_instant(op.rid, "admit", {{"op_number", index + 1}, {"load_back", op.flag}});
          if (load != enqueued_during_op_.end()) {
            request_instant(op.rid, "load-back", {{"op_number", index + 1}, {"ops", load->second}});
          }
          phase(op.rid, "running");
        }
        break;
      case OpKind::kCompute:
        request_instant(op.rid, "forward",
                        {{"op_number", index + 1}, {"n", op.n}, {"ok", outcome.ok}});
        break;
      case OpKind::kFinish:
        end_request(op.rid, "finish");
        break;
      case OpKind::kAbort:
        end_request(op.rid, "abort");
        break;
      case OpKind::kRetract:
        request_instant(op.rid, "retract", {{"op_number", index + 1}});
        phase(op.rid, "waiting");
        break;
      case OpKind::kOffload:
        request_instant(op.rid, "offload", {{"op_number", index + 1}});
        phase(op.rid, "offloaded");
        break;
      case OpKind::kResume:
        request_instant(op.rid, "resume", {{"op_number", index + 1}});
        phase(op.rid, "running");
        break;
      default:
        break;
    }
  }
  add({{"ph", "E"},
       {"name", std::string(to_string(op.kind))},
       {"cat", "op"},
       {"tid", kOpsTid},
       {"ts", clock_++},
       {"args", {{"applied", outcome.applied}, {"ok", outcome.ok}}}});
  if (executor_ != nullptr) event_hash_ = executor_->event_hash();
  if (executor_ != nullptr && executor_->failed() && !violation_marked_) {
    const SimViolation& v = *executor_->violation();
    add({{"ph", "i"},
         {"name", "VIOLATION " + v.invariant},
         {"cat", "violation"},
         {"s", "g"},
         {"tid", kOpsTid},
         {"ts", clock_ - 1},
         {"args", {{"invariant", v.invariant}, {"detail", v.detail}, {"op_number", index + 1}}}});
    violation_marked_ = true;
  }
}

void TimelineRecorder::on_fault(std::string_view site) {
  tracks_[kFaultsTid] = "faults";
  add({{"ph", "i"},
       {"name", std::string(site)},
       {"cat", "fault"},
       {"s", "t"},
       {"tid", kFaultsTid},
       {"ts", clock_},
       {"args", {{"after_op", op_index_ + 1}}}});
}

void TimelineRecorder::on_enqueue(const CpuOp& op) {
  last_enqueued_[op.stream] = op.id;
  ++enqueued_during_op_[op.stream];
}

void TimelineRecorder::on_record(StreamId stream, EventId event) {
  const auto enq = last_enqueued_.find(stream);
  const auto ran = last_run_.find(stream);
  const bool pending =
      enq != last_enqueued_.end() && (ran == last_run_.end() || ran->second < enq->second);
  if (pending) {
    completes_[enq->second].push_back(event.value);
    return;
  }
  // Nothing queued before it: complete at once. A marker slice holds the flow's start.
  const int tid = stream_tid(stream);
  event_source_[event.value] = Source{.tid = tid, .ts = clock_};
  add({{"ph", "X"},
       {"name", "record event " + std::to_string(event.value)},
       {"cat", "event"},
       {"tid", tid},
       {"ts", clock_++},
       {"dur", 1},
       {"args", {{"event", event.value}, {"op_number", op_index_ + 1}}}});
}

void TimelineRecorder::on_run(const CpuOp& op) {
  const int tid = stream_tid(op.stream);
  last_run_[op.stream] = op.id;
  const uint64_t ts = clock_++;
  nlohmann::json args = {{"backend_op", op.id}, {"label", op.label}, {"op_number", op_index_ + 1}};
  switch (op.kind) {
    case CpuOpKind::kCopy:
      args["bytes"] = op.bytes;
      args["src_offset"] = op.src_offset;
      args["dst_offset"] = op.dst_offset;
      break;
    case CpuOpKind::kUpload:
      args["bytes"] = op.payload.size();
      args["dst_offset"] = op.dst_offset;
      break;
    case CpuOpKind::kTransfer: {
      const KVTransfer& t = op.transfer;
      const auto layers = static_cast<size_t>(t.layer_end - t.layer_begin);
      args["indices"] = t.count;
      args["layers"] = layers;
      args["bytes"] = t.count * layers * t.src.item_bytes;
      args["src"] = t.src.block.kind == MemoryKind::kDevice ? "device" : "host";
      args["dst"] = t.dst.block.kind == MemoryKind::kDevice ? "device" : "host";
      break;
    }
    case CpuOpKind::kWait:
      args["event"] = op.event.value;
      break;
    case CpuOpKind::kPoison:
      break;
  }
  if (op.skip) args["refused"] = true;
  const std::string name = op.kind == CpuOpKind::kWait ? op.label
                           : op.label.empty()          ? std::string(kind_name(op.kind))
                                              : std::string(kind_name(op.kind)) + " " + op.label;
  add({{"ph", "X"},
       {"name", name},
       {"cat", std::string(kind_name(op.kind))},
       {"tid", tid},
       {"ts", ts},
       {"dur", 1},
       {"args", std::move(args)}});
  if (auto it = completes_.find(op.id); it != completes_.end()) {
    for (uint64_t event : it->second)
      event_source_[event] = Source{.tid = tid, .ts = ts};
    completes_.erase(it);
  }
  if (op.kind == CpuOpKind::kWait) {
    auto src = event_source_.find(op.event.value);
    if (src != event_source_.end()) {
      const uint64_t id = next_flow_++;
      const std::string flow = "event " + std::to_string(op.event.value);
      add({{"ph", "s"},
           {"name", flow},
           {"cat", "event"},
           {"id", id},
           {"tid", src->second.tid},
           {"ts", src->second.ts}});
      add({{"ph", "f"},
           {"bp", "e"},
           {"name", flow},
           {"cat", "event"},
           {"id", id},
           {"tid", tid},
           {"ts", ts}});
    }
  }
}

nlohmann::json TimelineRecorder::json() const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", kPid},
                    {"tid", 0},
                    {"args", {{"name", "kvsim"}}}});
  for (const auto& [tid, name] : tracks_) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", kPid},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_sort_index"},
                      {"pid", kPid},
                      {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const nlohmann::json& e : events_)
    events.push_back(e);
  // Requests still open when the run stopped (a violation ends it early): closed at the end.
  for (const auto& [rid, span] : requests_) {
    if (!span.open) continue;
    const nlohmann::json base = {{"ph", "e"},   {"cat", "request"}, {"id", rid},
                                 {"pid", kPid}, {"tid", kOpsTid},   {"ts", clock_}};
    if (!span.phase.empty()) {
      nlohmann::json e = base;
      e["name"] = span.phase;
      events.push_back(std::move(e));
    }
    nlohmann::json e = base;
    e["name"] = "request " + std::to_string(rid);
    e["args"] = {{"end", "the run stopped"}};
    events.push_back(std::move(e));
  }
  const nlohmann::json other = {{"clock", "logical: one unit per op boundary and per backend op"},
                                {"scenario", scenario_},
                                {"event_hash", hex64(event_hash_)}};
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"otherData", other}};
}

void TimelineRecorder::write(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw InputError(path + ": cannot write the timeline");
  out << json().dump() << "\n";
  if (!out) throw InputError(path + ": cannot write the timeline");
}

ExecutorSetup timeline_setup(TimelineRecorder& recorder, ExecutorSetup inner) {
  return [&recorder, inner = std::move(inner)](Executor& executor) {
    if (inner) inner(executor);
    recorder.attach(executor);
  };
}

}  // namespace kvsim::sim
