// The storage tier as users run it: byte budgets with LRU eviction (memory and file), the
// memory store's checksum, FileStorage's durable mode, per-process temp names, stale-temp
// cleanup that leaves other processes' writes alone, clear() and usage().
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

PageDigest budget_key_of(Token t) {
  return hash_page(namespace_seed(0), std::vector<Token>{t});
}

std::vector<std::byte> budget_payload(size_t n, int fill) {
  return std::vector<std::byte>(n, static_cast<std::byte>(fill));
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kvsim-budget-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

// --- MemoryStorage ------------------------------------------------------------------------

TEST(MemoryStorageBudget, BytesStayWithinTheBudgetAndTheLeastRecentlyUsedGoFirst) {
  MemoryStorage mem(0, 300);
  ASSERT_EQ(mem.set(budget_key_of(1), budget_payload(100, 1)), StorageStatus::kOk);
  ASSERT_EQ(mem.set(budget_key_of(2), budget_payload(100, 2)), StorageStatus::kOk);
  ASSERT_EQ(mem.set(budget_key_of(3), budget_payload(100, 3)), StorageStatus::kOk);
  std::vector<std::byte> out;
  ASSERT_EQ(mem.get(budget_key_of(1), &out), StorageStatus::kOk);  // 2 is now least recent
  ASSERT_EQ(mem.set(budget_key_of(4), budget_payload(150, 4)),
            StorageStatus::kOk);  // needs two to go
  EXPECT_TRUE(mem.exists(budget_key_of(1)));
  EXPECT_FALSE(mem.exists(budget_key_of(2)));
  EXPECT_FALSE(mem.exists(budget_key_of(3)));
  EXPECT_TRUE(mem.exists(budget_key_of(4)));
  EXPECT_EQ(mem.usage().bytes, 250u);
  EXPECT_EQ(mem.usage().pages, 2u);
  EXPECT_EQ(mem.evictions(), 2u);
}

TEST(MemoryStorageBudget, APageLargerThanTheBudgetIsRefusedAndNothingIsEvicted) {
  MemoryStorage mem(0, 100);
  ASSERT_EQ(mem.set(budget_key_of(1), budget_payload(60, 1)), StorageStatus::kOk);
  EXPECT_EQ(mem.set(budget_key_of(2), budget_payload(101, 2)), StorageStatus::kIoError);
  EXPECT_TRUE(mem.exists(budget_key_of(1)));
  EXPECT_FALSE(mem.exists(budget_key_of(2)));
  EXPECT_EQ(mem.evictions(), 0u);
}

TEST(MemoryStorageChecksum, DamagedBytesAreCorruptNeverServed) {
  MemoryStorage mem;
  ASSERT_EQ(mem.set(budget_key_of(1), budget_payload(8, 7)), StorageStatus::kOk);
  std::vector<std::byte>* stored = mem.damage_for_testing(budget_key_of(1));
  ASSERT_NE(stored, nullptr);
  (*stored)[3] ^= std::byte{1};
  std::vector<std::byte> out{std::byte{42}};
  EXPECT_EQ(mem.get(budget_key_of(1), &out), StorageStatus::kCorrupt);
  EXPECT_EQ(out, std::vector<std::byte>{std::byte{42}});  // untouched
  stored->resize(4);                                      // a torn page
  EXPECT_EQ(mem.get(budget_key_of(1), &out), StorageStatus::kCorrupt);
  mem.remove(budget_key_of(1));
  EXPECT_EQ(mem.usage().bytes, 0u);  // accounting follows what was stored, not the damage
  EXPECT_EQ(mem.damage_for_testing(budget_key_of(1)), nullptr);
}

// --- FileStorage budget -------------------------------------------------------------------

TEST_F(TempDirTest, FileBudgetEvictsByLastUseAndCountsFileBytes) {
  const uint64_t page_file = FileStorage::kHeaderBytes + 100;
  FileStorage file(dir_, {.capacity_bytes = 3 * page_file});
  ASSERT_TRUE(file.ok());
  for (Token t : {1, 2, 3})
    ASSERT_EQ(file.set(budget_key_of(t), budget_payload(100, t)), StorageStatus::kOk);
  std::vector<std::byte> out;
  ASSERT_EQ(file.get(budget_key_of(1), &out), StorageStatus::kOk);  // recency 2 < 3 < 1
  EXPECT_TRUE(file.exists(budget_key_of(2)));                       // not a use
  ASSERT_EQ(file.set(budget_key_of(4), budget_payload(100, 4)), StorageStatus::kOk);
  EXPECT_FALSE(file.exists(budget_key_of(2)));
  EXPECT_FALSE(fs::exists(file.path_of(budget_key_of(2))));
  ASSERT_EQ(file.set(budget_key_of(5), budget_payload(100, 5)), StorageStatus::kOk);
  EXPECT_FALSE(file.exists(budget_key_of(3)));
  for (Token t : {1, 4, 5})
    EXPECT_TRUE(file.exists(budget_key_of(t))) << t;
  EXPECT_EQ(file.usage().pages, 3u);
  EXPECT_EQ(file.usage().bytes, 3 * page_file);
  EXPECT_EQ(file.evictions(), 2u);
  EXPECT_EQ(file.set(budget_key_of(6), budget_payload(3 * page_file, 6)), StorageStatus::kIoError);
  EXPECT_NE(file.error().find("exceeds the budget"), std::string::npos);
  EXPECT_EQ(file.usage().pages, 3u);
}

TEST_F(TempDirTest, PagesFoundOnDiskAreOrderedByFileTimeThenEvictedOldestFirst) {
  const uint64_t page_file = FileStorage::kHeaderBytes + 10;
  {
    FileStorage writer(dir_);
    for (Token t : {1, 2, 3})
      ASSERT_EQ(writer.set(budget_key_of(t), budget_payload(10, t)), StorageStatus::kOk);
  }
  // Page 2 is the oldest file, then 3, then 1 (file times only order what is found at start).
  const auto now = fs::file_time_type::clock::now();
  FileStorage probe(dir_);
  fs::last_write_time(probe.path_of(budget_key_of(2)), now - std::chrono::hours(3));
  fs::last_write_time(probe.path_of(budget_key_of(3)), now - std::chrono::hours(2));
  fs::last_write_time(probe.path_of(budget_key_of(1)), now - std::chrono::hours(1));
  FileStorage file(dir_, {.capacity_bytes = 3 * page_file});
  ASSERT_EQ(file.set(budget_key_of(4), budget_payload(10, 4)), StorageStatus::kOk);
  EXPECT_FALSE(file.exists(budget_key_of(2)));
  ASSERT_EQ(file.set(budget_key_of(5), budget_payload(10, 5)), StorageStatus::kOk);
  EXPECT_FALSE(file.exists(budget_key_of(3)));
  EXPECT_TRUE(file.exists(budget_key_of(1)));
}

TEST_F(TempDirTest, SameOperationsGiveTheSameEvictionsWhateverTheClock) {
  // Two stores fed the same operations evict the same pages: recency is a logical clock.
  std::vector<std::vector<bool>> survivors;
  for (int round = 0; round < 2; ++round) {
    const fs::path d = dir_ / std::to_string(round);
    fs::create_directories(d);
    FileStorage file(d, {.capacity_bytes = 5 * (FileStorage::kHeaderBytes + 16)});
    std::vector<std::byte> out;
    for (Token t = 0; t < 40; ++t) {
      ASSERT_EQ(file.set(budget_key_of(t), budget_payload(16, t)), StorageStatus::kOk);
      if (t % 3 == 0) file.get(budget_key_of(t / 2), &out);
    }
    std::vector<bool> alive;
    for (Token t = 0; t < 40; ++t)
      alive.push_back(file.exists(budget_key_of(t)));
    survivors.push_back(alive);
  }
  EXPECT_EQ(survivors[0], survivors[1]);
}

// --- Durability, temp names, sharing ------------------------------------------------------

TEST_F(TempDirTest, DurableWritesAreCompletePagesAndLeaveNoTempFiles) {
  FileStorage file(dir_, {.durable = true});
  ASSERT_TRUE(file.options().durable);
  for (Token t = 0; t < 20; ++t)
    ASSERT_EQ(file.set(budget_key_of(t), budget_payload(64, t)), StorageStatus::kOk);
  FileStorage reader(dir_);
  std::vector<std::byte> out;
  for (Token t = 0; t < 20; ++t) {
    ASSERT_EQ(reader.get(budget_key_of(t), &out), StorageStatus::kOk);
    EXPECT_EQ(out, budget_payload(64, t));
  }
  for (const std::string& n : names())
    EXPECT_EQ(n.find(".tmp."), std::string::npos) << n;
}

TEST_F(TempDirTest, OnlyStaleTempFilesAreRemovedSoAnotherWriterKeepsItsOwn) {
  const std::string hex = to_hex(budget_key_of(9));
  const fs::path fresh = dir_ / (hex + ".tmp.99999.1");  // another process, writing now
  const fs::path stale = dir_ / (hex + ".tmp.88888.4");  // a process that died long ago
  std::ofstream(fresh) << "partial";
  std::ofstream(stale) << "partial";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  FileStorage file(dir_, {.stale_temp_seconds = 60});
  EXPECT_TRUE(fs::exists(fresh));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_EQ(file.stale_temps_removed(), 1u);
  EXPECT_EQ(file.page_count(), 0u);
}

TEST_F(TempDirTest, TwoInstancesOnOneDirectoryShareAndHealEachOthersPages) {
  FileStorage a(dir_);
  FileStorage b(dir_);
  ASSERT_EQ(a.set(budget_key_of(1), budget_payload(32, 1)), StorageStatus::kOk);
  EXPECT_TRUE(b.exists(budget_key_of(1)));
  std::vector<std::byte> out;
  ASSERT_EQ(b.get(budget_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, budget_payload(32, 1));
  b.remove(budget_key_of(1));  // "evicted by another writer"
  EXPECT_EQ(a.get(budget_key_of(1), &out), StorageStatus::kMiss);
  ASSERT_EQ(a.set(budget_key_of(1), budget_payload(32, 1)), StorageStatus::kOk);  // rewritten
  EXPECT_EQ(b.get(budget_key_of(1), &out), StorageStatus::kOk);
}

TEST_F(TempDirTest, ClearRemovesPagesOnlyAndUsageCountsThem) {
  std::ofstream(dir_ / "notes.txt") << "keep me";
  FileStorage file(dir_);
  for (Token t = 0; t < 5; ++t)
    ASSERT_EQ(file.set(budget_key_of(t), budget_payload(10, t)), StorageStatus::kOk);
  EXPECT_EQ(file.usage().pages, 5u);
  EXPECT_EQ(file.usage().bytes, 5 * (FileStorage::kHeaderBytes + 10));
  file.clear();
  EXPECT_EQ(file.usage().pages, 0u);
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_FALSE(file.exists(budget_key_of(0)));
}

TEST_F(TempDirTest, ABadDirectoryIsReportedWithTheOsReason) {
  std::ofstream(dir_ / "plain") << "x";
  FileStorage not_dir(dir_ / "plain");
  EXPECT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.error(), "Not a directory");
  FileStorage missing(dir_ / "nope");
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "No such file or directory");
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directories(dir_ / "ro");
    fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    FileStorage ro(dir_ / "ro");
    EXPECT_FALSE(ro.ok());
    EXPECT_EQ(ro.error(), "Permission denied");
    fs::permissions(dir_ / "ro", fs::perms::owner_all);
  }
}

}  // namespace
}  // namespace kvsim
