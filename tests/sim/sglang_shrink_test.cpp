// Shrinking failures of the SGLang target (docs/sglang-hunt.md, "Shrinking"): the same-failure
// test for SGLang's exceptions, and seed 004's trace from the blind hunt at its buggy commit
// (tests/data/sglang-shrink/seed004_parent.trace.jsonl, 447 ops) shrunk to at most 30 ops.
// The shrink needs the SGLang bundle and Debian's torch; it skips cleanly without them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "sim/campaign/runner.h"
#include "sim/campaign/shrink.h"
#include "sim/trace/trace.h"
#include "tests/support/sglang_env.h"

namespace kvsim::sim {
namespace {

SimViolation exception(const std::string& detail) {
  return SimViolation{"sglang.exception", detail, 0};
}

TEST(SglangShrink, AnExceptionsSiteIsItsTypeAndFrameNotItsMessage) {
  EXPECT_EQ(
      sglang_exception_site("IndexError: index 12 is out of bounds for dimension 0 with size "
                            "8 at sglang/srt/managers/cache_controller.py:431 (_generic_page_get)"),
      "IndexError at sglang/srt/managers/cache_controller.py:431 (_generic_page_get)");
  // A message that itself holds " at " and ':' keeps the last frame.
  EXPECT_EQ(sglang_exception_site("KeyError: 'x: at 3' at a.py:1 (f)"), "KeyError at a.py:1 (f)");
  EXPECT_EQ(sglang_exception_site("no frame here"), "no frame here");
}

TEST(SglangShrink, AnotherExceptionIsAnotherFailure) {
  const SimViolation found =
      exception("IndexError: index 12 is out of bounds at sglang/srt/a.py:10 (get)");
  // The same exception with other numbers in its message (a shrunk trace's sizes): the same.
  EXPECT_TRUE(same_failure(
      found, exception("IndexError: index 4 is out of bounds at sglang/srt/a.py:10 (get)")));
  // Another type at the same frame, or the same type raised elsewhere: not the same failure.
  EXPECT_FALSE(
      same_failure(found, exception("TypeError: bad operand at sglang/srt/a.py:10 (get)")));
  EXPECT_FALSE(same_failure(
      found, exception("IndexError: index 12 is out of bounds at sglang/srt/a.py:11 (get)")));
  EXPECT_FALSE(same_failure(
      found, exception("IndexError: index 12 is out of bounds at sglang/srt/b.py:10 (put)")));
  // Other invariants still compare by name only.
  EXPECT_TRUE(
      same_failure(SimViolation{"prefetch.abandoned_with_free_memory", "12 tokens free", 3},
                   SimViolation{"prefetch.abandoned_with_free_memory", "8 tokens free", 9}));
}

TEST(SglangShrink, SeedFoursTraceFromTheBlindHuntShrinksToAtMostThirtyOps) {
  if (const std::string why = kvsim::testing::sglang_skip_reason(); !why.empty())
    GTEST_SKIP() << why;
  setenv("KVSIM_SOURCE_DIR", KVSIM_SOURCE_DIR, 0);
  const OpTrace found =
      read_trace(
          std::string(KVSIM_SOURCE_DIR "/tests/data/sglang-shrink/seed004_parent.trace.jsonl"))
          .ops;
  ASSERT_EQ(found.target.kind, Target::Kind::kSglang);
  const ShrinkResult s = shrink_trace(found, {.max_replays = 300});
  ASSERT_TRUE(s.reproduced);
  EXPECT_LE(s.trace.ops.size(), 30u) << "after " << s.replays << " replays";
  ASSERT_TRUE(s.trace.violation.has_value());
  EXPECT_EQ(s.trace.violation->invariant, "prefetch.abandoned_with_free_memory");
  // The written trace carries the recorded checks and replays to the same violation.
  EXPECT_EQ(s.trace.scenario.check.full_every, found.scenario.check.full_every);
  const RunResult again = replay_ops(s.trace);
  ASSERT_TRUE(again.violation.has_value());
  EXPECT_EQ(again.violation->invariant, "prefetch.abandoned_with_free_memory");
}

}  // namespace
}  // namespace kvsim::sim
