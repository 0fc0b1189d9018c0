// The storage tier in the simulator: the cache.storage field, storage faults under the content
// oracle (every backend), file and memory agreeing, persistent stores (emptied unless reused,
// reused stores digested, scrubbed and replayable), and a damaged store that heals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/tiers/file_storage.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::string& cache) {
  try {
    parse_scenario(parse_json(R"({"name": "x", "cache": )" + cache + "}", "s.json"), "s.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A multi-turn workload whose host pool cannot keep the sessions: prefixes come back from
// storage (the shape of scenarios/file_storage_budget.json, smaller).
Scenario storage_scenario(StorageKind kind, const std::string& dir = "") {
  Scenario s = default_scenario();
  s.name = "storage_sim_test";
  s.cache.device_tokens = 512;
  s.cache.host_tokens = 256;
  s.cache.prefetch_threshold_tokens = 8;
  s.cache.prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete;
  s.cache.load_back_threshold_tokens = 4;
  s.storage = true;
  s.store.backend = kind;
  s.store.dir = dir;
  s.workload.kind = WorkloadKind::kMultiTurn;
  s.workload.requests = 80;
  s.workload.prompt_min = 8;
  s.workload.prompt_max = 32;
  s.workload.output_max = 8;
  s.workload.sessions = 24;
  s.scheduler.max_running = 4;
  s.scheduler.chunk_tokens = 32;
  s.check.full_every = 0;
  return s;
}

class StoreDir : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kvsim-storage-sim-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<fs::path> pages() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".kvpage") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

RunResult storage_run(const Scenario& s, uint64_t seed, std::vector<Op>* ops = nullptr) {
  return run_scenario(RunRequest{.scenario = &s, .seed = seed, .record = ops});
}

PageDigest key_of_file(const fs::path& p) {
  PageDigest d{};
  const std::string hex = p.filename().string().substr(0, 64);
  for (size_t i = 0; i < d.size(); ++i)
    d[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return d;
}

// --- The field ----------------------------------------------------------------------------

TEST(StorageField, BooleanAndObjectFormsParseAndRoundTrip) {
  Scenario plain =
      parse_scenario(parse_json(R"({"name": "x", "cache": {"storage": true}})", "s"), "s");
  EXPECT_TRUE(plain.storage);
  EXPECT_EQ(plain.store, StorageOptions{});
  EXPECT_EQ(to_json(plain)["cache"]["storage"], true);  // older traces keep their text

  Scenario file = parse_scenario(
      parse_json(R"({"name": "x", "cache": {"storage": {"backend": "file", "dir": "/d",
                 "capacity_bytes": 4096, "durable": true, "reuse": true}}})",
                 "s"),
      "s");
  EXPECT_TRUE(file.storage);
  EXPECT_EQ(file.store.backend, StorageKind::kFile);
  EXPECT_EQ(file.store.dir, "/d");
  EXPECT_EQ(file.store.capacity_bytes, 4096);
  EXPECT_TRUE(file.store.durable);
  EXPECT_TRUE(file.store.reuse);
  const Scenario back = parse_scenario(to_json(file), "s");
  EXPECT_EQ(back.store, file.store);
  EXPECT_EQ(to_json(back), to_json(file));

  Scenario off = parse_scenario(
      parse_json(R"({"name": "x", "cache": {"storage": {"enabled": false}}})", "s"), "s");
  EXPECT_FALSE(off.storage);
}

TEST(StorageField, ErrorsNameTheField) {
  EXPECT_EQ(error_of(R"({"storage": {"backend": "s3"}})").substr(0, 51),
            "s.json: field cache.storage.backend: \"s3\" is not on");
  EXPECT_EQ(error_of(R"({"storage": {"backend": "memory", "dir": "/x"}})"),
            "s.json: field cache.storage.dir: applies to the file backend only");
  EXPECT_EQ(error_of(R"({"storage": {"backend": "file", "reuse": true}})").substr(0, 46),
            "s.json: field cache.storage.reuse: needs a dir");
  EXPECT_EQ(error_of(R"({"storage": {"capacity_bytes": -1}})").substr(0, 51),
            "s.json: field cache.storage.capacity_bytes: -1 is o");
  EXPECT_EQ(error_of(R"({"storage": {"bakend": "file"}})"),
            "s.json: field cache.storage.bakend: unknown field (did you mean backend?)");
  EXPECT_EQ(error_of(R"({"storage": 3})"),
            "s.json: field cache.storage: expected true or false, got number");
}

TEST_F(StoreDir, BadDirectoriesAreInputErrorsNamingTheFieldAndTheOsReason) {
  Scenario s = storage_scenario(StorageKind::kFile, (dir_ / "missing").string());
  s.source = "x.json";
  try {
    check_storage_dir(s);
    FAIL() << "a missing directory was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "x.json: field cache.storage.dir: " + s.store.dir + ": No such file or directory");
  }
  std::ofstream(dir_ / "file") << "x";
  s.store.dir = (dir_ / "file").string();
  EXPECT_THROW(storage_run(s, 1), InputError);  // the executor refuses it too, before any op
  EXPECT_EQ(storage_dir_problem(s.store.dir), "Not a directory");
  EXPECT_EQ(storage_dir_problem(dir_.string()), "");
}

// --- Faults -------------------------------------------------------------------------------

class StorageFaultSweep : public ::testing::TestWithParam<StorageKind> {};

TEST_P(StorageFaultSweep, EveryStorageFaultFiresAndTheOracleHolds) {
  Scenario s = storage_scenario(GetParam());
  s.workload.requests = 100;
  s.faults.site_probability = 1.0;
  s.faults.fire_probability = 0.05;
  std::array<uint64_t, kStorageFaults> injected{};
  StorageRunStats total;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const RunResult r = storage_run(s, seed);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.violation->invariant << ": "
                        << r.violation->detail;
    for (size_t i = 0; i < kStorageFaults; ++i)
      injected[i] += r.storage.injected[i];
    total.corrupt_pages += r.storage.corrupt_pages;
    total.read_errors += r.storage.read_errors;
    total.miss_pages += r.storage.miss_pages;
    total.write_failures += r.storage.write_failures;
    total.hit_pages += r.storage.hit_pages;
  }
  for (size_t i = 1; i < kStorageFaults; ++i)
    EXPECT_GT(injected[i], 0u) << to_string(static_cast<StorageFault>(i));
  // Each fault shows in the counter that names its effect.
  EXPECT_GT(total.corrupt_pages, 0);
  EXPECT_GT(total.read_errors, 0);
  EXPECT_GT(total.miss_pages, 0);
  EXPECT_GT(total.write_failures, 0);
  EXPECT_GT(total.hit_pages, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageFaultSweep,
                         ::testing::Values(StorageKind::kMemory, StorageKind::kFile),
                         [](const auto& param_info) {
                           return param_info.param == StorageKind::kFile ? "file" : "memory";
                         });

TEST_F(StoreDir, ARunWithStorageFaultsReplaysFromItsTraceFile) {
  Scenario s = storage_scenario(StorageKind::kFile, dir_.string());
  s.faults.site_probability = 1.0;
  s.faults.fire_probability = 0.05;
  std::vector<Op> ops;
  const RunResult r = storage_run(s, 3, &ops);
  ASSERT_TRUE(r.ok());
  size_t faulted = 0;
  for (const Op& op : ops)
    faulted += op.kind == OpKind::kStorage && op.n != 0;
  ASSERT_GT(faulted, 0u);
  const std::string path = (dir_ / "t.trace.jsonl").string();
  write_op_trace(path, OpTrace{.scenario = s, .seed = 3, .ops = ops, .event_hash = r.event_hash});
  const AnyTrace t = read_trace(path);
  ASSERT_EQ(t.ops.ops.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i)
    ASSERT_EQ(t.ops.ops[i].n, ops[i].n) << "op " << i;
  const RunResult again = replay_ops(t.ops);
  EXPECT_TRUE(again.ok());
  EXPECT_EQ(again.event_hash, r.event_hash);
  EXPECT_EQ(again.storage.injected, r.storage.injected);
}

// --- Backends agree; persistent stores ----------------------------------------------------

TEST_F(StoreDir, FileAndMemoryBackendsGiveTheSameRunWithoutFaults) {
  Scenario mem = storage_scenario(StorageKind::kMemory);
  Scenario file = storage_scenario(StorageKind::kFile, dir_.string());
  mem.faults.enabled = file.faults.enabled = false;
  for (uint64_t seed : {1, 2}) {
    const RunResult a = storage_run(mem, seed);
    const RunResult b = storage_run(file, seed);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.event_hash, b.event_hash) << "seed " << seed;
    EXPECT_EQ(a.storage.hit_pages, b.storage.hit_pages);
    EXPECT_EQ(a.storage.pages, b.storage.pages);
  }
}

TEST_F(StoreDir, ARunStartsFromAnEmptyStoreUnlessItReusesIt) {
  Scenario s = storage_scenario(StorageKind::kFile, dir_.string());
  s.faults.enabled = false;
  const RunResult cold = storage_run(s, 5);
  ASSERT_TRUE(cold.ok());
  ASSERT_GT(pages().size(), 0u);
  const RunResult cold_again = storage_run(s, 5);  // the store left behind is emptied first
  EXPECT_EQ(cold_again.event_hash, cold.event_hash);
  EXPECT_TRUE(cold_again.storage.start_digest.empty());

  const std::string before = store_digest(dir_);
  s.store.reuse = true;
  const RunResult warm = storage_run(s, 5);
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ(warm.storage.start_digest, before);
  EXPECT_GT(warm.storage.hit_pages, cold.storage.hit_pages);  // the warm store serves pages
  EXPECT_NE(warm.event_hash, cold.event_hash);
}

TEST_F(StoreDir, AFailureOnAWarmStoreReplaysFromItsSnapshotAndNotFromAnotherStore) {
  Scenario s = storage_scenario(StorageKind::kFile, dir_.string());
  s.faults.enabled = false;
  ASSERT_TRUE(storage_run(s, 7).ok());
  // Forge every page: a changed payload under a recomputed checksum passes every check but
  // the content oracle's.
  {
    FileStorage file(dir_);
    for (const fs::path& p : pages()) {
      const PageDigest key = key_of_file(p);
      std::vector<std::byte> payload;
      ASSERT_EQ(file.get(key, &payload), StorageStatus::kOk);
      payload[0] ^= std::byte{0x40};
      file.remove(key);
      ASSERT_EQ(file.set(key, payload), StorageStatus::kOk);
    }
  }
  s.store.reuse = true;
  std::vector<Op> ops;
  const RunResult r = storage_run(s, 7, &ops);
  ASSERT_FALSE(r.ok()) << "a forged page was served without the oracle noticing";
  EXPECT_EQ(r.violation->invariant, "content");
  ASSERT_NE(r.storage.start_snapshot, nullptr);
  EXPECT_EQ(store_digest(r.storage.start_snapshot->path()), r.storage.start_digest);

  // What the CLI writes: the digest in the header, the snapshot next to the trace.
  OpTrace trace{.scenario = s, .seed = 7, .ops = ops, .event_hash = r.event_hash};
  trace.scenario.store.digest = r.storage.start_digest;
  trace.scenario.store.dir = r.storage.start_snapshot->path().string();
  const RunResult again = replay_ops(trace);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.violation->invariant, "content");
  EXPECT_EQ(again.event_hash, r.event_hash);
  EXPECT_EQ(store_digest(r.storage.start_snapshot->path()), r.storage.start_digest);  // a copy ran

  // Another store (the live directory, once one more page is gone): replay refuses it.
  fs::remove(pages().front());
  trace.scenario.store.dir = dir_.string();
  try {
    replay_ops(trace);
    FAIL() << "replay ran on a different store";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("field cache.storage.digest"), std::string::npos);
  }
}

// --- A damaged store heals ----------------------------------------------------------------

TEST_F(StoreDir, PagesDamagedBetweenRunsAreNeverServedAreRemovedAndTheStoreHeals) {
  Scenario s = storage_scenario(StorageKind::kFile, dir_.string());
  s.faults.enabled = false;
  const RunResult first = storage_run(s, 11);
  ASSERT_TRUE(first.ok());
  std::vector<fs::path> files = pages();
  ASSERT_GE(files.size(), 40u);
  // Damage every fourth page, each a different way.
  std::vector<fs::path> damaged;
  std::vector<fs::path> deleted;
  for (size_t i = 0; i + 1 < files.size(); i += 4) {
    const fs::path& p = files[i];
    std::ifstream in(p, std::ios::binary);
    std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    in.close();
    switch ((i / 4) % 6) {
      case 0:
        bytes.back() ^= 1;
        break;  // flipped payload byte
      case 1:
        bytes[25] ^= 1;
        break;  // flipped checksum byte
      case 2:
        bytes[0] = 'X';
        break;  // wrong magic
      case 3:
        bytes.resize(bytes.size() / 2);
        break;  // truncated
      case 4:
        bytes.clear();
        break;   // zero length
      case 5: {  // another page's file
        std::ifstream other(files[i + 1], std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(other), std::istreambuf_iterator<char>());
        break;
      }
    }
    std::ofstream(p, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    damaged.push_back(p);
  }
  for (size_t i = 2; i < files.size(); i += 8) {
    fs::remove(files[i]);
    deleted.push_back(files[i]);
  }

  s.store.reuse = true;
  const RunResult second = storage_run(s, 11);
  ASSERT_TRUE(second.ok()) << second.violation->invariant << ": " << second.violation->detail;
  EXPECT_EQ(second.storage.scrubbed_pages, damaged.size());  // counted and removed
  EXPECT_GT(second.storage.hit_pages, 0);
  // Nothing damaged is left: every page file validates (rewritten ones included).
  FileStorage check(dir_);
  std::vector<std::byte> payload;
  for (const fs::path& p : pages())
    EXPECT_EQ(check.get(key_of_file(p), &payload), StorageStatus::kOk) << p;
  size_t rewritten = 0;
  for (const fs::path& p : damaged)
    rewritten += fs::exists(p);
  EXPECT_GT(rewritten, 0u);  // the next backup of a removed page wrote it again

  const RunResult third = storage_run(s, 11);  // the healed store is not hit again
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third.storage.scrubbed_pages, 0u);
  EXPECT_EQ(third.storage.corrupt_pages, 0);
}

}  // namespace
}  // namespace kvsim::sim
