// RadixTree::snapshot() / restore(): a restored tree behaves exactly as the original (same
// match results, node ids, victims and sizes under the same random calls afterwards), and a
// corrupt snapshot is refused with the node and field named, leaving the tree new.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/swa_component.h"

namespace kvsim {
namespace {

// One random call, drawn against one tree and applied to any tree in the same state.
struct Call {
  enum Kind {
    kMatch,
    kInsert,
    kLock,
    kUnlock,
    kEvict,
    kBackup,
    kEvictHost,
    kLoadBack,
    kInsertHost
  };
  Kind kind = kMatch;
  Namespace ns = 0;
  std::vector<Token> tokens;
  SlotIndex first_slot = 0;
  bool paged = false;  // insert's value is page-granular
  NodeId node = 0;     // lock, backup, load-back
  size_t lock = 0;     // unlock: index into the held locks
};

// A tree and the locks its caller holds.
struct Driven {
  explicit Driven(RadixTreeOptions o) : tree(std::make_unique<RadixTree>(o)) {}
  std::unique_ptr<RadixTree> tree;
  std::vector<LockRecord> locks;
  std::vector<NodeId> returned;  // nodes returned by matches and inserts, most recent last
};

IndexVector slots(Tier tier, SlotIndex first, size_t n, int32_t page, bool paged) {
  if (paged && page > 1) {
    std::vector<SlotIndex> pages(n / static_cast<size_t>(page));
    for (size_t k = 0; k < pages.size(); ++k)
      pages[k] = first + static_cast<SlotIndex>(k) * page;
    return IndexVector::pages(tier, page, std::move(pages));
  }
  std::vector<SlotIndex> v(n);
  for (size_t k = 0; k < n; ++k)
    v[k] = first + static_cast<SlotIndex>(k);
  return IndexVector(tier, std::move(v));
}

class Driver {
 public:
  Driver(uint64_t seed, int32_t page) : rng_(seed), page_(page) {}

  Call draw(const Driven& d) {
    Call c;
    const RadixTree& t = *d.tree;
    const int r = pick(100);
    c.ns = pick(4) == 0 ? 1 : 0;
    c.first_slot = next_slot_;
    next_slot_ += 1000;
    if (r < 30) {
      c.kind = Call::kMatch;
      c.tokens = tokens();
    } else if (r < 55) {
      c.kind = Call::kInsert;
      c.tokens = tokens();
      c.paged = pick(2) == 0;
    } else if (r < 65 && !d.returned.empty()) {
      c.kind = Call::kLock;
      c.node = d.returned[d.returned.size() - 1 -
                          static_cast<size_t>(
                              pick(std::min<int>(4, static_cast<int>(d.returned.size()))))];
    } else if (r < 75 && !d.locks.empty()) {
      c.kind = Call::kUnlock;
      c.lock = static_cast<size_t>(pick(static_cast<int>(d.locks.size())));
    } else if (r < 83) {
      c.kind = Call::kEvict;
    } else if (r < 90) {
      c.kind = Call::kBackup;
      c.node = any_node(t);
    } else if (r < 93) {
      c.kind = Call::kEvictHost;
    } else if (r < 97) {
      c.kind = Call::kLoadBack;
      c.node = any_node(t);
    } else {
      c.kind = Call::kInsertHost;
      c.tokens = tokens();
    }
    return c;
  }

  // What the call returned, as numbers (compared between the trees).
  static std::vector<int64_t> apply(Driven& d, const Call& c) {
    RadixTree& t = *d.tree;
    const int32_t page = t.page_size();
    std::vector<int64_t> out{c.kind};
    switch (c.kind) {
      case Call::kMatch: {
        MatchResult m = t.match_prefix(c.ns, c.tokens);
        out.push_back(m.device_hit_length());
        out.push_back(static_cast<int64_t>(m.last_device_node->id));
        out.push_back(static_cast<int64_t>(m.last_host_node->id));
        out.push_back(static_cast<int64_t>(m.best_match_node->id));
        out.push_back(m.host_hit_length);
        for (SlotIndex s : m.device_indices.slots())
          out.push_back(s);
        d.returned.push_back(m.last_device_node->id);
        break;
      }
      case Call::kInsert: {
        InsertResult r = t.insert(
            c.ns, c.tokens,
            slots(Tier::kDevice, c.first_slot, c.tokens.size() / page * page, page, c.paged));
        out.push_back(r.prefix_len);
        const NodeId last = r.last_node != nullptr ? r.last_node->id : 0;
        out.push_back(static_cast<int64_t>(last));
        for (const TreeNode* n : r.hit_nodes)
          out.push_back(static_cast<int64_t>(n->id));
        d.returned.push_back(last);
        break;
      }
      case Call::kLock: {
        TreeNode* n = t.find(c.node);
        out.push_back(n != nullptr && !n->evicted());
        if (n == nullptr || n->evicted()) break;
        d.locks.push_back(t.lock(*n));
        out.push_back(static_cast<int64_t>(d.locks.back().start[0].value_or(0)));
        break;
      }
      case Call::kUnlock:
        t.unlock(d.locks[c.lock]);
        d.locks.erase(d.locks.begin() + static_cast<ptrdiff_t>(c.lock));
        break;
      case Call::kEvict:
        for (int k = 0; k < 3; ++k) {
          TreeNode* v = t.next_device_victim();
          if (v == nullptr) break;
          out.push_back(static_cast<int64_t>(v->id));
          ReleasedSlots freed = v->backed_up() ? t.demote(*v) : t.remove_device_leaf(*v);
          for (SlotIndex s : freed.full_device().slots())
            out.push_back(s);
        }
        break;
      case Call::kBackup: {
        TreeNode* n = t.find(c.node);
        const bool ok = n != nullptr && !n->is_root() && !n->backed_up() &&
                        (n->parent->is_root() || n->parent->backed_up());
        out.push_back(ok);
        if (ok) t.set_host_value(*n, slots(Tier::kHost, c.first_slot, n->key.size(), page, false));
        break;
      }
      case Call::kEvictHost: {
        TreeNode* v = t.next_host_victim();
        out.push_back(static_cast<int64_t>(v != nullptr ? v->id : 0));
        if (v != nullptr) t.remove_host_leaf(*v);
        break;
      }
      case Call::kLoadBack: {
        TreeNode* n = t.find(c.node);
        const bool ok = n != nullptr && !n->is_root() && n->evicted() &&
                        (n->parent->is_root() || !n->parent->evicted());
        out.push_back(ok);
        if (ok)
          t.set_device_value(*n, slots(Tier::kDevice, c.first_slot, n->key.size(), page, false));
        break;
      }
      case Call::kInsertHost: {
        const size_t n = c.tokens.size() / page * page;
        std::vector<PageDigest> hashes(n / page);
        for (size_t k = 0; k < hashes.size(); ++k)
          hashes[k][0] = static_cast<uint8_t>(c.tokens[k * page] + 1);
        HostInsertResult r = t.insert_host(
            c.ns, *t.root(), c.tokens, slots(Tier::kHost, c.first_slot, n, page, false), hashes);
        out.push_back(r.present_len);
        out.push_back(r.inserted_len);
        out.push_back(r.refused_len);
        out.push_back(static_cast<int64_t>(r.last_node->id));
        break;
      }
    }
    out.push_back(t.evictable_size());
    out.push_back(t.protected_size());
    out.push_back(static_cast<int64_t>(t.node_count()));
    return out;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  std::vector<Token> tokens() {
    // A few shared prefixes and a small vocabulary: many splits and partial matches.
    std::vector<Token> t;
    const int base = pick(3);
    const int len = pick(8 * page_ + 1);
    for (int k = 0; k < len; ++k)
      t.push_back(k < 2 * page_ ? base : pick(3));
    return t;
  }
  NodeId any_node(const RadixTree& t) {
    std::vector<NodeId> ids;
    t.for_each_node([&](const TreeNode& n) { ids.push_back(n.id); });
    return ids[static_cast<size_t>(pick(static_cast<int>(ids.size())))];
  }

  std::mt19937_64 rng_;
  int32_t page_;
  SlotIndex next_slot_ = 1;
};

std::vector<HeldLock> held(const std::vector<LockRecord>& locks) {
  std::vector<HeldLock> out;
  for (const LockRecord& r : locks)
    out.push_back(HeldLock{r.anchor, r.start[0]});
  return out;
}

void expect_sane(const RadixTree& t) {
  SanityReport report;
  t.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

struct RoundTripCase {
  int32_t page;
  EvictionPolicy policy;
  uint64_t seed;
};

class SnapshotRoundTrip : public ::testing::TestWithParam<RoundTripCase> {
 protected:
  ScopedThrowingAsserts asserts_;
};

TEST_P(SnapshotRoundTrip, RestoredTreeBehavesAsTheOriginal) {
  const RoundTripCase& p = GetParam();
  const RadixTreeOptions options{.page_size = p.page, .eviction_policy = p.policy};
  Driven a(options);
  Driver driver(p.seed, p.page);
  for (int i = 0; i < 400; ++i)
    Driver::apply(a, driver.draw(a));
  expect_sane(*a.tree);

  TreeSnapshot snap = a.tree->snapshot();
  snap.held_locks = held(a.locks);
  ASSERT_GT(snap.nodes.size(), 5u);
  Driven b(options);
  b.tree->restore(snap);
  b.locks = a.locks;
  b.returned = a.returned;
  expect_sane(*b.tree);
  TreeSnapshot again = b.tree->snapshot();
  again.held_locks = snap.held_locks;
  EXPECT_TRUE(again == snap);
  EXPECT_EQ(b.tree->evictable_size(), a.tree->evictable_size());
  EXPECT_EQ(b.tree->protected_size(), a.tree->protected_size());
  EXPECT_EQ(b.tree->device_leaf_count(), a.tree->device_leaf_count());
  EXPECT_EQ(b.tree->host_leaf_count(), a.tree->host_leaf_count());

  // The same calls on both: the same outcomes, call by call.
  int kinds_seen = 0;
  for (int i = 0; i < 600; ++i) {
    const Call c = driver.draw(a);
    const std::vector<int64_t> x = Driver::apply(a, c);
    const std::vector<int64_t> y = Driver::apply(b, c);
    ASSERT_EQ(x, y) << "call " << i << " (kind " << c.kind << ") differs after restore";
    kinds_seen |= 1 << c.kind;
  }
  EXPECT_EQ(kinds_seen, (1 << 9) - 1) << "every kind of call ran after the restore";
  expect_sane(*b.tree);
  TreeSnapshot end_a = a.tree->snapshot();
  TreeSnapshot end_b = b.tree->snapshot();
  EXPECT_TRUE(end_a == end_b);
}

INSTANTIATE_TEST_SUITE_P(Trees, SnapshotRoundTrip,
                         ::testing::Values(RoundTripCase{1, EvictionPolicy::kLru, 1},
                                           RoundTripCase{4, EvictionPolicy::kLru, 2},
                                           RoundTripCase{2, EvictionPolicy::kLfu, 3},
                                           RoundTripCase{4, EvictionPolicy::kLfu, 4}),
                         [](const ::testing::TestParamInfo<RoundTripCase>& tc) {
                           return "page" + std::to_string(tc.param.page) + "_" +
                                  std::string(to_string(tc.param.policy)) + "_seed" +
                                  std::to_string(tc.param.seed);
                         });

// A tree with splits, evictions, a lock and two namespaces, and its snapshot.
class SnapshotErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    RadixTree t(options_);
    std::vector<Token> a{1, 1, 2, 2, 3, 3, 4, 4};
    std::vector<Token> b{1, 1, 2, 2, 5, 5, 6, 6};
    t.insert(0, a, slots(Tier::kDevice, 100, 8, 2, false));
    t.insert(0, b, slots(Tier::kDevice, 200, 8, 2, false));
    t.insert(7, a, slots(Tier::kDevice, 300, 8, 2, true));
    TreeNode* locked = t.match_prefix(0, b).last_device_node;
    lock_ = t.lock(*locked);
    t.remove_device_leaf(*t.next_device_victim());
    snap_ = t.snapshot();
    snap_.held_locks = held({lock_});
  }

  // restore() of `s` fails with a message containing `want`, and the tree stays new.
  void expect_refused(const TreeSnapshot& s, const std::string& want) {
    RadixTree t(options_);
    try {
      t.restore(s);
      ADD_FAILURE() << "restore accepted a corrupt snapshot (wanted: " << want << ")";
    } catch (const SnapshotError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_EQ(t.node_count(), 1u);
    EXPECT_EQ(t.evictable_size(), 0);
    expect_sane(t);
    t.restore(snap_);  // still new: a good snapshot restores
    expect_sane(t);
  }
  static NodeSnapshot& node_in(TreeSnapshot& s, NodeId id) {
    for (NodeSnapshot& n : s.nodes) {
      if (n.id == id) return n;
    }
    throw std::logic_error("no node " + std::to_string(id));
  }
  NodeId locked_id() const { return *lock_.start[0]; }

  ScopedThrowingAsserts asserts_;
  RadixTreeOptions options_{.page_size = 2};
  LockRecord lock_;
  TreeSnapshot snap_;
};

TEST_F(SnapshotErrors, TheFixtureRestores) {
  RadixTree t(options_);
  t.restore(snap_);
  expect_sane(t);
  EXPECT_EQ(t.node_count(), snap_.nodes.size() + 1);
  EXPECT_GT(t.protected_size(), 0);
}

TEST_F(SnapshotErrors, UnknownParent) {
  TreeSnapshot s = snap_;
  s.nodes.back().parent = 99;
  expect_refused(s, "node " + std::to_string(s.nodes.back().id) + ": field parent: no node 99");
}

TEST_F(SnapshotErrors, CycleOfParents) {
  TreeSnapshot s = snap_;
  // Two nodes that name each other as parent.
  NodeSnapshot& x = s.nodes[0];
  NodeSnapshot& y = s.nodes[1];
  x.parent = y.id;
  y.parent = x.id;
  y.ns = x.ns;
  expect_refused(s, "field parent: a cycle of parents");
}

TEST_F(SnapshotErrors, IdsOutOfOrderOrDuplicated) {
  TreeSnapshot s = snap_;
  s.nodes[1].id = s.nodes[0].id;
  expect_refused(s, "field id: listed after node");
  s = snap_;
  s.nodes.back().id = s.next_id;
  expect_refused(s, "field id: not below the snapshot's next_id");
  s = snap_;
  s.nodes[0].id = 0;
  expect_refused(s, "node 0: field id: 0 is the root's id");
}

TEST_F(SnapshotErrors, MisalignedKeyAndShortValue) {
  TreeSnapshot s = snap_;
  s.nodes[0].key.push_back(9);
  expect_refused(s, "node " + std::to_string(s.nodes[0].id) +
                        ": field key: 5 tokens is not a positive multiple of the page size 2");
  s = snap_;
  for (NodeSnapshot& n : s.nodes) {
    if (n.value && n.value->stride == 1) {
      n.value->entries.pop_back();
      expect_refused(s, "node " + std::to_string(n.id) + ": field value:");
      break;
    }
  }
  s = snap_;
  for (NodeSnapshot& n : s.nodes) {
    if (n.value) {
      n.value->stride = 0;
      expect_refused(s, "field value: stride 0 is not positive");
      break;
    }
  }
}

TEST_F(SnapshotErrors, LockCountsDisagreeWithHeldLocks) {
  TreeSnapshot s = snap_;
  node_in(s, locked_id()).lock_ref += 1;
  expect_refused(s, "node " + std::to_string(locked_id()) +
                        ": field lock_ref: 2, but the held locks cover it 1 time(s)");
  s = snap_;
  s.held_locks->clear();
  expect_refused(s, "field lock_ref: 1, but the held locks cover it 0 time(s)");
  s = snap_;
  s.held_locks->push_back(HeldLock{1, 999});
  expect_refused(s, "field held_locks: lock 1 starts at node 999, which the snapshot lacks");
}

TEST_F(SnapshotErrors, HeldLocksProblemSaysWhatRestoreWould) {
  EXPECT_EQ(held_locks_problem(snap_), "");
  TreeSnapshot s = snap_;
  s.held_locks->push_back(s.held_locks->front());  // the same lock held twice
  EXPECT_NE(held_locks_problem(s).find("field lock_ref: 1, but the held locks cover it 2 time(s)"),
            std::string::npos)
      << held_locks_problem(s);
  s.held_locks.reset();  // nothing to check
  EXPECT_EQ(held_locks_problem(s), "");
}

TEST_F(SnapshotErrors, SanityViolationsAreNamed) {
  // Checks that need the whole tree are sanity_check's: an evicted node without a host copy,
  // hashes that are not one per page.
  TreeSnapshot s = snap_;
  NodeSnapshot& leaf = s.nodes.back();  // the namespace-7 leaf: unlocked, no children
  ASSERT_EQ(leaf.ns, 7u);
  leaf.value.reset();
  expect_refused(s, "node " + std::to_string(leaf.id) +
                        ": sanity_check after restore: tree.dead_node: no device or host copy");
  s = snap_;
  s.nodes.back().hash_value.resize(1);
  expect_refused(s, "tree.hash_shape");
}

TEST_F(SnapshotErrors, ClockFields) {
  TreeSnapshot s = snap_;
  s.nodes[0].last_access = s.clock + 1;
  expect_refused(
      s, "field last_access: " + std::to_string(s.clock + 1) + " is after the tree's clock");
  s = snap_;
  s.nodes[0].creation = s.nodes[0].last_access + 1;
  expect_refused(s, "field creation:");
}

TEST_F(SnapshotErrors, SiblingsWithTheSameFirstPage) {
  TreeSnapshot s = snap_;
  // Two children of the root in namespace 0 starting with page {1, 1}: make the namespace-7
  // root child namespace 0 (its subtree too).
  for (NodeSnapshot& n : s.nodes)
    if (n.ns == 7) n.ns = 0;
  expect_refused(s, "starts with the same page, in the same namespace, as its sibling");
}

TEST_F(SnapshotErrors, TreeOptionsMustMatch) {
  TreeSnapshot s = snap_;
  s.page_size = 4;
  expect_refused(s, "field page_size: 4, but this tree's page size is 2");
  s = snap_;
  s.eviction_policy = EvictionPolicy::kLfu;
  expect_refused(s, "field eviction_policy: lfu, but this tree's is lru");
}

TEST_F(SnapshotErrors, AuxComponentDataIsRefusedNotDropped) {
  TreeSnapshot s = snap_;
  s.nodes[0].aux_data.push_back(ComponentType::kSwa);
  expect_refused(s, "node " + std::to_string(s.nodes[0].id) +
                        ": field aux_data: swa component data; restore supports the "
                        "full-attention component only");
  s = snap_;
  s.aux_components.push_back(ComponentType::kMamba);
  expect_refused(s, "field aux_components: the snapshot's tree has a mamba component");

  // A tree with an SWA component snapshots it, and a tree with one refuses to restore.
  RadixTree hybrid(options_);
  hybrid.add_component(std::make_unique<SwaComponent>(4));
  EXPECT_EQ(hybrid.snapshot().aux_components, std::vector<ComponentType>{ComponentType::kSwa});
  EXPECT_THROW(hybrid.restore(snap_), SnapshotError);
}

TEST_F(SnapshotErrors, OnlyANewTreeRestores) {
  RadixTree t(options_);
  t.insert(0, std::vector<Token>{1, 1}, slots(Tier::kDevice, 1, 2, 2, false));
  try {
    t.restore(snap_);
    ADD_FAILURE() << "restore into a used tree";
  } catch (const SnapshotError& e) {
    EXPECT_NE(std::string(e.what()).find("restore needs a new tree"), std::string::npos);
  }
  EXPECT_EQ(t.node_count(), 2u);  // untouched
  expect_sane(t);
}

}  // namespace
}  // namespace kvsim
