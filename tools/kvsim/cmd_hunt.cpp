#include "tools/kvsim/cmd_hunt.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "sim/base/json_reader.h"
#include "sim/campaign/hunt.h"
#include "tools/kvsim/commands.h"
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

// The hunt prints nothing until it ends (its summary comes after shrinking): this says it is
// alive every 10 s of wall time on stderr, one line each (a redrawn line on a terminal).
class HuntProgress {
 public:
  explicit HuntProgress(double budget_s)
      : budget_s_(budget_s), tty_(isatty(STDERR_FILENO) != 0), thread_([this] { loop(); }) {}
  ~HuntProgress() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
    if (printed_ && tty_) std::fprintf(stderr, "\n");
  }
  HuntProgress(const HuntProgress&) = delete;
  HuntProgress& operator=(const HuntProgress&) = delete;

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (int tick = 1;; ++tick) {
      if (wake_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; })) return;
      printed_ = true;
      // snprintf + write(2), not stdio: the hunt forks its workers while this thread runs,
      // and a child must not inherit a stdio lock held here.
      char buf[128];
      const int n =
          budget_s_ > 0
              ? std::snprintf(buf, sizeof buf, "%skvsim hunt: %d s of the %.0f s budget%s",
                              tty_ ? "\r" : "", 10 * tick, budget_s_, tty_ ? "" : "\n")
              : std::snprintf(buf, sizeof buf, "%skvsim hunt: %d s%s", tty_ ? "\r" : "", 10 * tick,
                              tty_ ? "" : "\n");
      if (n > 0) (void)!::write(STDERR_FILENO, buf, static_cast<size_t>(n));
    }
  }

  double budget_s_;
  bool tty_;
  bool done_ = false;
  bool printed_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;  // last: started once the fields above exist
};

}  // namespace

int hunt_command(const HuntCommand& c) {
  try {
    sim::HuntOptions o;
    o.seed = c.seed;
    o.time_budget_s = c.time_budget_s;
    o.max_units = c.units;
    o.failures = c.failures;
    o.until_invariant = c.until;
    o.until_detail = c.until_detail;
    o.jobs = c.jobs;
    o.trace_dir = c.trace_dir;
    o.shrink = !c.no_shrink;
    o.shrink_replay_ops = c.shrink_ops;
    o.target = resolve_target(c.target);
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
    // SGLang's units are sized to ~1 s of one core (sim/campaign/target_fit.h); 120 s leaves
    // room for the longest capped units on a loaded machine without letting a stuck one eat
    // a 10-minute hunt.
    o.unit_timeout_s = c.unit_timeout_s.value_or(o.target.is_kvsim() ? 30.0 : 120.0);
    const std::string dir = scenarios_dir(c.scenarios);
    if (!dir.empty()) o.named = named_scenarios(dir);
    if (c.print_unit) {
      const sim::HuntUnit h = sim::hunt_unit(o, *c.print_unit);
      std::printf("%s\n", sim::to_json(h.scenario).dump(2).c_str());
      const std::string what = h.swarm ? "a swarm draw" : "the named scenario " + h.scenario.name;
      std::fprintf(stderr,
                   "kvsim hunt: unit %llu of the hunt from seed %llu is %s at seed %llu; run it "
                   "with: kvsim run FILE --seed %llu\n",
                   static_cast<unsigned long long>(h.index),
                   static_cast<unsigned long long>(o.seed), what.c_str(),
                   static_cast<unsigned long long>(h.seed),
                   static_cast<unsigned long long>(h.seed));
      return 0;
    }
    if (o.time_budget_s <= 0 && o.max_units == 0) {
      throw sim::InputError("--time-budget: must be positive unless --units is given");
    }
    if (!c.report.empty()) html::make_report_dir(c.report);  // before the budget is spent
    // Unit i runs seed S + i and its trace header holds it as a signed 64-bit number.
    constexpr uint64_t kMaxSeed = uint64_t{1} << 62;
    if (c.seed > kMaxSeed) {
      throw sim::InputError("--seed: " + std::to_string(c.seed) + " is out of range [0, 2^62 = " +
                            std::to_string(kMaxSeed) + "] (unit i runs seed S + i)");
    }
    sim::HuntReport r;
    {
      HuntProgress alive(o.time_budget_s);  // a line every 10 s while the hunt runs
      r = sim::run_hunt(o);
    }
    const probes::Snapshot reached = r.probes.empty() ? probes::snapshot() : r.probes;
    const std::string page =
        c.report.empty() ? "" : write_hunt_report(c.report, dir, o, r, reached);
    // Like a sweep: exit 4 when every unit ran clean but checked nothing.
    const int exit_code = !r.failures.empty()                         ? 1
                          : r.units > 0 && r.vacuous_units == r.units ? kExitVacuous
                                                                      : 0;
    if (c.json) {  // one document: {"hunt": {...}, "probe_report": {...}[, "report": path]}
      nlohmann::json j = sim::hunt_json(r);
      j["probe_report"] = probe_report_json(reached, r.units)["probe_report"];
      if (!page.empty()) j["report"] = page;
      std::printf("%s\n", j.dump().c_str());
      return exit_code;
    }
    std::printf("%s", sim::hunt_text(r).c_str());
    std::printf(
        "%s", (c.probes ? probe_report_text(reached, r.units) : probe_report_line(reached, r.units))
                  .c_str());
    if (!page.empty()) std::printf("report: %s\n", page.c_str());
    if (exit_code == kExitVacuous) {
      std::printf(
          "verdict: VACUOUS: no violation, but none of the %llu units checked anything "
          "(exit 4)\n",
          static_cast<unsigned long long>(r.units));
    } else if (r.failures.empty()) {
      std::printf("verdict: ok: no violation in %llu units (exit 0)\n",
                  static_cast<unsigned long long>(r.units));
    } else {
      const sim::HuntFailure& f = r.failures.front();
      std::printf(
          "verdict: VIOLATION: %zu failure(s), the first %s in unit %llu (exit 1); "
          "replay: kvsim replay %s\n",
          r.failures.size(), f.invariant.c_str(), static_cast<unsigned long long>(f.unit),
          (f.shrunk_trace.empty() ? f.trace : f.shrunk_trace).c_str());
    }
    return exit_code;
  } catch (const sim::InputError& e) {
    std::fprintf(stderr, "kvsim: %s\n", e.what());
    return 2;
  }
}

}  // namespace kvsim::tools
