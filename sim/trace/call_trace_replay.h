// Reading, replaying and shrinking call traces (sim/trace/call_trace.h): what `kvsim replay` and
// `kvsim shrink` do with a trace of kind "calls" recorded by the Python module.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace/call_trace.h"
#include "sim/trace/call_trace_snapshot.h"

namespace kvsim::sim {

struct CallTrace {
  int32_t page_size = 1;
  EvictionPolicy policy = EvictionPolicy::kLru;
  std::string source;
  int slots_hash = 1;  // hash_slots version of the evict outcomes (header "slots_hash")
  std::vector<Call> calls;
  std::vector<std::optional<CallOutcome>> recorded;  // per call, as the recording saw it
  std::optional<CallTraceEnd> end;                   // the footer (absent when cut short)
  // A segment of a windowed recording: the tree at its first call, restored before replay.
  std::optional<CallTraceSnapshot> snapshot;
};

// Throws InputError naming source:line and the field.
CallTrace read_call_trace_text(const std::string& text, const std::string& source);
CallTrace read_call_trace(const std::string& path);
// True when the file's first line is a trace header of kind "calls".
bool is_call_trace(const std::string& path);

struct CallReplay {
  size_t applied = 0;
  size_t skipped = 0;  // calls whose referent was not applied (shrunk traces)
  uint64_t event_hash = kCallHashSeed;
  std::optional<size_t> first_divergence;  // first call whose outcome differs from the recording
  std::string divergence;
  std::optional<std::pair<size_t, std::string>> violation;  // a core assertion at that call
  std::vector<std::string> sanity;                          // final sanity_check violations
  size_t nodes = 0;
  int64_t evictable = 0;
  int64_t protected_size = 0;
  std::vector<bool> was_applied;                     // per call
  std::vector<std::optional<CallOutcome>> outcomes;  // per applied call
  bool ok() const { return !violation && sanity.empty(); }
};

// Applies the calls (those with keep[i], when given) to a fresh tree, or to the trace's snapshot
// restored. Compares outcomes with the recording only on a full replay.
CallReplay replay_calls(const CallTrace& trace, const std::vector<bool>* keep = nullptr);

struct CallShrinkResult {
  bool reproduced = false;
  CallTrace trace;  // the shrunk trace, with the outcomes of its own replay
  size_t original_calls = 0;
  size_t replays = 0;
  std::string detail;
};
// Delta debugging over the calls before the violation: keeps a subset that still fails the
// same core assertion (same message up to the numbers in it, see failure_key).
std::string failure_key(const std::string& detail);
CallShrinkResult shrink_calls(const CallTrace& trace, size_t max_replays);

void write_call_trace(const std::string& path, const CallTrace& trace, const CallReplay& replay);

std::string call_replay_text(const std::string& path, const CallTrace& trace, const CallReplay& r);
nlohmann::json call_replay_json(const CallTrace& trace, const CallReplay& r);
// Same event hash, same violation (or none; its message compared by failure_key, so a core
// assertion that moved to another line still matches), same final sizes as the footer.
bool call_replay_matches(const CallTrace& trace, const CallReplay& r);

}  // namespace kvsim::sim

namespace kvsim::sim {
// `kvsim replay` / `kvsim shrink` on a call trace (tools/kvsim/commands.cpp dispatches here
// when the header's kind is "calls"). Exit codes as docs/cli.md: replay 3 when it differs from
// the recording, else 1 when it fails a core assertion (as recorded), else 0; shrink 0 when it
// wrote a shrunk trace, 1 when nothing fails.
// InputError propagates to the caller.
int call_replay_command(const std::string& path, bool json, bool expect_clean);
int call_shrink_command(const std::string& path, const std::string& out, size_t max_replays,
                        bool json);
}  // namespace kvsim::sim
