// The timeline export (sim/report/timeline.h) writes a well-formed Chrome Trace Event file: valid
// JSON, the keys each event type needs, every B closed by its E on the same track in order,
// every async span closed, every flow start paired with one flow end on another track — on a
// seed-bug trace replay, on a run with faults, and on a failing run (the violation marked).
// Recording never changes the run (same event hash), and two recordings are identical.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/tree/component.h"
#include "core/tree/radix_tree.h"
#include "sim/campaign/runner.h"
#include "sim/report/timeline.h"
#include "tests/support/planted_component.h"

namespace kvsim::sim {
namespace {

struct Shape {
  std::map<std::string, int> by_ph_cat;  // "X:copy" → count
  std::set<std::string> tracks;
  std::vector<std::string> violations;
};

// Checks the file's structure (GoogleTest failures) and returns what it holds.
Shape check_structure(const nlohmann::json& doc) {
  Shape shape;
  EXPECT_TRUE(doc.is_object());
  EXPECT_TRUE(doc.contains("traceEvents"));
  const nlohmann::json& events = doc.at("traceEvents");
  EXPECT_TRUE(events.is_array());
  std::map<int, std::vector<std::string>> open_slices;  // tid → stack of B names
  std::map<std::pair<std::string, uint64_t>, int> open_async;
  std::map<uint64_t, std::pair<int, int>> flows;  // id → (starts, ends)
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> flow_ts;
  std::map<uint64_t, std::pair<int, int>> flow_tid;
  std::map<int, uint64_t> last_ts;
  for (const nlohmann::json& e : events) {
    for (const char* key : {"ph", "name", "pid", "tid"})
      EXPECT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
    const std::string ph = e.at("ph");
    shape.by_ph_cat[ph + ":" + e.value("cat", std::string())]++;
    if (ph == "M") {
      if (e.at("name") == "thread_name") shape.tracks.insert(e.at("args").at("name"));
      continue;
    }
    EXPECT_TRUE(e.contains("ts") && e.at("ts").is_number_unsigned()) << e.dump();
    EXPECT_TRUE(e.contains("cat")) << e.dump();
    const uint64_t ts = e.at("ts");
    const int tid = e.at("tid");
    if (ph == "B" || ph == "E") {  // ordered per track
      EXPECT_GE(ts, last_ts[tid]) << e.dump();
      last_ts[tid] = ts;
    }
    if (ph == "B") {
      open_slices[tid].push_back(e.at("name"));
    } else if (ph == "E") {
      if (open_slices[tid].empty()) {
        ADD_FAILURE() << "E without B: " << e.dump();
        continue;
      }
      EXPECT_EQ(open_slices[tid].back(), e.at("name").get<std::string>());
      open_slices[tid].pop_back();
    } else if (ph == "X") {
      EXPECT_TRUE(e.contains("dur") && e.at("dur").get<int>() >= 1) << e.dump();
      EXPECT_TRUE(e.contains("args")) << e.dump();
      const std::string cat = e.at("cat");
      if (cat == "copy" || cat == "upload" || cat == "transfer") {
        EXPECT_TRUE(e.at("args").contains("bytes")) << e.dump();
      }
      if (cat == "transfer") {
        EXPECT_TRUE(e.at("args").contains("indices")) << e.dump();
      }
    } else if (ph == "b" || ph == "e" || ph == "n") {
      if (!e.contains("id")) {
        ADD_FAILURE() << "no id: " << e.dump();
        continue;
      }
      const auto key = std::make_pair(e.at("name").get<std::string>(), e.at("id").get<uint64_t>());
      if (ph == "b") {
        EXPECT_EQ(open_async[key]++, 0) << "nested span of the same name: " << e.dump();
      } else if (ph == "e") {
        EXPECT_EQ(open_async[key]--, 1) << "e without b: " << e.dump();
      }
    } else if (ph == "s" || ph == "f") {
      if (!e.contains("id")) {
        ADD_FAILURE() << "no id: " << e.dump();
        continue;
      }
      const uint64_t id = e.at("id");
      if (ph == "s") {
        flows[id].first++;
        flow_ts[id].first = ts;
        flow_tid[id].first = tid;
      } else {
        flows[id].second++;
        flow_ts[id].second = ts;
        flow_tid[id].second = tid;
        EXPECT_EQ(e.value("bp", ""), "e");
      }
    } else if (ph == "i") {
      EXPECT_TRUE(e.contains("s")) << e.dump();
      if (e.at("cat") == "violation") shape.violations.push_back(e.at("args").at("invariant"));
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  for (const auto& [tid, stack] : open_slices)
    EXPECT_TRUE(stack.empty()) << "track " << tid << " leaves " << stack.size() << " B open";
  for (const auto& [key, n] : open_async)
    EXPECT_EQ(n, 0) << "async span " << key.first << " id " << key.second << " left open";
  for (const auto& [id, n] : flows) {
    EXPECT_EQ(n.first, 1) << "flow " << id;
    EXPECT_EQ(n.second, 1) << "flow " << id;
    EXPECT_LE(flow_ts[id].first, flow_ts[id].second) << "flow " << id << " goes back in time";
  }
  return shape;
}

TEST(Timeline, SeedTraceReplayIsWellFormed) {
  const AnyTrace t = read_trace(std::string(KVSIM_SOURCE_DIR "/traces/seed-000.trace.jsonl"));
  const RunResult plain = replay_ops(t.ops);
  TimelineRecorder recorder;
  const RunResult drawn = replay_ops(t.ops, timeline_setup(recorder));
  EXPECT_EQ(plain.event_hash, drawn.event_hash);
  const std::string path = ::testing::TempDir() + "/seed-000.timeline.json";
  recorder.write(path);
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);  // throws on invalid JSON
  Shape shape = check_structure(doc);
  EXPECT_TRUE(shape.tracks.count("ops"));
  EXPECT_TRUE(shape.tracks.count("stream compute"));
  EXPECT_TRUE(shape.tracks.count("stream write"));
  EXPECT_GT(shape.by_ph_cat["B:op"], 0);
  EXPECT_GT(shape.by_ph_cat["X:transfer"], 0);
  EXPECT_GT(shape.by_ph_cat["b:request"], 0);
  EXPECT_GT(shape.by_ph_cat["s:event"], 0);  // the write stream waits on compute
  EXPECT_TRUE(shape.violations.empty());     // the fixed core replays it clean
}

TEST(Timeline, RunWithFaultsIsWellFormedAndDeterministic) {
  Scenario s =
      load_scenario(std::string(KVSIM_SOURCE_DIR "/scenarios/hybrid_delayed_completions.json"));
  s.workload.requests = std::min<int64_t>(s.workload.requests, 60);
  const RunResult plain = run_scenario(RunRequest{.scenario = &s, .seed = 5});
  TimelineRecorder a;
  TimelineRecorder b;
  const RunResult ra =
      run_scenario(RunRequest{.scenario = &s, .seed = 5, .setup = timeline_setup(a)});
  run_scenario(RunRequest{.scenario = &s, .seed = 5, .setup = timeline_setup(b)});
  EXPECT_EQ(plain.event_hash, ra.event_hash);
  const nlohmann::json doc = a.json();
  EXPECT_EQ(doc, b.json());  // logical clock: the same run, the same file
  Shape shape = check_structure(doc);
  EXPECT_TRUE(shape.tracks.count("stream load"));
  EXPECT_GT(shape.by_ph_cat["X:copy"] + shape.by_ph_cat["X:transfer"], 0);
  EXPECT_GT(shape.by_ph_cat["n:request"], 0);
  uint64_t fired = 0;
  for (uint64_t n : ra.faults_fired)
    fired += n;
  EXPECT_EQ(static_cast<uint64_t>(shape.by_ph_cat["i:fault"]), fired);
  EXPECT_GT(fired, 0u);
}

using testing::PlantedBugComponent;

TEST(Timeline, FailingRunMarksTheViolation) {
  Scenario s = default_scenario();
  s.faults.enabled = false;
  TimelineRecorder recorder;
  const ExecutorSetup plant = [](Executor& e) {
    e.cache().tree().add_component(std::make_unique<PlantedBugComponent>());
  };
  const RunResult r =
      run_scenario(RunRequest{.scenario = &s, .seed = 1, .setup = timeline_setup(recorder, plant)});
  ASSERT_FALSE(r.ok());
  Shape shape = check_structure(recorder.json());
  ASSERT_EQ(shape.violations.size(), 1u);
  EXPECT_EQ(shape.violations[0], r.violation->invariant);
}

}  // namespace
}  // namespace kvsim::sim
