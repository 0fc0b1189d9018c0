// FileStorage and what is not its page (issue 29): a FIFO or a symlink under a page's name, a
// page of another model geometry, a sparse file far larger than a page, and a full disk.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tiers/file_storage.h"
#include "core/tiers/page_hash.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

PageDigest key_of(Token t) {
  return hash_page(namespace_seed(0), std::vector<Token>{t});
}

std::vector<std::byte> payload(size_t n, uint8_t fill) {
  return std::vector<std::byte>(n, std::byte{fill});
}

class ForeignEntries : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("kvsim-foreign-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FileStorage store(uint64_t page_bytes) {
    return FileStorage(dir_, FileStorageOptions{.page_bytes = page_bytes});
  }
  fs::path dir_;
};

// Before the fix exists() opened the FIFO blocking: this test hung (ctest's timeout).
TEST_F(ForeignEntries, AFifoUnderAPageNameIsForeignNeverOpenedBlockingAndClearRemovesIt) {
  FileStorage file = store(16);
  const fs::path fifo = file.path_of(key_of(1));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  FileStorage again = store(16);
  EXPECT_EQ(again.foreign_at_start(), 1u);
  EXPECT_FALSE(again.exists(key_of(1)));
  std::vector<std::byte> out;
  EXPECT_EQ(again.get(key_of(1), &out), StorageStatus::kMiss);
  EXPECT_EQ(again.scrub(), 0u);  // not damaged: not ours
  EXPECT_EQ(again.foreign_count(), 1u);
  EXPECT_EQ(again.usage().pages, 0u);
  again.clear();
  EXPECT_FALSE(fs::exists(fs::symlink_status(fifo)));
  EXPECT_EQ(again.foreign_count(), 0u);
}

TEST_F(ForeignEntries, ASetOverAFifoReplacesItWithAPage) {
  FileStorage file = store(16);
  ASSERT_EQ(::mkfifo(file.path_of(key_of(1)).c_str(), 0644), 0);
  ASSERT_EQ(file.set(key_of(1), payload(16, 7)), StorageStatus::kOk);
  std::vector<std::byte> out;
  EXPECT_EQ(file.get(key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, payload(16, 7));
}

TEST_F(ForeignEntries, ASymlinkUnderAPageNameIsNotFollowed) {
  FileStorage file = store(16);
  ASSERT_EQ(file.set(key_of(2), payload(16, 1)), StorageStatus::kOk);
  // A link named like page 1 that points at page 2's file (whose header names key 2) and one
  // that points at a FIFO: neither is followed.
  fs::create_symlink(file.path_of(key_of(2)), file.path_of(key_of(1)));
  const fs::path fifo = dir_ / "elsewhere.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  fs::create_symlink(fifo, file.path_of(key_of(3)));
  EXPECT_FALSE(file.exists(key_of(1)));
  EXPECT_FALSE(file.exists(key_of(3)));
  EXPECT_EQ(file.foreign_count(), 2u);
  EXPECT_EQ(file.scrub(), 0u);
  std::string bytes;
  EXPECT_FALSE(read_own_page_file(file.path_of(key_of(3)), 16, &bytes));
  file.clear();  // unlinks the links, not what they point at
  EXPECT_TRUE(fs::exists(fifo));
  EXPECT_EQ(file.foreign_count(), 0u);
}

TEST_F(ForeignEntries, APageOfAnotherGeometryIsForeignNeitherServedNorRemoved) {
  FileStorage small = store(16);
  ASSERT_EQ(small.set(key_of(1), payload(16, 1)), StorageStatus::kOk);
  FileStorage large = store(32);  // same keys (token hashes), another page payload
  EXPECT_EQ(large.foreign_at_start(), 1u);
  EXPECT_FALSE(large.exists(key_of(1)));
  std::vector<std::byte> out;
  EXPECT_EQ(large.get(key_of(1), &out), StorageStatus::kMiss);
  EXPECT_EQ(large.scrub(), 0u);
  EXPECT_TRUE(small.exists(key_of(1)));  // still there, still the small model's
  EXPECT_EQ(large.usage().pages, 0u);
  EXPECT_EQ(small.usage().pages, 1u);
  std::string bytes;
  EXPECT_FALSE(read_own_page_file(small.path_of(key_of(1)), 32, &bytes));
  EXPECT_TRUE(read_own_page_file(small.path_of(key_of(1)), 16, &bytes));
  EXPECT_EQ(bytes.size(), FileStorage::kHeaderBytes + 16);
  // A set of the same key replaces it; the small model then sees a foreign page.
  ASSERT_EQ(large.set(key_of(1), payload(32, 2)), StorageStatus::kOk);
  EXPECT_TRUE(large.exists(key_of(1)));
  EXPECT_FALSE(small.exists(key_of(1)));
}

TEST_F(ForeignEntries, ATornPageOfThisGeometryIsStillDamagedAndScrubbed) {
  FileStorage file = store(16);
  ASSERT_EQ(file.set(key_of(1), payload(16, 1)), StorageStatus::kOk);
  fs::resize_file(file.path_of(key_of(1)), FileStorage::kHeaderBytes + 8);
  std::vector<std::byte> out;
  EXPECT_EQ(file.get(key_of(1), &out), StorageStatus::kCorrupt);
  EXPECT_EQ(file.foreign_count(), 0u);
  EXPECT_EQ(file.scrub(), 1u);
}

TEST_F(ForeignEntries, ASparseTebibytePageIsNeverReadWhole) {
  FileStorage file = store(16);
  ASSERT_EQ(file.set(key_of(1), payload(16, 1)), StorageStatus::kOk);
  const fs::path p = file.path_of(key_of(1));
  ASSERT_EQ(::truncate(p.c_str(), off_t{1} << 40), 0) << std::strerror(errno);
  std::string bytes;
  EXPECT_FALSE(read_own_page_file(p, 16, &bytes));
  EXPECT_TRUE(bytes.empty());
  EXPECT_FALSE(file.exists(key_of(1)));
  EXPECT_EQ(file.scrub(), 1u);  // damaged (its header's length is not its size): removed
}

// A 64 KiB tmpfs (needs CAP_SYS_ADMIN: skipped without it).
class FullDisk : public ForeignEntries {
 protected:
  void SetUp() override {
    ForeignEntries::SetUp();
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount(dir_.c_str());
    ForeignEntries::TearDown();
  }
  bool mounted_ = false;
};

TEST_F(FullDisk, AWriteThatFindsNoSpaceSaysSo) {
  FileStorage file = store(4096);
  StorageStatus last = StorageStatus::kOk;
  int written = 0;
  for (Token t = 0; t < 64 && last == StorageStatus::kOk; ++t) {
    last = file.set(key_of(t), payload(4096, 3));
    written += last == StorageStatus::kOk ? 1 : 0;
  }
  ASSERT_EQ(last, StorageStatus::kIoError) << "64 pages of 4 KiB fit in 64 KiB";
  EXPECT_GT(written, 0);
  EXPECT_TRUE(file.out_of_space());
  EXPECT_NE(file.error().find("No space left on device"), std::string::npos) << file.error();
  // No temp file is left behind, and the pages written are whole.
  EXPECT_EQ(file.usage().pages, static_cast<uint64_t>(written));
  EXPECT_EQ(file.scrub(), 0u);
}

}  // namespace
}  // namespace kvsim
