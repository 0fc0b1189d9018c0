// SHA-256, the page-hash chain and the storage backends.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

std::string sha_hex(const std::string& s) {
  return to_hex(std::span<const uint8_t>(Sha256::hash(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()))));
}

TEST(Sha256, NistVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(PageHash, ChainIsSplitInvariantAndNamespaced) {
  std::vector<Token> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  const PageDigest seed = namespace_seed(7);
  std::vector<PageDigest> all = hash_pages(seed, tokens, 2);
  ASSERT_EQ(all.size(), 4u);
  std::vector<PageDigest> tail = hash_pages(all[1], std::span<const Token>(tokens).subspan(4), 2);
  EXPECT_EQ(tail[0], all[2]);
  EXPECT_EQ(tail[1], all[3]);
  EXPECT_EQ(hash_pages(seed, tokens, 2), all);  // deterministic
  EXPECT_NE(hash_pages(namespace_seed(8), tokens, 2)[0], all[0]);
}

class StorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kvsim-storage-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  std::vector<std::byte> payload_{std::byte{1}, std::byte{2}, std::byte{3}};
  PageDigest key_ = hash_page(namespace_seed(0), std::vector<Token>{1});
  PageDigest other_ = hash_page(namespace_seed(0), std::vector<Token>{2});
};

TEST_F(StorageTest, BothBackendsRoundTripDedupAndStopAtFirstMiss) {
  MemoryStorage mem;
  FileStorage file(dir_);
  for (StorageBackend* s : std::initializer_list<StorageBackend*>{&mem, &file}) {
    std::vector<std::byte> out;
    EXPECT_EQ(s->get(key_, &out), StorageStatus::kMiss) << s->name();
    EXPECT_EQ(s->set(key_, payload_), StorageStatus::kOk);
    EXPECT_EQ(s->set(key_, std::vector<std::byte>{std::byte{9}}), StorageStatus::kOk);  // kept
    EXPECT_EQ(s->get(key_, &out), StorageStatus::kOk);
    EXPECT_EQ(out, payload_);
    std::vector<PageDigest> keys{key_, other_, key_};
    EXPECT_EQ(s->batch_exists(keys), 1u);
    s->remove(key_);
    EXPECT_FALSE(s->exists(key_));
    EXPECT_EQ(s->page_count(), 0u);
  }
}

TEST_F(StorageTest, MemoryStorageEvictsLeastRecentlyUsed) {
  MemoryStorage mem(2);
  PageDigest third = hash_page(namespace_seed(0), std::vector<Token>{3});
  mem.set(key_, payload_);
  mem.set(other_, payload_);
  std::vector<std::byte> out;
  mem.get(key_, &out);  // other_ is now least recent
  mem.set(third, payload_);
  EXPECT_TRUE(mem.exists(key_));
  EXPECT_FALSE(mem.exists(other_));
  EXPECT_TRUE(mem.exists(third));
}

TEST_F(StorageTest, FileStoragePersistsAndDetectsCorruption) {
  {
    FileStorage file(dir_);
    ASSERT_TRUE(file.ok());
    file.set(key_, payload_);
    file.set(other_, payload_);
  }
  FileStorage file(dir_);
  std::vector<std::byte> out;
  ASSERT_EQ(file.get(key_, &out), StorageStatus::kOk);
  const auto path = file.path_of(key_);
  const auto size = std::filesystem::file_size(path);
  // Truncated.
  std::filesystem::resize_file(path, size - 1);
  EXPECT_EQ(file.get(key_, &out), StorageStatus::kCorrupt);
  // Zero length.
  std::filesystem::resize_file(path, 0);
  EXPECT_EQ(file.get(key_, &out), StorageStatus::kCorrupt);
  // A flipped payload byte.
  {
    std::fstream f(file.path_of(other_), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(file.path_of(other_)) - 1));
    f.put('\x7f');
  }
  EXPECT_EQ(file.get(other_, &out), StorageStatus::kCorrupt);
  // Another page's file under this name.
  file.remove(other_);
  PageDigest third = hash_page(namespace_seed(0), std::vector<Token>{3});
  file.set(third, payload_);
  std::filesystem::rename(file.path_of(third), file.path_of(other_));
  EXPECT_EQ(file.get(other_, &out), StorageStatus::kCorrupt);
  // Leftover temp files are cleaned and never count as pages.
  std::ofstream(dir_ / "abc.tmp.3") << "junk";
  FileStorage reopened(dir_);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "abc.tmp.3"));
  EXPECT_EQ(reopened.page_count(), 2u);
}

}  // namespace
}  // namespace kvsim
