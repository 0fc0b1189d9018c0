// TimelineRecorder: writes a run as a Chrome Trace Event file (the JSON format Perfetto UI and
// chrome://tracing open; docs/outputs.md). It watches the executor (ExecutorObserver) and the
// CPU backend (CpuBackendObserver) and builds, on a logical clock:
//
//   track "ops"              one B/E slice per simulator op (index, kind, request, outcome)
//   track "stream <name>"    one X slice per backend op that ran on that stream: copies,
//                            uploads, KV transfers (indices count, bytes), waits, poisons
//   track "storage <worker>" the storage workers' units of work (query, io, backup)
//   track "faults"           an instant per fault site fired (runs only: replays have none)
//   flows                    event recorded on stream A → the wait on stream B that it released
//   async spans              per request: "request <rid>" from arrive to finish/abort, with
//                            phases waiting / running / offloaded inside, and instants for
//                            admit, load-back and each forward
//   instant (global)         the violation, named by its invariant, at the op that saw it
//
// The clock: `ts` counts observed things (each op start and end, each backend op), never wall
// time, so the same run gives the same file. One unit is shown as 1 µs by the viewers.
// Attach before the first op (an ExecutorSetup does: timeline_setup()) and write after the run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/model/executor.h"

namespace kvsim::sim {

class TimelineRecorder final : public ExecutorObserver, public CpuBackendObserver {
 public:
  TimelineRecorder() = default;
  ~TimelineRecorder() override;
  TimelineRecorder(const TimelineRecorder&) = delete;
  TimelineRecorder& operator=(const TimelineRecorder&) = delete;

  // Starts watching `executor` and its backend (before its first op).
  void attach(Executor& executor);
  // Stops watching (the executor must still exist); the events recorded stay.
  void detach();

  // {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}
  nlohmann::json json() const;
  // Writes json() to `path`; throws InputError when the file cannot be written.
  void write(const std::string& path) const;

  void before_op(size_t index, const Op& op) override;
  void after_op(size_t index, const Op& op, const OpOutcome& outcome) override;
  void on_fault(std::string_view site) override;
  void on_executor_gone() override { executor_ = nullptr; }
  void on_enqueue(const CpuOp& op) override;
  void on_run(const CpuOp& op) override;
  void on_record(StreamId stream, EventId event) override;

 private:
  struct Source {  // where a recorded event completed: a slice on a stream track
    int tid = 0;
    uint64_t ts = 0;
  };
  struct RequestSpan {
    std::string phase;  // the open phase span ("" when none)
    bool open = false;
  };

  int stream_tid(StreamId stream);
  void add(nlohmann::json event);
  void phase(RequestId rid, const std::string& next);
  void request_instant(RequestId rid, const std::string& name, nlohmann::json args = {});
  void end_request(RequestId rid, const std::string& how);

  Executor* executor_ = nullptr;
  std::string scenario_;
  uint64_t event_hash_ = 0;
  std::vector<nlohmann::json> events_;
  std::map<int, std::string> tracks_;  // tid → name
  uint64_t clock_ = 0;
  size_t op_index_ = 0;
  OpKind op_kind_ = OpKind::kPoll;
  bool violation_marked_ = false;
  // Backend bookkeeping: the last op enqueued per stream, which ops complete which events,
  // where each completed event's flow starts, how many ops each stream queued during an op.
  std::map<StreamId, OpId> last_enqueued_;
  std::map<StreamId, OpId> last_run_;
  std::map<OpId, std::vector<uint64_t>> completes_;  // op → events it completes
  std::map<uint64_t, Source> event_source_;
  std::map<StreamId, int64_t> enqueued_during_op_;
  uint64_t next_flow_ = 1;
  std::map<RequestId, RequestSpan> requests_;
};

// An ExecutorSetup that attaches `recorder` (chained after `inner` when given).
ExecutorSetup timeline_setup(TimelineRecorder& recorder, ExecutorSetup inner = {});

}  // namespace kvsim::sim
