// A call trace's footer must count the calls the file holds (issue 29): a recording with a call
// line lost or added is refused as an InputError (exit 2), never replayed as "matches".
#include <gtest/gtest.h>

#include <string>

#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_replay.h"

namespace kvsim::sim {
namespace {

const std::string kHeader =
    R"({"kvsim_trace":1,"kind":"calls","page_size":1,"eviction_policy":"lru","source":"test"})"
    "\n";
const std::string kCalls = R"({"op":"insert","ns":0,"tokens":[1,2],"value":[5,6]})"
                           "\n"
                           R"({"op":"match","ns":0,"tokens":[1,2]})"
                           "\n";

std::string footer(int calls) {
  return R"({"end":{"calls":)" + std::to_string(calls) +
         R"(,"event_hash":"0000000000000000","nodes":2,"evictable":2,"protected":0}})" + "\n";
}

std::string error_of(const std::string& text) {
  try {
    read_call_trace_text(text, "t.jsonl");
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(CallTraceFooter, ACountOffByOneIsRefused) {
  EXPECT_EQ(error_of(kHeader + kCalls + footer(3)),
            "t.jsonl: footer: field calls: 3 calls recorded, the file holds 2");
  EXPECT_EQ(error_of(kHeader + kCalls + footer(1)),
            "t.jsonl: footer: field calls: 1 calls recorded, the file holds 2");
  EXPECT_EQ(read_call_trace_text(kHeader + kCalls + footer(2), "t.jsonl").calls.size(), 2u);
}

}  // namespace
}  // namespace kvsim::sim
