// `kvsim hunt`: the blind hunt (sim/campaign/hunt.h) as a subcommand. Exit 0 when nothing was
// found, 1 when a violation was, 2 on bad input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tools/kvsim/target_flags.h"

namespace kvsim::tools {

struct HuntCommand {
  double time_budget_s = 60;
  uint64_t seed = 1;
  uint64_t failures = 1;
  std::string until;         // --until INVARIANT: stop at the first failure of it too ("" = never)
  std::string until_detail;  // --until-detail TEXT: only such a failure whose detail has TEXT
  int jobs = 1;
  bool json = false;
  bool probes = false;  // list the probes reached and never reached (else one line)
  std::string trace_dir = ".";
  bool no_shrink = false;
  uint64_t shrink_ops = 20'000'000;  // ops replayed per shrink, all replays together (0 = no limit)
  // A unit running longer is a "hang" failure (0 = no allowance); unset: 30 s on kvsim's core,
  // 120 s on SGLang's (a unit there runs ~100x slower: Python, the fake device, every check).
  std::optional<double> unit_timeout_s;
  uint64_t units = 0;     // stop after this many units (0 = only the budget and failures)
  std::string report;     // --report DIR: an HTML page of the hunt (hunt_report.h); "" = none
  std::string scenarios;  // folder of named scenarios ("" = ./scenarios, else the source tree's)
  // --print-unit N: print unit N's scenario (JSON, fitted to the target) and run nothing: a unit
  // the report calls vacuous or a failure's configuration, for `kvsim run FILE --seed S + N`.
  std::optional<uint64_t> print_unit;
  TargetFlags target;  // --target / --sglang-src: the cache under test
};

int hunt_command(const HuntCommand& c);

}  // namespace kvsim::tools
