#include "tools/kvsim/cmd_hunt.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "sim/campaign/hunt.h"
#include "sim/base/json_reader.h"
#include "tools/kvsim/html_report.h"
#include "tools/kvsim/hunt_report.h"
#include "tools/kvsim/probe_report.h"

namespace kvsim::tools {
namespace {

// The named scenarios of `dir`, sorted by file name. Mooncake replays are left out: they are
// hit-rate references (thousands of requests, no faults), not bug hunts.
std::vector<sim::Scenario> named_scenarios(const std::string& dir) {
  std::set<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.insert(e.path());
  }
  std::vector<sim::Scenario> out;
  for (const std::filesystem::path& p : files) {
    sim::Scenario s = sim::load_scenario(p.string());
    if (s.workload.kind != sim::WorkloadKind::kMooncake) out.push_back(std::move(s));
  }
  return out;
}

std::string scenarios_dir(const std::string& given) {
  if (!given.empty()) {
    if (!std::filesystem::is_directory(given)) {
      throw sim::InputError("--scenarios: " + given + ": not a folder");
    }
    return given;
  }
  if (std::filesystem::is_directory("scenarios")) return "scenarios";
#ifdef KVSIM_SOURCE_DIR
  if (std::filesystem::is_directory(KVSIM_SOURCE_DIR "/scenarios")) {
    return KVSIM_SOURCE_DIR "/scenarios";
  }
#endif
  return "";
}

}  // namespace

int hunt_command(const HuntCommand& c) {
  try {
    sim::HuntOptions o;
    o.seed = c.seed;
    o.time_budget_s = c.time_budget_s;
    o.max_units = c.units;
    o.failures = c.failures;
    o.jobs = c.jobs;
    o.trace_dir = c.trace_dir;
    o.shrink = !c.no_shrink;
    o.shrink_replay_ops = c.shrink_ops;
    // Said at once on stderr: the summary comes only after shrinking, which can take minutes.
    o.on_failure = [&](const sim::HuntFailure& f) {
      std::fprintf(stderr, "kvsim hunt: found %s in unit %llu (%s, seed %llu) after %.1f s%s%s\n",
                   f.invariant.c_str(), static_cast<unsigned long long>(f.unit), f.source.c_str(),
                   static_cast<unsigned long long>(f.seed), f.wall_s,
                   f.trace.empty() ? "" : "; trace ", f.trace.c_str());
      if (o.shrink && !f.trace.empty()) {
        std::fprintf(stderr,
                     "kvsim hunt: it will be shrunk once the hunt ends (--no-shrink skips)\n");
      }
      std::fflush(stderr);
    };
    o.unit_timeout_s = c.unit_timeout_s;
    const std::string dir = scenarios_dir(c.scenarios);
    if (!dir.empty()) o.named = named_scenarios(dir);
    if (o.time_budget_s <= 0 && o.max_units == 0) {
      throw sim::InputError("--time-budget: must be positive unless --units is given");
    }
    if (!c.report.empty()) html::make_report_dir(c.report);  // before the budget is spent
    const sim::HuntReport r = sim::run_hunt(o);
    const probes::Snapshot reached = r.probes.empty() ? probes::snapshot() : r.probes;
    const std::string page =
        c.report.empty() ? "" : write_hunt_report(c.report, dir, o, r, reached);
    if (c.json) {
      std::printf("%s\n", sim::hunt_json(r).dump().c_str());
      std::printf("%s\n", probe_report_json(reached, r.units).dump().c_str());
    } else {
      std::printf("%s", sim::hunt_text(r).c_str());
      std::printf("%s", probe_report_text(reached, r.units).c_str());
      if (!page.empty()) std::printf("report: %s\n", page.c_str());
    }
    return r.failures.empty() ? 0 : 1;
  } catch (const sim::InputError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  }
}

}  // namespace kvsim::tools
