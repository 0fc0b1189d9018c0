// The Mooncake importer and the block-LRU reference: the published hit-rate table is
// reproduced from the trace in traces/public (within 0.01), and the importer is strict.
#include <gtest/gtest.h>

#include <fstream>

#include "sim/base/json_reader.h"
#include "sim/workload/block_lru.h"
#include "sim/workload/mooncake.h"

namespace kvsim::sim {
namespace {

const std::string kTrace =
    std::string(KVSIM_SOURCE_DIR "/traces/public/mooncake_synthetic_trace.jsonl");

TEST(Mooncake, TraceHasThePublishedShape) {
  const std::vector<MooncakeRecord> records = read_mooncake(kTrace, 512);
  ASSERT_EQ(records.size(), 3993u);
  int64_t input = 0;
  size_t blocks = 0;
  for (const MooncakeRecord& r : records) {
    input += r.input_length;
    blocks += r.hash_ids.size();
  }
  EXPECT_EQ(blocks, 121877u);
  EXPECT_NEAR(static_cast<double>(input) / 3993.0, 15325.0, 1.0);
}

// README of traces/public: unlimited 0.651; 10^5 → 0.012, 10^6 → 0.142, 3·10^6 → 0.315,
// 10^7 → 0.577, 5·10^7 → 0.651.
TEST(Mooncake, BlockLruReproducesTheReferenceHitRates) {
  const std::vector<MooncakeRecord> records = read_mooncake(kTrace, 512);
  const std::vector<std::pair<int64_t, double>> table = {{0, 0.651},          {100'000, 0.012},
                                                         {1'000'000, 0.142},  {3'000'000, 0.315},
                                                         {10'000'000, 0.577}, {50'000'000, 0.651}};
  for (const auto& [capacity, expected] : table) {
    const BlockLruResult r = block_lru_hit_rate(records, capacity, 512);
    EXPECT_NEAR(r.token_hit_rate, expected, 0.01) << "capacity " << capacity;
  }
  EXPECT_NEAR(block_lru_hit_rate(records, 0, 512).block_hit_rate, 0.640, 0.01);
}

TEST(Mooncake, EqualIdsGiveEqualTokensAndPromptsHaveTheirLength) {
  EXPECT_EQ(mooncake_block_tokens(7, 512), mooncake_block_tokens(7, 512));
  EXPECT_NE(mooncake_block_tokens(7, 512), mooncake_block_tokens(8, 512));
  const std::vector<Arrival> a = import_mooncake(kTrace, 512, 1.0, 3);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(prompt_of(a[0]).size(), 40160u);
  EXPECT_EQ(prompt_of(a[1]).size(), 36640u);
}

TEST(Mooncake, MalformedLinesNameFileLineAndField) {
  const std::string path = ::testing::TempDir() + "/bad_mooncake.jsonl";
  auto expect_error = [&](const std::string& body, const std::string& fragment) {
    std::ofstream(path) << body;
    try {
      read_mooncake(path, 512);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"timestamp": 0, "input_length": 10, "output_length": 1})",
               ":1: field hash_ids: missing");
  expect_error(
      "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}\n"
      "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}",
      ":2: field timestamp: -1 is out of range");
  expect_error(R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": ["a"]})",
               ":1: field hash_ids[0]: expected an integer, got string");
  expect_error("", "no records");
}

}  // namespace
}  // namespace kvsim::sim
