// The hunt (`kvsim hunt`): a blind search for violations. Unit i of a hunt with base seed S runs
// seed S + i on either a swarm configuration (even units: sim/campaign/swarm.h draws it from the
// seed) or one of the named scenarios (odd units, round-robin), records its op trace, and on a
// violation writes the trace and (unless told not to) shrinks it. The hunt stops at the first N
// failures, when the wall-time budget is spent, or after a fixed number of units. The budget covers
// everything, the shrinks included: a unit or a shrink still running at its end is cut off
// there (a failure whose shrink is cut off is reported unshrunk, with a shrink_note).
//
// Determinism: which units run, and what each one does, depend on the base seed only; the wall
// clock decides only how far the hunt gets (it never enters a simulated run). With jobs > 1 the
// units are dealt to worker processes (unit i to worker i mod jobs): processes, not threads,
// because the core's assertion handler is process-global. A unit that outlives its time
// allowance (unit_timeout_s) is a failure of kind "hang", never silently dropped.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/probe.h"
#include "sim/config/scenario.h"
#include "sim/model/executor.h"
#include "sim/model/faults.h"
#include "sim/model/target.h"

namespace kvsim::sim {

struct HuntFailure;

struct HuntOptions {
  uint64_t seed = 1;
  double time_budget_s = 60;  // shrinks included; 0 = no limit (then max_units must be set)
  uint64_t max_units = 0;     // 0 = no limit on units
  uint64_t failures = 1;      // stop after this many failing units
  // Stop at the first failure of this invariant too ("" = never). Only where the hunt stops
  // knows the name; what it draws and runs does not (CI asks whether a blind hunt reaches a
  // seed's kind at all, past failures of other kinds, without spending its whole budget).
  std::string until_invariant;
  std::string until_detail;  // with until_invariant: only a failure whose detail contains this
  int jobs = 1;
  std::string trace_dir = ".";
  bool shrink = true;
  size_t shrink_replays = 5000;
  // Ops replayed per shrink, summed over its replays (0 = no limit): a long liveness trace
  // replays in seconds, so a replay count alone does not bound the time a shrink takes.
  size_t shrink_replay_ops = 20'000'000;
  // A unit (one seed's run) that runs longer than this many wall seconds is a failure of kind
  // "hang": its worker is killed, the unit's scenario is written for a rerun, and the hunt goes on
  // with a fresh worker. 0 = no allowance (then a lone hunt without a budget runs in process).
  double unit_timeout_s = 0;
  std::vector<Scenario> named;  // the named scenarios, in round-robin order
  ExecutorSetup setup;          // test hook: applied to every run and every shrink replay
  // Called once per failure as soon as it is found (before any shrinking): the command line
  // prints it at once, so a hunt that then shrinks for minutes has already said what it found.
  std::function<void(const HuntFailure&)> on_failure;
  // The cache under test (kvsim's core by default); each drawn configuration is fitted to what
  // it supports (sim/campaign/target_fit.h).
  Target target;
};

// What unit `index` runs: its scenario and seed.
struct HuntUnit {
  uint64_t index = 0;
  bool swarm = true;
  uint64_t seed = 0;
  Scenario scenario;
};
HuntUnit hunt_unit(const HuntOptions& options, uint64_t index);

struct HuntFailure {
  uint64_t unit = 0;
  std::string source;  // "swarm" or the named scenario
  uint64_t seed = 0;
  std::string invariant;
  std::string detail;
  int64_t ops = 0;           // ops of the failing run
  double wall_s = 0;         // hunt wall time when it was found
  uint64_t units_tried = 0;  // units finished when it was found (all workers)
  int64_t ops_before = 0;    // ops executed by the hunt up to and including it
  std::string trace;         // the failing op trace
  std::string shrunk_trace;  // "" with shrinking off or when it did not reproduce
  size_t shrunk_ops = 0;
  std::string shrink_note;  // why there is no shrunk trace (shrinking ran in a child process)
  // A hang (no op trace: the run never ended): the unit's scenario, for `kvsim run FILE --seed`.
  std::string hang_scenario;
};

// One unit as it ran (for `kvsim hunt --report`, tools/kvsim/hunt_report.h).
struct HuntUnitRecord {
  uint64_t unit = 0;
  bool swarm = true;
  std::string source;                 // "swarm" or the named scenario
  std::vector<std::string> features;  // a swarm configuration's features (sim/campaign/swarm.h)
  uint64_t seed = 0;
  int64_t ops = 0;
  uint64_t event_hash = 0;  // 0 for a hang (the run never ended)
  std::string verdict;      // "ok", "vacuous", "violation", "hang" or "crash"
  std::string invariant;    // the violated invariant ("" when ok)
  std::string vacuous;      // why a clean unit checked nothing (runner.h's vacuous_reason)
  std::array<uint64_t, kFaultSites> faults{};
};

struct HuntReport {
  uint64_t seed = 0;
  int jobs = 1;
  uint64_t units = 0;
  uint64_t swarm_units = 0;
  int64_t ops = 0;
  double wall_s = 0;
  std::string stopped;  // "failures", "until" (until_invariant found), "time_budget" or "units"
  std::map<std::string, uint64_t> features;   // swarm configurations by feature
  std::map<std::string, uint64_t> scenarios;  // named-scenario units by name
  // Clean units that proved nothing (no request finished, or no model read was checked), by
  // "source: reason". Counted among the units, never as failures: a configuration space the
  // hunt draws but cannot check shows here instead of passing for coverage.
  uint64_t vacuous_units = 0;
  std::map<std::string, uint64_t> vacuous;
  std::array<uint64_t, kFaultSites> faults_fired{};
  probes::Snapshot probes;               // code probes reached, summed over units (docs/probes.md)
  std::vector<HuntFailure> failures;     // by unit index
  std::vector<HuntUnitRecord> unit_log;  // every unit the hunt counted, by unit index
};

HuntReport run_hunt(const HuntOptions& options);

nlohmann::json hunt_json(const HuntReport& r);
std::string hunt_text(const HuntReport& r);

}  // namespace kvsim::sim
