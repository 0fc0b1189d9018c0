// Call traces that start with a tree snapshot (a segment of a windowed recording,
// sim/trace/call_trace_snapshot.h): replay restores the snapshot (same node ids and eviction order
// afterwards), the two call forms that name what predates the segment apply, shrink keeps the
// snapshot whole, and a bad snapshot is an InputError naming the file, line and field.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_replay.h"

namespace kvsim::sim {
namespace {

// Lines 1-5: header, snapshot (3 nodes, a lock held by call 7 on node 2), nodes 1, 2, 4.
// Calls (lines 6-): match, lock a snapshot node, unlock the earlier lock, evict, insert, unlock.
std::string segment_body(const std::string& snapshot_extra = "",
                         const std::string& node2_parent = "1",
                         const std::string& locks = R"([{"call":7,"anchor":2,"start":2}])") {
  return R"({"kvsim_trace":1,"kind":"calls","page_size":2,"eviction_policy":"lru","source":"test"}
{"snapshot":{"nodes":3,"next_id":5,"clock":9,"first_call":10,"segment":1,"locks":)" +
         locks + snapshot_extra + R"(}}
{"node":1,"parent":0,"ns":0,"tokens":[1,1],"value":[10,11],"lock_ref":1,"last_access":5,"creation":1,"hit_count":2}
{"node":2,"parent":)" +
         node2_parent +
         R"(,"ns":0,"tokens":[2,2],"value":[12,13],"lock_ref":1,"last_access":6,"creation":2,"hit_count":1}
{"node":4,"parent":0,"ns":0,"tokens":[3,3,3,3],"value":[20,21,22,23],"last_access":9,"creation":8,"hit_count":1}
{"op":"match","ns":0,"tokens":[1,1,2,2,5,5]}
{"op":"lock","node":4}
{"op":"unlock","lock":{"call":7,"anchor":2,"start":2}}
{"op":"evict","n":2}
{"op":"insert","ns":0,"tokens":[3,3,3,3,7,7],"value":[20,21,22,23,30,31]}
{"op":"unlock","of":1}
)";
}

// A recording ends with a footer: these end as one cut by SIGTERM (calls and hash, no sizes).
std::string signal_footer(int calls) {
  return R"({"end":{"calls":)" + std::to_string(calls) +
         R"(,"event_hash":"0000000000000000","cut_by_signal":15}})" + "\n";
}

std::string segment(const std::string& snapshot_extra = "", const std::string& node2_parent = "1",
                    const std::string& locks = R"([{"call":7,"anchor":2,"start":2}])") {
  return segment_body(snapshot_extra, node2_parent, locks) + signal_footer(6);
}

void expect_input_error(const std::string& text, const std::string& want) {
  try {
    read_call_trace_text(text, "t.jsonl");
    ADD_FAILURE() << "accepted; wanted: " << want;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(CallTraceSnapshot, ReplayRestoresIdsClocksAndLocks) {
  const CallTrace t = read_call_trace_text(segment(), "t.jsonl");
  ASSERT_TRUE(t.snapshot);
  EXPECT_EQ(t.snapshot->tree.nodes.size(), 3u);
  EXPECT_EQ(t.snapshot->first_call, 10u);
  const CallReplay r = replay_calls(t);
  ASSERT_FALSE(r.violation) << r.violation->second;
  EXPECT_TRUE(r.sanity.empty());
  EXPECT_EQ(r.applied, 6u);
  EXPECT_EQ(r.skipped, 0u);
  // The match reaches snapshot node 2 (4 tokens); the evict takes node 2, the LRU unlocked leaf
  // once the earlier lock is released (node 4 is locked), freeing its slots 12, 13; the insert
  // adds node 5, the snapshot's next id.
  EXPECT_EQ(r.outcomes[0]->amount, 4);
  EXPECT_EQ(r.outcomes[0]->node, 2u);
  EXPECT_EQ(r.outcomes[3]->amount, 2);
  EXPECT_EQ(r.outcomes[3]->slots_hash, hash_slots({12, 13}));
  EXPECT_EQ(r.outcomes[4]->amount, 4);
  EXPECT_EQ(r.outcomes[4]->node, 5u);
  EXPECT_EQ(r.nodes, 4u);  // root, 1, 4, 5
  EXPECT_EQ(r.protected_size, 0);
  EXPECT_EQ(r.evictable, 8);
}

TEST(CallTraceSnapshot, WrittenAndReadBackReplaysTheSame) {
  const CallTrace t = read_call_trace_text(segment(), "t.jsonl");
  const CallReplay r = replay_calls(t);
  const std::string path =
      (std::filesystem::temp_directory_path() / "kvsim_snapshot_roundtrip.calls.jsonl").string();
  write_call_trace(path, t, r);
  const CallTrace back = read_call_trace(path);
  std::remove(path.c_str());
  ASSERT_TRUE(back.snapshot);
  EXPECT_TRUE(back.snapshot->tree == t.snapshot->tree);
  EXPECT_EQ(back.snapshot->lock_calls, t.snapshot->lock_calls);
  const CallReplay again = replay_calls(back);
  EXPECT_TRUE(call_replay_matches(back, again));
  EXPECT_EQ(again.event_hash, r.event_hash);
}

TEST(CallTraceSnapshot, ShrinkKeepsTheSnapshotWhole) {
  // A second release of the earlier lock, after its node was evicted: "locked node 2 vanished".
  const std::string text = segment_body() + R"({"op":"match","ns":0,"tokens":[3,3]}
{"op":"unlock","lock":{"call":7,"anchor":2,"start":2}}
)" + signal_footer(8);
  const CallTrace t = read_call_trace_text(text, "t.jsonl");
  const CallReplay r = replay_calls(t);
  ASSERT_TRUE(r.violation);
  EXPECT_NE(r.violation->second.find("vanished"), std::string::npos);
  const CallShrinkResult s = shrink_calls(t, 1000);
  ASSERT_TRUE(s.reproduced);
  ASSERT_TRUE(s.trace.snapshot);
  EXPECT_TRUE(s.trace.snapshot->tree == t.snapshot->tree);
  EXPECT_EQ(s.trace.calls.size(), 3u);  // unlock, evict, unlock again
  EXPECT_TRUE(s.trace.calls.front().earlier.has_value());
}

TEST(CallTraceSnapshot, PageGranularValuesAreRunsOfPages) {
  // A node whose value is page-granular (stride 2: first slots of pages), recorded as slot runs
  // like any value: (10, 4) is slots 10-13, pages 10-11 and 12-13. Written back inline and read
  // again, it is the same.
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / "kvsim_snapshot_stride.calls.jsonl").string();
  const int64_t run[2] = {10, 4};
  {
    std::FILE* f = std::fopen((path + ".bin").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(run, sizeof run, 1, f);
    std::fclose(f);
    f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        R"({"kvsim_trace":1,"kind":"calls","page_size":2,"blob":"kvsim_snapshot_stride.calls.jsonl.bin"}
{"snapshot":{"nodes":1,"next_id":2,"clock":1}}
{"node":1,"parent":0,"tokens":[1,1,2,2],"val_runs":[0,1],"stride":2,"last_access":1,"creation":1,"hit_count":1}
{"op":"match","ns":0,"tokens":[1,1,2,2]}
{"op":"evict","n":4}
{"end":{"calls":2,"event_hash":"0000000000000000","cut_by_signal":15}}
)",
        f);
    std::fclose(f);
  }
  const CallTrace t = read_call_trace(path);
  std::remove(path.c_str());
  const SnapshotValue& v = *t.snapshot->tree.nodes.at(0).value;
  EXPECT_EQ(v.stride, 2);
  EXPECT_EQ(v.entries, (std::vector<SlotIndex>{10, 12}));
  const CallReplay r = replay_calls(t);
  EXPECT_EQ(r.outcomes[0]->amount, 4);
  EXPECT_EQ(r.outcomes[1]->slots_hash, hash_slots({10, 11, 12, 13}));
  write_call_trace(path, t, r);
  const CallTrace back = read_call_trace(path);
  std::remove(path.c_str());
  EXPECT_TRUE(back.snapshot->tree == t.snapshot->tree);
  // A stride the slots do not fit is named.
  std::string text = R"({"kvsim_trace":1,"kind":"calls","page_size":2}
{"snapshot":{"nodes":1,"next_id":2,"clock":1}}
{"node":1,"parent":0,"tokens":[1,1,2,2],"value":[10,11,13,15],"stride":2,"last_access":1,"creation":1,"hit_count":1}
)";
  expect_input_error(text, "t.jsonl:3: field value: page 1 is not 2 consecutive slots");
  // A run far longer than the node's key is refused before it is expanded.
  const int64_t huge[2] = {10, int64_t{1} << 40};
  std::FILE* f = std::fopen((path + ".bin").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(huge, sizeof huge, 1, f);
  std::fclose(f);
  text =
      R"({"kvsim_trace":1,"kind":"calls","page_size":2,"blob":"kvsim_snapshot_stride.calls.jsonl.bin"}
{"snapshot":{"nodes":1,"next_id":2,"clock":1}}
{"node":1,"parent":0,"tokens":[1,1,2,2],"val_runs":[0,1],"last_access":1,"creation":1,"hit_count":1}
)";
  try {
    read_call_trace_text(text, path);
    ADD_FAILURE() << "a 2^40-slot run was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":3: field val_runs: more than 4 slots"),
              std::string::npos)
        << e.what();
  }
  std::remove((path + ".bin").c_str());
}

TEST(CallTraceSnapshot, BadSnapshotsNameFileLineAndField) {
  expect_input_error(segment("", "9"),
                     "t.jsonl:4: snapshot: node 2: field parent: no node 9 in the snapshot");
  expect_input_error(segment("", "1", "[]"),
                     "t.jsonl:3: snapshot: node 1: field lock_ref: 1, but the held locks cover "
                     "it 0 time(s)");
  // The recording said its lock counts and held locks disagree: not checked.
  EXPECT_NO_THROW(
      read_call_trace_text(segment(R"(,"locks_disagree":"lock released twice")", "1", "[]"), "t"));
  std::string t = segment();
  t.replace(t.find(R"("nodes":3)"), 9, R"("nodes":4)");
  expect_input_error(t, "t.jsonl:6: the snapshot announces 4 nodes, but 3 node lines follow it");
  t = segment();
  t.replace(t.find(R"("nodes":3)"), 9, R"("nodes":2)");
  expect_input_error(t, "t.jsonl:5: field node: one node line more than the snapshot's 2");
  t = segment();
  t.replace(t.find(R"("tokens":[2,2])"), 14, R"("tokens":[2,2,2])");
  expect_input_error(t, "t.jsonl:4: snapshot: node 2: field key: 3 tokens");
}

TEST(CallTraceSnapshot, BadEarlierReferencesAreNamed) {
  std::string t = segment();
  t.replace(t.find(R"("node":4})"), 9, R"("node":3})");
  expect_input_error(t, "t.jsonl:7: field node: node 3 is not in the snapshot");
  t = segment();
  t.replace(t.find(R"({"call":7,"anchor":2,"start":2}})"), 32, R"({"call":12,"anchor":2}})");
  expect_input_error(t, "t.jsonl:8: field lock.call: 12 is not before the segment's first call 10");
  t = segment();
  t.replace(t.find(R"({"call":7,"anchor":2,"start":2}})"), 32,
            R"({"call":7,"anchor":2,"start":5}})");
  expect_input_error(t, "field lock: start 5 is not a node of the snapshot's time");
  expect_input_error(R"({"kvsim_trace":1,"kind":"calls","page_size":1}
{"op":"lock","node":1}
)",
                     "t.jsonl:2: field node: names what precedes the trace, which needs a "
                     "snapshot record");
  t = segment_body() +
      R"({"node":9,"parent":0,"tokens":[9,9],"last_access":1,"creation":1,"hit_count":0}
)";
  expect_input_error(t, "t.jsonl:12: a node line outside a snapshot");
  t = segment_body() + R"({"snapshot":{"nodes":0,"next_id":1,"clock":0}}
)";
  expect_input_error(t, "t.jsonl:12: a snapshot record comes right after the header, once");
}

}  // namespace
}  // namespace kvsim::sim
