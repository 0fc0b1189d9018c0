#include "core/backend/cpu_ordering.h"

#include <algorithm>

#include "core/common/assert.h"

namespace kvsim {

CpuOrdering::Clock& CpuOrdering::clock_of(StreamId stream) {
  if (streams_.size() <= stream) streams_.resize(stream + 1);
  return streams_[stream];
}

void CpuOrdering::join(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i)
    into[i] = std::max(into[i], from[i]);
}

const CpuOrdering::Clock& CpuOrdering::enqueue(StreamId stream, uint64_t position) {
  Clock& c = clock_of(stream);
  join(c, host_);
  if (c.size() <= stream) c.resize(stream + 1, 0);
  KV_ASSERT(position > c[stream], "stream positions must grow");
  c[stream] = position;
  return c;
}

void CpuOrdering::record(StreamId stream, EventId event) {
  KV_ASSERT(event.value == events_.size() + 1, "events are recorded in id order");
  events_.push_back(clock_of(stream));
}

void CpuOrdering::wait(StreamId stream, EventId event) {
  KV_ASSERT(event.valid() && event.value <= events_.size(), "wait on an unrecorded event");
  join(clock_of(stream), events_[event.value - 1]);
}

void CpuOrdering::observe_event(EventId event) {
  if (!event.valid() || event.value > events_.size()) return;
  join(host_, events_[event.value - 1]);
}

void CpuOrdering::observe_stream(StreamId stream) {
  join(host_, clock_of(stream));
}

void CpuOrdering::observe_all() {
  for (const Clock& c : streams_)
    join(host_, c);
}

void CpuOrdering::forget(PhysicalIndex physical) {
  if (physical < writers_.size()) writers_[physical].clear();
}

void CpuOrdering::merge(std::vector<Range>& ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  size_t out = 0;
  for (const Range& r : ranges) {
    if (r.begin >= r.end) continue;
    if (out > 0 && r.begin <= ranges[out - 1].end) {
      ranges[out - 1].end = std::max(ranges[out - 1].end, r.end);
    } else {
      ranges[out++] = r;
    }
  }
  ranges.resize(out);
}

std::optional<CpuOrdering::Conflict> CpuOrdering::unordered(PhysicalIndex physical,
                                                            const std::vector<Range>& ranges,
                                                            StreamId stream,
                                                            const Clock& clock) const {
  if (physical >= writers_.size()) return std::nullopt;
  const std::map<size_t, Writer>& w = writers_[physical];
  if (w.empty()) return std::nullopt;
  for (const Range& r : ranges) {
    auto it = w.upper_bound(r.begin);
    if (it != w.begin()) --it;
    for (; it != w.end() && it->first < r.end; ++it) {
      if (it->second.end <= r.begin) continue;
      const Writer& writer = it->second;
      if (writer.stream == stream) continue;  // same stream: ordered by the queue
      const uint64_t seen = writer.stream < clock.size() ? clock[writer.stream] : 0;
      if (seen >= writer.position) continue;
      return Conflict{.begin = std::max(r.begin, it->first),
                      .end = std::min(r.end, writer.end),
                      .writer = writer};
    }
  }
  return std::nullopt;
}

void CpuOrdering::write(PhysicalIndex physical, const std::vector<Range>& ranges, StreamId stream,
                        uint64_t position, OpId op) {
  if (writers_.size() <= physical) writers_.resize(physical + 1);
  std::map<size_t, Writer>& w = writers_[physical];
  for (const Range& r : ranges) {
    if (r.begin >= r.end) continue;
    // Cut the ranges overlapping [begin, end) down to their parts outside it.
    auto it = w.upper_bound(r.begin);
    if (it != w.begin()) --it;
    while (it != w.end() && it->first < r.end) {
      if (it->second.end <= r.begin) {
        ++it;
        continue;
      }
      const size_t b = it->first;
      const Writer old = it->second;
      it = w.erase(it);
      if (b < r.begin) w.emplace(b, Writer{r.begin, old.stream, old.position, old.op});
      if (old.end > r.end) {
        w.emplace(r.end, Writer{old.end, old.stream, old.position, old.op});
        break;
      }
    }
    w[r.begin] = Writer{r.end, stream, position, op};
  }
}

}  // namespace kvsim
