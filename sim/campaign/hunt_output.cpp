// What a hunt reports: its summary as one JSON document (`kvsim hunt --json`) and as text.
#include <cstdio>
#include <string>

#include "sim/campaign/hunt.h"

namespace kvsim::sim {

nlohmann::json hunt_json(const HuntReport& r) {
  nlohmann::json failures = nlohmann::json::array();
  for (const HuntFailure& f : r.failures) {
    const std::string& replay = f.shrunk_trace.empty() ? f.trace : f.shrunk_trace;
    const std::string rerun = f.hang_scenario.empty() ? "kvsim replay " + replay
                                                      : "kvsim run " + f.hang_scenario +
                                                            " --seed " + std::to_string(f.seed);
    failures.push_back({{"unit", f.unit},
                        {"source", f.source},
                        {"seed", f.seed},
                        {"invariant", f.invariant},
                        {"detail", f.detail},
                        {"ops", f.ops},
                        {"wall_s", f.wall_s},
                        {"units_tried", f.units_tried},
                        {"ops_before", f.ops_before},
                        {"trace", f.trace},
                        {"shrunk_trace", f.shrunk_trace},
                        {"shrunk_ops", f.shrunk_ops},
                        {"shrink_note", f.shrink_note},
                        {"replay", rerun}});
  }
  nlohmann::json faults = nlohmann::json::object();
  for (size_t i = 0; i < kFaultSites; ++i) {
    if (r.faults_fired[i] > 0)
      faults[std::string(to_string(static_cast<FaultSite>(i)))] = r.faults_fired[i];
  }
  nlohmann::json probe_hits = nlohmann::json::object();
  size_t reached = 0;
  for (const probes::Count& c : r.probes) {
    if (c.count == 0) continue;
    ++reached;
    probe_hits[std::string(c.name)] = c.count;
  }
  return nlohmann::json{
      {"hunt",
       {{"seed", r.seed},
        {"jobs", r.jobs},
        {"units", r.units},
        {"swarm_units", r.swarm_units},
        {"scenario_units", r.units - r.swarm_units},
        {"ops", r.ops},
        {"wall_s", r.wall_s},
        {"stopped", r.stopped},
        {"features", r.features},
        {"scenarios", r.scenarios},
        {"vacuous_units", r.vacuous_units},
        {"vacuous", r.vacuous},
        {"faults_fired", faults},
        {"probes_declared", probes::kCount},
        {"probes_reached", reached},
        {"probes", probe_hits},
        {"first_failure_s",
         r.failures.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.failures.front().wall_s)},
        {"failures", failures}}}};
}

std::string hunt_text(const HuntReport& r) {
  char buf[1024];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "hunt from seed %llu, %d job(s): %llu units (%llu swarm, %llu named) in %.1f s, "
                "%lld ops; stopped: %s\n",
                static_cast<unsigned long long>(r.seed), r.jobs,
                static_cast<unsigned long long>(r.units),
                static_cast<unsigned long long>(r.swarm_units),
                static_cast<unsigned long long>(r.units - r.swarm_units), r.wall_s,
                static_cast<long long>(r.ops), r.stopped.c_str());
  out += buf;
  out += "  swarm configurations by feature:";
  for (const auto& [name, n] : r.features) {
    std::snprintf(buf, sizeof buf, " %s %llu", name.c_str(), static_cast<unsigned long long>(n));
    out += buf;
  }
  out += "\n  named scenarios:";
  for (const auto& [name, n] : r.scenarios) {
    std::snprintf(buf, sizeof buf, " %s %llu", name.c_str(), static_cast<unsigned long long>(n));
    out += buf;
  }
  out += "\n  faults fired:";
  for (size_t i = 0; i < kFaultSites; ++i) {
    if (r.faults_fired[i] == 0) continue;
    std::snprintf(buf, sizeof buf, " %s %llu",
                  std::string(to_string(static_cast<FaultSite>(i))).c_str(),
                  static_cast<unsigned long long>(r.faults_fired[i]));
    out += buf;
  }
  // Code probes: the caller prints the probe report (tools/kvsim/probe_report.h).
  out += "\n";
  if (r.vacuous_units > 0) {
    std::snprintf(buf, sizeof buf, "  %llu clean unit(s) checked nothing (vacuous):",
                  static_cast<unsigned long long>(r.vacuous_units));
    out += buf;
    const char* sep = " ";
    for (const auto& [why, n] : r.vacuous) {
      std::snprintf(buf, sizeof buf, "%s%s %llu", sep, why.c_str(),
                    static_cast<unsigned long long>(n));
      out += buf;
      sep = "; ";
    }
    out += "\n";
  }
  if (r.failures.empty()) {
    out += "  no violation found\n";
    return out;
  }
  std::snprintf(buf, sizeof buf, "  %zu failure(s); first after %.3f s\n", r.failures.size(),
                r.failures.front().wall_s);
  out += buf;
  for (const HuntFailure& f : r.failures) {
    std::snprintf(buf, sizeof buf, "  unit %llu (%s, seed %llu): %s: %s\n",
                  static_cast<unsigned long long>(f.unit), f.source.c_str(),
                  static_cast<unsigned long long>(f.seed), f.invariant.c_str(), f.detail.c_str());
    out += buf;
    if (!f.trace.empty()) out += "    trace: " + f.trace + "\n";
    if (!f.shrunk_trace.empty()) {
      std::snprintf(buf, sizeof buf, "    shrunk to %zu ops: %s\n", f.shrunk_ops,
                    f.shrunk_trace.c_str());
      out += buf;
    }
    if (!f.shrink_note.empty()) out += "    " + f.shrink_note + "\n";
    if (!f.hang_scenario.empty()) {
      out += "    rerun: kvsim run " + f.hang_scenario + " --seed " + std::to_string(f.seed) + "\n";
    } else {
      out +=
          "    replay: kvsim replay " + (f.shrunk_trace.empty() ? f.trace : f.shrunk_trace) + "\n";
    }
  }
  return out;
}

}  // namespace kvsim::sim
