// Simulator throughput by tree size: ops per second of the default scenario with every
// invariant on (O(1) checks after every op, the full sanity walk amortized: full_every = 0),
// as the device pool — and with it the radix tree — grows. Per-op cost should stay flat.
//
//   ./build/default/bench/kvsim_sim_bench
#include <benchmark/benchmark.h>

#include "sim/campaign/runner.h"

namespace {

void BM_DefaultScenarioOps(benchmark::State& state) {
  kvsim::sim::Scenario s = kvsim::sim::default_scenario();
  s.cache.device_tokens = state.range(0);
  s.cache.host_tokens = 2 * state.range(0);
  s.check.full_every = 0;  // amortized full walk
  // More requests and more sessions for bigger pools, so the tree fills the pool.
  s.workload.requests = state.range(0) / 4;
  s.workload.sessions = std::max<int64_t>(8, state.range(0) / 256);
  s.workload.system_prompts = std::max<int64_t>(4, state.range(0) / 512);
  int64_t ops = 0;
  int64_t nodes = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    const kvsim::sim::RunResult r =
        kvsim::sim::run_scenario(kvsim::sim::RunRequest{.scenario = &s, .seed = seed++});
    if (!r.ok()) state.SkipWithError(("violation: " + r.violation->invariant).c_str());
    ops += r.stats.ops;
    nodes = std::max(nodes, r.stats.max_tree_nodes);
  }
  state.counters["tree_nodes"] = static_cast<double>(nodes);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
  state.counters["ops_per_run"] =
      static_cast<double>(ops) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DefaultScenarioOps)
    ->Arg(1024)
    ->Arg(4096)
    ->Arg(16384)
    ->Arg(65536)
    ->Unit(benchmark::kMillisecond);

}  // namespace
