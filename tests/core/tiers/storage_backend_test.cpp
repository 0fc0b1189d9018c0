// The StorageBackend contract (storage_backend.h), checked on every backend, and MemoryStorage's
// capacity and LRU rules.
#include "core/tiers/storage_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/tiers/file_storage.h"
#include "core/tiers/memory_storage.h"
#include "core/tiers/page_hash.h"

namespace kvsim {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, unique across concurrently running test processes.
fs::path unique_temp_dir() {
  static int counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "kvsim-storage-" + std::to_string(::getpid()) + "-" +
                     std::to_string(++counter) + "-" + info->test_suite_name() + "-" + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';  // typed suites are named "Suite/0"
  }
  return fs::temp_directory_path() / name;
}

PageDigest backend_key_of(Token t) {
  return hash_page(namespace_seed(0), std::vector<Token>{t});
}

std::vector<std::byte> bytes_of(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values)
    out.push_back(static_cast<std::byte>(v));
  return out;
}

struct MemoryMaker {
  static std::unique_ptr<StorageBackend> make(const fs::path&) {
    return std::make_unique<MemoryStorage>();
  }
};
struct FileMaker {
  static std::unique_ptr<StorageBackend> make(const fs::path& dir) {
    fs::create_directories(dir);  // FileStorage never creates its directory
    return std::make_unique<FileStorage>(dir);
  }
};

template <typename Maker>
class StorageBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = unique_temp_dir();
    storage_ = Maker::make(dir_);
  }
  void TearDown() override {
    storage_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
  std::unique_ptr<StorageBackend> storage_;
};

using Backends = ::testing::Types<MemoryMaker, FileMaker>;
TYPED_TEST_SUITE(StorageBackendTest, Backends);

TYPED_TEST(StorageBackendTest, SetGetRoundTrip) {
  StorageBackend& s = *this->storage_;
  const std::vector<std::byte> payload = bytes_of({1, 2, 3, 0, 255});
  EXPECT_EQ(s.set(backend_key_of(1), payload), StorageStatus::kOk);
  EXPECT_TRUE(s.exists(backend_key_of(1)));
  std::vector<std::byte> out = bytes_of({9, 9});
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, payload);
  EXPECT_EQ(s.page_count(), 1u);
}

TYPED_TEST(StorageBackendTest, LargeAndEmptyPayloads) {
  StorageBackend& s = *this->storage_;
  std::vector<std::byte> big(100000);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<std::byte>(i * 13);
  EXPECT_EQ(s.set(backend_key_of(1), big), StorageStatus::kOk);
  EXPECT_EQ(s.set(backend_key_of(2), std::span<const std::byte>()), StorageStatus::kOk);
  std::vector<std::byte> out;
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, big);
  EXPECT_EQ(s.get(backend_key_of(2), &out), StorageStatus::kOk);
  EXPECT_TRUE(out.empty());
}

TYPED_TEST(StorageBackendTest, MissLeavesTheOutputUnchanged) {
  StorageBackend& s = *this->storage_;
  std::vector<std::byte> out = bytes_of({7});
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kMiss);
  EXPECT_EQ(out, bytes_of({7}));
  EXPECT_FALSE(s.exists(backend_key_of(1)));
  EXPECT_EQ(s.page_count(), 0u);
}

TYPED_TEST(StorageBackendTest, SetDeduplicatesAndKeepsTheFirstPayload) {
  StorageBackend& s = *this->storage_;
  EXPECT_EQ(s.set(backend_key_of(1), bytes_of({1, 2, 3})), StorageStatus::kOk);
  EXPECT_EQ(s.set(backend_key_of(1), bytes_of({4})), StorageStatus::kOk);
  std::vector<std::byte> out;
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, bytes_of({1, 2, 3}));
  EXPECT_EQ(s.page_count(), 1u);
}

TYPED_TEST(StorageBackendTest, BatchExistsCountsLeadingKeysAndStopsAtTheFirstMiss) {
  StorageBackend& s = *this->storage_;
  for (Token t : {1, 2, 4})
    ASSERT_EQ(s.set(backend_key_of(t), bytes_of({t})), StorageStatus::kOk);
  const std::vector<PageDigest> keys{backend_key_of(1), backend_key_of(2), backend_key_of(3),
                                     backend_key_of(4)};
  EXPECT_EQ(s.batch_exists(keys), 2u);  // key 4 exists but follows the gap at key 3
  EXPECT_EQ(s.batch_exists(std::span<const PageDigest>(keys).subspan(0, 2)), 2u);
  EXPECT_EQ(s.batch_exists(std::span<const PageDigest>(keys).subspan(2)), 0u);
  EXPECT_EQ(s.batch_exists(std::span<const PageDigest>()), 0u);
}

TYPED_TEST(StorageBackendTest, RemoveDeletesOnlyThatKeyAndIgnoresAbsentKeys) {
  StorageBackend& s = *this->storage_;
  ASSERT_EQ(s.set(backend_key_of(1), bytes_of({1})), StorageStatus::kOk);
  ASSERT_EQ(s.set(backend_key_of(2), bytes_of({2})), StorageStatus::kOk);
  s.remove(backend_key_of(1));
  s.remove(backend_key_of(3));  // absent: a no-op
  EXPECT_FALSE(s.exists(backend_key_of(1)));
  EXPECT_TRUE(s.exists(backend_key_of(2)));
  EXPECT_EQ(s.page_count(), 1u);
  std::vector<std::byte> out;
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kMiss);
  // A removed key can be stored again, with new bytes.
  EXPECT_EQ(s.set(backend_key_of(1), bytes_of({5})), StorageStatus::kOk);
  EXPECT_EQ(s.get(backend_key_of(1), &out), StorageStatus::kOk);
  EXPECT_EQ(out, bytes_of({5}));
}

TYPED_TEST(StorageBackendTest, NullOutputIsAProgrammerError) {
  ScopedThrowingAsserts asserts;
  EXPECT_THROW(this->storage_->get(backend_key_of(1), nullptr), AssertionFailure);
}

TEST(StorageStatus, NamesAndValuesAreStable) {
  EXPECT_EQ(static_cast<int>(StorageStatus::kOk), 0);
  EXPECT_EQ(static_cast<int>(StorageStatus::kMiss), 1);
  EXPECT_EQ(static_cast<int>(StorageStatus::kCorrupt), 2);
  EXPECT_EQ(static_cast<int>(StorageStatus::kIoError), 3);
  EXPECT_EQ(to_string(StorageStatus::kOk), "ok");
  EXPECT_EQ(to_string(StorageStatus::kMiss), "miss");
  EXPECT_EQ(to_string(StorageStatus::kCorrupt), "corrupt");
  EXPECT_EQ(to_string(StorageStatus::kIoError), "io_error");
}

// --- MemoryStorage: capacity and LRU ------------------------------------------------------

TEST(MemoryStorage, ZeroCapacityIsUnlimited) {
  MemoryStorage mem;
  for (Token t = 0; t < 1000; ++t)
    ASSERT_EQ(mem.set(backend_key_of(t), bytes_of({1})), StorageStatus::kOk);
  EXPECT_EQ(mem.page_count(), 1000u);
}

TEST(MemoryStorage, FullStoreDropsTheLeastRecentlyUsedPage) {
  MemoryStorage mem(2);
  mem.set(backend_key_of(1), bytes_of({1}));
  mem.set(backend_key_of(2), bytes_of({2}));
  std::vector<std::byte> out;
  ASSERT_EQ(mem.get(backend_key_of(1), &out), StorageStatus::kOk);  // key 2 is now least recent
  mem.set(backend_key_of(3), bytes_of({3}));
  EXPECT_TRUE(mem.exists(backend_key_of(1)));
  EXPECT_FALSE(mem.exists(backend_key_of(2)));
  EXPECT_TRUE(mem.exists(backend_key_of(3)));
  EXPECT_EQ(mem.page_count(), 2u);
}

TEST(MemoryStorage, ExistsAndDedupSetAreNotUses) {
  MemoryStorage mem(2);
  mem.set(backend_key_of(1), bytes_of({1}));
  mem.set(backend_key_of(2), bytes_of({2}));
  EXPECT_TRUE(mem.exists(backend_key_of(1)));
  const std::vector<PageDigest> keys{backend_key_of(1)};
  EXPECT_EQ(mem.batch_exists(keys), 1u);
  mem.set(backend_key_of(1), bytes_of({9}));  // deduplicated: not a use
  mem.set(backend_key_of(3), bytes_of({3}));  // key 1 is still the least recent
  EXPECT_FALSE(mem.exists(backend_key_of(1)));
  EXPECT_TRUE(mem.exists(backend_key_of(2)));
  EXPECT_TRUE(mem.exists(backend_key_of(3)));
}

TEST(MemoryStorage, CapacityOneAndRemoveFreesRoom) {
  MemoryStorage mem(1);
  EXPECT_EQ(mem.capacity_pages(), 1u);
  mem.set(backend_key_of(1), bytes_of({1}));
  mem.set(backend_key_of(2), bytes_of({2}));
  EXPECT_FALSE(mem.exists(backend_key_of(1)));
  EXPECT_TRUE(mem.exists(backend_key_of(2)));
  mem.remove(backend_key_of(2));
  EXPECT_EQ(mem.page_count(), 0u);
  mem.set(backend_key_of(3), bytes_of({3}));
  mem.set(backend_key_of(4), bytes_of({4}));
  EXPECT_EQ(mem.page_count(), 1u);
  EXPECT_TRUE(mem.exists(backend_key_of(4)));
}

TEST(MemoryStorage, EvictionOrderIsTheUseOrder) {
  MemoryStorage mem(3);
  for (Token t : {1, 2, 3})
    mem.set(backend_key_of(t), bytes_of({t}));
  std::vector<std::byte> out;
  for (Token t : {2, 1, 3})  // recency now 2 < 1 < 3
    ASSERT_EQ(mem.get(backend_key_of(t), &out), StorageStatus::kOk);
  mem.set(backend_key_of(4), bytes_of({4}));
  EXPECT_FALSE(mem.exists(backend_key_of(2)));
  mem.set(backend_key_of(5), bytes_of({5}));
  EXPECT_FALSE(mem.exists(backend_key_of(1)));
  mem.set(backend_key_of(6), bytes_of({6}));
  EXPECT_FALSE(mem.exists(backend_key_of(3)));
  for (Token t : {4, 5, 6})
    EXPECT_TRUE(mem.exists(backend_key_of(t)));
}

}  // namespace
}  // namespace kvsim
