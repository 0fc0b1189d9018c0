// Differential: one random op stream (match / insert / lock / unlock / evict / demote) applied
// to two RadixTrees, one given Token spans and one the same ids as int64 spans, must give the
// same results and the same trees. The wide stream also carries ids outside Token's range: its
// match then equals the narrow match of the key cut before that id, and its insert throws
// TokenOutOfRange (with the tree unchanged, so still equal to the narrow one, which skips it).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/tree/radix_tree.h"
#include "core/tree/token_run.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using Calls = std::vector<std::pair<size_t, size_t>>;

struct Counts {
  int hits = 0, prefixes = 0, throws = 0, refills = 0, demotes = 0, cut_matches = 0;
};

class WideDifferential {
 public:
  WideDifferential(int32_t page, uint64_t seed)
      : page_(page),
        rng_(seed),
        narrow_(RadixTreeOptions{.page_size = page}),
        wide_(RadixTreeOptions{.page_size = page}) {
    for (auto& base : bases_) {
      base.resize(200);
      for (Token& t : base)
        t = token();
    }
  }

  void run(int ops) {
    for (int op = 0; op < ops; ++op) {
      SCOPED_TRACE("op " + std::to_string(op));
      step();
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_TRUE(narrow_.snapshot() == wide_.snapshot()) << "trees differ";
      for (const RadixTree* t : {&narrow_, &wide_}) {
        SanityReport report;
        t->sanity_check(report);
        ASSERT_TRUE(report.ok()) << report.summary();
      }
    }
  }
  const Counts& counts() const { return counts_; }

 private:
  Token token() {
    static constexpr Token kEdges[] = {std::numeric_limits<Token>::min(),
                                       std::numeric_limits<Token>::max(), -1, 0};
    if (rng_() % 10 < 8) return static_cast<Token>(rng_() % 1000) - 500;
    return kEdges[rng_() % 4];
  }
  // A prefix of one of a few bases, sometimes with one id changed or a fresh tail.
  std::vector<Token> key() {
    const std::vector<Token>& base = bases_[rng_() % bases_.size()];
    std::vector<Token> k(base.begin(), base.begin() + static_cast<ptrdiff_t>(rng_() % 201));
    if (!k.empty() && rng_() % 3 == 0) k[rng_() % k.size()] = token();
    if (rng_() % 4 == 0) {
      for (size_t n = rng_() % 40; n > 0; --n)
        k.push_back(token());
    }
    return k;
  }
  // The key's ids, with one out of Token's range at *bad (k.size() when none).
  std::vector<int64_t> widen(const std::vector<Token>& k, size_t* bad) {
    std::vector<int64_t> ids(k.begin(), k.end());
    *bad = k.size();
    if (k.empty() || rng_() % 5 != 0) return ids;
    *bad = rng_() % k.size();
    const int64_t two32 = int64_t{1} << 32;
    const int64_t pick[] = {ids[*bad] + two32, ids[*bad] - two32, int64_t{1} << 31,
                            -(int64_t{1} << 31) - 1, std::numeric_limits<int64_t>::max()};
    ids[*bad] = pick[rng_() % 5];
    return ids;
  }
  static std::vector<NodeId> ids_of(const std::vector<TreeNode*>& nodes) {
    std::vector<NodeId> out;
    for (const TreeNode* n : nodes)
      out.push_back(n->id);
    return out;
  }

  void step() {
    const uint64_t r = rng_() % 100;
    if (r < 35) return insert();
    if (r < 60) return match(false);
    if (r < 70) return match(true);
    if (r < 80) return unlock();
    if (r < 95) return evict_device();
    evict_host();
  }

  void match(bool lock) {
    const std::vector<Token> k = key();
    size_t bad = 0;
    const std::vector<int64_t> ids = widen(k, &bad);
    const std::vector<Token> cut(k.begin(), k.begin() + static_cast<ptrdiff_t>(bad));
    counts_.cut_matches += bad < k.size();
    MatchResult a = narrow_.match_prefix(0, cut);
    MatchResult b = wide_.match_prefix(0, std::span<const int64_t>(ids));
    ASSERT_EQ(a.device_hit_length(), b.device_hit_length());
    ASSERT_EQ(a.device_indices.slots(), b.device_indices.slots());
    ASSERT_EQ(a.host_hit_length, b.host_hit_length);
    ASSERT_EQ(a.last_device_node->id, b.last_device_node->id);
    ASSERT_EQ(a.best_match_node->id, b.best_match_node->id);
    ASSERT_EQ(a.last_host_node->id, b.last_host_node->id);
    counts_.hits += a.device_hit_length() > 0;
    if (lock && locks_.size() < 6)
      locks_.push_back({narrow_.lock(*a.last_device_node), wide_.lock(*b.last_device_node)});
  }

  void insert() {
    const std::vector<Token> k = key();
    size_t bad = 0;
    const std::vector<int64_t> ids = widen(k, &bad);
    const size_t aligned = k.size() / static_cast<size_t>(page_) * static_cast<size_t>(page_);
    std::vector<SlotIndex> firsts;
    const bool paged = rng_() % 2 == 0;
    for (size_t i = 0; i < aligned; i += paged ? static_cast<size_t>(page_) : 1)
      firsts.push_back(next_slot_ + static_cast<SlotIndex>(i));
    next_slot_ += static_cast<SlotIndex>(aligned) + 1000;
    const IndexVector value = paged ? IndexVector::pages(Tier::kDevice, page_, firsts)
                                    : IndexVector(Tier::kDevice, firsts);
    Calls calls;
    auto source = [&](size_t b, size_t e) {
      calls.emplace_back(b, e);
      return value.slice(b, e);
    };
    if (bad < aligned) {
      try {
        wide_.insert(0, std::span<const int64_t>(ids), source);
        FAIL() << "no TokenOutOfRange for id " << ids[bad] << " at " << bad;
      } catch (const TokenOutOfRange& e) {
        ASSERT_EQ(e.index(), bad);
      }
      ++counts_.throws;
      return;  // the narrow tree cannot hold that key: it skips the insert
    }
    InsertResult a = rng_() % 2 == 0 ? narrow_.insert(0, k, value)
                                     : narrow_.insert(0, std::span<const Token>(k), source);
    calls.clear();
    InsertResult b = wide_.insert(0, std::span<const int64_t>(ids), source);
    ASSERT_EQ(a.prefix_len, b.prefix_len);
    ASSERT_EQ(a.last_node->id, b.last_node->id);
    ASSERT_EQ(ids_of(a.hit_nodes), ids_of(b.hit_nodes));
    // Asked for [prefix_len, aligned) only, in contiguous ranges (refills, then the leaf).
    size_t at = static_cast<size_t>(b.prefix_len);
    for (const auto& [begin, end] : calls) {
      ASSERT_EQ(begin, at);
      ASSERT_LT(begin, end);
      at = end;
    }
    ASSERT_EQ(at, aligned);
    counts_.refills += calls.size() > 1;
    counts_.prefixes += b.prefix_len > 0;
    if (rng_() % 2 == 0) {  // the stored slots are the source's past the device-cached prefix
      const std::vector<SlotIndex> got =
          wide_.match_prefix(0, std::span<const int64_t>(ids)).device_indices.slots();
      narrow_.match_prefix(0, k);
      ASSERT_EQ(got.size(), aligned);
      for (size_t i = static_cast<size_t>(b.prefix_len); i < aligned; ++i)
        ASSERT_EQ(got[i], value[i]) << i;
    }
  }

  void unlock() {
    if (locks_.empty()) return;
    const size_t i = rng_() % locks_.size();
    narrow_.unlock(locks_[i].first);
    wide_.unlock(locks_[i].second);
    locks_.erase(locks_.begin() + static_cast<ptrdiff_t>(i));
  }

  // Removes the LRU device leaf, or backs its path up and demotes it.
  void evict_device() {
    TreeNode* a = narrow_.next_device_victim();
    TreeNode* b = wide_.next_device_victim();
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (a == nullptr) return;
    ASSERT_EQ(a->id, b->id);
    if (rng_() % 2 == 0 && !a->backed_up()) {
      ASSERT_EQ(narrow_.remove_device_leaf(*a).full_device(),
                wide_.remove_device_leaf(*b).full_device());
      return;
    }
    for (RadixTree* t : {&narrow_, &wide_}) {
      TreeNode* v = t == &narrow_ ? a : b;
      SlotIndex slot = next_host_;
      for (TreeNode* n : RadixTree::path_to(*v)) {
        if (n->backed_up()) continue;
        t->set_host_value(*n, testing::host(slot, static_cast<size_t>(n->token_count())));
        slot += n->token_count();
      }
      ASSERT_EQ(t->demote(*v).full_device().slots().size(), static_cast<size_t>(v->token_count()));
    }
    next_host_ += 100000;
    ++counts_.demotes;
  }

  void evict_host() {
    TreeNode* a = narrow_.next_host_victim();
    TreeNode* b = wide_.next_host_victim();
    ASSERT_EQ(a == nullptr, b == nullptr);
    if (a == nullptr) return;
    ASSERT_EQ(a->id, b->id);
    ASSERT_EQ(narrow_.remove_host_leaf(*a).full_host(), wide_.remove_host_leaf(*b).full_host());
  }

  int32_t page_;
  std::mt19937_64 rng_;
  RadixTree narrow_;
  RadixTree wide_;
  std::array<std::vector<Token>, 5> bases_;
  std::vector<std::pair<LockRecord, LockRecord>> locks_;
  SlotIndex next_slot_ = 1;
  SlotIndex next_host_ = 1;
  Counts counts_;
};

class WideDifferentialTest : public ::testing::TestWithParam<int32_t> {};

TEST_P(WideDifferentialTest, TokenAndWideTreesStayEqual) {
  ScopedThrowingAsserts asserts;
  for (uint64_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    WideDifferential d(GetParam(), seed);
    d.run(400);
    if (::testing::Test::HasFatalFailure()) return;
    // The stream reached what it is meant to compare.
    const Counts& c = d.counts();
    EXPECT_GT(c.hits, 10);
    EXPECT_GT(c.prefixes, 10);
    EXPECT_GT(c.throws, 3);
    EXPECT_GT(c.refills, 0);
    EXPECT_GT(c.demotes, 5);
    EXPECT_GT(c.cut_matches, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(PageSizes, WideDifferentialTest, ::testing::Values(1, 4, 16));

}  // namespace
}  // namespace kvsim
