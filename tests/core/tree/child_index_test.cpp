// ChildIndex (the hash index of a node with many children) and the tree's use of it: lookups
// through the index agree with the ordered map under inserts, splits and removals, and the
// sanity check sees an index that lost a child.
#include "core/tree/child_index.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "core/common/sanity.h"
#include "core/pools/paged_allocator.h"
#include "core/tree/radix_tree.h"

namespace kvsim {
namespace {

TEST(ChildIndex, FindsEveryMemberThroughCollisionsAndErasures) {
  // Every node shares one of 3 hashes, so runs are long and erase must shift them back.
  std::vector<TreeNode> nodes(200);
  ChildIndex index;
  for (size_t i = 0; i < nodes.size(); ++i)
    index.insert(i % 3, &nodes[i]);
  EXPECT_EQ(index.size(), 200u);
  for (size_t i = 0; i < nodes.size(); i += 2)
    EXPECT_TRUE(index.erase(i % 3, &nodes[i]));
  EXPECT_FALSE(index.erase(0, &nodes[0]));  // already gone
  EXPECT_EQ(index.size(), 100u);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TreeNode* want = i % 2 == 0 ? nullptr : &nodes[i];
    EXPECT_EQ(index.find(i % 3, [&](const TreeNode* n) { return n == &nodes[i]; }), want) << i;
  }
  size_t seen = 0;
  index.for_each([&](uint64_t, TreeNode*) { ++seen; });
  EXPECT_EQ(seen, 100u);
}

TEST(ChildIndex, HashCoversTheWholePage) {
  std::vector<Token> a(512, 7);
  std::vector<Token> b = a;
  b.back() = 8;  // siblings may differ only in a page's last token
  EXPECT_NE(ChildIndex::hash(0, a), ChildIndex::hash(0, b));
  EXPECT_NE(ChildIndex::hash(0, a), ChildIndex::hash(1, a));
}

// A root with many children (indexed) under inserts, splits and removals: every prompt
// matches what a plain map of prompts says it should, and the sanity check stays clean.
TEST(ChildIndex, TreeLookupsAgreeWithTheChildrenMap) {
  constexpr int32_t kPage = 2;
  RadixTree tree(RadixTreeOptions{.page_size = kPage});
  PagedSlotAllocator alloc(Tier::kDevice, 1 << 16, kPage);
  std::vector<std::vector<Token>> prompts;
  for (Token i = 0; i < 300; ++i) {
    // Siblings share their first token (same first page only when both tokens agree).
    prompts.push_back({i / 4, i, 1000 + i, 2000 + i});
  }
  for (const auto& p : prompts) {
    const IndexVector v = *alloc.alloc(static_cast<int64_t>(p.size()));
    tree.insert(0, p, v);
  }
  ASSERT_NE(tree.root()->child_index, nullptr);
  // Splits: a prompt that shares only the first page of an existing one.
  for (Token i = 0; i < 300; i += 7) {
    const std::vector<Token> p{i / 4, i, 5000 + i, 6000 + i};
    const MatchResult m = tree.match_prefix(0, p);
    EXPECT_EQ(m.device_hit_length(), 2) << i;
  }
  // Removals: evict LRU leaves until the root has few children left.
  while (tree.root()->children.size() > 20) {
    TreeNode* victim = tree.next_device_victim();
    ASSERT_NE(victim, nullptr);
    alloc.free(tree.remove_device_leaf(*victim).full_device());
  }
  for (const auto& p : prompts) {
    const MatchResult m = tree.match_prefix(0, p);
    bool cached = false;
    for (const auto& e : tree.root()->children)
      cached = cached || (e.node->key[0] == p[0] && e.node->key[1] == p[1]);
    EXPECT_EQ(m.device_hit_length() > 0, cached);
  }
  SanityReport report;
  tree.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
  // A child's cached first-page hash that no longer matches its key is a shape error.
  TreeNode* child = tree.root()->children.begin()->node.get();
  ASSERT_TRUE(child->first_page_hash.has_value()) << "an indexed child keeps its hash";
  const uint64_t kept = *child->first_page_hash;
  child->first_page_hash = kept ^ 1;
  SanityReport stale;
  tree.sanity_check(stale);
  EXPECT_NE(stale.summary().find("cached first-page hash is stale"), std::string::npos)
      << stale.summary();
  child->first_page_hash = kept;
  // An index that lost a child is a shape error.
  ASSERT_TRUE(tree.root()->child_index->erase(
      ChildIndex::hash(0, std::span<const Token>(child->key).first(kPage)), child));
  SanityReport broken;
  tree.sanity_check(broken);
  EXPECT_FALSE(broken.ok());
}

}  // namespace
}  // namespace kvsim
