// Traces: JSON Lines with a versioned header that embeds the scenario and the seed.
//
//   workload trace: header {"kvsim_trace":1,"kind":"workload",...}, then one arrival per line;
//                   replaying it re-runs the scheduler on exactly these arrivals.
//   op trace:       header {"kvsim_trace":1,"kind":"ops",...}, then one op per line, then a
//                   footer {"end":{...}} with the event hash and the violation (if any); replaying
//                   it applies the ops to a fresh executor without the scheduler, and a run
//                   that failed writes one annotated with the violated invariant and step.
// Every malformed line is an InputError naming the file, the line and the field.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/op.h"
#include "sim/scenario.h"
#include "sim/workload.h"

namespace kvsim::sim {

inline constexpr int64_t kTraceVersion = 1;

struct WorkloadTrace {
  Scenario scenario;
  uint64_t seed = 0;
  std::vector<Arrival> arrivals;
};

struct OpTrace {
  Scenario scenario;
  uint64_t seed = 0;
  std::vector<Op> ops;
  // From the footer (absent in a truncated trace).
  std::optional<uint64_t> event_hash;
  std::optional<SimViolation> violation;
};

// Arrivals with a recipe are written as "segments" (compact), others as "prompt" tokens; the
// reader takes both and keeps recipes unexpanded until the request arrives.
void write_workload_trace(const std::string& path, const WorkloadTrace& trace);
nlohmann::json arrival_json(const Arrival& a);

// Writes a workload trace one arrival at a time (gen and import stream into it).
class WorkloadTraceWriter {
 public:
  WorkloadTraceWriter(const std::string& path, const Scenario& scenario, uint64_t seed);
  void add(const Arrival& a);
  void close();  // an InputError if anything failed to write
  int64_t count() const { return count_; }

 private:
  std::string path_;
  std::ofstream out_;
  int64_t count_ = 0;
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

std::string hex64(uint64_t v);

}  // namespace kvsim::sim
