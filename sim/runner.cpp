#include "sim/runner.h"

#include <cstdio>

namespace kvsim::sim {

RunResult run_scenario(const RunRequest& request) {
  const Scenario& s = *request.scenario;
  std::vector<Arrival> arrivals =
      request.arrivals != nullptr ? *request.arrivals : generate_workload(s, request.seed);
  OpSink sink;
  if (request.record != nullptr) {
    sink = [record = request.record](const Op& op) { record->push_back(op); };
  }
  Scheduler scheduler(s, request.seed, std::move(arrivals), sink);
  return scheduler.run();
}

RunResult replay_ops(const OpTrace& trace) {
  Executor executor(trace.scenario, trace.seed);
  for (const Op& op : trace.ops) {
    executor.apply(op);
    if (executor.failed()) break;
  }
  if (!executor.failed()) executor.check_quiescent();
  RunResult result;
  result.violation = executor.violation();
  result.event_hash = executor.event_hash();
  result.stats = executor.stats();
  result.ticks = static_cast<int64_t>(executor.now());
  return result;
}

nlohmann::json summary_json(const Scenario& s, uint64_t seed, const RunResult& r) {
  nlohmann::json j = {{"scenario", s.name},
                      {"seed", seed},
                      {"ok", r.ok()},
                      {"event_hash", hex64(r.event_hash)},
                      {"ops", r.stats.ops},
                      {"ticks", r.ticks},
                      {"finished", r.stats.finished},
                      {"aborted", r.stats.aborted},
                      {"retracted", r.stats.retracted},
                      {"offloaded", r.stats.offloaded},
                      {"resumed", r.stats.resumed},
                      {"prompt_tokens", r.stats.prompt_tokens},
                      {"device_hit_tokens", r.stats.device_hit_tokens},
                      {"host_hit_tokens", r.stats.host_hit_tokens},
                      {"content_checks", r.stats.content_checks}};
  if (r.violation) {
    j["violation"] = {{"invariant", r.violation->invariant},
                      {"detail", r.violation->detail},
                      {"op_index", r.violation->op_index}};
  }
  nlohmann::json faults = nlohmann::json::object();
  for (size_t i = 0; i < kFaultSites; ++i) {
    if (r.faults_fired[i] > 0)
      faults[std::string(to_string(static_cast<FaultSite>(i)))] = r.faults_fired[i];
  }
  j["faults_fired"] = faults;
  return j;
}

std::string summary_text(const Scenario& s, uint64_t seed, const RunResult& r) {
  char buf[1024];
  std::string out;
  std::snprintf(buf, sizeof buf, "%s seed %llu: %s\n", s.name.c_str(),
                static_cast<unsigned long long>(seed), r.ok() ? "ok" : "VIOLATION");
  out += buf;
  if (r.violation) {
    std::snprintf(buf, sizeof buf, "  violation: %s: %s (after op %zu)\n",
                  r.violation->invariant.c_str(), r.violation->detail.c_str(),
                  r.violation->op_index);
    out += buf;
  }
  const double hit =
      r.stats.prompt_tokens == 0
          ? 0.0
          : static_cast<double>(r.stats.device_hit_tokens + r.stats.host_hit_tokens) /
                static_cast<double>(r.stats.prompt_tokens);
  std::snprintf(buf, sizeof buf,
                "  %lld ops over %lld ticks; requests finished %lld, aborted %lld, retracted %lld, "
                "offloaded %lld\n"
                "  prompt tokens %lld, hit %.3f (device %lld, host %lld); content checks %lld\n"
                "  event hash %s\n",
                static_cast<long long>(r.stats.ops), static_cast<long long>(r.ticks),
                static_cast<long long>(r.stats.finished), static_cast<long long>(r.stats.aborted),
                static_cast<long long>(r.stats.retracted),
                static_cast<long long>(r.stats.offloaded),
                static_cast<long long>(r.stats.prompt_tokens), hit,
                static_cast<long long>(r.stats.device_hit_tokens),
                static_cast<long long>(r.stats.host_hit_tokens),
                static_cast<long long>(r.stats.content_checks), hex64(r.event_hash).c_str());
  out += buf;
  return out;
}

}  // namespace kvsim::sim
