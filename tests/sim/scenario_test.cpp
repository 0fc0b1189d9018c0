// Scenario files and traces: defaults, round trips, and strict errors naming source and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"

namespace kvsim::sim {
namespace {

std::string scenario_error_of(const std::string& text) {
  try {
    parse_scenario(parse_json(text, "s.json"), "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, JsonRoundTripKeepsEveryField) {
  Scenario s = default_scenario();
  s.cache.swa_window_tokens = 16;
  s.cache.mamba_device_states = 32;
  s.workload.kind = WorkloadKind::kAgentic;
  s.faults.fire_probability = 0.4;
  const Scenario back = parse_scenario(to_json(s), "x");
  EXPECT_EQ(to_json(back), to_json(s));
}

TEST(Scenario, EveryNamedScenarioLoads) {
  int loaded = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(KVSIM_SOURCE_DIR "/scenarios"))) {
    if (e.path().extension() != ".json") continue;
    const Scenario s = load_scenario(e.path().string());
    EXPECT_EQ(s.name, e.path().stem().string());
    EXPECT_FALSE(s.description.empty()) << s.name;
    ++loaded;
  }
  EXPECT_GE(loaded, 7);
}

TEST(Scenario, ErrorsNameTheField) {
  EXPECT_EQ(scenario_error_of(R"({"cache": {}})"), "s.json: field name: missing");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "cahce": {}})"),
            "s.json: field cahce: unknown field (did you mean cache?)");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "cache": {"page_size": 0}})"),
            "s.json: field cache.page_size: 0 is out of range [1, 65536]");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "cache": {"item_bytes": 12}})"),
            "s.json: field cache.item_bytes: must be a multiple of 8");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "workload": {"kind": "chat"}})").substr(0, 48),
            "s.json: field workload.kind: \"chat\" is not one o");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "workload": {"prompt_min": 9, "prompt_max": 3}})"),
            "s.json: field workload.prompt_max: is smaller than prompt_min");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "scheduler": {"max_running": true}})"),
            "s.json: field scheduler.max_running: expected an integer, got boolean");
  EXPECT_EQ(scenario_error_of(R"({"name": "x", "workload": {"kind": "mooncake"}})"),
            "s.json: field workload.trace: a mooncake workload needs a trace file");
  EXPECT_NE(scenario_error_of(R"({"name": "x", "cache": {"swa_window_tokens": 2}})"), "");
  EXPECT_EQ(scenario_error_of("{\n \"name\": \"x\",\n \"cache\": [1,\n").substr(0, 11),
            "s.json:4:1:");
}

TEST(Trace, ReaderRejectsWhatIsNotATrace) {
  const std::string path = ::testing::TempDir() + "/t.jsonl";
  auto error = [&](const std::string& body) {
    std::ofstream(path) << body;
    try {
      read_trace(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("").find("empty file"), std::string::npos);
  EXPECT_NE(error("{\"kind\": \"ops\"}\n").find(":1: field kvsim_trace: missing"),
            std::string::npos);
  const std::string header =
      R"({"kvsim_trace": 1, "kind": "workload", "seed": 1, "scenario": {"name": "x"}})";
  EXPECT_NE(error(header + "\n").find("has no arrivals"), std::string::npos);
  EXPECT_NE(error(header + "\n{\"rid\": 1, \"tick\": 0, \"prompt\": []}\n")
                .find(":2: field prompt: is empty"),
            std::string::npos);
  EXPECT_NE(error(header + "\n{\"rid\": 1, \"tick\": 5, \"prompt\": [1], \"output_len\": 1}\n"
                           "{\"rid\": 2, \"tick\": 4, \"prompt\": [1], \"output_len\": 1}\n")
                .find(":3: field tick: goes backwards"),
            std::string::npos);
}

TEST(Trace, OpsThatNoLongerMakeSenseAreSkipped) {
  // What lets delta debugging drop any subset of a trace.
  const Scenario s = default_scenario();
  Executor ex(s, 1);
  EXPECT_FALSE(ex.apply(Op{.kind = OpKind::kFinish, .rid = 99}).applied);
  EXPECT_FALSE(ex.apply(Op{.kind = OpKind::kCompute, .rid = 99, .n = 4}).applied);
  EXPECT_FALSE(ex.apply(Op{.kind = OpKind::kStep, .n = 1, .target = 99}).applied);
  EXPECT_TRUE(ex.apply(Op{.kind = OpKind::kArrive, .rid = 1, .prompt = {1, 2, 3}, .output_len = 1})
                  .applied);
  EXPECT_FALSE(ex.failed());
}

}  // namespace
}  // namespace kvsim::sim
