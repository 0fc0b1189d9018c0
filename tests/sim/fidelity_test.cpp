// Imported workloads (kvsim import-sglang): the optional per-arrival fields survive the trace,
// abort_at ends a request as an abort at the recorded state, and the fidelity report compares
// the core's per-request hits with the reported ones.
#include <gtest/gtest.h>

#include <numeric>

#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"
#include "sim/report/fidelity.h"

namespace kvsim::sim {
namespace {

Scenario imported_scenario() {
  Scenario s = default_scenario();
  s.name = "imported";
  s.cache.page_size = 4;
  s.cache.device_tokens = 4096;
  s.cache.host_tokens = 8192;
  s.faults.enabled = false;
  s.workload.kind = WorkloadKind::kUniform;
  return s;
}

// `n` requests far apart in time, each a 64-token shared prefix and 10 tokens of its own: the
// first misses, every later one hits exactly the prefix.
std::vector<Arrival> sequential_shared_prefix(int n) {
  std::vector<Token> system(64);
  std::iota(system.begin(), system.end(), Token{5000});
  std::vector<Arrival> out;
  for (int i = 0; i < n; ++i) {
    Arrival a;
    a.rid = static_cast<RequestId>(i + 1);
    a.tick = static_cast<uint64_t>(i) * 1000;
    a.prompt = system;
    a.prompt.insert(a.prompt.end(), 10, static_cast<Token>(100 + i));
    a.output_len = 3;
    a.reported = ReportedCache{.cached_tokens = i == 0 ? 0 : 64, .prompt_tokens = 74};
    out.push_back(std::move(a));
  }
  return out;
}

TEST(Fidelity, ReportedFieldsAndAbortAtSurviveTheTrace) {
  std::vector<Arrival> arrivals = sequential_shared_prefix(3);
  arrivals[1].reported->device = 60;
  arrivals[1].reported->host = 4;
  arrivals[1].reported->storage = 0;
  arrivals[1].reported->sglang_rid = "abc";
  arrivals[2].reported->stand_in = true;
  arrivals[2].abort_at = 2;
  arrivals[0].reported.reset();
  const std::string path = ::testing::TempDir() + "/imported.trace.jsonl";
  write_workload_trace(
      path, WorkloadTrace{.scenario = imported_scenario(), .seed = 1, .arrivals = arrivals});
  const AnyTrace t = read_trace(path);
  ASSERT_EQ(t.workload.arrivals.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.workload.arrivals[i].abort_at, arrivals[i].abort_at) << i;
    EXPECT_EQ(t.workload.arrivals[i].reported, arrivals[i].reported) << i;
  }
}

TEST(Fidelity, AbortAtPastOutputLenIsAnInputError) {
  const std::string header = nlohmann::json{{"kvsim_trace", 1},
                                            {"kind", "workload"},
                                            {"seed", 1},
                                            {"scenario", to_json(imported_scenario())}}
                                 .dump();
  const std::string text =
      header + "\n{\"rid\":1,\"tick\":0,\"prompt\":[1,2],\"output_len\":2,\"abort_at\":3}\n";
  try {
    read_trace_text(text, "x.jsonl");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.jsonl:2: field abort_at: is past output_len"),
              std::string::npos)
        << e.what();
  }
}

TEST(Fidelity, AbortAtEndsTheRequestAsAnAbort) {
  const Scenario s = imported_scenario();
  std::vector<Arrival> arrivals = sequential_shared_prefix(4);
  arrivals[1].abort_at = 0;  // caught right after its prefill
  arrivals[2].abort_at = 2;  // caught mid-decode
  std::vector<Op> ops;
  const RunResult r =
      run_scenario(RunRequest{.scenario = &s, .seed = 1, .arrivals = &arrivals, .record = &ops});
  ASSERT_TRUE(r.ok()) << r.violation->invariant << ": " << r.violation->detail;
  EXPECT_EQ(r.stats.finished, 2);
  EXPECT_EQ(r.stats.aborted, 2);
  // The mid-decode abort comes after exactly two decode steps.
  int64_t last_compute = -1;
  for (const Op& op : ops) {
    if (op.rid == 3 && op.kind == OpKind::kCompute) last_compute = op.n;
    if (op.rid == 3 && op.kind == OpKind::kAbort) break;
  }
  EXPECT_EQ(last_compute, 74 + 2);
}

TEST(Fidelity, AgreesWithExactReportsAndNamesTheDifferences) {
  const Scenario s = imported_scenario();
  std::vector<Arrival> arrivals = sequential_shared_prefix(6);
  arrivals[3].reported->cached_tokens = 0;  // SGLang saw a flushed cache here
  arrivals[4].reported->cached_tokens = 68;
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 1, .arrivals = &arrivals});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.request_hits.size(), 6u);
  const FidelityReport f = compare_fidelity(arrivals, r);
  EXPECT_EQ(f.compared, 6);
  EXPECT_EQ(f.exact, 4);
  EXPECT_EQ(f.kvsim_tokens, 5 * 64);
  EXPECT_EQ(f.reported_tokens, 3 * 64 + 68);
  EXPECT_EQ(f.rows[3].diff(), 64);
  EXPECT_EQ(f.rows[4].diff(), -4);
  const std::string text = fidelity_text(f);
  EXPECT_NE(text.find("4 of 6 requests agree exactly"), std::string::npos) << text;
  EXPECT_NE(text.find("largest difference: +64 tokens (rid 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("rid 5: kvsim 64, SGLang 68 (-4) of 74"), std::string::npos) << text;
  EXPECT_EQ(fidelity_json(f)["requests"].size(), 6u);
  // Beyond 20 requests, only the largest differences are listed.
  const std::string big = fidelity_text(f, 1, 2);
  EXPECT_NE(big.find("largest differences"), std::string::npos);
  EXPECT_EQ(big.find("rid 5:"), std::string::npos) << big;
}

TEST(Fidelity, NothingReportedNothingCompared) {
  const Scenario s = imported_scenario();
  const std::vector<Arrival> arrivals = generate_workload(s, 3);
  EXPECT_FALSE(has_reported(arrivals));
}

}  // namespace
}  // namespace kvsim::sim
