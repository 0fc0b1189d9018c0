#include "sim/campaign/rebuild_check.h"

#include <vector>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/token_run.h"

namespace kvsim::sim {
namespace {

constexpr size_t kMaxLeafMatches = 32;
constexpr size_t kMaxWideLeaves = 8;

std::string id_text(const TreeNode* n) {
  return n == nullptr ? "none" : std::to_string(n->id);
}

// What a match of `leaf`'s whole path must find in a tree shaped as the one `leaf` is in:
// evicted nodes form the bottom of a path and have host copies, so the deepest device node is
// the last one with a device value, and the leaf itself is the best match.
struct ExpectedMatch {
  NodeId last_device = 0;  // 0: the root
  NodeId best = 0;
  int64_t device_hit = 0;
  int64_t host_hit = 0;
};

ExpectedMatch expected_match(const TreeNode& leaf) {
  ExpectedMatch e;
  for (const TreeNode* n : RadixTree::path_to(const_cast<TreeNode&>(leaf))) {
    const auto len = static_cast<int64_t>(n->key.size());
    if (!n->evicted()) {
      e.last_device = n->id;
      e.device_hit += len;
    } else {
      e.host_hit += len;
    }
    e.best = n->id;
  }
  return e;
}

std::string node_text(const RadixTree& t, const TreeNode* n) {
  return n == nullptr || n == t.root() ? "root" : std::to_string(n->id);
}

// Wide token ids (int64, as the Python module passes SGLang's tensors): the same inserts and
// matches, narrow on one rebuild of `s` and wide on another, must give the same results and
// leave the same trees; a wide id past Token's range matches nothing from its page on and is
// refused by insert with the tree unchanged.
std::string wide_problem(const RadixTree& tree, const TreeSnapshot& s,
                         const std::vector<const TreeNode*>& leaves) {
  RadixTree narrow(tree.options());
  RadixTree wide(tree.options());
  narrow.restore(s);
  wide.restore(s);
  const auto page = static_cast<size_t>(tree.page_size());
  constexpr int64_t kOutOfRange = int64_t{1} << 40;
  for (size_t k = 0; k < leaves.size() && k < kMaxWideLeaves; ++k) {
    const TreeNode& leaf = *leaves[k];
    // The leaf's path and one new page under it (a leaf has no child, so the page is new).
    std::vector<Token> t = RadixTree::prefix_tokens(leaf);
    const size_t old_len = t.size();
    for (size_t j = 0; j < page; ++j)
      t.push_back(static_cast<Token>(1000000 + k * page + j));
    std::vector<int64_t> w(t.begin(), t.end());
    // Slots no pool hands out: these trees only hold them.
    const auto value_of = [](size_t begin, size_t end) {
      std::vector<SlotIndex> v;
      for (size_t i = begin; i < end; ++i)
        v.push_back((SlotIndex{1} << 40) + static_cast<SlotIndex>(i));
      return IndexVector(Tier::kDevice, std::move(v));
    };
    const std::string where = "wide ids, node " + std::to_string(leaf.id) + "'s path + 1 page: ";
    // A wide insert whose new page holds an id past Token's range: refused, tree unchanged.
    std::vector<int64_t> bad = w;
    bad.back() = kOutOfRange;
    bool refused = false;
    try {
      wide.insert(leaf.ns, std::span<const int64_t>(bad), value_of);
    } catch (const TokenOutOfRange&) {
      refused = true;
    }
    if (!refused) return where + "an insert with an id past Token's range was accepted";
    const InsertResult a = narrow.insert(leaf.ns, std::span<const Token>(t), value_of);
    const InsertResult b = wide.insert(leaf.ns, std::span<const int64_t>(w), value_of);
    if (a.prefix_len != b.prefix_len ||
        node_text(narrow, a.last_node) != node_text(wide, b.last_node)) {
      return where + "insert: narrow prefix " + std::to_string(a.prefix_len) + " node " +
             node_text(narrow, a.last_node) + ", wide prefix " + std::to_string(b.prefix_len) +
             " node " + node_text(wide, b.last_node);
    }
    // The narrow tree matches the path without the new page; the wide one the whole key with
    // its last id out of range, which must stop at the same place.
    const MatchResult ma = narrow.match_prefix(leaf.ns, std::span<const Token>(t.data(), old_len));
    w.back() = kOutOfRange;
    const MatchResult mb = wide.match_prefix(leaf.ns, std::span<const int64_t>(w));
    if (ma.device_hit_length() != mb.device_hit_length() ||
        ma.host_hit_length != mb.host_hit_length ||
        node_text(narrow, ma.last_device_node) != node_text(wide, mb.last_device_node) ||
        node_text(narrow, ma.best_match_node) != node_text(wide, mb.best_match_node)) {
      return where + "match: narrow device hit " + std::to_string(ma.device_hit_length()) +
             " best " + node_text(narrow, ma.best_match_node) + ", wide device hit " +
             std::to_string(mb.device_hit_length()) + " best " +
             node_text(wide, mb.best_match_node);
    }
  }
  if (!(narrow.snapshot() == wide.snapshot())) {
    return "wide ids: the same inserts and matches left different trees, narrow and wide";
  }
  return "";
}

}  // namespace

std::string rebuild_problem(const RadixTree& tree) {
  const TreeSnapshot s = tree.snapshot();
  RadixTree rebuilt(tree.options());
  ScopedThrowingAsserts throwing;
  if (!s.aux_components.empty()) {
    try {
      rebuilt.restore(s);
    } catch (const SnapshotError& e) {
      if (e.field() != "aux_components") {
        return std::string(
                   "restore refused a tree with auxiliary components, but not by "
                   "naming them: ") +
               e.what();
      }
      return "";
    }
    return "restore accepted a tree with auxiliary components (it would drop their data)";
  }
  try {
    rebuilt.restore(s);
  } catch (const SnapshotError& e) {
    return std::string("restore refused the tree's own snapshot: ") + e.what();
  } catch (const AssertionFailure& e) {
    return std::string("restore of the tree's own snapshot asserted: ") + e.what();
  }
  if (!(rebuilt.snapshot() == s)) return "the rebuilt tree's snapshot differs from the original's";
  auto differs = [](const char* what, auto a, auto b) {
    return std::string(what) + ": original " + std::to_string(a) + ", rebuilt " + std::to_string(b);
  };
  if (rebuilt.node_count() != tree.node_count()) {
    return differs("node_count", tree.node_count(), rebuilt.node_count());
  }
  if (rebuilt.evictable_size() != tree.evictable_size()) {
    return differs("evictable_size", tree.evictable_size(), rebuilt.evictable_size());
  }
  if (rebuilt.protected_size() != tree.protected_size()) {
    return differs("protected_size", tree.protected_size(), rebuilt.protected_size());
  }
  if (rebuilt.host_size() != tree.host_size()) {
    return differs("host_size", tree.host_size(), rebuilt.host_size());
  }
  if (rebuilt.device_leaf_count() != tree.device_leaf_count()) {
    return differs("device_leaf_count", tree.device_leaf_count(), rebuilt.device_leaf_count());
  }
  if (rebuilt.host_leaf_count() != tree.host_leaf_count()) {
    return differs("host_leaf_count", tree.host_leaf_count(), rebuilt.host_leaf_count());
  }
  if (id_text(rebuilt.next_device_victim()) != id_text(tree.next_device_victim())) {
    return "next device victim: original node " + id_text(tree.next_device_victim()) +
           ", rebuilt node " + id_text(rebuilt.next_device_victim());
  }
  if (id_text(rebuilt.next_host_victim()) != id_text(tree.next_host_victim())) {
    return "next host victim: original node " + id_text(tree.next_host_victim()) +
           ", rebuilt node " + id_text(rebuilt.next_host_victim());
  }
  // Matches go to the rebuilt tree only (a match refreshes access times).
  std::vector<const TreeNode*> leaves;
  tree.for_each_node([&](const TreeNode& n) {
    if (&n != tree.root() && n.children.empty() && leaves.size() < kMaxLeafMatches) {
      leaves.push_back(&n);
    }
  });
  for (const TreeNode* leaf : leaves) {
    const ExpectedMatch want = expected_match(*leaf);
    const std::vector<Token> tokens = RadixTree::prefix_tokens(*leaf);
    MatchResult got;
    try {
      got = rebuilt.match_prefix(leaf->ns, tokens);
    } catch (const AssertionFailure& e) {
      return "match of node " + std::to_string(leaf->id) + "'s path asserted: " + e.what();
    }
    const NodeId last_device = got.last_device_node == rebuilt.root() || !got.last_device_node
                                   ? 0
                                   : got.last_device_node->id;
    const NodeId best =
        got.best_match_node == rebuilt.root() || !got.best_match_node ? 0 : got.best_match_node->id;
    if (last_device != want.last_device || best != want.best ||
        got.device_hit_length() != want.device_hit || got.host_hit_length != want.host_hit) {
      return "match of node " + std::to_string(leaf->id) + "'s path (" +
             std::to_string(tokens.size()) + " tokens) in the rebuilt tree: last device node " +
             std::to_string(last_device) + ", best " + std::to_string(best) + ", device hit " +
             std::to_string(got.device_hit_length()) + ", host hit " +
             std::to_string(got.host_hit_length) + "; the original's structure says " +
             std::to_string(want.last_device) + ", " + std::to_string(want.best) + ", " +
             std::to_string(want.device_hit) + ", " + std::to_string(want.host_hit);
    }
  }
  try {
    return wide_problem(tree, s, leaves);
  } catch (const AssertionFailure& e) {
    return std::string("wide ids: a core assertion: ") + e.what();
  }
}

void RebuildCheck::attach(Executor& executor) {
  executor_ = &executor;
  chain_onto(executor);
}

void RebuildCheck::after_op(size_t index, const Op& op, const OpOutcome& outcome) {
  const size_t n = index + 1;
  // Op 256, 512, 1024, ...: a handful of checks a unit, at growing tree sizes.
  if (n >= 256 && (n & (n - 1)) == 0) check("op " + std::to_string(n));
  ChainedObserver::after_op(index, op, outcome);
}

void RebuildCheck::on_executor_gone() {
  check("at the end of the run");
  executor_ = nullptr;
  ChainedObserver::on_executor_gone();
}

void RebuildCheck::check(const std::string& when) {
  if (executor_ == nullptr || problem_ || executor_->core() == nullptr) return;
  if (executor_->failed()) return;  // a failed run's tree may be anything
  ++checks_;
  const std::string p = rebuild_problem(executor_->cache().tree());
  if (!p.empty()) problem_ = when + ": " + p;
}

}  // namespace kvsim::sim
