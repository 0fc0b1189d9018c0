#include "sim/campaign/runner.h"

#include <cstdio>

namespace kvsim::sim {

RunResult run_scenario(const RunRequest& request) {
  const Scenario& s = *request.scenario;
  // Streamed: the run holds the requests in flight, never the whole workload.
  std::unique_ptr<ArrivalSource> arrivals = request.arrivals != nullptr
                                                ? list_source(*request.arrivals)
                                                : workload_source(s, request.seed);
  OpSink sink;
  if (request.record != nullptr || request.checks != nullptr || request.progress) {
    sink = [record = request.record, checks = request.checks, progress = request.progress,
            ops = int64_t{0},
            tick = int64_t{0}](const Op& op, const OpOutcome& o, uint64_t hash) mutable {
      if (record != nullptr) record->push_back(op);
      if (checks != nullptr) checks->push_back(OpCheck{.hash = hash, .ok = o.ok});
      if (op.kind == OpKind::kTick) tick = op.n;
      if (progress && (++ops & 0xffff) == 0) progress(ops, tick);
    };
  }
  Scheduler scheduler(s, request.seed, std::move(arrivals), sink, request.setup, request.target);
  return scheduler.run();
}

RunResult replay_ops(const OpTrace& trace, const ExecutorSetup& setup) {
  return replay_trace(trace, ReplayOptions{.setup = setup, .stop_at_problem = false}).result;
}

ReplayReport replay_trace(const OpTrace& trace, const ReplayOptions& options) {
  ReplayReport report;
  Executor executor(trace.scenario, trace.seed, trace.target);
  if (options.setup) options.setup(executor);
  const bool chained =
      options.check_chain && trace.checks.size() == trace.ops.size() && !trace.ops.empty();
  report.applied.reserve(trace.ops.size());
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const Op& op = trace.ops[i];
    OpOutcome o = executor.apply(op);
    const OpCheck actual{.hash = executor.event_hash(), .ok = o.ok};
    report.applied.push_back(o.applied);
    if (o.applied) {
      report.checks.push_back(actual);
    } else {
      ++report.rejected;
    }
    const bool differs =
        chained && (trace.checks[i].hash != actual.hash || trace.checks[i].ok != actual.ok);
    if (!report.problem && (!o.applied || differs)) {
      report.problem =
          ReplayProblem{.index = i,
                        .line = i < trace.lines.size() ? trace.lines[i] : 0,
                        .op = op,
                        .rejected = !o.applied,
                        .why = std::move(o.why),
                        .expected = chained ? std::optional(trace.checks[i]) : std::nullopt,
                        .actual = actual};
      if (options.stop_at_problem) break;
    }
    if (executor.failed()) break;
  }
  // The event hash, op count and ticks cover the trace's own ops only, so a complete recorded
  // run replays to its recorded figures whatever the drain below does.
  const uint64_t hash = executor.event_hash();
  const ExecutorStats stats = executor.stats();
  const auto ticks = static_cast<int64_t>(executor.now());
  // A trace cut short (by shrinking, or found by a fuzzer) may end with requests unfinished
  // and copies in flight: abort the requests and let every transfer land, so quiescence
  // reports leaks, never "the trace stopped early".
  const bool stopped = options.stop_at_problem && report.problem;
  if (!executor.failed() && !stopped) {
    for (const auto& [rid, r] : executor.requests()) {
      if (r.state != RequestState::kDone && !executor.failed()) {
        executor.apply(Op{.kind = OpKind::kAbort, .rid = rid});
      }
    }
    if (!executor.failed()) executor.apply(Op{.kind = OpKind::kFlush});
    for (int i = 0;
         i < 100000 && executor.cache_under_test().storage_enabled() && !executor.failed(); ++i) {
      bool busy = false;
      for (uint32_t w = 0; w < 3 && !executor.failed(); ++w) {
        const OpOutcome o = executor.apply(Op{.kind = OpKind::kStorage, .target = w});
        busy |= o.applied && o.ok;
      }
      if (!busy) break;
    }
    if (!executor.failed()) executor.apply(Op{.kind = OpKind::kFlush});
    if (!executor.failed()) executor.check_quiescent();
  }
  RunResult& result = report.result;
  result.target = executor.target();
  result.violation = executor.violation();
  result.event_hash = hash;
  result.stats = stats;
  result.storage = executor.storage_stats();
  result.stats.content_checks = executor.stats().content_checks;
  result.ticks = ticks;
  return report;
}

std::string describe(const OpTrace& trace, const ReplayProblem& p) {
  std::string where = trace.source.empty() ? "trace" : trace.source;
  where += p.line > 0 ? ":" + std::to_string(p.line) : " op " + std::to_string(p.index + 1);
  std::string s = where + ": op " + std::string(to_string(p.op.kind)) + ": ";
  if (p.rejected && !p.expected) return s + p.why;
  if (p.rejected) {
    return s + p.why + " (diverges from the recording: recorded " +
           (p.expected->ok ? "ok" : "refused") + ", event hash " + hex64(p.expected->hash) +
           "; replayed: rejected, event hash " + hex64(p.actual.hash) + ")";
  }
  s += "diverges from the recording: recorded ";
  s += p.expected->ok ? "ok" : "refused";
  s += ", event hash " + hex64(p.expected->hash) + "; replayed ";
  s += p.actual.ok ? "ok" : "refused";
  s += ", event hash " + hex64(p.actual.hash);
  return s;
}

nlohmann::json problem_json(const OpTrace& trace, const ReplayProblem& p) {
  nlohmann::json j = {{"line", p.line},
                      {"op_index", p.index},
                      {"op", to_json(p.op)},
                      {"rejected", p.rejected},
                      {"message", describe(trace, p)},
                      {"actual", {{"ok", p.actual.ok}, {"event_hash", hex64(p.actual.hash)}}}};
  if (p.rejected) j["why"] = p.why;
  if (p.expected) {
    j["expected"] = {{"ok", p.expected->ok}, {"event_hash", hex64(p.expected->hash)}};
  }
  return j;
}

std::string vacuous_reason(const Scenario& s, const RunResult& r) {
  if (!r.ok()) return "";
  if (r.stats.finished == 0) return "no request finished";
  if (s.check.content && r.stats.content_checks == 0) return "no model read was checked";
  return "";
}

namespace {

uint64_t faults_total(const RunResult& r) {
  uint64_t n = 0;
  for (uint64_t f : r.faults_fired)
    n += f;
  return n;
}

nlohmann::json storage_json(const StorageRunStats& st) {
  nlohmann::json injected = nlohmann::json::object();
  for (size_t i = 1; i < kStorageFaults; ++i) {
    if (st.injected[i] > 0)
      injected[std::string(to_string(static_cast<StorageFault>(i)))] = st.injected[i];
  }
  nlohmann::json j = {{"backend", st.backend},
                      {"query_hit_pages", st.query_hit_pages},
                      {"hit_pages", st.hit_pages},
                      {"read_bytes", st.read_bytes},
                      {"miss_pages", st.miss_pages},
                      {"corrupt_pages", st.corrupt_pages},
                      {"read_errors", st.read_errors},
                      {"write_failures", st.write_failures},
                      {"written_bytes", st.written_bytes},
                      {"pages", st.pages},
                      {"bytes", st.bytes},
                      {"evictions", st.evictions},
                      {"scrubbed_pages", st.scrubbed_pages},
                      {"foreign_entries", st.foreign_entries},
                      {"faults_injected", injected}};
  if (!st.start_digest.empty()) j["start_digest"] = st.start_digest;
  return j;
}

}  // namespace

nlohmann::json summary_json(const Scenario& s, uint64_t seed, const RunResult& r) {
  const std::string vacuous = vacuous_reason(s, r);
  nlohmann::json j = {{"scenario", s.name},
                      {"seed", seed},
                      {"ok", r.ok()},
                      {"verdict", !r.ok()           ? "violation"
                                  : vacuous.empty() ? "ok"
                                                    : "vacuous"},
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
                      {"content_checks", r.stats.content_checks},
                      {"invariant_checks", r.stats.invariant_checks},
                      {"full_checks", r.stats.full_checks},
                      {"storage_hit_tokens", r.stats.storage_hit_tokens},
                      {"rejected_ops", r.stats.rejected}};
  if (!vacuous.empty()) j["vacuous"] = vacuous;
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
  if (r.storage.enabled) j["storage"] = storage_json(r.storage);
  return j;
}

std::string summary_text(const Scenario& s, uint64_t seed, const RunResult& r) {
  char buf[1024];
  std::string out;
  const std::string vacuous = vacuous_reason(s, r);
  std::snprintf(buf, sizeof buf, "%s seed %llu: %s\n", s.name.c_str(),
                static_cast<unsigned long long>(seed),
                !r.ok()           ? "VIOLATION"
                : vacuous.empty() ? "ok"
                                  : ("VACUOUS (" + vacuous + ": the run proves nothing)").c_str());
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
  std::snprintf(buf, sizeof buf,
                "  checked: %lld after-op invariant checks (streams, slot conservation), %lld full "
                "sanity checks, %lld content checks (model reads); %llu faults fired; storage "
                "hits %lld tokens\n",
                static_cast<long long>(r.stats.invariant_checks),
                static_cast<long long>(r.stats.full_checks),
                static_cast<long long>(r.stats.content_checks),
                static_cast<unsigned long long>(faults_total(r)),
                static_cast<long long>(r.stats.storage_hit_tokens));
  out += buf;
  if (r.stats.rejected > 0) {
    out += "  " + std::to_string(r.stats.rejected) + " ops did not apply (rejected)\n";
  }
  if (r.storage.enabled) {
    const StorageRunStats& st = r.storage;
    std::snprintf(
        buf, sizeof buf,
        "  storage (%s): read %lld pages (%lld bytes) of %lld queried; missing %lld, corrupt "
        "%lld (removed), read errors %lld, write failures %lld; wrote %lld bytes\n"
        "  storage holds %llu pages, %llu bytes; %llu evicted for the budget\n",
        st.backend.c_str(), static_cast<long long>(st.hit_pages),
        static_cast<long long>(st.read_bytes), static_cast<long long>(st.query_hit_pages),
        static_cast<long long>(st.miss_pages), static_cast<long long>(st.corrupt_pages),
        static_cast<long long>(st.read_errors), static_cast<long long>(st.write_failures),
        static_cast<long long>(st.written_bytes), static_cast<unsigned long long>(st.pages),
        static_cast<unsigned long long>(st.bytes), static_cast<unsigned long long>(st.evictions));
    out += buf;
    if (st.foreign_entries > 0) {
      out += "  storage directory also holds " + std::to_string(st.foreign_entries) +
             " foreign entries under page names (another geometry's pages, FIFOs, links): "
             "left alone\n";
    }
    std::string injected;
    for (size_t i = 1; i < kStorageFaults; ++i) {
      if (st.injected[i] == 0) continue;
      injected += (injected.empty() ? "" : ", ") +
                  std::string(to_string(static_cast<StorageFault>(i))) + " " +
                  std::to_string(st.injected[i]);
    }
    if (!injected.empty()) out += "  storage faults injected: " + injected + "\n";
    if (!st.start_digest.empty()) {
      out += "  storage started on a reused store, digest " + st.start_digest + "; " +
             std::to_string(st.scrubbed_pages) + " damaged pages removed before the run\n";
    }
  }
  return out;
}

}  // namespace kvsim::sim
