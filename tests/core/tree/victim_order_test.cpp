// [tree.victim_order]: the next victim of each eviction set (device leaves under the tree's
// policy, host leaves and side-component values under LRU) is the one a plain reference of the
// policy picks. The clean trees agree with the reference under LRU and LFU; planted bugs (an
// order that no longer follows the policy) are reported by name.
#include <gtest/gtest.h>

#include <memory>

#include "core/tree/swa_component.h"
#include "tests/support/tree_fixture.h"

namespace kvsim {
namespace {

using testing::dev;
using testing::seq;

bool reports(const RadixTree& tree, const std::string& name) {
  SanityReport report;
  tree.sanity_check(report);
  return report.has(name);
}

// Two leaves a (older) and b, then b hit twice more: LRU takes a, LFU takes a too (fewer hits);
// after a is hit three times, LRU takes b and LFU still b (fewer hits).
TEST(VictimOrder, CleanTreesAgreeWithTheReferenceUnderLruAndLfu) {
  for (EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kLfu}) {
    ScopedThrowingAsserts asserts;
    RadixTree tree(RadixTreeOptions{.page_size = 4, .eviction_policy = policy});
    TreeNode* a = tree.insert(0, seq(1, 8), dev(100, 8)).last_node;
    TreeNode* b = tree.insert(0, seq(50, 8), dev(200, 8)).last_node;
    EXPECT_EQ(tree.next_device_victim(), a);
    EXPECT_FALSE(reports(tree, "tree.victim_order"));
    for (int i = 0; i < 3; ++i)
      tree.insert(0, seq(1, 8), dev(300, 8));  // a hit: newer and more often hit than b
    EXPECT_EQ(tree.next_device_victim(), b);
    EXPECT_FALSE(reports(tree, "tree.victim_order"));
    tree.insert(0, seq(50, 8), dev(400, 8));  // b newest, but still hit less than a
    EXPECT_EQ(tree.next_device_victim(), policy == EvictionPolicy::kLru ? a : b);
    EXPECT_FALSE(reports(tree, "tree.victim_order"));
  }
}

// Planted: the access stamps of two leaves swap without re-filing them (what a policy that read
// another field would leave): the set still takes the leaf it filed first.
TEST(VictimOrder, AnOrderThatNoLongerFollowsThePolicyIsReported) {
  ScopedThrowingAsserts asserts;
  RadixTree tree(RadixTreeOptions{.page_size = 4});
  TreeNode* a = tree.insert(0, seq(1, 8), dev(100, 8)).last_node;
  TreeNode* b = tree.insert(0, seq(50, 8), dev(200, 8)).last_node;
  std::swap(a->last_access, b->last_access);
  EXPECT_TRUE(reports(tree, "tree.victim_order"));
  std::swap(a->last_access, b->last_access);
  EXPECT_FALSE(reports(tree, "tree.victim_order"));
}

// The side components' values are evicted LRU whatever the tree's policy.
TEST(VictimOrder, SideComponentValuesFollowLru) {
  ScopedThrowingAsserts asserts;
  RadixTree tree(RadixTreeOptions{.page_size = 2, .eviction_policy = EvictionPolicy::kLfu});
  tree.add_component(std::make_unique<SwaComponent>(4));
  auto with_swa = [&](Token first, SlotIndex slots) {
    return tree
        .insert(0, seq(first, 4), dev(slots, 4),
                AuxInsertValues{.swa = dev(slots + 1000, 4), .owned_from = 0})
        .last_node;
  };
  TreeNode* a = with_swa(1, 100);
  TreeNode* b = with_swa(50, 200);
  EXPECT_EQ(tree.next_aux_victim(ComponentType::kSwa), a);
  EXPECT_FALSE(reports(tree, "tree.victim_order"));
  std::swap(a->last_access, b->last_access);  // planted, as above
  EXPECT_TRUE(reports(tree, "tree.victim_order"));
  std::swap(a->last_access, b->last_access);
  EXPECT_FALSE(reports(tree, "tree.victim_order"));
}

}  // namespace
}  // namespace kvsim
