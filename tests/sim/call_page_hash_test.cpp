// The recorder's page hashes (sim/trace/call_page_hash.h): the vectorised clones the machine picks
// compute the definition, int64 ids hash as the 32-bit tokens they hold, and ids that do not
// fit are reported.
#include "sim/trace/call_page_hash.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace kvsim::sim {
namespace {

// The definition, written out plainly: two sets of eight multiply-xorshift lanes over 64-bit
// words (tokens 2k and 2k+1 of a 16-token step, the first in the low half), even steps into the
// first set and odd steps into the second, the tokens past the last whole step into lane 0 of
// the first, then each set folded pairwise with the length and the two combined.
uint64_t reference_hash(const std::vector<Token>& t) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  constexpr uint64_t kFold = 0xC2B2AE3D27D4EB4FULL;
  uint64_t lanes[2][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {9, 2, 3, 4, 5, 6, 7, 8}};
  const auto mix = [&](uint64_t& lane, uint64_t w) {
    const uint64_t h = (lane ^ w) * kMul;
    lane = h ^ (h >> 32);
  };
  size_t i = 0;
  for (size_t step = 0; i + 16 <= t.size(); i += 16, ++step) {
    for (size_t k = 0; k < 8; ++k) {
      const uint64_t w = static_cast<uint32_t>(t[i + 2 * k]) |
                         (static_cast<uint64_t>(static_cast<uint32_t>(t[i + 2 * k + 1])) << 32);
      mix(lanes[step % 2][k], w);
    }
  }
  for (; i < t.size(); ++i)
    mix(lanes[0][0], static_cast<uint32_t>(t[i]));
  const auto pair = [&](uint64_t x, uint64_t y) {
    const uint64_t m = x * kFold;
    return ((m << 31) | (m >> 33)) ^ y;
  };
  const auto fold = [&](const uint64_t* v) {
    const uint64_t a = pair(pair(v[0], v[1]), pair(v[2], v[3]));
    const uint64_t b = pair(pair(v[4], v[5]), pair(v[6], v[7]));
    uint64_t h = pair(a, b) ^ (t.size() * kMul);
    h = (h ^ (h >> 29)) * kFold;
    return h ^ (h >> 32);
  };
  return fold(lanes[0]) ^ (fold(lanes[1]) * kMul);
}

std::vector<Token> tokens(size_t n, uint32_t seed) {
  std::vector<Token> t(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<Token>(x % 300000) - (x % 7 == 0 ? 150000 : 0);  // some negative ids
  }
  return t;
}

TEST(CallPageHash, EveryFormComputesTheDefinition) {
  for (const size_t page : {1u, 4u, 15u, 16u, 17u, 33u, 64u, 512u}) {
    const size_t pages = 5;
    const std::vector<Token> t = tokens(page * pages, static_cast<uint32_t>(page));
    std::vector<int64_t> wide(t.begin(), t.end());
    std::vector<uint64_t> from_tokens(pages), from_wide(pages);
    hash_token_pages(t.data(), pages, page, from_tokens.data());
    ASSERT_TRUE(hash_wide_pages(wide.data(), pages, page, from_wide.data()));
    for (size_t k = 0; k < pages; ++k) {
      const std::vector<Token> one(t.begin() + static_cast<ptrdiff_t>(k * page),
                                   t.begin() + static_cast<ptrdiff_t>((k + 1) * page));
      const uint64_t want = reference_hash(one);
      EXPECT_EQ(hash_token_page(one.data(), page), want) << "page " << page << " #" << k;
      EXPECT_EQ(from_tokens[k], want) << "page " << page << " #" << k;
      EXPECT_EQ(from_wide[k], want) << "page " << page << " #" << k;
    }
  }
}

TEST(CallPageHash, AnyOneTokenChangedOrTwoStepsSwappedChangesTheHash) {
  const size_t page = 64;
  const std::vector<Token> t = tokens(page, 9);
  const uint64_t base = hash_token_page(t.data(), page);
  for (size_t i = 0; i < page; ++i) {
    std::vector<Token> u = t;
    u[i] += 1;
    EXPECT_NE(hash_token_page(u.data(), page), base) << "token " << i;
  }
  std::vector<Token> swapped = t;  // steps of 16 tokens in another order
  std::memcpy(swapped.data(), t.data() + 16, 16 * sizeof(Token));
  std::memcpy(swapped.data() + 16, t.data(), 16 * sizeof(Token));
  EXPECT_NE(hash_token_page(swapped.data(), page), base);
  // The length is part of the hash: a page of zeros and a longer one differ.
  const std::vector<Token> zeros(32, 0);
  EXPECT_NE(hash_token_page(zeros.data(), 16), hash_token_page(zeros.data(), 32));
}

TEST(CallPageHash, WideIdsThatDoNotFitAreReportedAndHashedCut) {
  const size_t page = 32;
  for (const int64_t bad : {int64_t{1} << 31, -(int64_t{1} << 31) - 1, int64_t{1} << 40}) {
    for (const size_t at : {size_t{0}, size_t{17}, size_t{2 * page - 1}}) {
      std::vector<Token> t = tokens(2 * page, 3);
      std::vector<int64_t> wide(t.begin(), t.end());
      wide[at] = bad;
      t[at] = static_cast<Token>(bad);  // what the cut id is
      std::vector<uint64_t> got(2), want(2);
      EXPECT_FALSE(hash_wide_pages(wide.data(), 2, page, got.data())) << bad << " at " << at;
      hash_token_pages(t.data(), 2, page, want.data());
      EXPECT_EQ(got, want);
    }
  }
  // The extremes that do fit.
  std::vector<int64_t> edge(16, INT32_MAX);
  edge[3] = INT32_MIN;
  uint64_t h = 0;
  EXPECT_TRUE(hash_wide_pages(edge.data(), 1, 16, &h));
}

}  // namespace
}  // namespace kvsim::sim
