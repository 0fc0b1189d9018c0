// ChildList (core/tree/child_list.h): lookups by namespace and first page, O(1) removal that
// keeps every child's slot right, the key order of sorted(), the namespace counts, and the
// tree's shape check catching a child filed under the wrong slot.
#include "core/tree/child_list.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/tree_node.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

std::unique_ptr<TreeNode> node_with(NodeId id, Namespace ns, std::vector<Token> key) {
  auto n = std::make_unique<TreeNode>();
  n->id = id;
  n->ns = ns;
  n->key = TokenRun::adopt(std::move(key));
  return n;
}

void expect_slots_right(const ChildList& list) {
  uint32_t slot = 0;
  for (const auto& e : list) {
    EXPECT_EQ(e.node->slot_in_parent, slot) << "node " << e.node->id;
    EXPECT_EQ(e.ns, e.node->ns);
    EXPECT_EQ(e.first, e.node->key[0]);
    ++slot;
  }
}

TEST(ChildList, ScanFindsByNamespaceAndWholeFirstPage) {
  ChildList list;
  list.add(node_with(1, 0, {5, 6, 7, 8}));
  list.add(node_with(2, 0, {5, 6, 9, 9}));  // same first token, other page
  list.add(node_with(3, 4, {5, 6, 7, 8}));  // same page, other namespace
  const std::vector<Token> a{5, 6, 7, 8};
  const std::vector<Token> b{5, 6, 9, 9};
  const std::vector<Token> c{5, 6, 7, 0};
  EXPECT_EQ(list.scan(0, a)->id, 1u);
  EXPECT_EQ(list.scan(0, b)->id, 2u);
  EXPECT_EQ(list.scan(4, a)->id, 3u);
  EXPECT_EQ(list.scan(0, c), nullptr);
  EXPECT_EQ(list.scan(7, a), nullptr);
  EXPECT_EQ(list.scan(0, std::span<const Token>()), nullptr);
}

// Random adds and takes against a model: every slot stays right, lookups agree, sorted() is in
// (namespace, key) order and namespaces() counts each namespace's children.
TEST(ChildList, AgreesWithAnOrderedModelUnderRandomAddTake) {
  ChildList list;
  std::map<std::pair<Namespace, Token>, NodeId> model;  // (ns, first token) -> id
  uint64_t rng = 12345;
  auto next = [&] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
  };
  NodeId next_id = 1;
  for (int step = 0; step < 4000; ++step) {
    const Namespace ns = next() % 3;
    const Token first = static_cast<Token>(next() % 64);
    const std::vector<Token> page{first, 1, 2, 3};
    TreeNode* found = list.scan(ns, page);
    const auto it = model.find({ns, first});
    ASSERT_EQ(found != nullptr, it != model.end()) << "step " << step;
    if (found != nullptr) {
      ASSERT_EQ(found->id, it->second);
      const std::unique_ptr<TreeNode> gone = list.take(*found);
      EXPECT_EQ(gone.get(), found);
      model.erase(it);
    } else {
      list.add(node_with(next_id, ns, page));
      model[{ns, first}] = next_id++;
    }
    ASSERT_EQ(list.size(), model.size());
    if (step % 97 == 0) expect_slots_right(list);
  }
  expect_slots_right(list);
  std::vector<NodeId> in_order;
  for (const TreeNode* n : list.sorted())
    in_order.push_back(n->id);
  std::vector<NodeId> expected;
  std::map<Namespace, uint32_t> per_ns;
  for (const auto& [key, id] : model) {
    expected.push_back(id);
    ++per_ns[key.first];
  }
  EXPECT_EQ(in_order, expected);
  const std::vector<std::pair<Namespace, uint32_t>> counted(per_ns.begin(), per_ns.end());
  EXPECT_EQ(list.namespaces(), counted);
}

TEST(ChildList, ReplaceKeepsTheSlotAndNeedsTheSameStart) {
  ScopedThrowingAsserts asserts;
  ChildList list;
  list.add(node_with(1, 0, {1, 1}));
  TreeNode* old = list.add(node_with(2, 0, {2, 2, 2, 2}));
  std::unique_ptr<TreeNode> back = list.replace(*old, node_with(3, 0, {2, 2}));
  EXPECT_EQ(back.get(), old);
  EXPECT_EQ(list.scan(0, std::vector<Token>{2, 2})->id, 3u);
  expect_slots_right(list);
  TreeNode& now = *list.scan(0, std::vector<Token>{2, 2});
  EXPECT_THROW((void)list.replace(now, node_with(4, 0, {9, 9})), AssertionFailure);
  EXPECT_THROW((void)list.take(*back), AssertionFailure) << "no longer a child";
}

// A child whose slot does not match its place is a shape error the tree reports.
TEST(ChildList, TheShapeCheckCatchesAChildAtTheWrongSlot) {
  RadixTree tree(RadixTreeOptions{.page_size = 2});
  tree.insert(0, std::vector<Token>{1, 2, 3, 4}, testing::dev(0, 4));
  tree.insert(0, std::vector<Token>{5, 6}, testing::dev(4, 2));
  SanityReport clean;
  tree.sanity_check(clean);
  ASSERT_TRUE(clean.ok()) << clean.summary();
  TreeNode& child = *tree.root()->children.begin()->node;
  child.slot_in_parent ^= 1;
  SanityReport broken;
  tree.sanity_check(broken);
  EXPECT_NE(broken.summary().find("child stored under the wrong key"), std::string::npos)
      << broken.summary();
  child.slot_in_parent ^= 1;
}

}  // namespace
}  // namespace kvsim
