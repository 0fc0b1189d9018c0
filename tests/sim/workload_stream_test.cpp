// Workloads at scale: the generator streams (10^7 requests start in the memory of a few), each
// arrival's recipe expands to exactly its prompt, and workload traces store recipes compactly
// and read back the same prompts (old token-list traces still read: tests/data, ctest
// cli.old_format_workload_trace).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "sim/base/json_reader.h"
#include "sim/trace/trace.h"
#include "sim/workload/mooncake.h"
#include "sim/workload/workload.h"

namespace kvsim::sim {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define KVSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KVSIM_ASAN 1
#endif
#endif

const std::string kMooncake =
    std::string(KVSIM_SOURCE_DIR "/traces/public/mooncake_synthetic_trace.jsonl");

size_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  size_t total = 0, resident = 0;
  in >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

Scenario with_kind(WorkloadKind kind, int64_t requests) {
  Scenario s = default_scenario();
  s.workload.kind = kind;
  s.workload.requests = requests;
  return s;
}

void expect_same(const Arrival& a, const Arrival& b) {
  EXPECT_EQ(a.rid, b.rid);
  EXPECT_EQ(a.tick, b.tick);
  EXPECT_EQ(a.ns, b.ns);
  EXPECT_EQ(a.output_len, b.output_len);
  EXPECT_EQ(prompt_of(a).vec(), prompt_of(b).vec()) << "rid " << a.rid;
}

// 10^7 requests (the scenario maximum; materialised they take ~5 GB): the stream's first
// arrivals are those of a short workload, and taking them costs a few MB at most.
TEST(WorkloadStream, TenMillionRequestsStartInBoundedMemory) {
  const Scenario big = with_kind(WorkloadKind::kMixed, 10'000'000);
  const std::vector<Arrival> small = generate_workload(with_kind(WorkloadKind::kMixed, 2000), 7);
  [[maybe_unused]] const size_t before = resident_bytes();  // unread under ASan
  std::unique_ptr<ArrivalSource> source = workload_source(big, 7);
  Arrival a;
  for (const Arrival& expected : small) {
    ASSERT_TRUE(source->next(a));
    expect_same(a, expected);
  }
#ifndef KVSIM_ASAN
  EXPECT_LT(resident_bytes() - before, size_t{32} << 20);
#endif
}

TEST(WorkloadStream, StreamEndsAfterTheLastRequest) {
  const Scenario scenario = with_kind(WorkloadKind::kUniform, 3);  // outlives the source
  std::unique_ptr<ArrivalSource> source = workload_source(scenario, 1);
  Arrival a;
  EXPECT_TRUE(source->next(a));
  EXPECT_TRUE(source->next(a));
  EXPECT_TRUE(source->next(a));
  EXPECT_EQ(a.rid, 3u);
  EXPECT_FALSE(source->next(a));
}

TEST(WorkloadStream, RecipeExpandsToThePromptForEveryKind) {
  for (WorkloadKind kind :
       {WorkloadKind::kMixed, WorkloadKind::kSharedPrompt, WorkloadKind::kMultiTurn,
        WorkloadKind::kAgentic, WorkloadKind::kUniform}) {
    for (const Arrival& a : generate_workload(with_kind(kind, 300), 3)) {
      ASSERT_FALSE(a.recipe.empty());
      ASSERT_EQ(recipe_length(a.recipe), static_cast<int64_t>(a.prompt.size()));
      ASSERT_EQ(expand_recipe(a.recipe).vec(), a.prompt.vec())
          << to_string(kind) << " rid " << a.rid;
    }
  }
}

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/kvsim_" + std::to_string(getpid()) + "_" + name;
}

// The compact trace reads back the same arrivals (prompts expanded from the recipes), and a
// trace written with token lists reads back the same too; the compact one is far smaller.
TEST(WorkloadStream, CompactTraceRoundTrips) {
  const Scenario s = with_kind(WorkloadKind::kMixed, 300);
  const std::vector<Arrival> arrivals = generate_workload(s, 5);
  std::vector<Arrival> tokens_only = arrivals;
  for (Arrival& a : tokens_only)
    a.recipe.clear();
  const std::string compact = temp_path("compact.jsonl");
  const std::string tokens = temp_path("tokens.jsonl");
  write_workload_trace(compact, WorkloadTrace{.scenario = s, .seed = 5, .arrivals = arrivals});
  write_workload_trace(tokens, WorkloadTrace{.scenario = s, .seed = 5, .arrivals = tokens_only});
  for (const std::string& path : {compact, tokens}) {
    const AnyTrace t = read_trace(path);
    ASSERT_EQ(t.kind, "workload");
    ASSERT_EQ(t.workload.arrivals.size(), arrivals.size());
    for (size_t i = 0; i < arrivals.size(); ++i)
      expect_same(t.workload.arrivals[i], arrivals[i]);
  }
  const AnyTrace t = read_trace(compact);
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_TRUE(t.workload.arrivals[i].prompt.empty());  // expanded only when it arrives
    EXPECT_EQ(t.workload.arrivals[i].recipe, arrivals[i].recipe);
  }
  std::ifstream a(compact, std::ios::ate), b(tokens, std::ios::ate);
  EXPECT_LT(static_cast<double>(a.tellg()), 0.5 * static_cast<double>(b.tellg()));
  std::remove(compact.c_str());
  std::remove(tokens.c_str());
}

// Imported Mooncake arrivals are their block ids; the expansion is the blocks cut to length.
TEST(WorkloadStream, MooncakeRecipeIsTheBlockIds) {
  const std::vector<MooncakeRecord> records = read_mooncake(kMooncake, 512, 20);
  const std::vector<Arrival> arrivals = import_mooncake(kMooncake, 512, 1.0, 20);
  ASSERT_EQ(arrivals.size(), records.size());
  const std::string path = temp_path("mooncake.jsonl");
  write_workload_trace(
      path, WorkloadTrace{.scenario = default_scenario(), .seed = 1, .arrivals = arrivals});
  const AnyTrace t = read_trace(path);
  for (size_t i = 0; i < records.size(); ++i) {
    std::vector<Token> expected;
    for (int64_t id : records[i].hash_ids) {
      const std::vector<Token> block = mooncake_block_tokens(id, 512);
      expected.insert(expected.end(), block.begin(), block.end());
    }
    expected.resize(static_cast<size_t>(records[i].input_length));
    EXPECT_EQ(prompt_of(arrivals[i]).vec(), expected);
    EXPECT_EQ(prompt_of(t.workload.arrivals[i]).vec(), expected);
  }
  std::remove(path.c_str());
}

// A bad recipe is an error naming the line and the segment's field, before anything expands.
TEST(WorkloadStream, BadRecipesAreErrorsNamingTheField) {
  const std::string head = nlohmann::json{{"kvsim_trace", 1},
                                          {"kind", "workload"},
                                          {"seed", 1},
                                          {"scenario", to_json(default_scenario())}}
                               .dump() +
                           "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"rid":1,"tick":0,"segments":[{"rng":"0000000000000001","n":0}],"output_len":1})",
       "x:2: field segments[0].n"},
      {R"({"rid":1,"tick":0,"segments":[{"rng":"xyz","n":4}],"output_len":1})",
       "x:2: field segments[0].rng: expected 16 lowercase hex digits"},
      {R"({"rid":1,"tick":0,"segments":[{"mooncake":[1,2],"block_tokens":512,"len":100}],"output_len":1})",
       "x:2: field segments[0].mooncake: has 2 ids but len 100 needs 1 blocks of 512"},
      {R"({"rid":1,"tick":0,"segments":[{"rng":"0000000000000001","n":2147483648},{"out":1,"n":9}],"output_len":1})",
       "x:2: field segments: describes more than"},
      {R"({"rid":1,"tick":0,"segments":[],"output_len":1})", "x:2: field segments: is empty"},
      {R"({"rid":1,"tick":0,"segments":[{"what":1}],"output_len":1})",
       "x:2: field segments[0]: expected one of tokens, rng, out, mooncake"},
      {R"({"rid":1,"tick":0,"prompt":[1],"segments":[{"tokens":[1]}],"output_len":1})",
       "x:2: field prompt: expected exactly one of prompt (tokens) and segments"},
      {R"({"rid":1,"tick":0,"segments":[{"tokens":[1],"n":3}],"output_len":1})",
       "x:2: field segments[0].n: unknown field"},
  };
  for (const auto& [line, message] : cases) {
    try {
      read_trace_text(head + line + "\n", "x");
      ADD_FAILURE() << "accepted " << line;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << line << "\n  got: " << e.what();
    }
  }
}

}  // namespace
}  // namespace kvsim::sim
