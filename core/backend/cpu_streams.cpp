#include "core/backend/cpu_streams.h"

#include <utility>

#include "core/common/assert.h"

namespace kvsim {

CpuStreams::CpuStreams() {
  create("compute");
}

StreamId CpuStreams::create(std::string_view name) {
  KV_ASSERT(streams_.size() < UINT32_MAX, "too many streams");
  streams_.emplace_back();
  streams_.back().name = std::string(name);
  return static_cast<StreamId>(streams_.size() - 1);
}

const CpuStreams::Stream& CpuStreams::at(StreamId stream) const {
  KV_ASSERT(stream < streams_.size(), "unknown stream " + std::to_string(stream));
  return streams_[stream];
}

const CpuStreams::Event& CpuStreams::event_at(EventId event) const {
  KV_ASSERT(event.valid() && event.value <= events_.size(),
            "unknown event " + std::to_string(event.value));
  return events_[event.value - 1];
}

const std::string& CpuStreams::name(StreamId stream) const {
  return at(stream).name;
}

void CpuStreams::push(CpuOp op) {
  at(op.stream);
  Stream& s = streams_[op.stream];
  ++s.enqueued;
  ++pending_;
  s.queue.push_back(std::move(op));
}

const CpuOp* CpuStreams::head(StreamId stream) const {
  const Stream& s = at(stream);
  return s.queue.empty() ? nullptr : &s.queue.front();
}

bool CpuStreams::runnable(StreamId stream) const {
  const CpuOp* op = head(stream);
  if (op == nullptr) return false;
  return op->kind != CpuOpKind::kWait || complete(op->event);
}

CpuOp CpuStreams::pop(StreamId stream) {
  KV_ASSERT(runnable(stream), "pop of a stream that cannot run");
  Stream& s = streams_[stream];
  CpuOp op = std::move(s.queue.front());
  s.queue.pop_front();
  ++s.executed;
  --pending_;
  KV_ASSERT(s.executed + s.queue.size() == s.enqueued, "stream counters drifted");
  return op;
}

EventId CpuStreams::record(StreamId stream) {
  events_.push_back(Event{.stream = stream, .target = at(stream).enqueued});
  return EventId{events_.size()};
}

bool CpuStreams::complete(EventId event) const {
  const Event& e = event_at(event);
  return streams_[e.stream].executed >= e.target;
}

std::string CpuStreams::blocked_reason(StreamId stream) const {
  if (runnable(stream) || head(stream) == nullptr) return "";
  const Event& e = event_at(head(stream)->event);
  return "stream '" + name(stream) + "' waits on event " +
         std::to_string(head(stream)->event.value) + " (stream '" + name(e.stream) + "' has run " +
         std::to_string(executed(e.stream)) + " of the " + std::to_string(e.target) +
         " ops it needs)";
}

size_t CpuStreams::pending(StreamId stream) const {
  return at(stream).queue.size();
}

size_t CpuStreams::pending() const {
  return pending_;
}

uint64_t CpuStreams::enqueued(StreamId stream) const {
  return at(stream).enqueued;
}

uint64_t CpuStreams::executed(StreamId stream) const {
  return at(stream).executed;
}

}  // namespace kvsim
