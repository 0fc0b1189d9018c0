// sim_fuzzer: libFuzzer bytes → scenario knobs + a seed → one whole simulator run.
//
// The bytes choose what a swarm test would randomize (TigerBeetle's options_swarm): page size,
// pool sizes, layers, SWA and Mamba components, write and eviction policy, host layout, storage
// and prefetch policy, PD mode with a sparse index buffer, fault-site and fire probabilities,
// max_running, chunk size, the workload kind and its shape (at most kRequestsMax requests), and
// the run's seed. The scenario is written as a scenario file's JSON and parsed, so what runs is
// exactly what a trace header replays; the device pool is sized from the workload so every
// request fits (the one constraint the validator enforces). Then sim::run_scenario runs the
// scheduler to the end, invariants checked after every op and quiescence at the end.
//
// Property: the run ends without a violation. A violation writes the recorded op trace
// (fuzz_support.h) and aborts.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/common/assert.h"
#include "fuzz/fuzz_support.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"
#include "sim/config/scenario.h"
#include "sim/workload/workload.h"

namespace kvsim::fuzz {
namespace {

constexpr int64_t kRequestsMax = 30;

template <typename T, size_t N>
T pick(FuzzedDataProvider& in, const T (&choices)[N]) {
  return choices[in.ConsumeIntegralInRange<size_t>(0, N - 1)];
}

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

nlohmann::json workload_json(FuzzedDataProvider& in, int64_t* largest) {
  static const char* const kKinds[] = {"mixed", "shared_prompt", "multi_turn", "agentic",
                                       "uniform"};
  static const double kRates[] = {0.25, 0.5, 1.0, 2.0, 4.0};
  const int64_t prompt_min = in.ConsumeIntegralInRange<int64_t>(1, 24);
  const int64_t prompt_max = prompt_min + in.ConsumeIntegralInRange<int64_t>(0, 24);
  const int64_t output_min = in.ConsumeIntegralInRange<int64_t>(1, 8);
  const int64_t output_max = output_min + in.ConsumeIntegralInRange<int64_t>(0, 12);
  const int64_t system_prompt_tokens = in.ConsumeIntegralInRange<int64_t>(1, 40);
  // What scenario.cpp validate() requires of the device pool, and — known finding F1
  // (fuzz/findings/README.md) — what an agentic session really reaches: a history of up to
  // 4 × prompt_max plus prompt_max / 2 + 1 fresh tokens, whatever the system prompt. Sizing the
  // pool for the smaller bound re-finds that livelock within a minute; KVSIM_FUZZ_STRICT=1
  // does, and the mask goes with the fix.
  *largest = system_prompt_tokens + prompt_max * 4 + output_max;
  if (!strict()) *largest = std::max(*largest, prompt_max * 4 + prompt_max / 2 + 1 + output_max);
  return {{"kind", pick(in, kKinds)},
          {"requests", in.ConsumeIntegralInRange<int64_t>(1, kRequestsMax)},
          {"arrival_rate", pick(in, kRates)},
          {"prompt_min", prompt_min},
          {"prompt_max", prompt_max},
          {"output_min", output_min},
          {"output_max", output_max},
          {"system_prompts", in.ConsumeIntegralInRange<int64_t>(1, 4)},
          {"system_prompt_tokens", system_prompt_tokens},
          {"sessions", in.ConsumeIntegralInRange<int64_t>(1, 6)},
          {"namespaces", in.ConsumeIntegralInRange<int64_t>(1, 2)}};
}

// The scenario file the bytes describe (always valid by construction; the parser checks).
nlohmann::json scenario_json(FuzzedDataProvider& in) {
  static const int64_t kPages[] = {1, 2, 4, 4, 8, 16};
  static const char* const kWrite[] = {"write_through", "write_through_selective", "write_back"};
  static const char* const kStop[] = {"best_effort", "wait_complete", "timeout"};
  int64_t largest = 0;
  nlohmann::json workload = workload_json(in, &largest);
  const int64_t page = pick(in, kPages);
  const int64_t max_running = in.ConsumeIntegralInRange<int64_t>(1, 8);
  // Device: the largest request plus up to 24 pages of slack; host: from a quarter to twice it.
  const int64_t device = round_up(largest, page) + page * in.ConsumeIntegralInRange<int64_t>(0, 24);
  const int64_t host =
      std::max(page, round_up(device * in.ConsumeIntegralInRange<int64_t>(1, 8) / 4, page));
  // 0-1 none, 2 SWA, 3 Mamba, 4 both. Known finding F4 (fuzz/findings/README.md): the hybrid
  // (SWA + Mamba) under pressure with long shared prefixes thrashes — retract and re-admit
  // forever — so unless KVSIM_FUZZ_STRICT=1, 4 means SWA alone; the mask goes with the fix.
  const uint8_t component = in.ConsumeIntegralInRange<uint8_t>(0, 4);
  const bool swa = component == 2 || component == 4;
  const bool mamba = component == 3 || (component == 4 && strict());
  const bool pd = !swa && !mamba && in.ConsumeIntegralInRange<uint8_t>(0, 3) == 0;
  const bool storage = !pd && in.ConsumeBool();
  // Storage sits below the host tier: it needs hierarchical (the byte is consumed either way).
  const bool hierarchical = in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0 || storage;
  nlohmann::json cache = {{"page_size", page},
                          {"hierarchical", hierarchical},
                          {"layer_count", in.ConsumeIntegralInRange<int64_t>(1, 3)},
                          {"item_bytes", 8 * in.ConsumeIntegralInRange<int64_t>(1, 2)},
                          {"device_tokens", device},
                          {"host_tokens", host},
                          {"host_layout", in.ConsumeBool() ? "page_first" : "layer_first"},
                          {"write_policy", pick(in, kWrite)},
                          {"eviction_policy", in.ConsumeBool() ? "lru" : "lfu"},
                          {"load_back_threshold_tokens", in.ConsumeIntegralInRange<int64_t>(0, 16)},
                          {"storage", storage},
                          {"prefetch_threshold_tokens", in.ConsumeIntegralInRange<int64_t>(0, 64)},
                          {"prefetch_stop_policy", pick(in, kStop)}};
  if (swa) {
    cache["swa_window_tokens"] = page * in.ConsumeIntegralInRange<int64_t>(1, 4);
    cache["swa_device_tokens"] = in.ConsumeBool() ? 0 : round_up(device / 2 + page, page);
  }
  if (mamba) {
    cache["mamba_device_states"] = max_running + 1 + in.ConsumeIntegralInRange<int64_t>(0, 8);
    cache["mamba_host_states"] = in.ConsumeIntegralInRange<int64_t>(0, 16);
    cache["mamba_state_bytes"] = 8 * in.ConsumeIntegralInRange<int64_t>(1, 4);
  }
  if (pd && in.ConsumeBool()) cache["sparse_index_bytes_per_page"] = 32;
  const nlohmann::json scheduler = {
      {"mode", pd ? "pd" : "normal"},
      {"max_running", max_running},
      {"chunk_tokens", in.ConsumeIntegralInRange<int64_t>(1, 64)},
      {"decode_reserve_tokens", in.ConsumeIntegralInRange<int64_t>(0, 8)},
      {"metadata_slots", in.ConsumeIntegralInRange<int64_t>(1, 8)},
      {"cpu_copy_chunk_tokens", in.ConsumeIntegralInRange<int64_t>(1, 64)},
      {"load_back", in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0},
      {"prefetch", in.ConsumeIntegralInRange<uint8_t>(0, 7) != 0}};
  const nlohmann::json faults = {
      {"enabled", in.ConsumeIntegralInRange<uint8_t>(0, 3) != 0},
      {"site_probability", in.ConsumeIntegralInRange<int64_t>(0, 8) / 8.0},
      {"fire_probability", in.ConsumeIntegralInRange<int64_t>(0, 10) / 20.0}};
  return {{"name", "sim_fuzzer"},
          {"description", "fuzz/sim_fuzzer.cpp"},
          {"seed", 1},
          {"cache", cache},
          {"workload", workload},
          {"scheduler", scheduler},
          {"faults", faults},
          {"check", {{"full_every", 1}, {"content", true}}}};
}

}  // namespace
}  // namespace kvsim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvsim;
  FuzzedDataProvider in(data, size);
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  sim::Scenario scenario;
  try {
    scenario = sim::parse_scenario(fuzz::scenario_json(in), "sim_fuzzer");
  } catch (const sim::InputError& e) {
    fuzz::report_property("sim_fuzzer", std::string("built an invalid scenario: ") + e.what());
  }
  const std::vector<sim::Arrival> arrivals = sim::generate_workload(scenario, seed);
  std::vector<sim::Op> ops;
  sim::RunResult result;
  bool asserted = false;  // no event hash then: the run never returned one
  {
    // The executor turns assertions inside an op into violations; one outside an op (the final
    // quiescence check's sanity_check) is caught here, so it too leaves a trace.
    ScopedThrowingAsserts asserts;
    try {
      result = sim::run_scenario(sim::RunRequest{
          .scenario = &scenario, .seed = seed, .arrivals = &arrivals, .record = &ops});
    } catch (const AssertionFailure& e) {
      result.violation = sim::SimViolation{"core.assert", e.what(), ops.size()};
      asserted = true;
    }
  }
  if (!result.ok()) {
    const sim::WorkloadTrace workload{.scenario = scenario, .seed = seed, .arrivals = arrivals};
    fuzz::report_violation(
        "sim", data, size,
        sim::OpTrace{.scenario = scenario,
                     .seed = seed,
                     .ops = std::move(ops),
                     .event_hash = asserted ? std::nullopt : std::optional(result.event_hash),
                     .violation = result.violation},
        &workload);
  }
  return 0;
}
