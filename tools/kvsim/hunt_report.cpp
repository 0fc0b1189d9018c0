#include "tools/kvsim/hunt_report.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "sim/trace/trace.h"
#include "tools/kvsim/html_report.h"

namespace kvsim::tools {
namespace {

using html::esc;
using html::link;
using html::seconds;

// The command line that reruns this hunt (the same units, in the same order).
std::string hunt_command_line(const std::string& scenarios_dir, const sim::HuntOptions& o) {
  std::ostringstream c;
  c << "kvsim hunt --seed " << o.seed;
  if (o.time_budget_s > 0) c << " --time-budget " << o.time_budget_s;
  if (o.max_units > 0) c << " --units " << o.max_units;
  c << " --failures " << o.failures;
  if (!o.until_invariant.empty()) c << " --until " << o.until_invariant;
  if (!o.until_detail.empty()) c << " --until-detail '" << o.until_detail << "'";
  c << " -j " << o.jobs << " --trace-dir " << o.trace_dir;
  if (!o.shrink) c << " --no-shrink";
  if (!scenarios_dir.empty()) c << " --scenarios " << scenarios_dir;
  return c.str();
}

std::string stop_reason(const sim::HuntReport& r, const sim::HuntOptions& o) {
  if (r.stopped == "failures") return "found " + std::to_string(o.failures) + " failure(s)";
  if (r.stopped == "until") return "found a failure of " + o.until_invariant;
  if (r.stopped == "units") return "ran its " + std::to_string(o.max_units) + " units";
  if (r.stopped == "time_budget") return "spent its time budget of " + seconds(o.time_budget_s);
  return r.stopped;
}

}  // namespace

std::string hunt_report_html(const std::string& dir, const std::string& scenarios_dir,
                             const sim::HuntOptions& o, const sim::HuntReport& r,
                             const probes::Snapshot& probes) {
  std::ostringstream p;
  p << html::page_begin("kvsim hunt from seed " + std::to_string(r.seed),
                        hunt_command_line(scenarios_dir, o));

  const size_t failures = r.failures.size();
  p << "<table id=\"summary\"><tr><th>units</th><th>swarm</th><th>named</th><th>failures</th>"
    << "<th>vacuous</th><th>ops</th><th>wall time</th><th>stopped</th></tr><tr><td class=\"num\">"
    << r.units << "</td><td class=\"num\">" << r.swarm_units << "</td><td class=\"num\">"
    << r.units - r.swarm_units << "</td><td class=\"num " << (failures ? "bad" : "ok") << "\">"
    << failures << "</td><td class=\"num\">" << r.vacuous_units << "</td><td class=\"num\">"
    << r.ops << "</td><td class=\"num\">" << seconds(r.wall_s) << "</td><td>" << esc(r.stopped)
    << "</td></tr></table>\n";

  p << "<h2>Budget</h2>\n<table id=\"budget\"><tr><th>limit</th><th>value</th></tr>\n"
    << "<tr><td>time budget</td><td>"
    << (o.time_budget_s > 0 ? seconds(o.time_budget_s) : std::string("none")) << "</td></tr>\n"
    << "<tr><td>units</td><td>" << (o.max_units > 0 ? std::to_string(o.max_units) : "no limit")
    << "</td></tr>\n<tr><td>stop after failures</td><td>" << o.failures << "</td></tr>\n"
    << "<tr><td>worker processes</td><td>" << o.jobs << "</td></tr>\n"
    << "<tr><td>time allowance per unit (longer: a hang)</td><td>"
    << (o.unit_timeout_s > 0 ? seconds(o.unit_timeout_s) : std::string("none")) << "</td></tr>\n"
    << "<tr><td>stopped because it</td><td id=\"stopped\">" << esc(stop_reason(r, o))
    << "</td></tr>\n</table>\n";

  p << "<h2>Failures</h2>\n";
  if (failures == 0) {
    p << "<p class=\"ok\" id=\"no-failures\">No unit failed.</p>\n";
  } else {
    p << "<table id=\"failures\"><tr><th>unit</th><th>source</th><th>seed</th><th>invariant</th>"
      << "<th>detail</th><th>ops</th><th>op trace</th><th>shrunk trace</th><th>found after</th>"
      << "<th>replay</th></tr>\n";
    for (const sim::HuntFailure& f : r.failures) {
      const std::string& replay = f.shrunk_trace.empty() ? f.trace : f.shrunk_trace;
      const std::string rerun = f.hang_scenario.empty() ? "kvsim replay " + replay
                                                        : "kvsim run " + f.hang_scenario +
                                                              " --seed " + std::to_string(f.seed);
      p << "<tr class=\"violation\"><td class=\"num\">" << f.unit << "</td><td>" << esc(f.source)
        << "</td><td class=\"num\">" << f.seed << "</td><td>" << esc(f.invariant) << "</td><td>"
        << esc(f.detail) << "</td><td class=\"num\">" << f.ops << "</td><td>"
        << link(dir, f.hang_scenario.empty() ? f.trace : f.hang_scenario) << "</td><td>"
        << link(dir, f.shrunk_trace);
      if (!f.shrunk_trace.empty()) p << " (" << f.shrunk_ops << " ops)";
      p << "</td><td>" << f.units_tried << " units, " << seconds(f.wall_s) << "</td><td><code>"
        << esc(rerun) << "</code></td></tr>\n";
    }
    p << "</table>\n";
  }

  p << "<h2>Units</h2>\n<table id=\"units\"><tr><th>unit</th><th>kind</th><th>configuration</th>"
    << "<th>seed</th><th>verdict</th><th>event hash</th><th>ops</th><th>invariant (or why "
       "vacuous)</th></tr>\n";
  auto faults = html::all_fault_sites();  // site → (fired, units)
  for (const sim::HuntUnitRecord& u : r.unit_log) {
    p << "<tr class=\"" << esc(u.verdict) << "\"><td class=\"num\">" << u.unit << "</td><td>"
      << (u.swarm ? "swarm" : "named") << "</td><td>" << esc(u.source);
    for (size_t i = 0; i < u.features.size(); ++i)
      p << (i == 0 ? ": " : ", ") << esc(u.features[i]);
    p << "</td><td class=\"num\">" << u.seed << "</td><td>" << esc(u.verdict) << "</td><td><code>"
      << (u.verdict == "hang" ? std::string("–") : sim::hex64(u.event_hash))
      << "</code></td><td class=\"num\">" << u.ops << "</td><td>"
      << esc(u.vacuous.empty() ? u.invariant : u.vacuous) << "</td></tr>\n";
    for (size_t i = 0; i < sim::kFaultSites; ++i) {
      if (u.faults[i] == 0) continue;
      auto& f = faults[std::string(sim::to_string(static_cast<sim::FaultSite>(i)))];
      f.first += static_cast<int64_t>(u.faults[i]);
      f.second += 1;
    }
  }
  p << "</table>\n";

  p << "<h2>Coverage</h2>\n<table id=\"features\"><tr><th>swarm feature</th><th>units</th></tr>\n";
  for (const auto& [name, n] : r.features) {
    p << "<tr><td>" << esc(name) << "</td><td class=\"num\">" << n << "</td></tr>\n";
  }
  p << "</table>\n<table id=\"scenarios\"><tr><th>named scenario</th><th>units</th></tr>\n";
  for (const auto& [name, n] : r.scenarios) {
    p << "<tr><td>" << esc(name) << "</td><td class=\"num\">" << n << "</td></tr>\n";
  }
  p << "</table>\n";

  p << html::fault_table(faults, "units") << html::probe_section(probes, "the hunt");
  p << html::page_end();
  return p.str();
}

std::string write_hunt_report(const std::string& dir, const std::string& scenarios_dir,
                              const sim::HuntOptions& options, const sim::HuntReport& report,
                              const probes::Snapshot& probes) {
  return html::write_page(dir, hunt_report_html(dir, scenarios_dir, options, report, probes));
}

}  // namespace kvsim::tools
