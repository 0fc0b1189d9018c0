#include "core/common/probe.h"

namespace kvsim::probes {

namespace detail {
thread_local std::array<uint64_t, kCount> counters{};
}  // namespace detail

const std::array<Info, kCount>& all() {
  static const std::array<Info, kCount> infos = {{
#define KVSIM_PROBE_INFO(name, file, meaning, unreached) Info{#name, file, meaning, unreached},
      KVSIM_PROBE_LIST(KVSIM_PROBE_INFO)
#undef KVSIM_PROBE_INFO
  }};
  return infos;
}

Snapshot snapshot() {
  Snapshot out;
  out.reserve(kCount);
  for (size_t i = 0; i < kCount; ++i)
    out.push_back(Count{all()[i].name, detail::counters[i]});
  return out;
}

void reset() {
  detail::counters.fill(0);
}

void accumulate(Snapshot& into, const Snapshot& from) {
  if (into.empty()) {
    into = from;
    return;
  }
  for (size_t i = 0; i < into.size() && i < from.size(); ++i)
    into[i].count += from[i].count;
}

}  // namespace kvsim::probes
