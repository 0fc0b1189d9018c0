// The page-hash chain: encoding, determinism, chaining, split invariance, namespace isolation.
#include "core/tiers/page_hash.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "core/common/assert.h"
#include "core/tiers/sha256.h"

namespace kvsim {
namespace {

std::vector<Token> run(size_t n, Token first = 1) {
  std::vector<Token> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = first + static_cast<Token>(i * 7 % 101);
  return t;
}

TEST(PageHash, GoldenDigestsPinTheEncoding) {
  // Computed independently with Python's hashlib:
  //   seed = sha256(b"kvsim-ns" + struct.pack("<Q", ns))
  //   page = sha256(prev + struct.pack("<2i", *tokens))
  EXPECT_EQ(to_hex(namespace_seed(0)),
            "266fedd2d668da4f43eeba74b35a729b3756ebcae5c456d7f1a5f9b5bbb47279");
  EXPECT_EQ(to_hex(namespace_seed(7)),
            "47ae7696c08f8813e08516e97d989c15fb06d73d6145d5ad11c91e266fbc94a1");
  const std::vector<Token> tokens{1, 2, 3, -1};
  const std::vector<PageDigest> pages = hash_pages(namespace_seed(0), tokens, 2);
  ASSERT_EQ(pages.size(), 2u);
  EXPECT_EQ(to_hex(pages[0]), "883fb27f82bb5dedaf1e770e489bd4b2ec628ed790a3d485c50a8912c945bffc");
  EXPECT_EQ(to_hex(pages[1]), "f03e926f76c8d236cb9f65814f8d7d3cbbb89e22d70aab42fb3ade0ca0328809");
}

TEST(PageHash, HashPageIsShaOfPrevAndLittleEndianTokens) {
  const PageDigest prev = namespace_seed(3);
  const std::vector<Token> page = run(100);  // 400 bytes: more than one encoding chunk
  Sha256 h;
  h.update(prev);
  for (Token t : page) {
    const auto u = static_cast<uint32_t>(t);
    const std::vector<uint8_t> le{static_cast<uint8_t>(u), static_cast<uint8_t>(u >> 8),
                                  static_cast<uint8_t>(u >> 16), static_cast<uint8_t>(u >> 24)};
    h.update(le);
  }
  EXPECT_EQ(hash_page(prev, page), h.finish());
}

TEST(PageHash, Deterministic) {
  const std::vector<Token> t = run(64);
  EXPECT_EQ(hash_pages(namespace_seed(5), t, 16), hash_pages(namespace_seed(5), t, 16));
  EXPECT_EQ(namespace_seed(5), namespace_seed(5));
}

TEST(PageHash, EachPageChainsFromThePreviousDigest) {
  const std::vector<Token> t = run(48);
  const std::span<const Token> s(t);
  const std::vector<PageDigest> all = hash_pages(namespace_seed(1), t, 4);
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[0], hash_page(namespace_seed(1), s.subspan(0, 4)));
  for (size_t k = 1; k < all.size(); ++k)
    EXPECT_EQ(all[k], hash_page(all[k - 1], s.subspan(4 * k, 4))) << "page " << k;
  // Chaining from page k's digest reproduces the rest of the chain.
  for (size_t k = 0; k + 1 < all.size(); ++k) {
    const std::vector<PageDigest> rest = hash_pages(all[k], s.subspan(4 * (k + 1)), 4);
    EXPECT_EQ(rest, std::vector<PageDigest>(all.begin() + static_cast<ptrdiff_t>(k + 1), all.end()))
        << "from page " << k;
  }
}

TEST(PageHash, SplitInvariantAtEveryPageBoundary) {
  const std::vector<Token> t = run(40);
  const std::span<const Token> s(t);
  const PageDigest seed = namespace_seed(9);
  const std::vector<PageDigest> whole = hash_pages(seed, t, 8);
  for (size_t cut = 0; cut <= t.size(); cut += 8) {
    std::vector<PageDigest> joined = hash_pages(seed, s.subspan(0, cut), 8);
    const PageDigest carry = joined.empty() ? seed : joined.back();
    const std::vector<PageDigest> tail = hash_pages(carry, s.subspan(cut), 8);
    joined.insert(joined.end(), tail.begin(), tail.end());
    EXPECT_EQ(joined, whole) << "cut at " << cut;
  }
}

TEST(PageHash, NamespacesNeverShareAKey) {
  const std::vector<Token> t = run(32);
  std::set<PageDigest> seen;
  for (Namespace ns : {Namespace{0}, Namespace{1}, Namespace{256}, ~Namespace{0}}) {
    EXPECT_TRUE(seen.insert(namespace_seed(ns)).second);
    for (const PageDigest& d : hash_pages(namespace_seed(ns), t, 4))
      EXPECT_TRUE(seen.insert(d).second) << "namespace " << ns;
  }
}

TEST(PageHash, PositionAndContentMatter) {
  const PageDigest seed = namespace_seed(0);
  // The same page at a different position in the chain gets a different key.
  const std::vector<Token> twice{5, 6, 5, 6};
  const std::vector<PageDigest> d = hash_pages(seed, twice, 2);
  EXPECT_NE(d[0], d[1]);
  // Token order matters.
  EXPECT_NE(hash_page(seed, std::vector<Token>{1, 2}), hash_page(seed, std::vector<Token>{2, 1}));
}

TEST(PageHash, EmptyRunHasNoPages) {
  EXPECT_TRUE(hash_pages(namespace_seed(0), std::span<const Token>(), 4).empty());
}

TEST(PageHash, ProgrammerErrorsAssert) {
  ScopedThrowingAsserts asserts;
  const std::vector<Token> t = run(6);
  EXPECT_THROW(hash_pages(namespace_seed(0), t, 4), AssertionFailure);  // not whole pages
  EXPECT_THROW(hash_pages(namespace_seed(0), t, 0), AssertionFailure);
  EXPECT_THROW(hash_pages(namespace_seed(0), t, -2), AssertionFailure);
  EXPECT_THROW(hash_page(namespace_seed(0), std::span<const Token>()), AssertionFailure);
}

TEST(PageHash, HexIs64LowercaseDigits) {
  const std::string hex = to_hex(namespace_seed(42));
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace kvsim
