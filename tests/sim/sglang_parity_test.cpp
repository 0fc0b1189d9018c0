// Parity with SGLang's RadixCache, per request: every configuration of the oracle in
// tests/data/sglang-oracle (SGLang's own figures, see its NOTE.md) is replayed on kvsim's core
// with the same op stream (sim/trace/sglang_replay.h), and every column of every request must be
// equal: hit tokens, new tokens, evict requested/evicted, tokens cached.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/common/assert.h"
#include "sim/base/json_reader.h"
#include "sim/trace/sglang_replay.h"

namespace kvsim::sim {
namespace {

const std::string kParityTrace =
    std::string(KVSIM_SOURCE_DIR "/traces/public/mooncake_synthetic_trace.jsonl");
const std::string kOracle = std::string(KVSIM_SOURCE_DIR "/tests/data/sglang-oracle");

std::vector<std::filesystem::path> oracle_summaries() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(kOracle)) {
    if (e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SglangParity, EveryRequestOfEveryConfigurationMatchesSglang) {
  ScopedThrowingAsserts asserts;
  const std::vector<std::filesystem::path> configs = oracle_summaries();
  ASSERT_EQ(configs.size(), 9u) << "tests/data/sglang-oracle lost a configuration";
  std::map<std::pair<bool, bool>, SglangTrace> traces;  // (tail_hash, with_output)
  for (const auto& json_path : configs) {
    SCOPED_TRACE(json_path.filename().string());
    std::ifstream in(json_path);
    const nlohmann::json s = nlohmann::json::parse(in);
    SglangReplayOptions o;
    o.page_size = s.at("page_size").get<int32_t>();
    o.capacity_tokens =
        s.at("capacity_tokens").is_null() ? 0 : s.at("capacity_tokens").get<int64_t>();
    o.tail_hash = s.at("tail").get<std::string>() == "hash";
    o.with_output = s.at("with_output").get<bool>();
    o.server_match_limit = s.at("server_match_limit").get<bool>();
    ASSERT_EQ(s.at("eviction_policy").get<std::string>(), "lru");
    const auto key = std::make_pair(o.tail_hash, o.with_output);
    if (!traces.contains(key)) {
      traces.emplace(key, SglangTrace::load(kParityTrace, o.tail_hash, o.with_output));
    }
    const SglangReplayResult r = replay_sglang_ops(traces.at(key), o);

    std::filesystem::path csv = json_path;
    csv.replace_extension(".csv");
    const std::vector<SglangReplayRow> want = read_sglang_rows(csv.string());
    ASSERT_EQ(r.rows.size(), want.size());
    size_t hit_diffs = 0;
    size_t other_diffs = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (r.rows[i].hit_tokens != want[i].hit_tokens) {
        if (hit_diffs++ < 3) {
          ADD_FAILURE() << "request " << i << ": kvsim hit " << r.rows[i].hit_tokens
                        << " tokens, SGLang " << want[i].hit_tokens;
        }
      } else if (!(r.rows[i] == want[i]) && other_diffs++ < 3) {
        ADD_FAILURE() << "request " << i << ": same hit, different new/evict/cache figures";
      }
    }
    EXPECT_EQ(hit_diffs, 0u);
    EXPECT_EQ(other_diffs, 0u);
    EXPECT_EQ(r.hit_tokens, s.at("hit_tokens").get<int64_t>());
    EXPECT_EQ(r.input_tokens, s.at("input_tokens").get<int64_t>());
    EXPECT_EQ(r.evict_calls, s.at("evict_calls").get<int64_t>());
    EXPECT_EQ(r.evicted_tokens, s.at("evicted_tokens").get<int64_t>());
    EXPECT_EQ(r.truncated_inserts, s.at("truncated_inserts").get<int64_t>());
    EXPECT_EQ(r.final_cache_tokens, s.at("final_cache_tokens").get<int64_t>());
  }
}

// The comparison is sensitive: one page less of capacity changes SGLang's figures.
TEST(SglangParity, OnePageLessCapacityIsDetected) {
  ScopedThrowingAsserts asserts;
  const SglangTrace trace = SglangTrace::load(kParityTrace, false, false, 1500);
  SglangReplayOptions o;
  o.capacity_tokens = 3'000'000 - 512;
  const SglangReplayResult r = replay_sglang_ops(trace, o);
  const std::vector<SglangReplayRow> want = read_sglang_rows(kOracle + "/syn_P512_C3e6.csv");
  size_t diffs = 0;
  for (size_t i = 0; i < r.rows.size(); ++i)
    diffs += r.rows[i] == want[i] ? 0 : 1;
  EXPECT_GT(diffs, 0u);
}

TEST(SglangParity, TokensFollowTheOracleDerivation) {
  const SglangTrace plain = SglangTrace::load(kParityTrace, false, false, 50);
  const SglangTrace hashed = SglangTrace::load(kParityTrace, true, true, 50);
  // Request 0: 40,160 tokens, hash ids 0..78: block b is tokens b*512 .. b*512+511.
  ASSERT_EQ(plain.input_length(0), 40160);
  EXPECT_EQ(plain.input(0)[0], 0);
  EXPECT_EQ(plain.input(0)[512 * 5 + 7], 512 * 5 + 7);
  // The partial last block: request-unique by default, its hash block's tokens with --tail hash.
  const Token tail_first = plain.input(0)[78 * 512];
  EXPECT_GE(tail_first, (78 + 1) * 512);
  EXPECT_EQ(hashed.input(0)[78 * 512], 78 * 512);
  // Outputs are appended to the inserted sequence only.
  EXPECT_EQ(plain.inserted(0).size(), 40160u);
  EXPECT_EQ(hashed.inserted(0).size(), 40160u + 6u);
  for (size_t i = 1; i < 50; ++i) {
    // Unique tokens never repeat across requests.
    EXPECT_NE(plain.input(i).back(), tail_first);
  }
}

TEST(SglangParity, BadOracleCsvIsAnInputError) {
  const std::string path = ::testing::TempDir() + "/bad_oracle.csv";
  {
    std::ofstream out(path);
    out << "idx,input_len,hit_tokens,new_tokens,evict_requested,evicted,cache_tokens\n"
        << "0,10,x,0,0,0,0\n";
  }
  try {
    (void)read_sglang_rows(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_oracle.csv:2: field hit_tokens"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvsim::sim
