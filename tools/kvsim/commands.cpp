#include "tools/kvsim/commands.h"

#include <unistd.h>

#include <chrono>

#include <cstdio>
#include <string>

#include "sim/fidelity.h"
#include "sim/json_reader.h"
#include "sim/mooncake.h"
#include "sim/runner.h"
#include "sim/shrink.h"

namespace kvsim::tools {
namespace {

using sim::InputError;

int input_error(const std::exception& e) {
  std::fprintf(stderr, "kvsim: %s\n", e.what());
  return 2;
}

sim::Scenario scenario_or_default(const std::string& path) {
  return path.empty() ? sim::default_scenario() : sim::load_scenario(path);
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

}  // namespace

int run_command(const RunCommand& c) {
  try {
    sim::Scenario s = scenario_or_default(c.scenario);
    if (c.full_every > 0) s.check.full_every = c.full_every;
    if (c.no_faults) s.faults.enabled = false;
    if (c.no_content) s.check.content = false;
    std::vector<sim::Arrival> given;
    if (!c.workload.empty()) {
      sim::AnyTrace t = sim::read_trace(c.workload);
      if (t.kind != "workload") throw InputError(c.workload + ": not a workload trace");
      given = std::move(t.workload.arrivals);
      // Without a scenario file, the workload runs on the configuration its header embeds
      // (for an imported SGLang dump: the deployment the dump recorded).
      if (c.scenario.empty()) {
        s = t.workload.scenario;
        if (c.full_every > 0) s.check.full_every = c.full_every;
        if (c.no_faults) s.faults.enabled = false;
        if (c.no_content) s.check.content = false;
      }
    }
    const uint64_t first_seed = c.seed != 0 ? c.seed : s.seed;
    const bool fidelity = sim::has_reported(given);
    if (!c.record.empty() && c.seeds != 1) {
      throw InputError("--record: records one run; drop --seeds or set it to 1");
    }
    const bool show_progress = c.progress && c.seeds > 1 && !c.json && isatty(STDERR_FILENO);
    uint64_t failures = 0;
    uint64_t tried = 0;
    int64_t total_ops = 0;
    nlohmann::json first_failure;  // null until a seed fails
    // Wall time bounds the sweep (a CLI concern); the simulated runs never see it.
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (uint64_t i = 0; i < c.seeds; ++i) {
      if (c.time_budget_s > 0 && elapsed() > c.time_budget_s) break;
      ++tried;
      const uint64_t seed = first_seed + i;
      std::vector<sim::Op> ops;
      sim::RunRequest req{.scenario = &s,
                          .seed = seed,
                          .arrivals = given.empty() ? nullptr : &given,
                          .record = &ops};
      const sim::RunResult r = sim::run_scenario(req);
      total_ops += r.stats.ops;
      if (!r.ok() && ++failures == 1) {
        first_failure = {{"seed", seed},
                         {"seeds_tried", tried},
                         {"ops", total_ops},
                         {"wall_s", elapsed()},
                         {"invariant", r.violation->invariant}};
      }
      if (c.json) {
        nlohmann::json j = sim::summary_json(s, seed, r);
        if (fidelity) j["fidelity"] = sim::fidelity_json(sim::compare_fidelity(given, r));
        std::printf("%s\n", j.dump().c_str());
      } else if (c.seeds == 1 || !r.ok()) {
        if (show_progress) std::fprintf(stderr, "\n");
        std::printf("%s", sim::summary_text(s, seed, r).c_str());
        if (fidelity && c.seeds == 1) {
          std::printf("%s", sim::fidelity_text(sim::compare_fidelity(given, r)).c_str());
        }
      }
      std::string trace_path = c.record;
      if (!r.ok() && trace_path.empty()) {
        trace_path = (c.failure_trace.empty() ? std::string(".") : c.failure_trace) + "/kvsim-" +
                     s.name + "-seed" + std::to_string(seed) + ".trace.jsonl";
      }
      if (!trace_path.empty()) {
        sim::write_op_trace(trace_path, sim::OpTrace{.scenario = s,
                                                     .seed = seed,
                                                     .ops = ops,
                                                     .event_hash = r.event_hash,
                                                     .violation = r.violation});
        if (!c.json) {
          std::printf("  op trace: %s (replay: kvsim replay %s)\n", trace_path.c_str(),
                      trace_path.c_str());
        }
      }
      if (show_progress) progress(i + 1, c.seeds, failures);
      if (!r.ok() && (c.stop_at_first || (c.max_failures > 0 && failures >= c.max_failures))) {
        if (show_progress) std::fprintf(stderr, "\n");
        break;
      }
    }
    if (c.stop_at_first || c.max_failures > 0 || c.time_budget_s > 0) {
      nlohmann::json summary = {{"scenario", s.name},
                                {"seeds_tried", tried},
                                {"ops", total_ops},
                                {"failures", failures},
                                {"wall_s", elapsed()}};
      summary["first_failure"] = first_failure;
      const nlohmann::json hunt = {{"hunt", summary}};
      std::printf("%s\n", hunt.dump().c_str());
    }
    if (c.seeds > 1 && !c.json) {
      std::printf("%s: %llu seeds from %llu: %llu ok, %llu with violations\n", s.name.c_str(),
                  static_cast<unsigned long long>(tried),
                  static_cast<unsigned long long>(first_seed),
                  static_cast<unsigned long long>(tried - failures),
                  static_cast<unsigned long long>(failures));
    }
    return failures == 0 ? 0 : 1;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int replay_command(const ReplayCommand& c) {
  try {
    sim::AnyTrace t = sim::read_trace(c.trace);
    sim::RunResult r;
    const sim::Scenario* s = nullptr;
    uint64_t seed = 0;
    if (t.kind == "workload") {
      s = &t.workload.scenario;
      seed = t.workload.seed;
      r = sim::run_scenario(
          sim::RunRequest{.scenario = s, .seed = seed, .arrivals = &t.workload.arrivals});
    } else {
      s = &t.ops.scenario;
      seed = t.ops.seed;
      r = sim::replay_ops(t.ops);
    }
    const bool fidelity = t.kind == "workload" && sim::has_reported(t.workload.arrivals);
    if (c.json) {
      nlohmann::json j = sim::summary_json(*s, seed, r);
      if (t.kind == "ops" && t.ops.event_hash) {
        j["recorded_event_hash"] = sim::hex64(*t.ops.event_hash);
      }
      if (fidelity)
        j["fidelity"] = sim::fidelity_json(sim::compare_fidelity(t.workload.arrivals, r));
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s", sim::summary_text(*s, seed, r).c_str());
      if (fidelity) {
        std::printf("%s",
                    sim::fidelity_text(sim::compare_fidelity(t.workload.arrivals, r)).c_str());
      }
    }
    if (c.expect_clean) return r.ok() ? 0 : 1;
    if (t.kind == "ops") {
      const bool same_hash = !t.ops.event_hash || *t.ops.event_hash == r.event_hash;
      const bool same_violation =
          t.ops.violation.has_value() == r.violation.has_value() &&
          (!r.violation || r.violation->invariant == t.ops.violation->invariant);
      if (!c.json) {
        std::printf(
            "  replay %s the recording (%s)\n",
            same_hash && same_violation ? "matches" : "DIFFERS FROM",
            t.ops.violation ? ("violation " + t.ops.violation->invariant).c_str() : "clean run");
      }
      if (!same_hash || !same_violation) return 3;
    }
    return r.ok() ? 0 : 1;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int gen_command(const GenCommand& c) {
  try {
    sim::Scenario s = scenario_or_default(c.scenario);
    const uint64_t seed = c.seed != 0 ? c.seed : s.seed;
    sim::WorkloadTrace t{.scenario = s, .seed = seed, .arrivals = sim::generate_workload(s, seed)};
    sim::write_workload_trace(c.out, t);
    std::printf("%s: %zu arrivals of scenario %s, seed %llu\n", c.out.c_str(), t.arrivals.size(),
                s.name.c_str(), static_cast<unsigned long long>(seed));
    return 0;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int import_mooncake_command(const ImportMooncakeCommand& c) {
  try {
    sim::Scenario s;
    if (c.scenario.empty()) {
      s = sim::default_scenario();
      s.name = "mooncake";
      s.description = "Imported Mooncake trace";
      s.cache.page_size = static_cast<int32_t>(c.block_tokens);
      s.cache.layer_count = 1;
      s.cache.item_bytes = 8;
      s.cache.device_tokens = c.block_tokens * 20000;
      s.cache.host_tokens = c.block_tokens * 40000;
    } else {
      s = sim::load_scenario(c.scenario);
    }
    std::vector<sim::Arrival> arrivals =
        sim::import_mooncake(c.in, c.block_tokens, c.ms_per_tick, c.limit);
    s.workload.kind = sim::WorkloadKind::kUniform;  // the trace carries the arrivals itself
    s.workload.requests = static_cast<int64_t>(arrivals.size());
    sim::write_workload_trace(
        c.out, sim::WorkloadTrace{.scenario = s, .seed = s.seed, .arrivals = std::move(arrivals)});
    std::printf("%s: %lld requests imported from %s\n", c.out.c_str(),
                static_cast<long long>(s.workload.requests), c.in.c_str());
    return 0;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

int shrink_command(const ShrinkCommand& c) {
  try {
    sim::AnyTrace t = sim::read_trace(c.trace);
    if (t.kind != "ops") throw InputError(c.trace + ": shrink needs an op trace");
    const sim::ShrinkResult r = sim::shrink_trace(t.ops, {.max_replays = c.max_replays});
    if (!r.reproduced) {
      std::fprintf(stderr, "kvsim: %s: the trace does not fail when replayed; nothing to shrink\n",
                   c.trace.c_str());
      return 1;
    }
    sim::write_op_trace(c.out, r.trace);
    if (c.json) {
      std::printf("%s\n", nlohmann::json{{"original_ops", r.original_ops},
                                         {"shrunk_ops", r.trace.ops.size()},
                                         {"replays", r.replays},
                                         {"invariant", r.trace.violation->invariant},
                                         {"detail", r.trace.violation->detail},
                                         {"out", c.out}}
                              .dump()
                              .c_str());
    } else {
      std::printf(
          "shrunk %zu ops to %zu in %zu replays; still fails with %s: %s\n"
          "written to %s (replay: kvsim replay %s)\n",
          r.original_ops, r.trace.ops.size(), r.replays, r.trace.violation->invariant.c_str(),
          r.trace.violation->detail.c_str(), c.out.c_str(), c.out.c_str());
    }
    return 0;
  } catch (const InputError& e) {
    return input_error(e);
  }
}

}  // namespace kvsim::tools
