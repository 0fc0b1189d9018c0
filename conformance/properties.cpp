// The component conformance kit: properties every TreeComponent must satisfy, registered by
// register_component_kit (conformance.h) as one GoogleTest case per property and
// ComponentUnderTest descriptor (kit.h), each case a RapidCheck property over random operation
// sequences (serve, match/split, backup, the three evictions, load-back, settle, lock, unlock).
//
//   LockSymmetry          acquire then release returns every lock count (device and host, every
//                         component) and the evictable/protected accounting (full and
//                         auxiliary) to where they were — also when the tree is split, served,
//                         backed up or loaded back between acquire and release, and when the
//                         anchor's bottom segment is evicted (seed 002). Twin subjects run the
//                         same operations, one inside a lock: they must end identical.
//   Accounting            RadixTree::sanity_check and the host's own checks (pools, ownership,
//                         stream lifetime) are clean after every operation; after releasing
//                         everything and evicting everything, the tree is the bare root and no
//                         slot is left allocated.
//   EvictionSafety        while a lock is held, every value its acquire protected stays on
//                         device (the node exists, the value is no tombstone, its slots are
//                         still the tree's): no eviction (device, component, host) frees it.
//   LoadBackAnchoring     a load-back anchored on best_match_node reads only nodes holding a
//                         device or host value of every component, never throws, and when it
//                         loads, a new match of the same prefix is served from device to the
//                         anchor with the oracle's bytes.
//   TransferResolution    CacheController::resolve_pool_transfers (move_indices for the full
//                         pool) builds new device-resident index objects and leaves its inputs
//                         and the tree host-resident and unchanged (seed 001).
//   ContentAcrossTiers    after serve → backup → evict → load-back, every component's device
//                         and host values equal the oracle.
//
// The project's own instantiations (tests/conformance/component_kit_test.cpp): Full, Swa, Mamba
// (HiCache on the CPU backend) and Example (the doc's PageChecksumComponent on its tree-level
// host, ExampleCache: HiCache cannot host a fourth component type without core changes — see
// docs/new-component.md). A component in another repository links kvsim::conformance and
// registers its own descriptor (examples/external-component/).
//
// Run:   ctest --test-dir build/<dir> -R conformance
//        build/<dir>/tests/kvsim_conformance_tests --gtest_filter='*/ComponentKit.*/Example'
// A failure prints the shrunk operation list and a replay line (rc_replay.h).
#include <gtest/gtest.h>

#include <rapidcheck.h>

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "conformance/conformance.h"
#include "conformance/rc_replay.h"
#include "core/common/assert.h"

namespace kvsim::conformance {
namespace {

// One registered case: a property run on one component.
class KitTest : public ::testing::Test {
 public:
  explicit KitTest(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

constexpr int32_t kPropertyPage = kKitPageSize;
constexpr std::array<ComponentType, 3> kTypes{ComponentType::kFull, ComponentType::kSwa,
                                              ComponentType::kMamba};

void assert_sane(KitSubject& subject, const char* when) {
  SanityReport report;
  subject.sanity(report);
  if (!report.ok()) RC_FAIL(std::string(when) + ": " + report.summary());
}

// --- Lock state of a whole tree, for LockSymmetry ---------------------------------------
struct LockState {
  // Per node: lock_ref and host_lock_ref of every slot, and which values are on device.
  std::map<NodeId, std::array<int32_t, 6>> nodes;
  std::array<int64_t, 6> sizes{};  // evictable, protected, then aux evictable/protected ×2
};

LockState lock_state(const RadixTree& tree) {
  LockState s;
  tree.for_each_node([&](const TreeNode& n) {
    std::array<int32_t, 6> v{};
    for (size_t t = 0; t < kTypes.size(); ++t) {
      v[2 * t] = n.component(t).lock_ref * 4 + (n.component(t).value ? 1 : 0) +
                 (n.component(t).host_value ? 2 : 0);
      v[2 * t + 1] = n.component(t).host_lock_ref;
    }
    s.nodes[n.id] = v;
  });
  s.sizes = {tree.evictable_size(),
             tree.protected_size(),
             tree.aux_evictable_size(ComponentType::kSwa),
             tree.aux_protected_size(ComponentType::kSwa),
             tree.aux_evictable_size(ComponentType::kMamba),
             tree.aux_protected_size(ComponentType::kMamba)};
  return s;
}

std::string diff(const LockState& with_lock, const LockState& without) {
  if (with_lock.sizes != without.sizes) {
    std::string out = "size accounting differs (evictable, protected, swa ev/prot, mamba ev/prot):";
    for (size_t i = 0; i < 6; ++i) {
      out += " " + std::to_string(with_lock.sizes[i]) + "/" + std::to_string(without.sizes[i]);
    }
    return out;
  }
  if (with_lock.nodes.size() != without.nodes.size()) return "node counts differ";
  for (const auto& [id, v] : with_lock.nodes) {
    auto it = without.nodes.find(id);
    if (it == without.nodes.end()) return "node " + std::to_string(id) + " only in one twin";
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != it->second[i]) {
        return "node " + std::to_string(id) + " component " + std::to_string(i / 2) +
               (i % 2 ? " host_lock_ref " : " lock_ref*4+values ") + std::to_string(v[i]) +
               " after acquire/release, " + std::to_string(it->second[i]) + " without";
      }
    }
  }
  return "";
}

// --- Values protected by one acquire, for EvictionSafety --------------------------------
struct Protected {
  NodeId node;
  ComponentType type;
  std::vector<SlotIndex> slots;
};

std::map<std::pair<NodeId, size_t>, int32_t> lock_counts(const RadixTree& tree) {
  std::map<std::pair<NodeId, size_t>, int32_t> out;
  tree.for_each_node([&](const TreeNode& n) {
    for (size_t t = 0; t < kTypes.size(); ++t)
      out[{n.id, t}] = n.component(t).lock_ref;
  });
  return out;
}

bool same_record(const LockRecord& a, const LockRecord& b) {
  return a.anchor == b.anchor && a.start == b.start && a.aux == b.aux;
}

void LockSymmetry(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto before = *gen_ops({.evictions = true, .locks = false}, 30, kPropertyPage);
    // The anchor: usually the path of a shape `before` served (so the lock has depth).
    std::vector<Shape> served;
    for (const KitOp& op : before) {
      if (op.kind == KitOp::kServe) served.push_back(op.shape);
    }
    const Shape anchor_shape =
        served.empty() || *rc::gen::weightedElement<int>({{1, 0}, {4, 1}}) == 0
            ? *gen_shape(6, kPropertyPage, 2)
            : *rc::gen::elementOf(served);
    // Pages evicted right before the acquire, so that the anchor's bottom segment may be
    // evicted when the lock is taken (seed 002).
    const uint32_t evict_pages = *rc::gen::weightedElement<uint32_t>({{2, 0}, {1, 2}, {1, 6}});
    // Make the anchor's path the least recently used, so that those pages are its bottom.
    const bool age_anchor_path = *rc::gen::arbitrary<bool>();
    const bool on_best_match = *rc::gen::arbitrary<bool>();
    const auto between = *gen_ops({.evictions = false, .locks = true}, 20, kPropertyPage);
    // Matches of a prefix of the anchor's own tokens, cut after `pages` pages: they split
    // the locked path where it ends inside a node.
    const auto cuts = *rc::gen::container<std::vector<uint8_t>>(rc::gen::inRange<uint8_t>(1, 6));
    auto a = cut.make(KitGeometry::kRoomy);  // runs `between` inside the lock
    auto b = cut.make(KitGeometry::kRoomy);  // its twin, without the lock
    OpRunner ra(*a, cut.type);
    OpRunner rb(*b, cut.type);
    for (const KitOp& op : before) {
      ra.run(op);
      rb.run(op);
    }
    const std::vector<Token> tokens = tokens_of(anchor_shape, kPropertyPage);
    if (evict_pages > 0 && age_anchor_path) {
      for (KitSubject* s : {a.get(), b.get()}) {
        RadixTree& tree = s->tree();
        std::set<NodeId> path;
        for (TreeNode* n :
             RadixTree::path_to(*tree.match_prefix(anchor_shape.ns, tokens).best_match_node))
          path.insert(n->id);
        std::vector<NodeId> others;
        tree.for_each_node([&](const TreeNode& n) {
          if (!n.is_root() && path.count(n.id) == 0) others.push_back(n.id);
        });
        for (NodeId id : others)
          tree.touch(*tree.find(id));
      }
    }
    if (evict_pages > 0) {
      const KitOp evict{.kind = KitOp::kEvictDevice, .n = evict_pages};
      ra.run(evict);
      rb.run(evict);
    }
    const MatchResult ma = a->tree().match_prefix(anchor_shape.ns, tokens);
    b->tree().match_prefix(anchor_shape.ns, tokens);
    TreeNode& anchor = on_best_match ? *ma.best_match_node : *ma.last_device_node;
    RC_LOG() << "anchor: " << show(anchor_shape) << " → node " << anchor.id
             << (anchor.evicted() ? " (evicted)" : "") << "\n";
    const int64_t anchor_tokens = anchor.token_count();
    const bool anchor_evicted = anchor.evicted();
    const LockRecord record = a->tree().lock(anchor);
    assert_sane(*a, "after acquire");
    const auto cut_at = [&](uint8_t pages) {
      Shape prefix = anchor_shape;
      prefix.branches.resize(std::min<size_t>(pages, prefix.branches.size()));
      prefix.tail = 0;
      const KitOp split{.kind = KitOp::kMatch, .shape = prefix};
      ra.run(split);
      rb.run(split);
    };
    for (size_t i = 0; i < std::max(between.size(), cuts.size()); ++i) {
      if (i < between.size()) {
        ra.run(between[i]);
        rb.run(between[i]);
      }
      if (i < cuts.size()) cut_at(cuts[i]);
      assert_sane(*a, "between acquire and release");
    }
    RC_CLASSIFY(record.start[index_of(cut.type)].has_value(), "component locked something");
    RC_CLASSIFY(anchor.token_count() != anchor_tokens, "anchor split while locked");
    RC_CLASSIFY(anchor_evicted, "anchor evicted (seed 002)");
    a->tree().unlock(record);
    assert_sane(*a, "after release");
    ra.unlock_all();
    rb.unlock_all();
    const std::string d = diff(lock_state(a->tree()), lock_state(b->tree()));
    RC_ASSERT(d == "");
    a->settle();
    b->settle();
    RC_ASSERT(diff(lock_state(a->tree()), lock_state(b->tree())) == "");
  });
}

void Accounting(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto ops = *gen_ops({}, 50, kPropertyPage);
    auto s = cut.make(KitGeometry::kTight);
    OpRunner runner(*s, cut.type);
    for (const KitOp& op : ops) {
      runner.run(op);
      SanityReport tree_report;
      s->tree().sanity_check(tree_report);
      if (!tree_report.ok()) RC_FAIL("RadixTree::sanity_check: " + tree_report.summary());
      assert_sane(*s, "after an operation");
    }
    runner.unlock_all();
    s->settle();
    assert_sane(*s, "after releasing every lock");
    evict_everything(*s);
    assert_sane(*s, "after evicting everything");
    RC_ASSERT(s->tree().node_count() == 1u);
    RC_ASSERT(s->tree().evictable_size() == 0);
    RC_ASSERT(s->tree().protected_size() == 0);
    const auto leak = s->leak_error();
    if (leak) RC_FAIL(*leak);
  });
}

void EvictionSafety(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto ops = *gen_ops({}, 50, kPropertyPage);
    auto s = cut.make(KitGeometry::kTight);
    RadixTree& tree = s->tree();
    OpRunner runner(*s, cut.type);
    std::vector<std::pair<LockRecord, std::vector<Protected>>> held;
    std::map<std::pair<NodeId, size_t>, int32_t> counts_before;
    bool evicted_under_lock = false;
    runner.before_lock = [&] { counts_before = lock_counts(tree); };
    runner.on_lock = [&](const LockRecord& record) {
      std::vector<Protected> prot;
      for (const auto& [key, count] : lock_counts(tree)) {
        auto it = counts_before.find(key);
        if (count <= (it == counts_before.end() ? 0 : it->second)) continue;
        const TreeNode* n = tree.find(key.first);
        const auto type = static_cast<ComponentType>(key.second);
        RC_ASSERT(n->has_device(type));  // a lock never lands on a value that is not there
        prot.push_back({key.first, type, n->component(type).value->slots()});
      }
      held.emplace_back(record, std::move(prot));
    };
    runner.on_unlock = [&](const LockRecord& record) {
      for (auto it = held.begin(); it != held.end(); ++it) {
        if (same_record(it->first, record)) {
          held.erase(it);
          return;
        }
      }
    };
    for (const KitOp& op : ops) {
      runner.run(op);
      assert_sane(*s, "after an operation");
      // Every device slot the tree holds now, per component.
      std::array<std::set<SlotIndex>, 3> on_device;
      tree.for_each_node([&](const TreeNode& n) {
        for (size_t t = 0; t < kTypes.size(); ++t) {
          if (n.component(t).value)
            on_device[t].insert(n.component(t).value->slots().begin(),
                                n.component(t).value->slots().end());
        }
      });
      for (const auto& [record, prot] : held) {
        if (!prot.empty() && op.kind == KitOp::kEvictComponent) evicted_under_lock = true;
        if (!prot.empty() && op.kind == KitOp::kEvictDevice) evicted_under_lock = true;
        for (const Protected& p : prot) {
          const TreeNode* n = tree.find(p.node);
          RC_ASSERT(n != nullptr);           // a locked node is never removed
          RC_ASSERT(n->has_device(p.type));  // nor evicted or tombstoned
          for (SlotIndex slot : p.slots)
            RC_ASSERT(on_device[index_of(p.type)].count(slot) == 1u);
        }
      }
    }
    RC_CLASSIFY(evicted_under_lock, "evictions while values were locked");
    runner.unlock_all();
    s->settle();
    assert_sane(*s, "after releasing every lock");
  });
}

void LoadBackAnchoring(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto ops = *gen_ops({}, 50, kPropertyPage);
    auto s = cut.make(KitGeometry::kTight);
    RadixTree& tree = s->tree();
    OpRunner runner(*s, cut.type);
    runner.before_load_back = [&](TreeNode& anchor) {
      for (const TreeNode* n : evicted_chain(anchor))
        RC_ASSERT(n->backed_up());
      for (const TreeNode* n : cut.load_back_reads(anchor)) {
        if (!n->has_device(cut.type) && !n->has_host(cut.type)) {
          RC_FAIL("load-back anchored at node " + std::to_string(anchor.id) + " reads node " +
                  std::to_string(n->id) + ", which has neither device nor host value");
        }
      }
    };
    runner.after_load_back = [&](TreeNode& anchor, bool loaded) {
      if (!loaded) return;
      s->settle();
      const std::vector<Token> prefix = RadixTree::prefix_tokens(anchor);
      const MatchResult again = tree.match_prefix(anchor.ns, prefix);
      RC_ASSERT(again.last_device_node == &anchor);
      for (TreeNode* n : RadixTree::path_to(anchor)) {
        for (ComponentType t : s->types()) {
          if (auto e = s->values_error(*n, t)) RC_FAIL("after load-back: " + *e);
        }
      }
    };
    for (const KitOp& op : ops) {
      runner.run(op);
      assert_sane(*s, "after an operation");
    }
    // One more load-back of every shape the operations served, anchored where match says.
    for (const KitOp& op : ops) {
      if (op.kind != KitOp::kServe) continue;
      runner.run(KitOp{.kind = KitOp::kLoadBack, .shape = op.shape});
      assert_sane(*s, "after a final load-back");
    }
    runner.unlock_all();
    s->settle();
    assert_sane(*s, "at the end");
  });
}

void TransferResolution(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto ops = *gen_ops({}, 40, kPropertyPage);
    const Shape last = *gen_shape(6, kPropertyPage, 2);
    const bool to_host = *rc::gen::arbitrary<bool>();
    auto s = cut.make(KitGeometry::kTight);
    RadixTree& tree = s->tree();
    OpRunner runner(*s, cut.type);
    for (const KitOp& op : ops)
      runner.run(op);
    // Make sure at least one node holds both a device and a host value.
    runner.run(KitOp{.kind = KitOp::kServe, .shape = last});
    for (uint32_t i = 0; i < last.branches.size(); ++i)
      runner.run(KitOp{.kind = KitOp::kBackup, .shape = last, .n = i});
    s->settle();

    // Snapshot of every value the tree holds.
    using Values = std::array<std::optional<IndexVector>, 6>;
    std::map<NodeId, Values> snapshot;
    tree.for_each_node([&](const TreeNode& n) {
      Values v;
      for (size_t t = 0; t < kTypes.size(); ++t) {
        v[2 * t] = n.component(t).value;
        v[2 * t + 1] = n.component(t).host_value;
      }
      snapshot[n.id] = v;
    });
    std::vector<PoolTransfer> transfers;
    tree.for_each_node([&](const TreeNode& n) {
      const ComponentData& d = n.component(cut.type);
      if (n.is_root() || !d.value || !d.host_value) return;
      transfers.push_back(PoolTransfer{.pool = PoolName::kSwa,  // set below
                                       .host_indices = *d.host_value,
                                       .device_indices = *d.value,
                                       .nodes = {n.id}});
    });
    RC_TAG(transfers.empty() ? "no transfer" : "transfers");
    const TransferContext ctx = s->transfer_context(cut.type);
    const std::vector<PoolTransfer> inputs_before = transfers;
    std::vector<ResolvedIndices> resolved;
    if (ctx.pool) {
      for (PoolTransfer& pt : transfers)
        pt.pool = *ctx.pool;
      const std::vector<PoolTransfer> inputs = transfers;
      for (ResolvedPoolTransfer& r : ctx.controller->resolve_pool_transfers(transfers, to_host)) {
        RC_ASSERT(r.pool == *ctx.pool);
        RC_ASSERT(r.to_host == to_host);
        resolved.push_back(std::move(r.indices));
      }
      RC_ASSERT(resolved.size() == transfers.size());
      for (size_t i = 0; i < transfers.size(); ++i) {
        RC_ASSERT(transfers[i].host_indices == inputs[i].host_indices);
        RC_ASSERT(transfers[i].device_indices == inputs[i].device_indices);
        RC_ASSERT(transfers[i].nodes == inputs[i].nodes);
      }
    } else {
      for (const PoolTransfer& pt : transfers) {
        resolved.push_back(to_host
                               ? ctx.controller->move_indices(pt.device_indices, pt.host_indices)
                               : ctx.controller->move_indices(pt.host_indices, pt.device_indices));
      }
    }
    for (size_t i = 0; i < transfers.size(); ++i) {
      const PoolTransfer& pt = transfers[i];
      RC_ASSERT(pt.host_indices.residency() == Residency::kHost);
      RC_ASSERT(pt.device_indices.residency() == Residency::kHost);
      RC_ASSERT(pt.host_indices == inputs_before[i].host_indices);
      RC_ASSERT(pt.device_indices == inputs_before[i].device_indices);
      const ResolvedIndices& r = resolved[i];
      RC_ASSERT(r.src.residency() == Residency::kDevice);
      RC_ASSERT(r.dst.residency() == Residency::kDevice);
      const IndexVector& src = to_host ? pt.device_indices : pt.host_indices;
      const IndexVector& dst = to_host ? pt.host_indices : pt.device_indices;
      RC_ASSERT(r.src.slots() == src.slots());
      RC_ASSERT(r.dst.slots() == dst.slots());
      RC_ASSERT(r.src.tier() == src.tier());
      RC_ASSERT(r.dst.tier() == dst.tier());
    }
    // The tree is unchanged and host-resident.
    tree.for_each_node([&](const TreeNode& n) {
      auto it = snapshot.find(n.id);
      RC_ASSERT(it != snapshot.end());
      for (size_t t = 0; t < kTypes.size(); ++t) {
        RC_ASSERT(n.component(t).value == it->second[2 * t]);
        RC_ASSERT(n.component(t).host_value == it->second[2 * t + 1]);
        if (n.component(t).value) RC_ASSERT(n.component(t).value->residency() == Residency::kHost);
        if (n.component(t).host_value)
          RC_ASSERT(n.component(t).host_value->residency() == Residency::kHost);
      }
    });
    RC_ASSERT(snapshot.size() == tree.node_count());
    CacheController& controller = *ctx.controller;
    for (const ResolvedIndices& r : resolved)
      controller.release_after(r, controller.backend().compute_stream());
    s->settle();
    assert_sane(*s, "after releasing the resolved indices");
  });
}

void ContentAcrossTiers(const ComponentUnderTest& cut, const std::string& binary) {
  check_property(binary, [cut] {
    ScopedThrowingAsserts asserts;
    const auto shapes = *rc::gen::resize(
        6,
        rc::gen::nonEmpty(rc::gen::container<std::vector<Shape>>(gen_shape(6, kPropertyPage, 2))));
    const uint32_t tombstones = *rc::gen::inRange<uint32_t>(0, 8);
    auto s = cut.make(KitGeometry::kTight);
    RadixTree& tree = s->tree();
    const auto check_all = [&](const char* when) {
      tree.for_each_node([&](const TreeNode& n) {
        for (ComponentType t : s->types()) {
          if (auto e = s->values_error(n, t)) RC_FAIL(std::string(when) + ": " + *e);
        }
      });
    };
    for (const Shape& shape : shapes)
      s->serve(shape.ns, tokens_of(shape, kPropertyPage));
    s->evict_component(cut.type, tombstones);
    s->settle();
    // Back up every node, parents first (for_each_node visits the root, then children).
    std::vector<NodeId> ids;
    tree.for_each_node([&](const TreeNode& n) { ids.push_back(n.id); });
    for (NodeId id : ids) {
      TreeNode* n = tree.find(id);
      if (n != nullptr && !n->is_root() && !n->evicted() && !n->backed_up()) s->backup(*n);
    }
    s->settle();
    check_all("after backup");
    assert_sane(*s, "after backup");
    s->evict_device(int64_t{1} << 40);
    check_all("after eviction");
    assert_sane(*s, "after eviction");
    int loads = 0;
    for (const Shape& shape : shapes) {
      const std::vector<Token> tokens = tokens_of(shape, kPropertyPage);
      const MatchResult m = tree.match_prefix(shape.ns, tokens);
      if (m.best_match_node == m.last_device_node) continue;
      if (!s->load_back(*m.best_match_node)) continue;
      ++loads;
      s->settle();
      for (TreeNode* n : RadixTree::path_to(*m.best_match_node)) {
        for (ComponentType t : s->types()) {
          if (auto e = s->values_error(*n, t)) RC_FAIL("after load-back: " + *e);
        }
      }
      assert_sane(*s, "after load-back");
    }
    RC_TAG(loads == 0 ? "nothing loaded back" : "loaded back");
    check_all("at the end");
  });
}

}  // namespace

void register_component_kit(const std::vector<ComponentUnderTest>& components,
                            const std::string& binary, const std::string& suite) {
  using Property = void (*)(const ComponentUnderTest&, const std::string&);
  const std::vector<std::pair<const char*, Property>> properties = {
      {"LockSymmetry", &LockSymmetry},
      {"Accounting", &Accounting},
      {"EvictionSafety", &EvictionSafety},
      {"LoadBackAnchoring", &LoadBackAnchoring},
      {"TransferResolution", &TransferResolution},
      {"ContentAcrossTiers", &ContentAcrossTiers}};
  for (const auto& [name, property] : properties) {
    for (const ComponentUnderTest& cut : components) {
      const std::string test = std::string(name) + "/" + cut.name;
      ::testing::RegisterTest(
          suite.c_str(), test.c_str(), nullptr, cut.name.c_str(), __FILE__, __LINE__,
          [cut, binary, property]() -> ::testing::Test* {
            return new KitTest([cut, binary, property] { property(cut, binary); });
          });
    }
  }
}

}  // namespace kvsim::conformance
