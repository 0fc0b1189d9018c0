// [tree.root] and [tree.sibling_order] (issue 28, survivors of the seed-23 mutation sample): the
// root's fixed state and the order in which a walk visits siblings are recomputed by
// sanity_check. The root test plants the state a lock counted on the root would leave; the
// order check stays quiet on a tree whose walk mixes namespaces and many siblings (its planted
// bug is a wrong ChildList::sorted comparator, mutant 1181, which only a rebuilt core can hold).
#include <gtest/gtest.h>

#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::seq;

class RootAndSiblingChecksTest : public testing::CheckedTreeTest {
 protected:
  bool reports(const std::string& name) {
    SanityReport report;
    tree_.sanity_check(report);
    return report.has(name);
  }
};

TEST_F(RootAndSiblingChecksTest, ALockCountedOnTheRootIsReported) {
  tree_.insert(0, seq(1, 8), dev(100, 8));
  EXPECT_FALSE(reports("tree.root"));
  ++tree_.root()->full().lock_ref;  // what inc_full_lock without its root guard leaves
  EXPECT_TRUE(reports("tree.root"));
  --tree_.root()->full().lock_ref;
  EXPECT_FALSE(reports("tree.root"));
}

TEST_F(RootAndSiblingChecksTest, SiblingsAcrossNamespacesWalkInOrder) {
  // Root children in three namespaces, inserted out of order, and a node with 20 children (past
  // ChildIndex::kMinChildren, so the index is built and std::sort leaves insertion sort).
  SlotIndex slot = 0;
  for (Namespace ns : {2, 0, 1}) {
    for (Token first : {40, 10, 30, 20}) {
      tree_.insert(ns, seq(first, 8), dev(slot, 8));
      slot += 8;
    }
  }
  for (Token t = 39; t >= 20; --t) {
    std::vector<Token> key = seq(1000, 4);
    const std::vector<Token> tail = seq(t * 4, 4);
    key.insert(key.end(), tail.begin(), tail.end());
    tree_.insert(0, key, dev(slot, 8));
    slot += 8;
  }
  EXPECT_FALSE(reports("tree.sibling_order"));
  std::vector<NodeId> walked;
  tree_.for_each_node([&](const TreeNode& n) {
    if (n.parent == tree_.root()) walked.push_back(n.id);
  });
  EXPECT_EQ(walked.size(), 13u);
}

}  // namespace
}  // namespace kvsim
