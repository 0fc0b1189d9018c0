// kvsim run --seeds N --report DIR: a self-contained HTML page (DIR/index.html: inline CSS, no
// script, no network) for a sweep, to attach to a pull request: the seeds with verdicts and
// event hashes; the failures with invariant, detail, op trace, tree picture and the replay and
// shrink commands; invariant checks and their counts; fault sites and how often each fired;
// code probes reached (core/common/probe.h); hit rates. docs/outputs.md shows one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/probe.h"

namespace kvsim::tools {

class SweepReport {
 public:
  SweepReport(std::string command, std::string scenario)
      : command_(std::move(command)), scenario_(std::move(scenario)) {}
  // One run: sim::summary_json plus "trace" and "tree" (paths, "" when none).
  void add(nlohmann::json run) { runs_.push_back(std::move(run)); }
  // Writes DIR/index.html (creating DIR); throws sim::InputError naming --report on failure.
  // Returns the page's path. `jobs` and `wall_s` (the sweep's -j and wall time) are shown in
  // the summary; they are the only things on the page that depend on -j or the machine.
  std::string write(const std::string& dir, const probes::Snapshot& probes, unsigned jobs,
                    double wall_s) const;
  // The page itself (links relative to `dir`).
  std::string html(const std::string& dir, const probes::Snapshot& probes, unsigned jobs,
                   double wall_s) const;

 private:
  std::string command_;
  std::string scenario_;
  std::vector<nlohmann::json> runs_;
};

}  // namespace kvsim::tools
