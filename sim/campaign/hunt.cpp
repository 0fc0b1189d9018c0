#include "sim/campaign/hunt.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/common/probe.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/child_process.h"
#include "sim/campaign/profile_flush.h"
#include "sim/campaign/rebuild_check.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/shrink.h"
#include "sim/campaign/swarm.h"
#include "sim/campaign/target_fit.h"

namespace kvsim::sim {
namespace {

// What a worker reports for one unit (one JSON line over its pipe).
struct UnitResult {
  uint64_t unit = 0;
  bool swarm = true;
  std::string source;
  uint64_t seed = 0;
  int64_t ops = 0;
  uint64_t event_hash = 0;
  std::vector<std::string> features;
  std::array<uint64_t, kFaultSites> faults{};
  std::vector<uint64_t> probes;  // per declared probe, in declaration order
  std::optional<SimViolation> violation;
  std::string vacuous;  // a clean run that checked nothing: why (runner.h's vacuous_reason)
  std::string trace;
  std::string hang_scenario;  // parent-side only (hang_result)
};

nlohmann::json to_json(const UnitResult& u) {
  nlohmann::json j = {{"unit", u.unit},
                      {"swarm", u.swarm},
                      {"source", u.source},
                      {"seed", u.seed},
                      {"ops", u.ops},
                      {"features", u.features},
                      {"event_hash", u.event_hash},
                      {"faults", u.faults},
                      {"trace", u.trace}};
  j["probes"] = u.probes;
  if (!u.vacuous.empty()) j["vacuous"] = u.vacuous;
  if (u.violation) {
    j["invariant"] = u.violation->invariant;
    j["detail"] = u.violation->detail;
    j["op_index"] = u.violation->op_index;
  }
  return j;
}

UnitResult unit_from_json(const nlohmann::json& j) {
  UnitResult u;
  u.unit = j.at("unit").get<uint64_t>();
  u.swarm = j.at("swarm").get<bool>();
  u.source = j.at("source").get<std::string>();
  u.seed = j.at("seed").get<uint64_t>();
  u.ops = j.at("ops").get<int64_t>();
  u.event_hash = j.at("event_hash").get<uint64_t>();
  u.features = j.at("features").get<std::vector<std::string>>();
  u.faults = j.at("faults").get<std::array<uint64_t, kFaultSites>>();
  u.trace = j.at("trace").get<std::string>();
  u.probes = j.at("probes").get<std::vector<uint64_t>>();
  u.vacuous = j.value("vacuous", std::string());
  if (j.contains("invariant")) {
    u.violation = SimViolation{j.at("invariant").get<std::string>(),
                               j.at("detail").get<std::string>(), j.at("op_index").get<size_t>()};
  }
  return u;
}

std::string trace_path(const HuntOptions& o, const std::string& source, uint64_t seed,
                       const char* suffix) {
  return (std::filesystem::path(o.trace_dir) /
          ("kvsim-hunt-" + source + "-seed" + std::to_string(seed) + suffix))
      .string();
}

// A unit's result before it runs: which unit, and where its configuration came from.
UnitResult unit_identity(const HuntUnit& h) {
  UnitResult u;
  u.unit = h.index;
  u.swarm = h.swarm;
  u.source = h.scenario.name;
  u.seed = h.seed;
  if (h.swarm) u.features = features(h.scenario);
  return u;
}

UnitResult run_unit(const HuntOptions& options, uint64_t index) {
  const HuntUnit h = hunt_unit(options, index);
  UnitResult u = unit_identity(h);
  std::vector<Op> ops;
  probes::reset();  // the unit's own hits (thread-local counters; one unit at a time here)
  // The tree's snapshot, restore and wide ids, which no op drives (rebuild_check.h).
  RebuildCheck rebuild;
  const RunResult r = run_scenario(RunRequest{.scenario = &h.scenario,
                                              .seed = h.seed,
                                              .record = &ops,
                                              .setup =
                                                  [&](Executor& e) {
                                                    if (options.setup) options.setup(e);
                                                    rebuild.attach(e);
                                                  },
                                              .target = options.target});
  u.ops = r.stats.ops;
  u.event_hash = r.event_hash;
  u.faults = r.faults_fired;
  for (const probes::Count& c : probes::snapshot())
    u.probes.push_back(c.count);
  u.violation = r.violation;
  if (!r.violation && rebuild.problem()) {
    // Not in the op trace's replay (which does not rebuild): the hunt's own rerun reproduces it.
    u.violation = SimViolation{"tree.snapshot_rebuild",
                               *rebuild.problem() + " (rerun: kvsim hunt --seed " +
                                   std::to_string(options.seed) + " --units " +
                                   std::to_string(index + 1) + ")",
                               static_cast<size_t>(r.stats.ops)};
    return u;
  }
  u.vacuous = vacuous_reason(h.scenario, r);  // "" when the run failed
  if (r.violation) {
    u.trace = trace_path(options, u.source, h.seed, ".trace.jsonl");
    write_op_trace(u.trace, OpTrace{.scenario = h.scenario,
                                    .seed = h.seed,
                                    .target = r.target,
                                    .ops = std::move(ops),
                                    .event_hash = r.event_hash,
                                    .violation = r.violation});
  }
  return u;
}

class Clock {
 public:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Folds unit results into the report; true once the hunt has enough failures, or one of the
// invariant it runs until.
class Collector {
 public:
  Collector(const HuntOptions& o, HuntReport& r, const Clock& clock)
      : options_(o), report_(r), clock_(clock) {}

  bool add(const UnitResult& u) {
    ++report_.units;
    report_.ops += u.ops;
    if (u.swarm) {
      ++report_.swarm_units;
      for (const std::string& f : u.features)
        ++report_.features[f];
    } else {
      ++report_.scenarios[u.source];
    }
    if (!u.vacuous.empty()) {  // only a clean unit has a reason
      ++report_.vacuous_units;
      ++report_.vacuous[u.source + ": " + u.vacuous];
    }
    for (size_t i = 0; i < kFaultSites; ++i)
      report_.faults_fired[i] += u.faults[i];
    report_.unit_log.push_back(
        HuntUnitRecord{.unit = u.unit,
                       .swarm = u.swarm,
                       .source = u.source,
                       .features = u.features,
                       .seed = u.seed,
                       .ops = u.ops,
                       .event_hash = u.event_hash,
                       // A unit its worker never reported is a "hang" or a "crash".
                       .verdict = !u.violation ? (u.vacuous.empty() ? "ok" : "vacuous")
                                  : u.violation->invariant == "crash" || !u.hang_scenario.empty()
                                      ? u.violation->invariant
                                      : "violation",
                       .invariant = u.violation ? u.violation->invariant : "",
                       .vacuous = u.vacuous,
                       .faults = u.faults});
    if (report_.probes.empty()) {
      for (const probes::Info& p : probes::all())
        report_.probes.push_back(probes::Count{p.name, 0});
    }
    for (size_t i = 0; i < report_.probes.size() && i < u.probes.size(); ++i)
      report_.probes[i].count += u.probes[i];
    if (u.violation && report_.failures.size() < options_.failures) {
      report_.failures.push_back(HuntFailure{.unit = u.unit,
                                             .source = u.source,
                                             .seed = u.seed,
                                             .invariant = u.violation->invariant,
                                             .detail = u.violation->detail,
                                             .ops = u.ops,
                                             .wall_s = clock_.elapsed(),
                                             .units_tried = report_.units,
                                             .ops_before = report_.ops,
                                             .trace = u.trace,
                                             .hang_scenario = u.hang_scenario});
      if (options_.on_failure) options_.on_failure(report_.failures.back());
      if (!options_.until_invariant.empty() && u.violation->invariant == options_.until_invariant &&
          u.violation->detail.find(options_.until_detail) != std::string::npos)
        until_found_ = true;
    }
    return until_found_ || report_.failures.size() >= options_.failures;
  }
  // Why add() said stop: "until" or "failures".
  const char* stop_reason() const { return until_found_ ? "until" : "failures"; }

 private:
  const HuntOptions& options_;
  HuntReport& report_;
  const Clock& clock_;
  bool until_found_ = false;
};

bool out_of_time(const HuntOptions& o, const Clock& clock) {
  return o.time_budget_s > 0 && clock.elapsed() >= o.time_budget_s;
}

bool units_done(const HuntOptions& o, uint64_t next) {
  return o.max_units > 0 && next >= o.max_units;
}

void run_in_process(const HuntOptions& o, HuntReport& report, const Clock& clock) {
  Collector collect(o, report, clock);
  for (uint64_t i = 0;; ++i) {
    if (units_done(o, i)) {
      report.stopped = "units";
      return;
    }
    if (out_of_time(o, clock)) {
      report.stopped = "time_budget";
      return;
    }
    if (collect.add(run_unit(o, i))) {
      report.stopped = collect.stop_reason();
      return;
    }
  }
}

void write_line(int fd, const std::string& line) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0);  // the parent has gone (it stopped the hunt)
    done += static_cast<size_t>(n);
  }
}

// Runs units first, first + jobs, ...: announces each ({"start": i}) so the parent can time
// it, then sends its result.
// In a coverage build each unit's counts are written as it ends (profile_flush.h).
[[noreturn]] void worker(const HuntOptions& o, uint64_t first, int fd, const Clock& clock) {
  profile_flush::forked_child();
  for (uint64_t i = first;; i += static_cast<uint64_t>(o.jobs)) {
    if (units_done(o, i) || out_of_time(o, clock)) break;
    write_line(fd, nlohmann::json{{"start", i}}.dump() + "\n");
    const UnitResult u = run_unit(o, i);
    profile_flush::write();
    write_line(fd, to_json(u).dump() + "\n");
  }
  ::close(fd);
  _exit(0);
}

// The failure of a unit whose worker process never reported it (it ran past its allowance, or
// died: an uncaught exception, a signal). There is no op trace, so its scenario is written for a
// rerun (`kvsim run SCENARIO --seed S` reproduces it).
UnitResult lost_unit_result(const HuntOptions& o, uint64_t index, const std::string& invariant,
                            const std::string& detail, const char* suffix) {
  const HuntUnit h = hunt_unit(o, index);
  UnitResult u = unit_identity(h);
  u.violation = SimViolation{invariant, detail, 0};
  u.hang_scenario = trace_path(o, u.source, h.seed, suffix);
  std::ofstream f(u.hang_scenario);
  f << to_json(h.scenario).dump(2) << "\n";
  if (!f) throw InputError("--trace-dir: cannot write " + u.hang_scenario);
  return u;
}

// A worker that died inside a unit: a crash of the code under test is a failure, never a unit
// the hunt silently drops (the hunt would otherwise report "no violation" for a core that
// cannot even start the drawn configuration). The unit is re-run under the crash recorder, so
// the failure comes with an op trace that `kvsim replay` and `kvsim shrink` take; when the
// re-run leaves none, the unit's scenario is written for a rerun instead.
UnitResult crash_result(const HuntOptions& o, uint64_t index, int status) {
  const SimViolation how = crash_violation(status, 0);
  const HuntUnit unit = hunt_unit(o, index);
  std::string trace = trace_path(o, unit_identity(unit).source, unit.seed, ".crash.trace.jsonl");
  if (!record_crash_trace(unit.scenario, unit.seed, o.setup, trace)) trace.clear();
  if (!trace.empty()) {
    const HuntUnit h = hunt_unit(o, index);
    UnitResult u = unit_identity(h);
    const AnyTrace t = read_trace(trace);
    u.violation = t.ops.violation ? *t.ops.violation : how;
    u.ops = static_cast<int64_t>(t.ops.ops.size());
    u.trace = trace;
    return u;
  }
  return lost_unit_result(o, index, "crash",
                          "the worker running this unit " + how.detail +
                              " before reporting it, and its re-run under the crash recorder "
                              "left no trace (see the hunt's stderr)",
                          ".crash.scenario.json");
}

// A unit past its allowance.
UnitResult hang_result(const HuntOptions& o, uint64_t index, double ran_s) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "unit ran %.1f s, past its time allowance of %.1f s (worker killed; no op trace)",
                ran_s, o.unit_timeout_s);
  return lost_unit_result(o, index, "hang", buf, ".hang.scenario.json");
}

void run_workers(const HuntOptions& o, HuntReport& report, const Clock& clock) {
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    std::string buffer;
    int64_t current = -1;  // the unit it runs (-1: between units)
    double started = 0;    // when that unit started (hunt wall time)
  };
  std::vector<Worker> workers(static_cast<size_t>(o.jobs));
  auto start = [&](size_t k, uint64_t first) {
    const PipedChild child = fork_with_pipe("hunt", "worker processes");
    if (child.pid == 0) {
      for (size_t j = 0; j < workers.size(); ++j) {
        if (j != k && workers[j].fd >= 0) ::close(workers[j].fd);
      }
      worker(o, first, child.fd, clock);
    }
    workers[k] = Worker{child.pid, child.fd, {}, -1, 0};
  };
  for (size_t k = 0; k < workers.size(); ++k)
    start(k, k);
  Collector collect(o, report, clock);
  std::vector<UnitResult> pending;
  bool enough = false;
  // A unit still running when the budget ends is cut off there (the workers check the budget
  // between units only): the budget is a budget, not a start time for the last unit.
  const double hard_stop = o.time_budget_s > 0 ? o.time_budget_s : 0;
  for (;;) {
    std::vector<pollfd> fds;
    for (const Worker& w : workers) {
      if (w.fd >= 0) fds.push_back(pollfd{w.fd, POLLIN, 0});
    }
    if (fds.empty() || enough) break;
    // A unit past its allowance is a failure ("hang"), not a unit the hunt drops: its worker
    // is killed and a fresh one goes on with that worker's next units.
    for (size_t k = 0; k < workers.size() && !enough && o.unit_timeout_s > 0; ++k) {
      Worker& w = workers[k];
      const double ran = clock.elapsed() - w.started;
      if (w.fd < 0 || w.current < 0 || ran <= o.unit_timeout_s) continue;
      ::kill(w.pid, SIGKILL);
      ::close(w.fd);
      int status = 0;
      ::waitpid(w.pid, &status, 0);
      const auto unit = static_cast<uint64_t>(w.current);
      w = Worker{};
      enough = collect.add(hang_result(o, unit, ran));
      const uint64_t next = unit + static_cast<uint64_t>(o.jobs);
      if (!enough && !units_done(o, next) && !out_of_time(o, clock)) start(k, next);
    }
    if (enough) break;
    fds.clear();
    for (const Worker& w : workers) {
      if (w.fd >= 0) fds.push_back(pollfd{w.fd, POLLIN, 0});
    }
    if (fds.empty()) break;
    if (hard_stop > 0 && clock.elapsed() > hard_stop) break;
    if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < workers.size(); ++k) {
      Worker& w = workers[k];
      if (w.fd < 0) continue;
      pollfd* p = nullptr;
      for (pollfd& f : fds) {
        if (f.fd == w.fd) p = &f;
      }
      if (p == nullptr || p->revents == 0) continue;
      char buf[65536];
      const ssize_t n = ::read(w.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(w.fd);
        w.fd = -1;
        if (w.current >= 0) {  // it died inside a unit: a crash, then a fresh worker goes on
          int status = 0;
          ::waitpid(w.pid, &status, 0);
          const auto unit = static_cast<uint64_t>(w.current);
          w = Worker{};
          if (!enough) enough = collect.add(crash_result(o, unit, status));
          const uint64_t next = unit + static_cast<uint64_t>(o.jobs);
          if (!enough && !units_done(o, next) && !out_of_time(o, clock)) start(k, next);
        }
        continue;
      }
      w.buffer.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = w.buffer.find('\n')) != std::string::npos) {
        const std::string line = w.buffer.substr(0, nl);
        w.buffer.erase(0, nl + 1);
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.contains("start")) {
          w.current = j.at("start").get<int64_t>();
          w.started = clock.elapsed();
          continue;
        }
        w.current = -1;
        if (!enough) enough = collect.add(unit_from_json(j));
      }
    }
  }
  for (Worker& w : workers) {
    if (w.pid < 0) continue;
    if (w.fd >= 0) {
      ::kill(w.pid, SIGKILL);
      ::close(w.fd);
    }
    int status = 0;
    ::waitpid(w.pid, &status, 0);
  }
  if (enough) {
    report.stopped = collect.stop_reason();
  } else if (o.max_units > 0 && report.units >= o.max_units) {
    report.stopped = "units";
  } else {
    report.stopped = "time_budget";
  }
}

// Shrinks a failure's trace in a child process, as shrink_in_child does (a shrink that crashes
// cannot take the hunt with it), but within the hunt's time budget: the budget covers the
// shrink too, so `--time-budget 60` ends by 60 s. A shrink the budget cuts short leaves the
// failure unshrunk, with a note naming the command that shrinks it. "" when shrunk.
std::string shrink_within_budget(const HuntFailure& f, const std::string& out, const HuntOptions& o,
                                 const Clock& clock) {
  const ShrinkOptions so{
      .max_replays = o.shrink_replays, .max_replay_ops = o.shrink_replay_ops, .setup = o.setup};
  if (o.time_budget_s <= 0) return shrink_in_child(f.trace, out, so);
  const std::string later = "; `kvsim shrink " + f.trace + "` shrinks it";
  if (clock.elapsed() >= o.time_budget_s) {
    return "not shrunk: the time budget was spent before the shrink" + later;
  }
  std::error_code ec;
  std::filesystem::remove(out, ec);
  const pid_t pid = fork_flushed();
  if (pid < 0) return "not shrunk: cannot start the shrink process";
  if (pid == 0) {
    profile_flush::forked_child();
    const ShrinkResult s = shrink_trace(read_trace(f.trace).ops, so);
    if (s.reproduced) write_op_trace(out, s.trace);
    std::fflush(nullptr);
    profile_flush::write();
    _exit(s.reproduced ? 0 : 3);
  }
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return "not shrunk: lost the shrink process";
    if (clock.elapsed() >= o.time_budget_s) {
      ::kill(pid, SIGKILL);
      status = wait_for_child(pid);
      std::filesystem::remove(out, ec);  // a trace cut off mid-write is no trace
      return "not shrunk: the time budget ran out during the shrink" + later;
    }
    ::poll(nullptr, 0, 20);  // a 20 ms nap: the shrink's end is seen within 20 ms of it
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::filesystem::exists(out)) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
    return "not shrunk: the trace did not reproduce its failure";
  }
  return "not shrunk: the shrink process " + crash_violation(status, 0).detail;
}

}  // namespace

HuntUnit hunt_unit(const HuntOptions& options, uint64_t index) {
  HuntUnit h;
  h.index = index;
  h.seed = options.seed + index;
  h.swarm = options.named.empty() || index % 2 == 0;
  if (h.swarm) {
    h.scenario = draw_scenario(h.seed);
  } else {
    h.scenario = options.named[(index / 2) % options.named.size()];
  }
  fit_to_target(h.scenario, options.target);
  return h;
}

HuntReport run_hunt(const HuntOptions& options) {
  if (options.time_budget_s <= 0 && options.max_units == 0) {
    throw InputError("hunt: needs a time budget or a unit count");
  }
  if (options.jobs < 1) throw InputError("-j: must be at least 1");
  if (options.failures < 1) throw InputError("--failures: must be at least 1");
  std::error_code ec;
  std::filesystem::create_directories(options.trace_dir, ec);
  if (!std::filesystem::is_directory(options.trace_dir)) {
    throw InputError("--trace-dir: " + options.trace_dir + ": cannot create the folder");
  }
  HuntReport report;
  report.seed = options.seed;
  report.jobs = options.jobs;
  const Clock clock;
  if (options.jobs == 1 && options.time_budget_s <= 0 && options.unit_timeout_s <= 0) {
    run_in_process(options, report, clock);
  } else {
    run_workers(options, report, clock);
  }
  std::sort(report.failures.begin(), report.failures.end(),
            [](const HuntFailure& a, const HuntFailure& b) { return a.unit < b.unit; });
  std::sort(report.unit_log.begin(), report.unit_log.end(),
            [](const HuntUnitRecord& a, const HuntUnitRecord& b) { return a.unit < b.unit; });
  report.wall_s = clock.elapsed();
  if (options.shrink) {
    for (HuntFailure& f : report.failures) {
      if (f.trace.empty()) continue;  // a hang: no op trace to shrink
      const std::string out = trace_path(options, f.source, f.seed, ".shrunk.trace.jsonl");
      f.shrink_note = shrink_within_budget(f, out, options, clock);
      if (f.shrink_note.empty()) {
        f.shrunk_trace = out;
        f.shrunk_ops = read_trace(out).ops.ops.size();
      }
    }
  }
  return report;
}

}  // namespace kvsim::sim
