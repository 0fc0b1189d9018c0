// Property: every configuration the parser and the resource check accept runs to a verdict
// within its memory limit. Scenarios are drawn over wide ranges (pool sizes up to the parser's
// bounds, item sizes, layer counts, hybrid pools) so that many are refused; each accepted one
// builds its executor — whose pools must fit the estimate the check made — and runs a short
// workload to a verdict (clean or a violation, never an exception or a crash).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "sim/base/json_reader.h"
#include "sim/campaign/resources.h"
#include "sim/campaign/runner.h"

namespace kvsim::sim {
namespace {

constexpr uint64_t kLimit = uint64_t{32} << 20;  // 32 MiB: small, so the check bites

// A size drawn log-uniformly from [1, 2^max_log2], rounded up to a multiple of `multiple`.
rc::Gen<int64_t> log_size(int max_log2, int64_t multiple) {
  return rc::gen::map(
      rc::gen::pair(rc::gen::inRange(0, max_log2 + 1), rc::gen::arbitrary<uint32_t>()),
      [=](const std::pair<int, uint32_t>& p) {
        const int64_t top = int64_t{1} << p.first;
        const int64_t v = top / 2 + static_cast<int64_t>(p.second % (top / 2 + 1));
        return (std::max<int64_t>(v, 1) + multiple - 1) / multiple * multiple;
      });
}

RC_GTEST_PROP(AcceptedConfig, RunsToAVerdictWithinItsMemoryLimit, ()) {
  const int64_t page = int64_t{1} << *rc::gen::inRange(0, 5);
  nlohmann::json cache = {
      {"page_size", page},
      {"layer_count", *log_size(10, 1)},
      {"item_bytes", *log_size(20, 8)},
      {"device_tokens", *log_size(40, page)},
      {"host_tokens", *log_size(40, page)},
  };
  if (*rc::gen::inRange(0, 3) == 0) cache["swa_window_tokens"] = page * *rc::gen::inRange(1, 4);
  if (*rc::gen::inRange(0, 3) == 0) {
    cache["mamba_device_states"] = *log_size(40, 1);
    cache["mamba_state_bytes"] = *log_size(16, 8);
  }
  const nlohmann::json doc = {
      {"name", "prop"},
      {"cache", cache},
      {"workload",
       {{"kind", "shared_prompt"},
        {"requests", *rc::gen::inRange(1, 12)},
        {"prompt_min", 1},
        {"prompt_max", 8},
        {"system_prompt_tokens", 8},
        {"output_max", 4}}},
      {"check", {{"full_every", 0}}},
  };
  Scenario s;
  try {
    s = parse_scenario(doc, "prop.json");
    check_memory(s, true, kLimit, "prop.json");
  } catch (const InputError& e) {
    RC_TAG("refused");
    RC_ASSERT(std::string(e.what()).find("prop.json") == 0);  // named, never a crash
    return;
  }
  RC_TAG("accepted");
  uint64_t estimate = 0;
  for (const MemoryNeed& n : scenario_memory(s, true))
    estimate += n.bytes;
  RC_ASSERT(estimate <= kLimit);
  {
    Executor ex(s, 1);
    const uint64_t pools = ex.backend().device_bytes_reserved() + ex.backend().host_bytes_in_use();
    RC_ASSERT(pools <= estimate);
  }
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 1});
  RC_ASSERT(r.stats.ops > 0);
  if (r.violation) RC_ASSERT(!r.violation->invariant.empty());
}

}  // namespace
}  // namespace kvsim::sim
