// The file store's environment under a run (issue 29): a FIFO named like a page, a sparse page
// far larger than a page, two model geometries on one directory, copies of stores left in the
// temp directory by killed runs, and a full disk.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tiers/file_storage.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/runner.h"
#include "sim/model/storage_tier.h"

namespace kvsim::sim {
namespace {

namespace fs = std::filesystem;

// A multi-turn workload whose host pool cannot keep the sessions, so pages come back from the
// store (as tests/sim/storage_sim_test.cpp's).
Scenario file_scenario(const fs::path& dir, size_t item_bytes = 16) {
  Scenario s = default_scenario();
  s.name = "storage_environment_test";
  s.cache.device_tokens = 512;
  s.cache.host_tokens = 256;
  s.cache.item_bytes = item_bytes;
  s.cache.prefetch_threshold_tokens = 8;
  s.cache.prefetch_stop_policy = PrefetchStopPolicy::kWaitComplete;
  s.cache.load_back_threshold_tokens = 4;
  s.storage = true;
  s.store.backend = StorageKind::kFile;
  s.store.dir = dir.string();
  s.workload.kind = WorkloadKind::kMultiTurn;
  s.workload.requests = 80;
  s.workload.prompt_min = 8;
  s.workload.prompt_max = 32;
  s.workload.output_max = 8;
  s.workload.sessions = 24;
  s.scheduler.max_running = 4;
  s.scheduler.chunk_tokens = 32;
  s.check.full_every = 0;
  s.faults.enabled = false;
  return s;
}

RunResult environment_run(const Scenario& s, uint64_t seed) {
  return run_scenario(RunRequest{.scenario = &s, .seed = seed});
}

std::string page_name(char c) {
  return std::string(64, c) + ".kvpage";
}

class StoreEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kvsim-store-env-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  size_t page_files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      n += e.path().extension() == ".kvpage" && e.is_regular_file() ? 1 : 0;
    return n;
  }
  fs::path dir_;
};

// Before: the run hung in FileStorage::exists (reuse) or the clear left the FIFO (cold).
TEST_F(StoreEnv, AFifoNamedLikeAPageIsForeignOnAReusedStoreAndClearedOnAColdOne) {
  const fs::path fifo = dir_ / page_name('a');
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  Scenario s = file_scenario(dir_);
  s.store.reuse = true;
  const RunResult warm = environment_run(s, 3);
  ASSERT_TRUE(warm.ok()) << warm.violation->invariant << ": " << warm.violation->detail;
  EXPECT_EQ(warm.storage.foreign_entries, 1u);
  ASSERT_NE(warm.storage.start_snapshot, nullptr);
  EXPECT_TRUE(fs::is_empty(warm.storage.start_snapshot->path()));  // the FIFO was not copied
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));              // and is left alone

  s.store.reuse = false;
  const RunResult cold = environment_run(s, 3);
  ASSERT_TRUE(cold.ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(fifo)));  // the start-of-run clear removed it
  EXPECT_EQ(cold.storage.foreign_entries, 0u);
}

// Before: the snapshot copied the whole sparse file (5.6 GB in a minute) into the temp dir.
TEST_F(StoreEnv, ASparseTebibytePageIsNotCopiedIntoTheSnapshotAndIsScrubbed) {
  Scenario s = file_scenario(dir_);
  ASSERT_TRUE(environment_run(s, 4).ok());
  ASSERT_GT(page_files(), 0u);
  const fs::path victim = fs::directory_iterator(dir_)->path();
  ASSERT_EQ(::truncate(victim.c_str(), off_t{1} << 40), 0) << std::strerror(errno);
  s.store.reuse = true;
  const RunResult warm = environment_run(s, 4);
  ASSERT_TRUE(warm.ok()) << warm.violation->detail;
  EXPECT_EQ(warm.storage.scrubbed_pages, 1u);
  ASSERT_NE(warm.storage.start_snapshot, nullptr);
  uintmax_t copied = 0;
  for (const auto& e : fs::directory_iterator(warm.storage.start_snapshot->path()))
    copied += e.file_size();
  EXPECT_LT(copied, uintmax_t{1} << 20);
  EXPECT_FALSE(fs::exists(warm.storage.start_snapshot->path() / victim.filename()));
}

// Before: the second model read the first one's page, counted it corrupt while the store
// answered ok: a storage.stats violation.
TEST_F(StoreEnv, TwoModelGeometriesOnOneDirectoryCountEachOthersPagesAsForeign) {
  Scenario small = file_scenario(dir_, 16);
  ASSERT_TRUE(environment_run(small, 5).ok());
  const size_t small_pages = page_files();
  ASSERT_GT(small_pages, 0u);
  Scenario large = file_scenario(dir_, 32);
  large.store.reuse = true;
  small.store.reuse = true;
  for (uint64_t seed : {5u, 6u}) {
    const RunResult r = environment_run(large, seed);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.violation->invariant << ": "
                        << r.violation->detail;
    EXPECT_EQ(r.storage.corrupt_pages, 0);
    const RunResult back = environment_run(small, seed);
    ASSERT_TRUE(back.ok()) << "seed " << seed << ": " << back.violation->invariant << ": "
                           << back.violation->detail;
    EXPECT_EQ(back.storage.corrupt_pages, 0);
    EXPECT_GT(back.storage.foreign_entries, 0u) << "the large model's pages are foreign";
  }
  EXPECT_TRUE(run_changes_its_store(small));  // such a run records its own trace
  small.store.reuse = false;
  EXPECT_FALSE(run_changes_its_store(small));
}

pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(StoreEnv, CopiesOfStoresLeftByKilledRunsAreSweptAndLiveOnesKept) {
  const fs::path tmp = fs::temp_directory_path();
  const fs::path stale = tmp / ("kvsim-store-snapshot-" + std::to_string(dead_pid()) + "-Ab12Cd");
  const fs::path stale_replay =
      tmp / ("kvsim-replay-store-" + std::to_string(dead_pid()) + "-x1y2z3");
  const fs::path live = tmp / ("kvsim-store-snapshot-" + std::to_string(::getpid()) + "-Zz9Yy8");
  const fs::path unowned = tmp / "kvsim-store-snapshot-Qw3Er4";  // no pid: not ours to judge
  for (const fs::path& d : {stale, stale_replay, live, unowned}) {
    fs::create_directories(d);
    std::ofstream(d / page_name('b')) << "x";
  }
  Scenario s = file_scenario(dir_);
  s.store.reuse = true;
  const RunResult r = environment_run(s, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_replay));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(unowned));
  // The run's own snapshot carries its pid, so a later run can tell whether it is stale.
  ASSERT_NE(r.storage.start_snapshot, nullptr);
  EXPECT_NE(r.storage.start_snapshot->path().filename().string().find(
                "kvsim-store-snapshot-" + std::to_string(::getpid()) + "-"),
            std::string::npos);
  for (const fs::path& d : {stale, stale_replay, live, unowned})
    fs::remove_all(d);
}

// A 64 KiB tmpfs as the store (needs CAP_SYS_ADMIN: skipped without it).
class FullStore : public StoreEnv {
 protected:
  void SetUp() override {
    StoreEnv::SetUp();
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount(dir_.c_str());
    StoreEnv::TearDown();
  }
  std::string run_error(const Scenario& s) {
    try {
      environment_run(s, 2);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  bool mounted_ = false;
};

// Before: a storage.contract violation (exit 1, a failing trace) on a fresh store and counted
// write failures (exit 0) on a reused one.
TEST_F(FullStore, AFullDiskIsAnInputErrorNamingTheDirectoryOnFreshAndReusedStores) {
  Scenario s = file_scenario(dir_, 1024);  // pages of 2 KiB and more: 64 KiB holds a few dozen
  const std::string fresh = run_error(s);
  EXPECT_NE(fresh.find("storage directory " + dir_.string() + " is full"), std::string::npos)
      << fresh;
  EXPECT_NE(fresh.find("No space left on device"), std::string::npos) << fresh;
  s.store.reuse = true;
  const std::string reused = run_error(s);
  EXPECT_NE(reused.find("storage directory " + dir_.string() + " is full"), std::string::npos)
      << reused;
}

}  // namespace
}  // namespace kvsim::sim
