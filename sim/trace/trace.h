// Traces: JSON Lines with a versioned header that embeds the scenario and the seed.
//
//   workload trace: header {"kvsim_trace":1,"kind":"workload",...}, then one arrival per line;
//                   replaying it re-runs the scheduler on exactly these arrivals.
//   op trace:       header {"kvsim_trace":2,"kind":"ops",...}, then one op per line, then a
//                   footer {"end":{...}} with the op count, the last tick, the event hash and
//                   the violation (if any); replaying it applies the ops to a fresh executor
//                   without the scheduler, and a run that failed writes one annotated with the
//                   violated invariant and step. From version 2 every op line carries the event
//                   hash after it ("h", a hash chain) and "ok": false when its outcome was a
//                   refusal (admit found no room, ...), so a replay names the first op whose
//                   outcome differs. Version 1 traces (no chain) are still read.
// Every malformed line is an InputError naming the file, the line and the field; a trace
// without its end record is one too (it was cut short).
#pragma once

#include <array>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/hex64.h"
#include "sim/config/scenario.h"
#include "sim/model/executor.h"
#include "sim/model/faults.h"
#include "sim/model/op.h"
#include "sim/model/target.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {

inline constexpr int64_t kTraceVersion = 2;  // written; versions 1 and 2 are read

// What an op trace recorded about one op: its outcome and the event hash after it.
struct OpCheck {
  uint64_t hash = 0;
  bool ok = true;
};

struct WorkloadTrace {
  Scenario scenario;
  uint64_t seed = 0;
  std::vector<Arrival> arrivals;
};

struct OpTrace {
  Scenario scenario;
  uint64_t seed = 0;
  Target target;  // the cache the ops ran on (kvsim's core unless the header names another)
  std::vector<Op> ops;
  // From the footer.
  std::optional<uint64_t> event_hash;
  std::optional<SimViolation> violation;
  std::optional<int64_t> ticks;  // the last tick (version 2)
  // Faults the recording run fired, per site (version 2; the ops carry their effects).
  std::optional<std::array<uint64_t, kFaultSites>> faults_fired;
  // Per op (parallel to `ops`, or empty): the recorded outcome and hash chain (version 2).
  std::vector<OpCheck> checks;
  // Where it was read from (empty for a trace built in memory): the source, the line of each
  // op (parallel to `ops`), the end record's line, the op count the end record declares.
  std::string source;
  std::vector<size_t> lines;
  size_t end_line = 0;
  int64_t declared_ops = -1;
  int64_t version = kTraceVersion;
};

// Arrivals with a recipe are written as "segments" (compact), others as "prompt" tokens; the
// reader takes both and keeps recipes unexpanded until the request arrives.
void write_workload_trace(const std::string& path, const WorkloadTrace& trace);
nlohmann::json arrival_json(const Arrival& a);

// Writes a workload trace one arrival at a time (gen and import stream into it).
// "-" writes to standard output; a file appears only when close() succeeds.
class WorkloadTraceWriter {
 public:
  WorkloadTraceWriter(const std::string& path, const Scenario& scenario, uint64_t seed);
  ~WorkloadTraceWriter();  // without close(): the partial file is removed
  WorkloadTraceWriter(const WorkloadTraceWriter&) = delete;
  WorkloadTraceWriter& operator=(const WorkloadTraceWriter&) = delete;
  void add(const Arrival& a);
  void close();  // an InputError if anything failed to write
  int64_t count() const { return count_; }

 private:
  std::ostream& out();
  std::string path_;
  std::string tmp_;  // "" for standard output
  std::ofstream file_;
  int64_t count_ = 0;
  bool closed_ = false;
};
void write_op_trace(const std::string& path, const OpTrace& trace);

// Reads either kind; `kind` tells which one it was ("workload" or "ops").
struct AnyTrace {
  std::string kind;
  WorkloadTrace workload;
  OpTrace ops;
};
AnyTrace read_trace(const std::string& path);
// The same parse over text already in memory (the fuzzers' entry point); errors name `source`
// where read_trace names the path. read_trace(path) is this over the file's contents.
AnyTrace read_trace_text(const std::string& text, const std::string& source);

}  // namespace kvsim::sim
