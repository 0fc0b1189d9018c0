#include "tests/support/cache_fixture.h"

#include <numeric>

#include "sim/model/content_oracle.h"

namespace kvsim::testing {

std::vector<Token> tokens_from(Token first, size_t n) {
  std::vector<Token> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

HiCacheOptions CacheFixture::default_options() {
  return HiCacheOptions{.page_size = 4,
                        .layer_count = 2,
                        .item_bytes = 16,
                        .device_tokens = 64,
                        .host_tokens = 128,
                        .load_back_threshold_tokens = 1,
                        .prefetch_threshold_tokens = 8};
}

CacheFixture::CacheFixture(HiCacheOptions options, StorageBackend* storage)
    : cache_(std::make_unique<HiCache>(backend_, options, storage)) {}

CacheFixture::~CacheFixture() = default;

void CacheFixture::TearDown() {
  if (!HasFatalFailure()) expect_sane();
}

void CacheFixture::expect_sane() {
  SanityReport report;
  cache_->sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

void CacheFixture::forward(Namespace ns, std::span<const Token> tokens, const IndexVector& slots,
                           size_t begin) {
  DeviceKVPool& pool = cache_->device_pool();
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      pool.write_item_async(backend_.compute_stream(), layer, slots[i],
                            sim::expected_item(ns, tokens, begin + i, layer, pool.item_bytes()));
    }
  }
}

void CacheFixture::run_request(Namespace ns, std::span<const Token> tokens) {
  MatchResult m = cache_->match_prefix(ns, tokens);
  LockRecord lock = cache_->lock(*m.last_device_node);
  const size_t cached = m.device_indices.size();
  const auto page = static_cast<size_t>(cache_->options().page_size);
  const size_t need = (tokens.size() - cached + page - 1) / page * page;
  IndexVector all = m.device_indices;
  if (need > 0) {
    std::optional<IndexVector> fresh = cache_->alloc_device(static_cast<int64_t>(need));
    ASSERT_TRUE(fresh) << "device pool exhausted";
    forward(ns, tokens, fresh->slice(0, tokens.size() - cached), cached);
    all.append(*fresh);
  }
  InsertResult ins = cache_->insert(ns, tokens, all);
  // Free what the tree did not adopt: duplicates and the unaligned tail.
  const size_t aligned = tokens.size() / page * page;
  std::vector<SlotIndex> mine;
  for (size_t i = cached; i < static_cast<size_t>(ins.prefix_len); ++i)
    mine.push_back(all[i]);
  for (size_t i = aligned; i < all.size(); ++i)
    mine.push_back(all[i]);
  if (!mine.empty()) cache_->free_device(IndexVector(Tier::kDevice, std::move(mine)));
  cache_->unlock(lock);
}

::testing::AssertionResult CacheFixture::device_content_ok(Namespace ns,
                                                           std::span<const Token> tokens,
                                                           const IndexVector& slots) {
  DeviceKVPool& pool = cache_->device_pool();
  for (size_t i = 0; i < slots.size(); ++i) {
    for (int32_t layer = 0; layer < pool.layer_count(); ++layer) {
      if (pool.read_item_sync(layer, slots[i]) !=
          sim::expected_item(ns, tokens, i, layer, pool.item_bytes())) {
        return ::testing::AssertionFailure()
               << "position " << i << " layer " << layer << " (slot " << slots[i] << ") is wrong";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvsim::testing
