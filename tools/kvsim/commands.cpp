#include "tools/kvsim/commands.h"

#include "tools/kvsim/target_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/campaign/resources.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/shrink.h"
#include "sim/campaign/sweep.h"
#include "sim/model/storage_tier.h"
#include "sim/report/fidelity.h"
#include "sim/report/timeline.h"
#include "sim/report/tree_picture.h"
#include "sim/trace/call_trace_replay.h"
#include "sim/workload/mooncake.h"
#include "tools/kvsim/probe_report.h"
#include "tools/kvsim/sweep_report.h"

namespace kvsim::tools {
namespace {

using sim::InputError;

int input_error(const std::exception& e) {
  std::fprintf(stderr, "kvsim: %s\n", e.what());
  return kExitInput;
}

uint64_t memory_limit(const std::string& text) {
  if (text.empty()) return sim::default_memory_limit();
  uint64_t v = 0;
  if (!sim::parse_bytes(text, &v)) {
    throw InputError("--memory-limit: \"" + text +
                     "\" is not a size (a positive number of bytes, or with K, M, G, T)");
  }
  return v;
}

sim::Scenario scenario_or_default(const std::string& path) {
  return path.empty() ? sim::default_scenario() : sim::load_scenario(path);
}

std::string scenario_source(const sim::Scenario& s) {
  return s.source.empty() ? "the built-in scenario \"" + s.name + "\"" : s.source;
}

// An output file is checked before a run spends its time: the folder exists and takes a file.
void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty() || path == "-") return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(flag + " " + path + ": is a directory");
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  if (!fs::is_directory(dir, ec)) {
    throw InputError(flag + " " + path + ": no such folder: " + dir);
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(flag + " " + path + ": cannot write into " + dir + ": " +
                     std::strerror(errno));
  }
}

void check_folder(const std::string& dir, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(flag + " " + dir + ": not a folder");
  if (::access(dir.c_str(), W_OK) != 0) {
    throw InputError(flag + " " + dir + ": cannot write into it: " + std::strerror(errno));
  }
}

// A failing run's trace: kvsim-<scenario>-seed<seed>-<hash>.trace.jsonl, with -2, -3, ... when
// that name is taken, so two runs never overwrite each other's traces.
std::string unique_trace_path(const std::string& dir, const std::string& name, uint64_t seed,
                              uint64_t hash) {
  const std::string stem =
      dir + "/kvsim-" + name + "-seed" + std::to_string(seed) + "-" + sim::hex64(hash).substr(0, 8);
  std::string path = stem + ".trace.jsonl";
  for (int n = 2; std::filesystem::exists(path); ++n)
    path = stem + "-" + std::to_string(n) + ".trace.jsonl";
  return path;
}

// The first field where two scenarios differ ("cache.device_tokens"), "" when equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b,
                             const std::string& path = "") {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      const std::string p = path.empty() ? k : path + "." + k;
      if (!b.contains(k)) return p;
      std::string d = first_difference(v, b[k], p);
      if (!d.empty()) return d;
    }
    for (const auto& [k, v] : b.items()) {
      if (!a.contains(k)) return path.empty() ? k : path + "." + k;
    }
    return "";
  }
  return a == b ? "" : path;
}

// On a non-terminal (CI logs, `| tee`) a sweep says how far it is every 10 s, one plain line
// each, instead of the terminal's redrawn bar.
void progress_line(uint64_t done, uint64_t total, uint64_t failures, double wall_s) {
  std::fprintf(stderr, "kvsim: %llu/%llu seeds, %llu failing, %.0f s\n",
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
               static_cast<unsigned long long>(failures), wall_s);
  std::fflush(stderr);
}

// The last line of a single run's text output: what it found and the exit code that follows.
std::string run_verdict(const sim::Scenario& s, const sim::RunResult& r,
                        const std::string& trace_path) {
  if (!r.ok()) {
    std::string v = "verdict: VIOLATION of " + r.violation->invariant + " after op " +
                    std::to_string(r.violation->op_index) + " (exit 1)";
    if (!trace_path.empty() && trace_path != "-") v += "; replay: kvsim replay " + trace_path;
    return v + "\n";
  }
  const std::string vacuous = sim::vacuous_reason(s, r);
  if (!vacuous.empty()) return "verdict: VACUOUS: " + vacuous + " (exit 4)\n";
  return "verdict: ok: no violation in " + std::to_string(r.stats.ops) +
         " ops, every check passed (exit 0)\n";
}

void progress(uint64_t done, uint64_t total, uint64_t failures) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%.*s%*s] %llu/%llu seeds, %llu failing", filled,
               "##############################", kWidth - filled, "",
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
               static_cast<unsigned long long>(failures));
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// The storage flags of `kvsim run`; directory problems are reported before any run.
void apply_storage_flags(const RunCommand& c, sim::Scenario& s) {
  if (!c.storage_dir.empty()) {
    const std::string problem = sim::storage_dir_problem(c.storage_dir);
    if (!problem.empty()) throw InputError("--storage-dir: " + c.storage_dir + ": " + problem);
    s.storage = true;
    s.store.backend = sim::StorageKind::kFile;
    s.store.dir = c.storage_dir;
  }
  if (c.storage_reuse) {
    if (!s.storage || s.store.backend != sim::StorageKind::kFile || s.store.dir.empty()) {
      throw InputError("--storage-reuse: needs a file store in a directory (--storage-dir DIR)");
    }
    s.store.reuse = true;
  }
  sim::check_storage_dir(s);
  // Seeds run in parallel would empty and fill one directory under each other.
  if (c.jobs > 1 && c.seeds > 1 && s.storage && s.store.backend == sim::StorageKind::kFile &&
      !s.store.dir.empty()) {
    throw InputError("--jobs: a file store in one directory (" + s.store.dir +
                     ") runs one seed at a time; use --jobs 1, or drop the directory (each run "
                     "then gets a private one)");
  }
}

// A trace of a run on a reused store keeps that store next to it (<trace>.store): replay and
// shrink use it when it is there (sim/model/storage_tier.h).
std::string trace_store(const std::string& trace_path) {
  return trace_path + ".store";
}

void use_trace_store(sim::Scenario& s, const std::string& trace_path) {
  std::error_code ec;
  if (s.storage && !s.store.digest.empty() &&
      std::filesystem::is_directory(trace_store(trace_path), ec)) {
    s.store.dir = trace_store(trace_path);
  }
}

void save_trace_store(const std::filesystem::path& from, const std::string& trace_path) {
  const std::filesystem::path to = trace_store(trace_path);
  std::error_code ec;
  std::filesystem::remove_all(to, ec);
  std::filesystem::create_directories(to, ec);
  if (ec) throw InputError(to.string() + ": " + ec.message());
  sim::copy_store_pages(from, to);
}

// Writes the tree picture of a failing run beside its op trace: <trace stem>.tree.dot, and
// .tree.svg when Graphviz is installed. Returns the picture to open: the .svg when it was
// drawn, else the .dot ("" when nothing could be written).
std::string write_tree_beside(const std::string& trace_path, const std::string& dot) {
  std::string stem = trace_path;
  const std::string suffix = ".trace.jsonl";
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
    stem.resize(stem.size() - suffix.size());
  }
  const std::string path = stem + ".tree.dot";
  std::ofstream out(path);
  out << dot;
  if (!out) return "";
  std::string why;
  if (sim::dot_to_svg(dot, stem + ".tree.svg", &why)) return stem + ".tree.svg";
  return path;
}

// kvsim replay --tree-at: the tree after op N, as DOT or SVG, into --tree-out or a file named
// after the trace and the op.
void write_tree_at(const ReplayCommand& c, const sim::TreeCapture& tree) {
  if (!tree.at_dot()) {
    throw InputError("--tree-at: op " + std::to_string(*c.tree_at) +
                     " is past the run's last op (" + std::to_string(tree.ops_seen()) +
                     " ops applied)");
  }
  const std::string& dot = *tree.at_dot();
  std::string out = c.tree_out;
  if (out.empty()) {  // <trace name>.op<N>.tree.<format> in the current folder
    std::string stem = std::filesystem::path(c.trace).filename().string();
    const std::string suffix = ".trace.jsonl";
    if (stem.size() > suffix.size() &&
        stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
      stem.resize(stem.size() - suffix.size());
    }
    out = stem + ".op" + std::to_string(*c.tree_at) + ".tree." + c.tree_format;
  }
  if (c.tree_format == "svg") {
    std::string why;
    if (!sim::dot_to_svg(dot, out, &why)) throw InputError("--format svg: " + why);
  } else {
    std::ofstream f(out);
    f << dot;
    if (!f) throw InputError("--tree-out: " + out + ": cannot write");
  }
  std::fprintf(stderr, "kvsim: tree after op %llu: %s\n",
               static_cast<unsigned long long>(*c.tree_at), out.c_str());
}

}  // namespace

const char* exit_code_help() {
  return "Exit codes:\n"
         "  0  clean: no violation, and requests finished and were checked\n"
         "  1  a violation was found (the op trace is written; see its replay command)\n"
         "  2  bad input: a file, a flag or a resource limit (the message names it)\n"
         "  3  a replay does not reproduce its recording (the first diverging op is named)\n"
         "  4  vacuous: no violation, but no request finished or no model read was checked\n"
         "  5  out of memory despite the up-front estimate (lower the pools)\n"
         "  105-109  the command line itself (CLI11: bad value, missing or unknown flag or "
         "subcommand)\n";
}

int run_command(const RunCommand& c) {
  try {
    const uint64_t limit = memory_limit(c.memory_limit);
    sim::Scenario s = scenario_or_default(c.scenario);
    const sim::Target target = resolve_target(c.target);
    std::vector<sim::Arrival> given;
    uint64_t first_seed = c.seed != 0 ? c.seed : s.seed;
    if (!c.workload.empty()) {
      sim::AnyTrace t = sim::read_trace(c.workload);
      if (t.kind != "workload") throw InputError(c.workload + ": not a workload trace");
      // The trace's own scenario is the one it runs under; a scenario file must agree.
      if (!c.scenario.empty()) {
        const std::string diff =
            first_difference(sim::to_json(s), sim::to_json(t.workload.scenario));
        if (!diff.empty()) {
          throw InputError("--workload " + c.workload + ": its embedded scenario differs from " +
                           c.scenario + " in field " + diff +
                           "; drop the scenario argument to run the trace's own");
        }
      }
      // (For an imported SGLang dump: the deployment the dump recorded.)
      s = t.workload.scenario;
      if (c.seed == 0) first_seed = t.workload.seed;
      given = std::move(t.workload.arrivals);
    }
    const bool fidelity = sim::has_reported(given);
    if (c.full_every > 0) s.check.full_every = c.full_every;
    if (c.no_faults) s.faults.enabled = false;
    if (c.no_content) s.check.content = false;
    apply_storage_flags(c, s);
    constexpr uint64_t kMaxSeed = INT64_MAX;  // what a trace header can hold
    if (first_seed > kMaxSeed) {
      throw InputError("--seed: " + std::to_string(first_seed) + " is out of range [0, " +
                       std::to_string(kMaxSeed) + "]");
    }
    if (c.seeds - 1 > kMaxSeed - first_seed) {
      throw InputError("--seeds: " + std::to_string(c.seeds) + " seeds from --seed " +
                       std::to_string(first_seed) + " run past the largest seed " +
                       std::to_string(kMaxSeed));
    }
    if (!c.record.empty() && c.seeds != 1) {
      throw InputError("--record: records one run; drop --seeds or set it to 1");
    }
    if (!c.timeline.empty() && c.seeds != 1) {
      throw InputError("--timeline: draws one run; drop --seeds or set it to 1");
    }
    sim::check_memory(s, given.empty(), limit, scenario_source(s));
    check_writable(c.record, "--record");
    {
      // A full sanity check after every op walks every page: on a big pool that is slow.
      const int64_t pages = (s.cache.device_tokens + s.cache.host_tokens) / s.cache.page_size;
      if (s.check.full_every == 1 && pages > (int64_t{1} << 20)) {
        std::fprintf(stderr,
                     "kvsim: note: check.full_every 1 walks all %lld pool pages after every op; "
                     "this run will be slow (--full-every N, or check.full_every 0: amortized)\n",
                     static_cast<long long>(pages));
      }
    }
    const std::string trace_dir = c.failure_trace.empty() ? std::string(".") : c.failure_trace;
    check_folder(trace_dir, "--trace-dir");
    // With the op trace on standard output, the summaries go to standard error.
    FILE* report = c.record == "-" ? stderr : stdout;
    const bool tty = isatty(STDERR_FILENO) != 0;
    const sim::SeedRange seeds(first_seed, c.seeds,
                               c.shard.empty() ? sim::Shard{} : sim::parse_shard(c.shard));
    if (seeds.empty()) {
      throw InputError("--shard: " + c.shard + " holds none of the " + std::to_string(c.seeds) +
                       " seeds (use at most " + std::to_string(c.seeds) + " shards)");
    }
    const bool sweep = seeds.size() > 1 || !c.shard.empty();
    const bool show_progress = c.progress && sweep && !c.json && tty;
    // Not a terminal (or --json): a plain progress line every 10 s on stderr for long sweeps.
    const bool log_progress = c.progress && sweep && !show_progress;
    double last_logged = 0;
    uint64_t failures = 0;
    uint64_t vacuous = 0;
    uint64_t tried = 0;
    int64_t total_ops = 0;
    nlohmann::json first_failure;  // null until a seed fails
    nlohmann::json single_json;    // a single run's --json document
    std::string single_verdict;    // a single run's last text line
    // Wall time bounds the sweep and paces the progress line (a CLI concern); the simulated
    // runs never see it.
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    probes::Snapshot probe_total;  // code probes reached over the sweep
    // One seed's run on a worker. Recording every op costs memory and time, so a run records
    // only when asked to (--record); a failing run is run again, recording, for its trace (the
    // same seed gives the same ops: the second run must reproduce the first one's hash).
    struct SeedRun {
      sim::RunResult result;
      probes::Snapshot probes;  // this run's probe hits (counted on the worker's thread)
      std::vector<sim::Op> ops;
      std::vector<sim::OpCheck> checks;
      bool recorded = false;
      std::optional<std::string> failure_tree;  // DOT of the tree at the failure
    };
    SweepReport sweep_report(
        "kvsim run " + (c.scenario.empty() ? std::string() : c.scenario + " ") + "--seed " +
            std::to_string(first_seed) + " --seeds " + std::to_string(seeds.size()),
        s.name);
    const std::vector<sim::Arrival>* arrivals = given.empty() ? nullptr : &given;
    auto job = [&](uint64_t seed) {
      SeedRun out;
      probes::reset();  // this thread's counters
      // A reused store is changed by the run itself: a second run would start on another
      // store, so such a run records the first time.
      const bool record = !c.record.empty() || sim::run_changes_its_store(s);
      sim::RunRequest req{.scenario = &s,
                          .seed = seed,
                          .arrivals = arrivals,
                          .record = record ? &out.ops : nullptr,
                          .checks = record ? &out.checks : nullptr,
                          .target = target};
      sim::TimelineRecorder timeline;
      // Draws the tree when the run fails (written beside its op trace).
      sim::TreeCapture tree(std::nullopt, s.name + " seed " + std::to_string(seed),
                            c.timeline.empty() ? nullptr : &timeline);
      req.setup = [&](sim::Executor& e) {
        if (!c.timeline.empty()) timeline.attach(e);
        tree.attach(e);
      };
      bool progress_shown = false;
      if (!sweep && c.progress && tty) {
        // A long single run shows it is alive: ops and ticks, every few seconds.
        req.progress = [&, last = 0.0](int64_t n, int64_t tick) mutable {
          if (elapsed() - last < 2.0) return;
          last = elapsed();
          progress_shown = true;
          std::fprintf(stderr, "\r%s seed %llu: %lld ops, tick %lld, %.0f s", s.name.c_str(),
                       static_cast<unsigned long long>(seed), static_cast<long long>(n),
                       static_cast<long long>(tick), last);
          std::fflush(stderr);
        };
      }
      out.result = sim::run_scenario(req);
      if (progress_shown) std::fprintf(stderr, "\n");
      if (!c.timeline.empty()) timeline.write(c.timeline);  // its path is printed by consume
      out.failure_tree = tree.failure_dot();
      out.probes = probes::snapshot();
      out.recorded = record;
      if (!out.result.ok() && !record) {
        const sim::RunResult again = sim::run_scenario(sim::RunRequest{.scenario = &s,
                                                                       .seed = seed,
                                                                       .arrivals = arrivals,
                                                                       .record = &out.ops,
                                                                       .checks = &out.checks,
                                                                       .target = target});
        if (again.event_hash != out.result.event_hash) {
          throw InputError("seed " + std::to_string(seed) +
                           ": not deterministic: a second run gave event hash " +
                           sim::hex64(again.event_hash) + " after " +
                           sim::hex64(out.result.event_hash));
        }
        out.recorded = true;
      }
      return out;
    };
    auto consume = [&](uint64_t i, uint64_t seed, SeedRun& run) {
      const sim::RunResult& r = run.result;
      ++tried;
      probes::accumulate(probe_total, run.probes);
      const probes::Snapshot& probe_run = run.probes;
      total_ops += r.stats.ops;
      const bool is_vacuous = !sim::vacuous_reason(s, r).empty();
      if (is_vacuous) ++vacuous;
      if (!r.ok() && ++failures == 1) {
        first_failure = {{"seed", seed},
                         {"seeds_tried", tried},
                         {"ops", total_ops},
                         {"wall_s", elapsed()},
                         {"invariant", r.violation->invariant}};
      }
      std::string trace_path = c.record;
      if (!r.ok() && trace_path.empty()) {
        trace_path = unique_trace_path(trace_dir, s.name, seed, r.event_hash);
      }
      if (!trace_path.empty() && run.recorded) {
        sim::Scenario traced = s;
        if (!r.storage.start_digest.empty()) {  // a reused store: keep what the run started on
          traced.store.digest = r.storage.start_digest;
          save_trace_store(r.storage.start_snapshot->path(), trace_path);
        }
        sim::write_op_trace(trace_path, sim::OpTrace{.scenario = traced,
                                                     .seed = seed,
                                                     .target = r.target,
                                                     .ops = std::move(run.ops),
                                                     .event_hash = r.event_hash,
                                                     .violation = r.violation,
                                                     .ticks = r.ticks,
                                                     .faults_fired = r.faults_fired,
                                                     .checks = std::move(run.checks)});
      }
      std::string tree_path;
      if (!r.ok() && run.failure_tree && !trace_path.empty() && trace_path != "-") {
        tree_path = write_tree_beside(trace_path, *run.failure_tree);
      }
      if (!c.report.empty()) {
        nlohmann::json j = sim::summary_json(s, seed, r);
        j["trace"] = trace_path == "-" ? std::string() : trace_path;
        j["tree"] = tree_path;
        sweep_report.add(std::move(j));
      }
      if (c.json) {
        nlohmann::json j = sim::summary_json(s, seed, r);
        if (!trace_path.empty()) j["trace"] = trace_path;
        if (!tree_path.empty()) j["tree"] = tree_path;
        if (!c.timeline.empty()) j["timeline"] = c.timeline;
        nlohmann::json hit = nlohmann::json::object();
        for (const probes::Count& p : probe_run) {
          if (p.count > 0) hit[std::string(p.name)] = p.count;
        }
        j["probes_hit"] = std::move(hit);
        if (fidelity) j["fidelity"] = sim::fidelity_json(sim::compare_fidelity(given, r));
        // A single run is one document, printed once the probe report is known (below).
        if (sweep) {
          std::fprintf(report, "%s\n", j.dump().c_str());
        } else {
          single_json = std::move(j);
        }
      } else if (!sweep || !r.ok()) {
        if (show_progress) std::fprintf(stderr, "\n");
        std::fprintf(report, "%s", sim::summary_text(s, seed, r).c_str());
        if (fidelity && !sweep) {
          std::fprintf(report, "%s", sim::fidelity_text(sim::compare_fidelity(given, r)).c_str());
        }
        if (!trace_path.empty()) {
          std::fprintf(report, "  op trace: %s (replay: kvsim replay %s)\n", trace_path.c_str(),
                       trace_path.c_str());
        }
        if (!tree_path.empty()) {
          std::fprintf(report, "  tree at the failure: %s\n", tree_path.c_str());
        }
        if (!c.timeline.empty()) std::fprintf(report, "  timeline: %s\n", c.timeline.c_str());
        if (!sweep) single_verdict = run_verdict(s, r, trace_path);
      }
      std::fflush(report);
      if (show_progress) progress(i + 1, seeds.size(), failures);
      if (log_progress && elapsed() - last_logged >= 10.0) {
        last_logged = elapsed();
        progress_line(i + 1, seeds.size(), failures, last_logged);
      }
      if (!r.ok() && (c.stop_at_first || (c.max_failures > 0 && failures >= c.max_failures))) {
        if (show_progress) std::fprintf(stderr, "\n");
        return false;
      }
      if (c.time_budget_s > 0 && elapsed() > c.time_budget_s && i + 1 < seeds.size()) {
        if (show_progress) std::fprintf(stderr, "\n");
        return false;
      }
      return true;
    };
    sim::run_sweep<SeedRun>(seeds, c.jobs, job, consume);
    if (probe_total.empty()) probe_total = probes::snapshot();  // no run: every count is 0
    const int exit_code = failures > 0                    ? kExitViolation
                          : tried > 0 && vacuous == tried ? kExitVacuous
                                                          : kExitOk;
    std::string page;
    if (!c.report.empty()) page = sweep_report.write(c.report, probe_total, c.jobs, elapsed());
    if (c.json) {
      // One document per run; a sweep is JSON Lines: the per-seed lines above, then this one.
      const nlohmann::json probe_json = probe_report_json(probe_total, tried)["probe_report"];
      if (!sweep) {
        single_json["probe_report"] = probe_json;
        if (!page.empty()) single_json["report"] = page;
        std::fprintf(report, "%s\n", single_json.dump().c_str());
      } else {
        nlohmann::json summary = {{"scenario", s.name},
                                  {"first_seed", first_seed},
                                  {"seeds_tried", tried},
                                  {"ops", total_ops},
                                  {"failures", failures},
                                  {"vacuous", vacuous},
                                  {"jobs", c.jobs},
                                  {"wall_s", elapsed()},
                                  {"exit_code", exit_code},
                                  {"first_failure", first_failure},
                                  {"probe_report", probe_json}};
        if (!c.shard.empty()) summary["shard"] = c.shard;
        if (!page.empty()) summary["report"] = page;
        std::fprintf(report, "%s\n", nlohmann::json{{"sweep", summary}}.dump().c_str());
      }
      return exit_code;
    }
    std::fprintf(
        report, "%s",
        (c.probes ? probe_report_text(probe_total, tried) : probe_report_line(probe_total, tried))
            .c_str());
    if (!page.empty()) std::fprintf(report, "report: %s\n", page.c_str());
    if (!sweep) {
      std::fprintf(report, "%s", single_verdict.c_str());
      return exit_code;
    }
    std::string stopped;  // when a sweep stopped early (only with a stop flag)
    if (c.stop_at_first || c.max_failures > 0 || c.time_budget_s > 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "; stopped after %.1f s", elapsed());
      stopped = buf;
    }
    std::fprintf(report, "%s: %llu seeds from %llu", s.name.c_str(),
                 static_cast<unsigned long long>(tried),
                 static_cast<unsigned long long>(first_seed));
    if (!c.shard.empty()) {
      std::fprintf(report, " (shard %s of a sweep of %llu)", c.shard.c_str(),
                   static_cast<unsigned long long>(c.seeds));
    }
    std::fprintf(report, ": %llu ok, %llu with violations%s%s\n",
                 static_cast<unsigned long long>(tried - failures),
                 static_cast<unsigned long long>(failures),
                 vacuous == 0
                     ? ""
                     : ("; " + std::to_string(vacuous) + " of the clean runs were vacuous").c_str(),
                 stopped.c_str());
    if (failures > 0) {
      std::fprintf(report,
                   "verdict: VIOLATION in %llu of %llu seeds, the first seed %s with %s (exit 1)\n",
                   static_cast<unsigned long long>(failures),
                   static_cast<unsigned long long>(tried), first_failure["seed"].dump().c_str(),
                   first_failure["invariant"].get<std::string>().c_str());
    } else if (exit_code == kExitVacuous) {
      std::fprintf(report, "verdict: VACUOUS: no seed's run checked anything (exit 4)\n");
    } else {
      std::fprintf(report, "verdict: ok: no violation in %llu seeds (exit 0)\n",
                   static_cast<unsigned long long>(tried));
    }
    return exit_code;

  } catch (const InputError& e) {
    return input_error(e);
  }
}

int replay_command(const ReplayCommand& c) {
  try {
    // Calls recorded by the Python module (sim/trace/call_trace.h).
    if (sim::is_call_trace(c.trace)) {
      return sim::call_replay_command(c.trace, c.json, c.expect_clean);
    }
    const uint64_t limit = memory_limit(c.memory_limit);
    sim::AnyTrace t = sim::read_trace(c.trace);
    t.ops.target = resolve_target(c.target, t.ops.target);
    sim::TimelineRecorder timeline;
    if (c.tree_at && *c.tree_at == 0) {
      throw InputError(
          "--tree-at: ops are numbered from 1 (op N is the N-th op of the trace, "
          "the one a run summary's \"after op N\" names)");
    }
    // The capture counts from 0.
    const std::optional<size_t> capture_at =
        c.tree_at ? std::optional<size_t>(*c.tree_at - 1) : std::nullopt;
    sim::TreeCapture tree(capture_at, c.trace, c.timeline.empty() ? nullptr : &timeline);
    sim::ExecutorSetup setup;
    if (!c.timeline.empty() || c.tree_at) {
      setup = [&](sim::Executor& e) {
        if (!c.timeline.empty()) timeline.attach(e);
        if (c.tree_at) tree.attach(e);
      };
    }
    if (t.kind == "workload") {
      const sim::Scenario& s = t.workload.scenario;
      sim::check_memory(s, false, limit, c.trace + ":1 (scenario)");
      const sim::RunResult r = sim::run_scenario(sim::RunRequest{.scenario = &s,
                                                                 .seed = t.workload.seed,
                                                                 .arrivals = &t.workload.arrivals,
                                                                 .setup = setup,
                                                                 .target = t.ops.target});
      if (!c.timeline.empty()) timeline.write(c.timeline);
      if (c.tree_at) write_tree_at(c, tree);
      const bool fidelity = sim::has_reported(t.workload.arrivals);
      if (c.json) {
        nlohmann::json j = sim::summary_json(s, t.workload.seed, r);
        if (fidelity) {
          j["fidelity"] = sim::fidelity_json(sim::compare_fidelity(t.workload.arrivals, r));
        }
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%s", sim::summary_text(s, t.workload.seed, r).c_str());
        if (fidelity) {
          std::printf("%s",
                      sim::fidelity_text(sim::compare_fidelity(t.workload.arrivals, r)).c_str());
        }
      }
      if (!r.ok()) return kExitViolation;
      if (c.expect_clean) return kExitOk;
      return sim::vacuous_reason(s, r).empty() ? kExitOk : kExitVacuous;
    }
    use_trace_store(t.ops.scenario, c.trace);
    const sim::OpTrace& trace = t.ops;
    const sim::Scenario& s = trace.scenario;
    sim::check_trace_memory(trace, limit, c.trace + ":1");
    // Version 1 traces may hold ops that do not apply (shrinking kept them): they are
    // reported, not errors. From version 2 every op must apply and match its recording.
    // --expect-clean replays a regression trace on a changed (fixed) core: its recorded
    // outcomes need not hold there, so it replays leniently and only the verdict counts.
    const bool strict = trace.version >= 2 && !c.expect_clean;
    sim::ReplayReport rep = sim::replay_trace(
        trace, {.setup = setup, .stop_at_problem = strict, .check_chain = !c.expect_clean});
    if (!c.timeline.empty()) timeline.write(c.timeline);
    if (c.tree_at) write_tree_at(c, tree);
    // The faults are the recording's (their effects are in the ops): reported as recorded.
    if (trace.faults_fired) rep.result.faults_fired = *trace.faults_fired;
    const sim::RunResult& r = rep.result;
    const std::string end_at = c.trace + ":" + std::to_string(trace.end_line);
    // The first disagreement with the recording, as "<where>: <what>" (empty: none).
    std::string differs;
    bool bad_op = false;  // an op that cannot apply in a trace without a hash chain
    if (rep.problem && strict) {
      differs = sim::describe(trace, *rep.problem);
      bad_op = rep.problem->rejected && !rep.problem->expected;
    } else if (trace.declared_ops >= 0 &&
               trace.declared_ops != static_cast<int64_t>(trace.ops.size())) {
      differs = end_at + ": end: the end record says " + std::to_string(trace.declared_ops) +
                " ops but the trace holds " + std::to_string(trace.ops.size());
    } else if (trace.event_hash && *trace.event_hash != r.event_hash) {
      differs = end_at + ": end: event hash " + sim::hex64(r.event_hash) +
                " differs from the recorded " + sim::hex64(*trace.event_hash);
    } else if (trace.violation.has_value() != r.violation.has_value() ||
               (r.violation && r.violation->invariant != trace.violation->invariant)) {
      differs = end_at + ": end: the recording " +
                (trace.violation ? "failed with " + trace.violation->invariant
                                 : std::string("was clean")) +
                ", the replay " +
                (r.violation ? "fails with " + r.violation->invariant : std::string("is clean"));
    } else if (trace.ticks && *trace.ticks != r.ticks) {
      differs = end_at + ": end: the recording ends at tick " + std::to_string(*trace.ticks) +
                ", the replay at tick " + std::to_string(r.ticks);
    }
    if (bad_op) {
      std::fprintf(stderr, "kvsim: %s\n", differs.c_str());
      return kExitInput;
    }
    if (!differs.empty() && !c.expect_clean) std::fprintf(stderr, "kvsim: %s\n", differs.c_str());
    if (rep.rejected > 0 && !strict && !c.json) {
      std::fprintf(stderr, "kvsim: note: %lld ops of this trace did not apply (%s)\n",
                   static_cast<long long>(rep.rejected),
                   rep.problem ? sim::describe(trace, *rep.problem).c_str() : "");
    }
    if (c.json) {
      nlohmann::json j = sim::summary_json(s, trace.seed, r);
      if (trace.event_hash) j["recorded_event_hash"] = sim::hex64(*trace.event_hash);
      j["matches"] = differs.empty();
      if (!differs.empty()) j["differs"] = differs;
      if (rep.problem) j["first_problem"] = sim::problem_json(trace, *rep.problem);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s", sim::summary_text(s, trace.seed, r).c_str());
      const std::string recorded =
          trace.violation ? "violation " + trace.violation->invariant : std::string("clean run");
      if (c.expect_clean) {
        // A regression trace: what counts is the verdict on this core, not the recording's.
        std::printf("verdict: %s on this core (the recording: %s) (exit %d)\n",
                    r.ok() ? "clean" : ("VIOLATION of " + r.violation->invariant).c_str(),
                    recorded.c_str(), r.ok() ? kExitOk : kExitViolation);
      } else {
        std::printf("  replay %s the recording (%s)\n",
                    differs.empty() ? "matches" : "DIFFERS FROM", recorded.c_str());
      }
    }
    if (c.expect_clean) return r.ok() ? kExitOk : kExitViolation;
    if (!differs.empty()) return kExitDiffers;
    return r.ok() ? kExitOk : kExitViolation;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int gen_command(const GenCommand& c) {
  try {
    const uint64_t limit = memory_limit(c.memory_limit);
    sim::Scenario s = scenario_or_default(c.scenario);
    const uint64_t seed = c.seed != 0 ? c.seed : s.seed;
    if (seed > static_cast<uint64_t>(INT64_MAX)) {
      throw InputError("--seed: " + std::to_string(seed) + " is out of range [0, " +
                       std::to_string(INT64_MAX) + "]");
    }
    sim::check_memory(s, true, limit, scenario_source(s));
    check_writable(c.out, "--out");
    // Streamed: arrival by arrival into the file, prompts as recipes (segments).
    sim::WorkloadTraceWriter w(c.out, s, seed);
    std::unique_ptr<sim::ArrivalSource> source = sim::workload_source(s, seed);
    sim::Arrival a;
    while (source->next(a))
      w.add(a);
    w.close();
    std::fprintf(c.out == "-" ? stderr : stdout, "%s: %lld arrivals of scenario %s, seed %llu\n",
                 c.out.c_str(), static_cast<long long>(w.count()), s.name.c_str(),
                 static_cast<unsigned long long>(seed));
    return kExitOk;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int import_mooncake_command(const ImportMooncakeCommand& c) {
  try {
    const uint64_t limit = memory_limit(c.memory_limit);
    sim::Scenario s;
    std::string source;
    if (c.scenario.empty()) {
      s = sim::default_scenario();
      s.name = "mooncake";
      s.description = "Imported Mooncake trace";
      s.cache.page_size = static_cast<int32_t>(c.block_tokens);
      s.cache.layer_count = 1;
      s.cache.item_bytes = 8;
      s.cache.device_tokens = c.block_tokens * 20000;
      s.cache.host_tokens = c.block_tokens * 40000;
      // A replay of the trace, scheduled like scenarios/mooncake_synthetic.json (the reference
      // block LRU): one request at a time, whole prompts in one chunk, no fault injection, the
      // O(tree) sanity walk amortized. The default scheduler would chunk each ~15 K-token prompt
      // and run millions of ops; this runs the 3,993-request trace in seconds.
      s.scheduler.max_running = 1;
      s.scheduler.chunk_tokens = 1'000'000'000;
      s.scheduler.decode_reserve_tokens = 0;
      s.scheduler.liveness_ticks = 100'000'000;
      s.scheduler.max_ticks = 100'000'000;
      s.faults.enabled = false;
      s.check.full_every = 0;
      source = "the default import scenario for --block-tokens " + std::to_string(c.block_tokens);
    } else {
      s = sim::load_scenario(c.scenario);
      source = c.scenario;
    }
    s.workload.kind = sim::WorkloadKind::kUniform;  // the trace carries the arrivals itself
    s.workload.trace_path.clear();
    // Everything is checked before anything big is allocated or written: the scenario as
    // `kvsim run --workload` will read it back from the header (field ranges included, e.g.
    // a --block-tokens past cache.page_size's bound), then the output file.
    sim::parse_scenario(sim::to_json(s), source, sim::ScenarioUse::kReplay);
    check_writable(c.out, "--out");
    const std::vector<sim::MooncakeRecord> records =
        sim::read_mooncake(c.in, c.block_tokens, c.limit);
    s.workload.requests = static_cast<int64_t>(records.size());
    sim::check_memory(s, false, limit, source);
    if (limit > sim::default_memory_limit()) {
      // A --memory-limit above the default lets the import through; `run` needs it too.
      try {
        sim::check_memory(s, false, sim::default_memory_limit(), source);
      } catch (const InputError&) {
        std::fprintf(stderr,
                     "kvsim: note: %s needs more memory than kvsim's default limit (half the "
                     "physical memory): run the workload with --memory-limit %s too\n",
                     source.c_str(), c.memory_limit.c_str());
      }
    }
    uint64_t tokens = 0;
    for (const sim::MooncakeRecord& rec : records)
      tokens += static_cast<uint64_t>(rec.input_length) + static_cast<uint64_t>(c.block_tokens);
    // A token costs 4 bytes in the prompt and some 40 more as JSON on its way to the file.
    sim::check_token_memory(tokens, 48, limit, c.in, "input_length");
    std::vector<sim::Arrival> arrivals =
        sim::import_mooncake(c.in, c.block_tokens, c.ms_per_tick, c.limit);
    // The run stops at scheduler.max_ticks: the trace's last arrival must come before it, with
    // the same allowance after it that the default gives a run from tick 0. The default import
    // scenario is sized to the trace; a given scenario is the user's, so it is refused here
    // rather than by `kvsim run` later.
    uint64_t last_tick = 0;
    for (const sim::Arrival& a : arrivals)
      last_tick = std::max(last_tick, a.tick);
    constexpr int64_t kMaxTicks = int64_t{1} << 40;  // scheduler.max_ticks' upper bound
    if (last_tick >= static_cast<uint64_t>(s.scheduler.max_ticks)) {
      if (!c.scenario.empty()) {
        throw InputError(c.scenario + ": field scheduler.max_ticks: " +
                         std::to_string(s.scheduler.max_ticks) + " ends the run before " + c.in +
                         "'s last arrival at tick " + std::to_string(last_tick) +
                         "; raise it above that (or --ms-per-tick, to make ticks longer)");
      }
      if (last_tick >=
          static_cast<uint64_t>(kMaxTicks) - static_cast<uint64_t>(s.scheduler.max_ticks)) {
        throw InputError(c.in + ": its last arrival at tick " + std::to_string(last_tick) +
                         " is past what a run can reach (2^40 ticks); raise --ms-per-tick");
      }
      s.scheduler.max_ticks += static_cast<int64_t>(last_tick);
    }
    sim::write_workload_trace(
        c.out, sim::WorkloadTrace{.scenario = s, .seed = s.seed, .arrivals = std::move(arrivals)});
    std::fprintf(c.out == "-" ? stderr : stdout, "%s: %lld requests imported from %s\n",
                 c.out.c_str(), static_cast<long long>(s.workload.requests), c.in.c_str());
    return kExitOk;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int shrink_command(const ShrinkCommand& c) {
  try {
    if (sim::is_call_trace(c.trace)) {
      return sim::call_shrink_command(c.trace, c.out, c.max_replays, c.json);
    }
    const uint64_t limit = memory_limit(c.memory_limit);
    sim::AnyTrace t = sim::read_trace(c.trace);
    if (t.kind != "ops") throw InputError(c.trace + ": shrink needs an op trace");
    t.ops.target = resolve_target(c.target, t.ops.target);
    const std::string recorded_dir = t.ops.scenario.store.dir;
    use_trace_store(t.ops.scenario, c.trace);
    const std::string store_used = t.ops.scenario.store.dir;
    sim::check_trace_memory(t.ops, limit, c.trace + ":1");
    check_writable(c.out, "--out");
    sim::ShrinkResult r = sim::shrink_trace(t.ops, {.max_replays = c.max_replays});
    if (!r.reproduced) {
      std::fprintf(stderr, "kvsim: %s: the trace does not fail when replayed; nothing to shrink\n",
                   c.trace.c_str());
      return kExitViolation;
    }
    if (store_used != recorded_dir && c.out != "-") {  // the shrunk trace keeps its store
      save_trace_store(store_used, c.out);
      r.trace.scenario.store.dir = recorded_dir;
    }
    sim::write_op_trace(c.out, r.trace);
    FILE* report = c.out == "-" ? stderr : stdout;
    if (c.json) {
      std::fprintf(report, "%s\n",
                   nlohmann::json{{"original_ops", r.original_ops},
                                  {"shrunk_ops", r.trace.ops.size()},
                                  {"replays", r.replays},
                                  {"invariant", r.trace.violation->invariant},
                                  {"detail", r.trace.violation->detail},
                                  {"out", c.out}}
                       .dump()
                       .c_str());
    } else {
      std::fprintf(report,
                   "shrunk %zu ops to %zu in %zu replays; still fails with %s: %s\n"
                   "written to %s (replay: kvsim replay %s)\n",
                   r.original_ops, r.trace.ops.size(), r.replays,
                   r.trace.violation->invariant.c_str(), r.trace.violation->detail.c_str(),
                   c.out.c_str(), c.out.c_str());
    }
    return kExitOk;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

}  // namespace kvsim::tools
