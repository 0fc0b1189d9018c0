// The wide-id kernels (core/tree/wide_ids.h) and TokenRun's narrowed copies, on the edges of
// Token's range and on every length 0..200, so the vector loops' tails are covered.
#include "core/tree/wide_ids.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/token_run.h"

namespace kvsim {
namespace {

constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();
constexpr int64_t kTwo32 = int64_t{1} << 32;

// Ids that fit a Token, edges first.
const std::vector<int64_t> kFit = {0, 1, -1, kMax32, kMin32, kMax32 - 1, kMin32 + 1, 12345};
// Ids that do not, each next to a value it would truncate to.
const std::vector<int64_t> kOut = {kMax32 + 1,
                                   kMin32 - 1,
                                   kTwo32,
                                   -kTwo32,
                                   kTwo32 + 5,
                                   kTwo32 - 1,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};

// Length n of in-range ids, mixing the edges.
std::vector<int64_t> fitting(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(n);
  for (int64_t& x : v)
    x = kFit[rng() % kFit.size()];
  return v;
}

TEST(WideIds, FitsTokenOnTheEdges) {
  for (int64_t v : kFit)
    EXPECT_TRUE(fits_token(v)) << v;
  for (int64_t v : kOut)
    EXPECT_FALSE(fits_token(v)) << v;
}

TEST(WideIds, AllFitAndNarrowOnEveryLength) {
  for (size_t n = 0; n <= 200; ++n) {
    const std::vector<int64_t> ids = fitting(n, n);
    EXPECT_TRUE(all_wide_ids_fit(ids.data(), n)) << n;
    std::vector<Token> dst(n + 1, 77);
    EXPECT_TRUE(narrow_wide_ids(ids.data(), n, dst.data())) << n;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<int64_t>(dst[i]), ids[i]) << n << " " << i;
    EXPECT_EQ(dst[n], 77) << "wrote past the end, n " << n;
    EXPECT_EQ(first_wide_token_out_of_range(ids), n);
  }
}

TEST(WideIds, OneIdOutOfRangeAnywhereIsFound) {
  for (size_t n = 1; n <= 200; ++n) {
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      for (int64_t bad : kOut) {
        std::vector<int64_t> ids = fitting(n, n * 31 + at);
        ids[at] = bad;
        ASSERT_FALSE(all_wide_ids_fit(ids.data(), n)) << n << " " << at << " " << bad;
        std::vector<Token> dst(n);
        ASSERT_FALSE(narrow_wide_ids(ids.data(), n, dst.data())) << n << " " << at << " " << bad;
        ASSERT_EQ(first_wide_token_out_of_range(ids), at) << n << " " << bad;
        // A second bad id later does not move the answer.
        if (at + 1 < n) {
          ids[n - 1] = kMin32 - 1;
          ASSERT_EQ(first_wide_token_out_of_range(ids), at) << n << " " << bad;
        }
        // The prefix before it still fits.
        ASSERT_TRUE(all_wide_ids_fit(ids.data(), at)) << n << " " << at;
      }
    }
  }
}

// Scalar reference: leading positions equal as int64, rounded down to whole chunks of 64.
size_t reference_chunks(const std::vector<Token>& key, const std::vector<int64_t>& ids,
                        size_t limit) {
  size_t n = 0;
  while (n < limit && static_cast<int64_t>(key[n]) == ids[n])
    ++n;
  return n / 64 * 64;
}

TEST(WideIds, EqualWideChunksMatchesAScalarReference) {
  std::mt19937_64 rng(7);
  for (size_t len = 0; len <= 200; ++len) {
    const std::vector<int64_t> base = fitting(len, len + 1000);
    std::vector<Token> key(base.begin(), base.end());
    for (size_t limit : {len, len / 2, len == 0 ? size_t{0} : len - 1}) {
      std::vector<int64_t> ids = base;
      ASSERT_EQ(equal_wide_chunks(key.data(), ids.data(), limit), reference_chunks(key, ids, limit))
          << len << " " << limit;
      if (len == 0) continue;
      // One differing id: another in-range value, or one that truncates to the key's.
      for (int round = 0; round < 6; ++round) {
        ids = base;
        const size_t at = rng() % len;
        switch (round % 3) {
          case 0:
            ids[at] = key[at] == 0 ? 1 : 0;
            break;
          case 1:
            ids[at] = static_cast<int64_t>(key[at]) + kTwo32;
            break;
          default:
            ids[at] = static_cast<int64_t>(static_cast<uint32_t>(key[at])) ^ kTwo32;
            break;
        }
        ASSERT_EQ(equal_wide_chunks(key.data(), ids.data(), limit),
                  reference_chunks(key, ids, limit))
            << len << " " << limit << " at " << at;
      }
    }
  }
}

TEST(WideIds, EqualWideChunksCountsWholeChunksOnly) {
  const std::vector<int64_t> ids = fitting(200, 3);
  std::vector<Token> key(ids.begin(), ids.end());
  EXPECT_EQ(equal_wide_chunks(key.data(), ids.data(), 200), 192u);
  EXPECT_EQ(equal_wide_chunks(key.data(), ids.data(), 63), 0u);
  EXPECT_EQ(equal_wide_chunks(key.data(), ids.data(), 128), 128u);
  std::vector<int64_t> other = ids;
  other[64] = static_cast<int64_t>(key[64]) - kTwo32;  // same low 32 bits
  EXPECT_EQ(equal_wide_chunks(key.data(), other.data(), 200), 64u);
  other[63] = static_cast<int64_t>(key[63]) + 1;
  EXPECT_EQ(equal_wide_chunks(key.data(), other.data(), 200), 0u);
}

TEST(WideIds, NarrowedCopies) {
  ScopedThrowingAsserts asserts;
  EXPECT_TRUE(TokenRun::try_narrowed_copy_of({})->empty());
  const std::vector<int64_t> ids = fitting(70, 9);
  std::optional<TokenRun> run = TokenRun::try_narrowed_copy_of(ids);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(*run, std::vector<Token>(ids.begin(), ids.end()));
  EXPECT_EQ(TokenRun::narrowed_copy_of(ids), *run);
  for (int64_t bad : kOut) {
    std::vector<int64_t> with_bad = ids;
    with_bad[69] = bad;
    EXPECT_FALSE(TokenRun::try_narrowed_copy_of(with_bad).has_value()) << bad;
    EXPECT_THROW(TokenRun::narrowed_copy_of(with_bad), AssertionFailure) << bad;
  }
}

}  // namespace
}  // namespace kvsim
