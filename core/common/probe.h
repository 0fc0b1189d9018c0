// Code probes (FoundationDB's CODE_PROBE, Antithesis's "sometimes" assertions): a named marker
// on a rare path of the core. A probe never changes behaviour; it only counts that the path
// ran. A probe that no sweep reaches marks a path the harness does not test.
//
//   KV_PROBE(name)            counts one hit of `name`.
//   KV_PROBE_IF(cond, name)   counts a hit when `cond` (side-effect free) holds.
//
// Every probe is declared once in core/common/probe_list.h, so the ones never hit are known.
// Counters are thread_local: each thread that runs simulations counts its own hits, and a
// caller that runs one simulation per thread takes snapshot() after it (and reset() before).
// Counting is deterministic: it depends only on the code paths a run takes.
//
// Built with -DKVSIM_PROBES=0 (CMake option KVSIM_PROBES=OFF) the macros compile to nothing
// (names are still checked; conditions are not evaluated) and every count stays 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/common/probe_list.h"

#ifndef KVSIM_PROBES
#define KVSIM_PROBES 1
#endif

namespace kvsim::probes {

// Internal linkage: a translation unit built with probes off may sit beside others (tests).
constexpr bool kEnabled = KVSIM_PROBES != 0;

enum class Id : uint16_t {
#define KVSIM_PROBE_ENUM(name, file, meaning, unreached) name,
  KVSIM_PROBE_LIST(KVSIM_PROBE_ENUM)
#undef KVSIM_PROBE_ENUM
};

inline constexpr size_t kCount = 0
#define KVSIM_PROBE_COUNT(name, file, meaning, unreached) +1
    KVSIM_PROBE_LIST(KVSIM_PROBE_COUNT)
#undef KVSIM_PROBE_COUNT
    ;

// The declaration of one probe.
struct Info {
  std::string_view name;
  std::string_view file;                // the source file that holds the probe
  std::string_view meaning;             // one line: what reaching it means
  std::string_view expected_unreached;  // "" or why no current sweep reaches it (temporary)
};

// Every declared probe, in declaration order.
const std::array<Info, kCount>& all();

struct Count {
  std::string_view name;
  uint64_t count = 0;
};
using Snapshot = std::vector<Count>;

// This thread's count of every declared probe (declaration order), hit or not.
Snapshot snapshot();
// Zeroes this thread's counters.
void reset();
// Adds `from` into `into` (both from snapshot(); `into` may be empty).
void accumulate(Snapshot& into, const Snapshot& from);

namespace detail {
#if defined(__GNUC__)
#define KVSIM_PROBE_TLS __attribute__((tls_model("initial-exec")))
#else
#define KVSIM_PROBE_TLS
#endif
extern thread_local KVSIM_PROBE_TLS std::array<uint64_t, kCount> counters;
inline void hit(Id id) {
  ++counters[static_cast<size_t>(id)];
}
}  // namespace detail

// This thread's probe hits while it lives are not counted: the counters it found are put back
// when it ends. For a check's own calls into the core (the option contract's small caches),
// which are not what the run under test reached.
class Uncounted {
 public:
  Uncounted() : saved_(detail::counters) {}
  ~Uncounted() { detail::counters = saved_; }
  Uncounted(const Uncounted&) = delete;
  Uncounted& operator=(const Uncounted&) = delete;

 private:
  std::array<uint64_t, kCount> saved_;
};

}  // namespace kvsim::probes

#if KVSIM_PROBES
#define KV_PROBE(name) ::kvsim::probes::detail::hit(::kvsim::probes::Id::name)
#define KV_PROBE_IF(cond, name)                                        \
  do {                                                                 \
    if (cond) ::kvsim::probes::detail::hit(::kvsim::probes::Id::name); \
  } while (0)
#else
#define KV_PROBE(name) static_cast<void>(::kvsim::probes::Id::name)
#define KV_PROBE_IF(cond, name)                   \
  do {                                            \
    static_cast<void>(::kvsim::probes::Id::name); \
    if (false && (cond)) {                        \
    }                                             \
  } while (0)
#endif
