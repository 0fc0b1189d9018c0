// CpuOrdering: happens-before tracking for CpuBackend (invariant stream_ordering).
//
// A GPU orders work on different streams only through events (and the host only through the
// completions it observed). The CPU emulation runs ops in whatever order its driver steps the
// streams, so a read that races a copy on another stream passes whenever the copy happened to
// run first — or whenever the stale bytes happen to equal the new ones (a Mamba state reloaded
// into the slot it left). This tracker decides at ENQUEUE time, independent of the schedule:
// every stream and the host carry a vector clock (one entry per stream: how many of its ops
// are ordered before), an event captures its stream's clock, wait_event joins it into the
// waiting stream, and an observed completion (query_event true, synchronize*) joins it into
// the host's clock, which every later enqueue inherits. Each byte range of a block remembers
// the last op enqueued to write it; an op that reads a range whose last writer is on another
// stream and not ordered before it is an "unordered_read" violation.
//
// Invariants:
//  1. clocks only grow; a stream's own entry equals its enqueued count after each enqueue;
//  2. the ranges recorded for one block are disjoint, and a handout starts with none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/caching_allocator.h"

namespace kvsim {

class CpuOrdering {
 public:
  using Clock = std::vector<uint64_t>;
  struct Writer {
    size_t end = 0;
    StreamId stream = 0;
    uint64_t position = 0;  // the writer's 1-based position on its stream
    OpId op = 0;
  };
  struct Conflict {
    size_t begin = 0;
    size_t end = 0;
    Writer writer;
  };
  struct Range {
    size_t begin = 0;
    size_t end = 0;
  };

  // The clock of the op about to be enqueued on `stream` at `position` (joins the host's).
  const Clock& enqueue(StreamId stream, uint64_t position);
  void record(StreamId stream, EventId event);  // an event captures its stream's clock
  void wait(StreamId stream, EventId event);    // the stream's later work follows the event
  void observe_event(EventId event);            // the host saw the event complete
  void observe_stream(StreamId stream);         // the host saw the stream drain
  void observe_all();
  void forget(PhysicalIndex physical);  // a new handout: its bytes have no writer yet

  // The first recorded writer of `ranges` of `physical` not ordered before `clock` on
  // `stream`, if any (ranges sorted and merged by the caller or not: each is looked up).
  std::optional<Conflict> unordered(PhysicalIndex physical, const std::vector<Range>& ranges,
                                    StreamId stream, const Clock& clock) const;
  void write(PhysicalIndex physical, const std::vector<Range>& ranges, StreamId stream,
             uint64_t position, OpId op);

  // Sorts and merges touching ranges (a gather's items often form runs).
  static void merge(std::vector<Range>& ranges);

 private:
  Clock& clock_of(StreamId stream);
  static void join(Clock& into, const Clock& from);

  std::vector<Clock> streams_;
  std::vector<Clock> events_;  // by EventId.value - 1
  Clock host_;
  std::vector<std::map<size_t, Writer>> writers_;  // by physical index; key: range begin
};

}  // namespace kvsim
