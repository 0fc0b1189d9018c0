// Call-trace replay (sim/call_trace_replay.h): a recorded core assertion is the same failure
// when the recording was made in another checkout or build layout, and not when it is another
// assertion.
#include "sim/call_trace_replay.h"

#include <gtest/gtest.h>

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
  const std::string path =
      std::string(KVSIM_SOURCE_DIR) + "/tests/data/calls/crash.min.calls.jsonl";
  CallTrace trace = read_call_trace(path);
  ASSERT_TRUE(trace.end && trace.end->violation);
  trace.end->violation->second = "/elsewhere/" + trace.end->violation->second;
  EXPECT_TRUE(call_replay_matches(trace, replay_calls(trace)));
  trace.end->violation->second = "core/tree/full_component.cpp:1: other: assertion";
  EXPECT_FALSE(call_replay_matches(trace, replay_calls(trace)));
}

}  // namespace
}  // namespace kvsim::sim
