// A call trace without its footer is not a whole recording (issue 29): a header alone or a
// recording cut at a line boundary is refused (InputError, exit 2), never replayed as "replay
// matches the recording". A recording cut by SIGTERM / abort() ends with the footer its signal
// handler writes ("cut_by_signal"), and replays to an honest verdict.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "sim/base/hex64.h"
#include "sim/base/json_reader.h"
#include "sim/trace/call_trace.h"
#include "sim/trace/call_trace_replay.h"

namespace kvsim::sim {
namespace {

const std::string kIncompleteHeader =
    R"({"kvsim_trace":1,"kind":"calls","page_size":1,"eviction_policy":"lru","source":"test"})"
    "\n";
const std::string kIncompleteCalls = R"({"op":"insert","ns":0,"tokens":[1,2],"value":[5,6]})"
                                     "\n"
                                     R"({"op":"match","ns":0,"tokens":[1,2]})"
                                     "\n";

std::string incomplete_error_of(const std::string& text) {
  try {
    read_call_trace_text(text, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

std::string signal_footer(size_t calls, uint64_t hash, int sig) {
  return call_trace_footer(CallTraceEnd{.calls = calls, .event_hash = hash, .cut_by_signal = sig})
             .dump() +
         "\n";
}

// The event hash of kIncompleteCalls, as a replay computes it (what a recording's footer states).
uint64_t calls_hash() {
  std::string with_footer = kIncompleteHeader + kIncompleteCalls + signal_footer(2, 0, 15);
  return replay_calls(read_call_trace_text(with_footer, "t.jsonl")).event_hash;
}

TEST(CallTraceIncomplete, AHeaderAloneIsRefused) {
  EXPECT_EQ(incomplete_error_of(kIncompleteHeader),
            "t.jsonl: incomplete recording: no footer after line 1 (0 calls): the recording "
            "process was killed before writing one, or the file was cut; only a whole "
            "recording replays");
}

TEST(CallTraceIncomplete, ARecordingCutAtALineBoundaryIsRefused) {
  const std::string error = incomplete_error_of(kIncompleteHeader + kIncompleteCalls);
  EXPECT_EQ(error.rfind("t.jsonl: incomplete recording: no footer after line 3 (2 calls)", 0), 0u)
      << error;
  EXPECT_NE(incomplete_error_of(kIncompleteHeader +
                                kIncompleteCalls.substr(0, kIncompleteCalls.find('\n') + 1))
                .find("no footer"),
            std::string::npos);
}

TEST(CallTraceIncomplete, ARealRecordingWithoutItsFooterIsRefused) {
  std::ifstream in(std::string(KVSIM_SOURCE_DIR "/tests/data/calls/crash.min.calls.jsonl"));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(incomplete_error_of(text), "accepted");
  const size_t last = text.rfind('\n', text.size() - 2);  // the footer is the last line
  ASSERT_NE(text.find("\"end\"", last), std::string::npos);
  EXPECT_NE(incomplete_error_of(text.substr(0, last + 1)).find("incomplete recording: no footer"),
            std::string::npos);
}

TEST(CallTraceIncomplete, ASignalFooterReplaysHonestly) {
  const uint64_t hash = calls_hash();
  const CallTrace t =
      read_call_trace_text(kIncompleteHeader + kIncompleteCalls + signal_footer(2, hash, 15), "t");
  ASSERT_TRUE(t.end.has_value());
  EXPECT_EQ(t.end->cut_by_signal, 15);
  const CallReplay r = replay_calls(t);
  EXPECT_TRUE(call_replay_matches(t, r));
  const std::string text = call_replay_text("t", t, r);
  EXPECT_NE(text.find("the recording was cut by signal 15 after 2 calls"), std::string::npos)
      << text;
  EXPECT_NE(text.find("replay matches the recording"), std::string::npos) << text;
  EXPECT_EQ(call_replay_json(t, r)["cut_by_signal"], 15);

  // Another event hash (a call's outcome changed before the cut): not a match.
  const CallTrace other = read_call_trace_text(
      kIncompleteHeader + kIncompleteCalls + signal_footer(2, hash ^ 1, 6), "t");
  EXPECT_FALSE(call_replay_matches(other, replay_calls(other)));
  // Its count is checked like any footer's.
  EXPECT_EQ(incomplete_error_of(kIncompleteHeader + kIncompleteCalls + signal_footer(3, hash, 15)),
            "t.jsonl: footer: field calls: 3 calls recorded, the file holds 2");
}

TEST(CallTraceIncomplete, ASignalFooterHoldsCallsHashAndSignalOnly) {
  EXPECT_EQ(signal_footer(7, 0xabcdef, 15),
            R"({"end":{"calls":7,"cut_by_signal":15,"event_hash":"0000000000abcdef"}})"
            "\n");
  // A signal number out of range, or tree sizes next to it, is refused.
  const std::string base = R"({"end":{"calls":2,"event_hash":")" + hex64(calls_hash()) + R"(",)";
  EXPECT_NE(incomplete_error_of(kIncompleteHeader + kIncompleteCalls + base +
                                R"("cut_by_signal":0}})" + "\n"),
            "accepted");
  EXPECT_NE(incomplete_error_of(kIncompleteHeader + kIncompleteCalls + base +
                                R"("cut_by_signal":65}})" + "\n"),
            "accepted");
  EXPECT_NE(incomplete_error_of(kIncompleteHeader + kIncompleteCalls + base +
                                R"("cut_by_signal":15,"nodes":2}})" + "\n"),
            "accepted");
}

}  // namespace
}  // namespace kvsim::sim
