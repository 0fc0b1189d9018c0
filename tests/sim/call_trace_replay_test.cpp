// Call-trace replay (sim/trace/call_trace_replay.h): a recorded core assertion is the same failure
// when the recording was made in another checkout or build layout, and not when it is another
// assertion.
#include "sim/trace/call_trace_replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace kvsim::sim {
namespace {

TEST(CallTraceFailureKey, IgnoresTheDirectoryAndNumbers) {
  const std::string here =
      "core/tree/full_component.cpp:44: node != nullptr: locked node 31 vanished";
  EXPECT_EQ(
      failure_key(here),
      failure_key("/ci/checkout/core/tree/full_component.cpp:42: node != nullptr: locked node "
                  "7 vanished"));
  EXPECT_EQ(failure_key(here),
            failure_key("../../core/tree/full_component.cpp:44: node != nullptr: locked node 1 "
                        "vanished"));
}

TEST(CallTraceFailureKey, TellsOtherAssertionsApart) {
  const std::string here =
      "core/tree/full_component.cpp:44: node != nullptr: locked node 31 vanished";
  EXPECT_NE(failure_key(here), failure_key("core/tree/swa_component.cpp:44: node != nullptr: "
                                           "locked node 31 vanished"));
  EXPECT_NE(failure_key(here), failure_key("core/tree/full_component.cpp:44: lock >= 0: negative"));
  // A message without a file location keeps its slashes.
  EXPECT_NE(failure_key("a/b: x"), failure_key("b: x"));
}

TEST(CallTraceReplay, RecordingFromAnotherBuildLayoutStillMatches) {
  const std::string path = std::string(KVSIM_SOURCE_DIR "/tests/data/calls/crash.min.calls.jsonl");
  CallTrace trace = read_call_trace(path);
  ASSERT_TRUE(trace.end && trace.end->violation);
  trace.end->violation->second = "/elsewhere/" + trace.end->violation->second;
  EXPECT_TRUE(call_replay_matches(trace, replay_calls(trace)));
  trace.end->violation->second = "core/tree/full_component.cpp:1: other: assertion";
  EXPECT_FALSE(call_replay_matches(trace, replay_calls(trace)));
}

}  // namespace
}  // namespace kvsim::sim

namespace kvsim::sim {
namespace {

// "val_from": a recording keeps an insert's slots from the first one the tree read. A replay
// in step with it reads only those; one that reads an earlier slot has diverged and says so.
// A recording ends with a footer: these end as one cut by SIGTERM (calls and hash only).
CallTrace trace_of(const std::string& dir, const std::string& lines) {
  // One file per test: ctest runs the tests of this binary as parallel processes.
  const std::string path = dir + "/val_from." +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                           ".calls.jsonl";
  {
    std::ofstream out(path);
    const auto calls = std::count(lines.begin(), lines.end(), '\n');
    out << R"({"eviction_policy":"lru","kind":"calls","kvsim_trace":1,"page_size":2,"source":"test"})"
        << "\n"
        << lines << R"({"end":{"calls":)" << calls
        << R"(,"event_hash":"0000000000000000","cut_by_signal":15}})"
        << "\n";
  }
  return read_call_trace(path);
}

TEST(CallTraceReplay, AnInsertRecordedFromValFromReplaysTheSlotsItKept) {
  const CallTrace trace = trace_of(::testing::TempDir(),
                                   R"({"ns":0,"op":"insert","tokens":[1,2],"value":[10,11]}
{"ns":0,"op":"insert","tokens":[1,2,3,4],"val_from":2,"value":[12,13]}
{"ns":0,"op":"match","tokens":[1,2,3,4]}
)");
  ASSERT_EQ(trace.calls.size(), 3u);
  EXPECT_EQ(trace.calls[1].value_from, 2u);
  const CallReplay r = replay_calls(trace);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r.outcomes[2].has_value());
  EXPECT_EQ(r.outcomes[1]->amount, 2);  // prefix_len: the first page was held
  EXPECT_EQ(r.outcomes[2]->amount, 4);  // and the second stored from the kept slots
}

TEST(CallTraceReplay, AnInsertThatReadsBeforeValFromIsADivergence) {
  // The tree holds nothing: the insert reads slot 0, which the recording did not keep.
  const CallTrace trace =
      trace_of(::testing::TempDir(),
               R"({"ns":0,"op":"insert","tokens":[1,2,3,4],"val_from":2,"value":[12,13]}
)");
  const CallReplay r = replay_calls(trace);
  ASSERT_TRUE(r.violation.has_value());
  EXPECT_NE(r.violation->second.find("before the first one the recording kept"), std::string::npos)
      << r.violation->second;
}

}  // namespace
}  // namespace kvsim::sim
