// kvsim: the command line. `kvsim run` runs the built-in default job and prints its summary.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/smoke_run.h"

namespace {

void print_text(const kvsim::sim::SmokeSummary& s, uint64_t seed) {
  std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed), s.ok ? "ok" : "VIOLATION");
  if (!s.ok)
    std::printf("  violation: %s (step %lld)\n", s.violation.c_str(),
                static_cast<long long>(s.step));
  std::printf("  requests %lld, steps %lld, prompt tokens %lld\n",
              static_cast<long long>(s.requests_done), static_cast<long long>(s.step),
              static_cast<long long>(s.prompt_tokens));
  std::printf("  device hits %lld, host hits %lld, loaded back %lld, evicted %lld tokens\n",
              static_cast<long long>(s.device_hit_tokens),
              static_cast<long long>(s.host_hit_tokens), static_cast<long long>(s.load_back_tokens),
              static_cast<long long>(s.evicted_device_tokens));
  std::printf("  event log hash %016llx\n", static_cast<unsigned long long>(s.event_log_hash));
}

nlohmann::json to_json(const kvsim::sim::SmokeSummary& s, uint64_t seed) {
  return {{"seed", seed},
          {"ok", s.ok},
          {"violation", s.violation},
          {"steps", s.step},
          {"requests", s.requests_done},
          {"prompt_tokens", s.prompt_tokens},
          {"device_hit_tokens", s.device_hit_tokens},
          {"host_hit_tokens", s.host_hit_tokens},
          {"load_back_tokens", s.load_back_tokens},
          {"evicted_device_tokens", s.evicted_device_tokens},
          {"event_log_hash", s.event_log_hash}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvsim: a hierarchical KV-cache core and its deterministic test harness"};
  app.require_subcommand(1);
  CLI::App* run = app.add_subcommand(
      "run",
      "Run the built-in default scenario (a seeded workload through the real core, "
      "checking every invariant after every step) and print its summary");
  kvsim::sim::SmokeOptions options = kvsim::sim::default_smoke_options();
  uint64_t seeds = 1;
  bool json = false;
  run->add_option("--seed", options.seed, "The run's seed")->capture_default_str();
  run->add_option("--seeds", seeds, "Sweep this many seeds, starting at --seed")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}))
      ->capture_default_str();
  run->add_option("--requests", options.requests, "Requests per run")
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
      ->capture_default_str();
  run->add_flag("--json", json, "Print one JSON summary per seed");
  CLI11_PARSE(app, argc, argv);

  int failures = 0;
  for (uint64_t i = 0; i < seeds; ++i) {
    kvsim::sim::SmokeOptions o = options;
    o.seed = options.seed + i;
    const kvsim::sim::SmokeSummary s = kvsim::sim::run_smoke(o);
    if (json) {
      std::printf("%s\n", to_json(s, o.seed).dump().c_str());
    } else {
      print_text(s, o.seed);
    }
    failures += s.ok ? 0 : 1;
  }
  if (seeds > 1 && !json) {
    std::printf("%llu seeds: %llu ok, %d with violations\n", static_cast<unsigned long long>(seeds),
                static_cast<unsigned long long>(seeds - static_cast<uint64_t>(failures)), failures);
  }
  return failures == 0 ? 0 : 1;
}
