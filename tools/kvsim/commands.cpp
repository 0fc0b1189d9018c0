#include "tools/kvsim/commands.h"

#include <unistd.h>

#include <chrono>

#include <cstdio>
#include <string>

#include "sim/json_reader.h"
#include "sim/mooncake.h"
#include "sim/runner.h"
#include "sim/shrink.h"
#include "sim/sweep.h"

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
    uint64_t first_seed = c.seed != 0 ? c.seed : s.seed;
    if (!c.workload.empty()) {
      sim::AnyTrace t = sim::read_trace(c.workload);
      if (t.kind != "workload") throw InputError(c.workload + ": not a workload trace");
      given = std::move(t.workload.arrivals);
    }
    if (!c.record.empty() && c.seeds != 1) {
      throw InputError("--record: records one run; drop --seeds or set it to 1");
    }
    const sim::SeedRange seeds(first_seed, c.seeds,
                               c.shard.empty() ? sim::Shard{} : sim::parse_shard(c.shard));
    if (seeds.empty()) {
      throw InputError("--shard: " + c.shard + " holds none of the " + std::to_string(c.seeds) +
                       " seeds (use at most " + std::to_string(c.seeds) + " shards)");
    }
    const bool sweep = seeds.size() > 1 || !c.shard.empty();
    const bool show_progress = c.progress && sweep && !c.json && isatty(STDERR_FILENO);
    uint64_t failures = 0;
    uint64_t tried = 0;
    int64_t total_ops = 0;
    nlohmann::json first_failure;  // null until a seed fails
    // Wall time bounds the sweep (a CLI concern); the simulated runs never see it.
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    // One seed's run on a worker. Recording every op costs memory and time, so a run records
    // only when asked to (--record); a failing run is run again, recording, for its trace (the
    // same seed gives the same ops: the second run must reproduce the first one's hash).
    struct SeedRun {
      sim::RunResult result;
      std::vector<sim::Op> ops;
      bool recorded = false;
    };
    const std::vector<sim::Arrival>* arrivals = given.empty() ? nullptr : &given;
    auto job = [&](uint64_t seed) {
      SeedRun out;
      const bool record = !c.record.empty();
      out.result = sim::run_scenario(sim::RunRequest{.scenario = &s,
                                                     .seed = seed,
                                                     .arrivals = arrivals,
                                                     .record = record ? &out.ops : nullptr});
      out.recorded = record;
      if (!out.result.ok() && !record) {
        const sim::RunResult again = sim::run_scenario(sim::RunRequest{
            .scenario = &s, .seed = seed, .arrivals = arrivals, .record = &out.ops});
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
      total_ops += r.stats.ops;
      if (!r.ok() && ++failures == 1) {
        first_failure = {{"seed", seed},
                         {"seeds_tried", tried},
                         {"ops", total_ops},
                         {"wall_s", elapsed()},
                         {"invariant", r.violation->invariant}};
      }
      if (c.json) {
        std::printf("%s\n", sim::summary_json(s, seed, r).dump().c_str());
      } else if (!sweep || !r.ok()) {
        if (show_progress) std::fprintf(stderr, "\n");
        std::printf("%s", sim::summary_text(s, seed, r).c_str());
      }
      std::string trace_path = c.record;
      if (!r.ok() && trace_path.empty()) {
        trace_path = (c.failure_trace.empty() ? std::string(".") : c.failure_trace) + "/kvsim-" +
                     s.name + "-seed" + std::to_string(seed) + ".trace.jsonl";
      }
      if (!trace_path.empty() && run.recorded) {
        sim::write_op_trace(trace_path, sim::OpTrace{.scenario = s,
                                                     .seed = seed,
                                                     .ops = std::move(run.ops),
                                                     .event_hash = r.event_hash,
                                                     .violation = r.violation});
        if (!c.json) {
          std::printf("  op trace: %s (replay: kvsim replay %s)\n", trace_path.c_str(),
                      trace_path.c_str());
        }
      }
      std::fflush(stdout);
      if (show_progress) progress(i + 1, seeds.size(), failures);
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
    if (sweep && !c.json) {
      std::printf("%s: %llu seeds from %llu", s.name.c_str(),
                  static_cast<unsigned long long>(tried),
                  static_cast<unsigned long long>(first_seed));
      if (!c.shard.empty()) {
        std::printf(" (shard %s of a sweep of %llu)", c.shard.c_str(),
                    static_cast<unsigned long long>(c.seeds));
      }
      std::printf(": %llu ok, %llu with violations\n",
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
    if (c.json) {
      nlohmann::json j = sim::summary_json(*s, seed, r);
      if (t.kind == "ops" && t.ops.event_hash) {
        j["recorded_event_hash"] = sim::hex64(*t.ops.event_hash);
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s", sim::summary_text(*s, seed, r).c_str());
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
    // Streamed: arrival by arrival into the file, prompts as recipes (segments).
    sim::WorkloadTraceWriter w(c.out, s, seed);
    std::unique_ptr<sim::ArrivalSource> source = sim::workload_source(s, seed);
    sim::Arrival a;
    while (source->next(a))
      w.add(a);
    w.close();
    std::printf("%s: %lld arrivals of scenario %s, seed %llu\n", c.out.c_str(),
                static_cast<long long>(w.count()), s.name.c_str(),
                static_cast<unsigned long long>(seed));
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
