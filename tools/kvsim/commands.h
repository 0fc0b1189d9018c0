// The kvsim subcommands, free of CLI11 (which main.cpp alone includes): each takes its parsed
// options and returns the process exit code (kExit*, listed in `kvsim --help` and docs/cli.md).
// Bad input is reported on stderr as "kvsim: <file>:<line>: field <name>: <problem>".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tools/kvsim/target_flags.h"

namespace kvsim::tools {

inline constexpr int kExitOk = 0;           // clean, and something was checked
inline constexpr int kExitViolation = 1;    // a run or replay found a violation
inline constexpr int kExitInput = 2;        // bad input: a file, a flag, a resource limit
inline constexpr int kExitDiffers = 3;      // a replay does not reproduce its recording
inline constexpr int kExitVacuous = 4;      // clean, but no request finished / nothing checked
inline constexpr int kExitOutOfMemory = 5;  // memory ran out despite the up-front estimate
// The table `kvsim --help` prints (docs/cli.md has the same).
const char* exit_code_help();

struct RunCommand {
  std::string scenario;  // "" = the built-in default
  uint64_t seed = 0;     // 0 = the scenario's seed
  uint64_t seeds = 1;
  unsigned jobs = 1;  // worker threads for a sweep (results are the same for every value)
  std::string shard;  // "I/N": run only the seeds at positions I, I+N, ... of the sweep
  bool json = false;
  bool probes = false;        // list the probes reached and never reached (else one line)
  std::string record;         // write the op trace of the (single) run here
  std::string failure_trace;  // where a failing run writes its op trace ("" = next to cwd)
  std::string workload;       // run on the arrivals of this workload trace
  int64_t full_every = 0;     // override check.full_every
  bool no_faults = false;
  bool no_content = false;
  bool progress = true;
  bool stop_at_first = false;  // stop the sweep at the first failing seed
  uint64_t max_failures = 0;   // stop the sweep after this many failing seeds (0 = never)
  double time_budget_s = 0;    // stop the sweep after this much wall time (0 = none)
  std::string storage_dir;     // a file store in this directory (cache.storage)
  bool storage_reuse = false;  // start on what the store holds (cache.storage.reuse)
  std::string timeline;        // write the (single) run as a Chrome Trace Event file
  std::string report;          // write the sweep's HTML report into this folder
  std::string memory_limit;    // "" = half the physical memory
  TargetFlags target;          // --target / --sglang-src (the cache under test)
};

struct ReplayCommand {
  std::string trace;
  bool json = false;
  bool expect_clean = false;        // exit 0 iff the replay finds no violation (regression traces)
  std::string timeline;             // write the replay as a Chrome Trace Event file
  std::optional<uint64_t> tree_at;  // draw the radix tree after op N (from 1)
  std::string tree_format = "dot";  // dot | svg
  std::string tree_out;             // "" = <trace name>.op<N>.tree.<format> here
  std::string memory_limit;
  TargetFlags target;  // override the cache the trace recorded (e.g. another SGLang tree)
};

struct ShrinkCommand {
  std::string trace;
  std::string out;
  uint64_t max_replays = 20000;
  bool json = false;
  std::string memory_limit;
  TargetFlags target;  // override the cache the trace recorded
};

struct GenCommand {
  std::string scenario;
  uint64_t seed = 0;
  std::string out;
  std::string memory_limit;
};

struct ImportMooncakeCommand {
  std::string in;
  std::string out;
  std::string scenario;  // the scenario embedded in the header ("" = a Mooncake default)
  int64_t block_tokens = 512;
  double ms_per_tick = 1.0;
  int64_t limit = 0;
  std::string memory_limit;
};

int run_command(const RunCommand& c);
int replay_command(const ReplayCommand& c);
int gen_command(const GenCommand& c);
int shrink_command(const ShrinkCommand& c);
int import_mooncake_command(const ImportMooncakeCommand& c);

}  // namespace kvsim::tools
