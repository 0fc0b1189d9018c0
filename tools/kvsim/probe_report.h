// Reporting of code probes (core/common/probe.h) for the kvsim commands: which probes a sweep
// reached and how often, and which it never reached; `kvsim probes` lists the declarations.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/common/probe.h"

namespace kvsim::tools {

// Human-readable: "probes: K of N reached in R runs", the reached ones with counts, the
// never-reached ones (an expected_unreached probe is marked with a '*').
std::string probe_report_text(const probes::Snapshot& s, uint64_t runs);

// One line for a run's output when the list is not asked for: "probes: K of N reached in R
// runs (--probes lists them; docs/probes.md)".
std::string probe_report_line(const probes::Snapshot& s, uint64_t runs);

// {"probe_report": {"runs", "declared", "reached", "probes": {name: count, ...} (declaration
// order), "never_reached": [...], "expected_unreached": [...]}}. Never holds the key "hunt" or
// "ok", so line-oriented consumers of --json output are not confused by it.
nlohmann::json probe_report_json(const probes::Snapshot& s, uint64_t runs);

// docs/probes.md, generated from core/common/probe_list.h.
std::string probes_markdown();

struct ProbesCommand {
  bool markdown = false;
  bool json = false;
};
int probes_command(const ProbesCommand& c);

}  // namespace kvsim::tools
