// FileStorage: persistence, the on-disk format, and every kind of damaged file.
#include "core/tiers/file_storage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/tiers/page_hash.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

PageDigest file_key_of(Token t) {
  return hash_page(namespace_seed(0), std::vector<Token>{t});
}

std::vector<char> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream o(p, std::ios::binary | std::ios::trunc);
  o.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class FileStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kvsim-file-storage-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(++counter) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Stores `payload_` under key 1 and returns the page file's path.
  fs::path store_one(FileStorage& file) {
    EXPECT_EQ(file.set(file_key_of(1), payload_), StorageStatus::kOk);
    return file.path_of(file_key_of(1));
  }

  // get(key 1) with an output that must stay untouched on failure.
  StorageStatus get_one(FileStorage& file) {
    std::vector<std::byte> out{std::byte{42}};
    const StorageStatus status = file.get(file_key_of(1), &out);
    if (status != StorageStatus::kOk) {
      EXPECT_EQ(out, std::vector<std::byte>{std::byte{42}});
    }
    return status;
  }

  fs::path dir_;
  std::vector<std::byte> payload_{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
};

TEST_F(FileStorageTest, NeedsAnExistingDirectoryAndNamesFilesByHexKey) {
  {
    FileStorage missing(dir_ / "a" / "b");  // never created here (a typo must not write)
    EXPECT_FALSE(missing.ok());
    EXPECT_EQ(missing.error(), "No such file or directory");
    EXPECT_FALSE(fs::exists(dir_ / "a"));
  }
  fs::create_directories(dir_ / "a" / "b");
  FileStorage file(dir_ / "a" / "b");
  ASSERT_TRUE(file.ok());
  const fs::path p = store_one(file);
  EXPECT_EQ(p, dir_ / "a" / "b" / (to_hex(file_key_of(1)) + ".kvpage"));
  EXPECT_TRUE(fs::is_regular_file(p));
  EXPECT_EQ(file.name(), "file");
}

TEST_F(FileStorageTest, FileLayoutIsTheDocumentedFormat) {
  FileStorage file(dir_);
  const std::vector<char> bytes = read_all(store_one(file));
  ASSERT_EQ(bytes.size(), FileStorage::kHeaderBytes + payload_.size());
  EXPECT_EQ(std::string(bytes.data(), 8), "KVSIMPG1");
  EXPECT_EQ(std::vector<char>(bytes.begin() + 8, bytes.begin() + 12),
            (std::vector<char>{1, 0, 0, 0}));  // version 1, little-endian
  EXPECT_EQ(std::vector<char>(bytes.begin() + 12, bytes.begin() + 20),
            (std::vector<char>{4, 0, 0, 0, 0, 0, 0, 0}));  // payload length
  const Sha256Digest sum = Sha256::hash(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload_.data()), payload_.size()));
  EXPECT_TRUE(std::equal(sum.begin(), sum.end(), bytes.begin() + 20,
                         [](uint8_t a, char b) { return a == static_cast<uint8_t>(b); }));
  const PageDigest key = file_key_of(1);
  EXPECT_TRUE(std::equal(key.begin(), key.end(), bytes.begin() + 52,
                         [](uint8_t a, char b) { return a == static_cast<uint8_t>(b); }));
  EXPECT_EQ(bytes[84], 1);
  EXPECT_EQ(bytes[87], 4);
}

TEST_F(FileStorageTest, PagesPersistAcrossInstances) {
  {
    FileStorage first(dir_);
    store_one(first);
    ASSERT_EQ(first.set(file_key_of(2), std::vector<std::byte>{std::byte{9}}), StorageStatus::kOk);
  }
  FileStorage second(dir_);
  EXPECT_EQ(second.page_count(), 2u);
  std::vector<std::byte> out;
  EXPECT_EQ(second.get(file_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, payload_);
  EXPECT_EQ(second.get(file_key_of(2), &out), StorageStatus::kOk);
  EXPECT_EQ(out, std::vector<std::byte>{std::byte{9}});
  // Dedup sees the other instance's pages.
  EXPECT_EQ(second.set(file_key_of(1), std::vector<std::byte>{std::byte{0}}), StorageStatus::kOk);
  EXPECT_EQ(second.get(file_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, payload_);
}

TEST_F(FileStorageTest, TruncatedFileIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  for (uintmax_t size : {FileStorage::kHeaderBytes + 3, FileStorage::kHeaderBytes + 0,
                         FileStorage::kHeaderBytes - 1, uintmax_t{8}, uintmax_t{1}}) {
    fs::remove(p);
    store_one(file);
    fs::resize_file(p, size);
    EXPECT_EQ(get_one(file), StorageStatus::kCorrupt) << "size " << size;
  }
}

TEST_F(FileStorageTest, ZeroLengthFileIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  fs::resize_file(p, 0);
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
}

TEST_F(FileStorageTest, ExtendedFileIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  std::vector<char> bytes = read_all(p);
  bytes.push_back('x');
  write_all(p, bytes);
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
}

TEST_F(FileStorageTest, EveryFlippedByteIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  const std::vector<char> good = read_all(p);
  // Every header field (magic, version, length, checksum, key) and every payload byte.
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<char> bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    write_all(p, bad);
    EXPECT_EQ(get_one(file), StorageStatus::kCorrupt) << "byte " << i;
  }
  write_all(p, good);
  EXPECT_EQ(get_one(file), StorageStatus::kOk);
}

TEST_F(FileStorageTest, WrongMagicIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  std::vector<char> bytes = read_all(p);
  std::copy_n("KVSIMPG2", 8, bytes.begin());
  write_all(p, bytes);
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
}

TEST_F(FileStorageTest, UnknownVersionIsCorrupt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  std::vector<char> bytes = read_all(p);
  bytes[8] = 2;
  write_all(p, bytes);
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
}

TEST_F(FileStorageTest, ForgedHugeLengthIsCorruptWithoutAllocating) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  std::vector<char> bytes = read_all(p);
  for (size_t i = 12; i < 20; ++i)
    bytes[i] = static_cast<char>(0xff);
  write_all(p, bytes);
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
}

TEST_F(FileStorageTest, AnotherPagesFileUnderThisNameIsCorrupt) {
  FileStorage file(dir_);
  ASSERT_EQ(file.set(file_key_of(2), payload_), StorageStatus::kOk);
  fs::rename(file.path_of(file_key_of(2)), file.path_of(file_key_of(1)));
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
  std::vector<std::byte> out;
  EXPECT_EQ(file.get(file_key_of(2), &out), StorageStatus::kMiss);
}

TEST_F(FileStorageTest, ForeignContentNeverCrashes) {
  FileStorage file(dir_);
  const fs::path p = file.path_of(file_key_of(1));
  for (const std::string& junk :
       {std::string("hello"), std::string(84, '\0'), std::string(84, '\xff'),
        std::string("KVSIMPG1") + std::string(200, '\x01'), std::string(5000, 'K')}) {
    write_all(p, std::vector<char>(junk.begin(), junk.end()));
    EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
  }
}

TEST_F(FileStorageTest, ADamagedHeaderDoesNotExistAndSetRewritesIt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  fs::resize_file(p, 10);
  // Contract 3: exists() is only as good as the header; a set() rewrites the page.
  EXPECT_FALSE(file.exists(file_key_of(1)));
  const std::vector<PageDigest> keys{file_key_of(1)};
  EXPECT_EQ(file.batch_exists(keys), 0u);
  EXPECT_EQ(file.set(file_key_of(1), payload_), StorageStatus::kOk);
  EXPECT_EQ(get_one(file), StorageStatus::kOk);
}

TEST_F(FileStorageTest, ADamagedPayloadExistsUntilGetFindsItOutAndRemoveThenSetRepairsIt) {
  FileStorage file(dir_);
  const fs::path p = store_one(file);
  std::vector<char> bytes = read_all(p);
  bytes.back() ^= 1;
  write_all(p, bytes);
  EXPECT_TRUE(file.exists(file_key_of(1)));                           // the header is intact
  EXPECT_EQ(file.set(file_key_of(1), payload_), StorageStatus::kOk);  // dedup keeps it
  EXPECT_EQ(get_one(file), StorageStatus::kCorrupt);
  file.remove(file_key_of(1));
  store_one(file);
  EXPECT_EQ(get_one(file), StorageStatus::kOk);
}

TEST_F(FileStorageTest, LeftoverTempFilesAreIgnoredAndCleanedOnConstruction) {
  {
    FileStorage file(dir_);
    store_one(file);
  }
  const std::string hex = to_hex(file_key_of(2));
  const fs::path leftover = dir_ / (hex + ".tmp.3");
  write_all(leftover, {'j', 'u', 'n', 'k'});
  fs::last_write_time(leftover, fs::file_time_type::clock::now() - std::chrono::hours(2));
  // While it is there it is not a page.
  {
    fs::create_directories(dir_ / "elsewhere");
    FileStorage no_cleanup_yet(dir_ / "elsewhere");  // another dir: does not touch ours
  }
  EXPECT_TRUE(fs::exists(leftover));
  FileStorage file(dir_);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_EQ(file.stale_temps_removed(), 1u);
  EXPECT_EQ(file.page_count(), 1u);
  EXPECT_FALSE(file.exists(file_key_of(2)));
  EXPECT_EQ(get_one(file), StorageStatus::kOk);
  // A temp file appearing later is still not a page.
  write_all(leftover, {'j'});
  EXPECT_EQ(file.page_count(), 1u);
  std::vector<std::byte> out;
  EXPECT_EQ(file.get(file_key_of(2), &out), StorageStatus::kMiss);
}

TEST_F(FileStorageTest, OtherFilesInTheDirectoryAreIgnoredAndKept) {
  fs::create_directories(dir_ / "subdir.kvpage");
  write_all(dir_ / "notes.txt", {'x'});
  write_all(dir_ / "ABCDEF.kvpage", {'x'});
  write_all(dir_ / "something.tmp.1", {'x'});  // not our temp pattern
  FileStorage file(dir_);
  EXPECT_EQ(file.page_count(), 0u);
  store_one(file);
  EXPECT_EQ(file.page_count(), 1u);
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir_ / "something.tmp.1"));
}

TEST_F(FileStorageTest, DirectoryUnderAPageNameIsNotAPage) {
  FileStorage file(dir_);
  fs::create_directories(file.path_of(file_key_of(1)));
  EXPECT_FALSE(file.exists(file_key_of(1)));
  EXPECT_EQ(get_one(file), StorageStatus::kMiss);  // foreign (file_storage.h contract 4)
  EXPECT_EQ(file.foreign_count(), 1u);
  EXPECT_EQ(file.page_count(), 0u);
  EXPECT_EQ(file.set(file_key_of(1), payload_), StorageStatus::kIoError);  // cannot rename over it
  EXPECT_EQ(file.page_count(), 0u);
  // The failed write leaves no temp file behind.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST_F(FileStorageTest, UnusableDirectoryReportsErrorsAsValues) {
  fs::create_directories(dir_);
  write_all(dir_ / "plain-file", {'x'});
  FileStorage file(dir_ / "plain-file");  // a file, not a directory
  EXPECT_FALSE(file.ok());
  EXPECT_EQ(file.set(file_key_of(1), payload_), StorageStatus::kIoError);
  EXPECT_FALSE(file.exists(file_key_of(1)));
  EXPECT_EQ(get_one(file), StorageStatus::kMiss);
  EXPECT_EQ(file.page_count(), 0u);
  file.remove(file_key_of(1));
}

}  // namespace
}  // namespace kvsim
