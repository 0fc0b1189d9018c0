// kvsim hunt --report DIR: a self-contained HTML page (DIR/index.html: inline CSS, no script, no
// network) for a hunt (sim/campaign/hunt.h), the sibling of `kvsim run --report` (sweep_report.h):
// the hunt's budget and why it stopped; every unit run (swarm configuration or named scenario,
// seed, verdict, event hash); the failures with invariant, op trace, shrunk trace and replay
// command; swarm features and named scenarios covered; fault sites and how often each fired; code
// probes reached. docs/hunt.md describes it.
#pragma once

#include <string>

#include "core/common/probe.h"
#include "sim/campaign/hunt.h"

namespace kvsim::tools {

// The page itself (links relative to `dir`). `scenarios_dir`: where the named scenarios came from
// ("" = none), for the command line that reruns the hunt.
std::string hunt_report_html(const std::string& dir, const std::string& scenarios_dir,
                             const sim::HuntOptions& options, const sim::HuntReport& report,
                             const probes::Snapshot& probes);
// Writes DIR/index.html (creating DIR); throws sim::InputError naming --report on failure.
// Returns the page's path.
std::string write_hunt_report(const std::string& dir, const std::string& scenarios_dir,
                              const sim::HuntOptions& options, const sim::HuntReport& report,
                              const probes::Snapshot& probes);

}  // namespace kvsim::tools
