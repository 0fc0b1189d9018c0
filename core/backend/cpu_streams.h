// CpuStreams: the FIFO queues and events of CpuBackend, without memory or execution.
//
// A stream is a queue of CpuOps plus two counters: ops enqueued so far and ops executed so
// far. An event is a position: (stream, ops enqueued on it when it was recorded); it is
// complete once that many ops of the stream have executed. A wait op at the head of a queue
// is runnable only once its event is complete. Stream 0 is "compute" and always exists.
//
// Invariants:
//  1. executed(s) <= enqueued(s) and enqueued(s) - executed(s) == pending(s);
//  2. ops leave a queue only from its head, in enqueue order;
//  3. an event's target never exceeds its stream's enqueued count, so it can always complete
//     by running that stream alone (a wait can block only on other streams).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/caching_allocator.h"
#include "core/backend/cpu_op.h"

namespace kvsim {

class CpuStreams final : public StreamProgress {
 public:
  CpuStreams();
  ~CpuStreams() = default;

  StreamId create(std::string_view name);
  size_t count() const { return streams_.size(); }
  bool exists(StreamId stream) const { return stream < streams_.size(); }
  const std::string& name(StreamId stream) const;

  void push(CpuOp op);                       // onto op.stream
  const CpuOp* head(StreamId stream) const;  // nullptr when empty
  bool runnable(StreamId stream) const;
  CpuOp pop(StreamId stream);  // KV_ASSERT runnable; counts the op as executed

  EventId record(StreamId stream);
  bool known(EventId event) const { return event.valid() && event.value <= events_.size(); }
  bool complete(EventId event) const;
  // Why `stream` cannot run (for deadlock reports); "" when it can or is empty.
  std::string blocked_reason(StreamId stream) const;

  size_t pending(StreamId stream) const;
  size_t pending() const;
  uint64_t enqueued(StreamId stream) const override;
  uint64_t executed(StreamId stream) const override;

 private:
  struct Stream {
    std::string name;
    std::deque<CpuOp> queue;
    uint64_t enqueued = 0;
    uint64_t executed = 0;
  };
  struct Event {
    StreamId stream;
    uint64_t target;
  };

  const Stream& at(StreamId stream) const;
  const Event& event_at(EventId event) const;

  std::vector<Stream> streams_;
  std::vector<Event> events_;  // EventId.value - 1
  size_t pending_ = 0;
};

}  // namespace kvsim
