// The cheaper checks (issue 12) check the same things: the fast content oracle gives the
// reference bytes and finds the first wrong item, the auto full-check period counts only ops
// that may change the cache, and the memory estimate of a streamed workload counts the
// prompts in flight, not every request's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "sim/base/json_reader.h"
#include "sim/campaign/resources.h"
#include "sim/campaign/runner.h"
#include "sim/model/content_oracle.h"
#include "sim/model/executor.h"

namespace kvsim::sim {
namespace {

TEST(ContentOracle, FastFillGivesTheReferenceBytes) {
  std::mt19937_64 rng(12);
  for (size_t bytes = 0; bytes <= 70; ++bytes) {
    for (int trial = 0; trial < 20; ++trial) {
      const uint64_t h = rng();
      const size_t pos = rng() % 100000;
      const auto layer = static_cast<int32_t>(rng() % 64);
      const auto kind = static_cast<ContentKind>(rng() % 4);
      std::vector<std::byte> fast(bytes), ref(bytes);
      fill_item(h, pos, layer, kind, fast);
      fill_item_reference(h, pos, layer, kind, ref);
      ASSERT_EQ(fast, ref) << bytes << " bytes, trial " << trial;
    }
  }
}

TEST(ContentOracle, FillItemsAndFirstWrongItemAgreeWithFillItem) {
  std::mt19937_64 rng(7);
  for (size_t item : {size_t{8}, size_t{24}, size_t{5}}) {
    std::vector<uint64_t> hashes(300);
    for (uint64_t& h : hashes)
      h = rng();
    const size_t first = 40, count = 200;
    std::vector<std::byte> got(count * item);
    fill_items(hashes, first, count, 3, ContentKind::kSwa, item, got.data());
    std::vector<size_t> positions(count);
    for (size_t i = 0; i < count; ++i) {
      positions[i] = first + i;
      std::vector<std::byte> one(item);
      fill_item(hashes[first + i], first + i, 3, ContentKind::kSwa, one);
      ASSERT_EQ(0, std::memcmp(one.data(), got.data() + i * item, item)) << item << " " << i;
    }
    std::vector<std::byte> scratch;
    EXPECT_EQ(count,
              first_wrong_item(hashes, positions, 3, ContentKind::kSwa, item, got.data(), scratch));
    // Another layer's bytes are wrong from the first item.
    EXPECT_EQ(0u,
              first_wrong_item(hashes, positions, 4, ContentKind::kSwa, item, got.data(), scratch));
    for (int trial = 0; trial < 10; ++trial) {
      const size_t bad = rng() % count;
      const size_t byte = bad * item + rng() % item;
      std::vector<std::byte> corrupt = got;
      corrupt[byte] ^= std::byte{1};
      EXPECT_EQ(bad, first_wrong_item(hashes, positions, 3, ContentKind::kSwa, item, corrupt.data(),
                                      scratch));
    }
  }
}

Scenario auto_checked() {
  Scenario s = default_scenario();
  s.faults.enabled = false;
  s.check.full_every = 0;
  return s;
}

TEST(CheckSchedule, AutoPeriodSkipsOpsThatCannotChangeTheCache) {
  Executor ex(auto_checked(), 1);
  // Far more ticks and liveness checks than one period (nodes + pages) / 8: no walk.
  for (int64_t t = 1; t <= 20000; ++t) {
    ASSERT_TRUE(ex.apply(Op{.kind = OpKind::kTick, .n = t}).applied);
    ASSERT_TRUE(ex.apply(Op{.kind = OpKind::kLiveness}).applied);
  }
  EXPECT_EQ(0, ex.stats().full_checks);
  // Polls may change the cache (they consume transfer acks): they count.
  for (int i = 0; i < 20000 && ex.stats().full_checks == 0; ++i)
    ASSERT_TRUE(ex.apply(Op{.kind = OpKind::kPoll}).applied);
  EXPECT_GT(ex.stats().full_checks, 0);
  EXPECT_FALSE(ex.failed());
}

TEST(CheckSchedule, ExplicitPeriodCountsEveryOp) {
  Scenario s = auto_checked();
  s.check.full_every = 10;
  Executor ex(s, 1);
  for (int64_t t = 1; t <= 100; ++t)
    ASSERT_TRUE(ex.apply(Op{.kind = OpKind::kTick, .n = t}).applied);
  EXPECT_EQ(10, ex.stats().full_checks);
}

TEST(CheckSchedule, AutoRunStillWalksAndStaysClean) {
  Scenario s = auto_checked();
  const RunResult a = run_scenario(RunRequest{.scenario = &s, .seed = 3});
  EXPECT_FALSE(a.violation.has_value());
  EXPECT_GT(a.stats.full_checks, 0);
}

Scenario streamed(int64_t requests, int64_t prompt_max) {
  Scenario s = default_scenario();
  s.workload.requests = requests;
  s.workload.prompt_max = prompt_max;
  return s;
}

uint64_t need(const Scenario& s, const char* field) {
  for (const MemoryNeed& n : scenario_memory(s, true)) {
    if (n.field == field) return n.bytes;
  }
  return 0;
}

TEST(Resources, StreamedPromptsAreCountedInFlightNotPerRequest) {
  // 10^6 requests of up to 4,096 fresh tokens: 16 GB if every prompt were held, but the
  // generator streams and finished requests drop their tokens.
  const Scenario big = streamed(1000000, 4096);
  EXPECT_NO_THROW(check_memory(big, true, uint64_t{4} << 30, "big.json"));
  // The prompts in flight stop growing with the request count once every request can no
  // longer be in flight at once...
  EXPECT_EQ(need(streamed(1000000, 4096), "workload.prompt_max"),
            need(streamed(2000000, 4096), "workload.prompt_max"));
  // ...but grow with it below that, and with the prompt size.
  EXPECT_LT(need(streamed(10, 4096), "workload.prompt_max"),
            need(streamed(100, 4096), "workload.prompt_max"));
  EXPECT_LT(need(streamed(1000, 64), "workload.prompt_max"),
            need(streamed(1000, 4096), "workload.prompt_max"));
  // A workload trace or Mooncake replay generates nothing.
  EXPECT_EQ(0u, [&] {
    for (const MemoryNeed& n : scenario_memory(big, false))
      if (n.field == "workload.prompt_max") return n.bytes;
    return uint64_t{0};
  }());
}

TEST(Resources, HugePromptsInFlightAreStillRefused) {
  const Scenario s = streamed(100, int64_t{1} << 30);
  try {
    check_memory(s, true, uint64_t{4} << 30, "p.json");
    FAIL() << "accepted 100 prompts of 2^30 tokens in 4 GiB";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: field workload.prompt_max: needs"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvsim::sim
