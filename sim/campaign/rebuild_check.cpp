#include "sim/campaign/rebuild_check.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/cache/hi_cache.h"
#include "core/common/assert.h"
#include "core/tree/radix_tree.h"
#include "core/tree/token_run.h"
#include "core/tree/wide_ids.h"

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

// The path node with the longest key, when it has at least two pages: where a key that
// diverges mid-node is made (its offset in the path is returned through `start`).
const TreeNode* longest_node(const TreeNode& leaf, size_t page, size_t* start) {
  const TreeNode* best = nullptr;
  size_t at = 0;
  for (const TreeNode* n : RadixTree::path_to(const_cast<TreeNode&>(leaf))) {
    if (n->key.size() >= 2 * page && (best == nullptr || n->key.size() > best->key.size())) {
      best = n;
      *start = at;
    }
    at += n->key.size();
  }
  return best;
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
  // Slots no pool hands out: these trees only hold them.
  const auto value_of = [](size_t begin, size_t end) {
    std::vector<SlotIndex> v;
    for (size_t i = begin; i < end; ++i)
      v.push_back((SlotIndex{1} << 40) + static_cast<SlotIndex>(i));
    return IndexVector(Tier::kDevice, std::move(v));
  };
  for (size_t k = 0; k < leaves.size() && k < kMaxWideLeaves; ++k) {
    const TreeNode& leaf = *leaves[k];
    // The leaf's path and one new page under it (a leaf has no child, so the page is new).
    std::vector<Token> t = RadixTree::prefix_tokens(leaf);
    const size_t old_len = t.size();
    for (size_t j = 0; j < page; ++j)
      t.push_back(static_cast<Token>(1000000 + k * page + j));
    std::vector<int64_t> w(t.begin(), t.end());
    const std::string where = "wide ids, node " + std::to_string(leaf.id) + "'s path + 1 page: ";
    // A wide insert whose new page holds an id past Token's range: refused, tree unchanged.
    // Far out of range, and one past either end of Token's range (the boundaries).
    for (const int64_t out : {kOutOfRange, int64_t{std::numeric_limits<Token>::max()} + 1,
                              int64_t{std::numeric_limits<Token>::min()} - 1}) {
      std::vector<int64_t> bad = w;
      bad.back() = out;
      bool refused = false;
      size_t named = 0;  // the index the refusal names: the bad id's, the whole key's last
      try {
        wide.insert(leaf.ns, std::span<const int64_t>(bad), value_of);
      } catch (const TokenOutOfRange& e) {
        refused = true;
        named = e.index();
      }
      if (!refused) {
        return where + "an insert with the id " + std::to_string(out) +
               " (past Token's range) was accepted";
      }
      if (named != bad.size() - 1) {
        return where + "the refusal of the id " + std::to_string(out) + " at tokens[" +
               std::to_string(bad.size() - 1) + "] names tokens[" + std::to_string(named) + "]";
      }
      if (std::string p = wide_helpers_problem(t, bad, all_wide_ids_fit, equal_wide_chunks);
          !p.empty()) {
        return where + p;
      }
    }
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
  // Keys that leave a stored key mid-node (one id changed inside the longest node of a path):
  // the wide walk compares whole chunks of ids first, so a divergence must stop it where the
  // narrow walk stops.
  for (size_t k = 0; k < leaves.size() && k < kMaxWideLeaves; ++k) {
    const TreeNode& leaf = *leaves[k];
    size_t start = 0;
    const TreeNode* node = longest_node(leaf, page, &start);
    if (node == nullptr) continue;
    const std::vector<Token> path = RadixTree::prefix_tokens(leaf);
    std::vector<Token> t = path;
    const size_t d = start + node->key.size() / page / 2 * page;
    t[d] ^= 1;
    const std::vector<int64_t> w(t.begin(), t.end());
    const std::string where = "wide ids, node " + std::to_string(leaf.id) + "'s path with id " +
                              std::to_string(d) + " changed: ";
    if (std::string p = wide_helpers_problem(path, w, all_wide_ids_fit, equal_wide_chunks);
        !p.empty()) {
      return where + p;
    }
    const std::vector<int64_t> same(path.begin(), path.end());
    if (std::string p = wide_helpers_problem(path, same, all_wide_ids_fit, equal_wide_chunks);
        !p.empty()) {
      return "wide ids, node " + std::to_string(leaf.id) + "'s path: " + p;
    }
    const MatchResult ma = narrow.match_prefix(leaf.ns, std::span<const Token>(t));
    const MatchResult mb = wide.match_prefix(leaf.ns, std::span<const int64_t>(w));
    if (ma.device_hit_length() != mb.device_hit_length() ||
        ma.host_hit_length != mb.host_hit_length ||
        node_text(narrow, ma.best_match_node) != node_text(wide, mb.best_match_node)) {
      return where + "match: narrow device hit " + std::to_string(ma.device_hit_length()) +
             " host hit " + std::to_string(ma.host_hit_length) + ", wide device hit " +
             std::to_string(mb.device_hit_length()) + " host hit " +
             std::to_string(mb.host_hit_length);
    }
    const InsertResult a = narrow.insert(leaf.ns, std::span<const Token>(t), value_of);
    const InsertResult b = wide.insert(leaf.ns, std::span<const int64_t>(w), value_of);
    if (a.prefix_len != b.prefix_len ||
        node_text(narrow, a.last_node) != node_text(wide, b.last_node)) {
      return where + "insert: narrow prefix " + std::to_string(a.prefix_len) + ", wide prefix " +
             std::to_string(b.prefix_len);
    }
  }
  if (!(narrow.snapshot() == wide.snapshot())) {
    return "wide ids: the same inserts and matches left different trees, narrow and wide";
  }
  return "";
}

}  // namespace

// The host-only inserts a storage prefetch makes, drilled on `t` (a rebuilt tree: it is
// changed): a fresh chain without page keys, then one page longer with a key per page. "" when
// each inserts what it says, the new leaf holds the given host slots and only its own keys, and
// the tree stays sane.
static std::string host_insert_problem(RadixTree& t) {
  const auto page = static_cast<size_t>(t.page_size());
  Namespace ns = 0;  // one past every namespace in use: the drill's keys meet no node
  t.for_each_node([&](const TreeNode& n) { ns = std::max(ns, n.ns); });
  ++ns;
  std::vector<Token> tokens(3 * page);
  std::vector<SlotIndex> slots(tokens.size());
  std::vector<PageDigest> hashes(3);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<Token>(i + 1);
    slots[i] = static_cast<SlotIndex>(1'000'000 + i);
  }
  for (size_t k = 0; k < hashes.size(); ++k)
    hashes[k].fill(static_cast<uint8_t>(0xa0 + k));
  const IndexVector host(Tier::kHost, slots);
  const size_t leaves_before = t.host_leaf_count();
  auto report = [&](const char* call, const HostInsertResult& r, size_t present, size_t inserted,
                    const TreeNode* leaf, size_t from, const std::vector<PageDigest>& digests) {
    std::ostringstream out;
    if (r.present_len != static_cast<int64_t>(present) ||
        r.inserted_len != static_cast<int64_t>(inserted) || r.refused_len != 0) {
      out << call << ": present " << r.present_len << ", inserted " << r.inserted_len
          << ", refused " << r.refused_len << " (expected " << present << ", " << inserted
          << ", 0)";
    } else if (r.last_node != leaf || leaf == nullptr || !leaf->evicted() ||
               leaf->full().host_value != host.slice(from, present + inserted)) {
      out << call << ": the new leaf does not hold the given host slots, host-only";
    } else if (leaf->hash_value != digests) {
      out << call << ": the new leaf holds " << leaf->hash_value.size() << " page keys, not the "
          << digests.size() << " given for its pages";
    }
    return out.str();
  };
  // Two pages and all but one token of a third (no partial page when a page is one token),
  // with no page keys (the keys are then computed on demand).
  const std::span<const Token> two(tokens.data(), 3 * page - 1);
  const HostInsertResult a = t.insert_host(ns, *t.root(), two, host, {});
  if (std::string p = report("insert_host without page keys", a, 0, 2 * page, a.last_node, 0, {});
      !p.empty()) {
    return p;
  }
  // The same two pages and one more, with a key per page: only the new page's key is taken.
  const TreeNode* first = a.last_node;
  const std::span<const Token> three(tokens.data(), 3 * page);
  const HostInsertResult b = t.insert_host(ns, *t.root(), three, host, hashes);
  const TreeNode* leaf =
      b.last_node != nullptr && b.last_node->parent == first ? b.last_node : nullptr;
  if (std::string p =
          report("insert_host with page keys", b, 2 * page, page, leaf, 2 * page, {hashes[2]});
      !p.empty()) {
    return p;
  }
  if (t.host_leaf_count() != leaves_before + 1) {
    return "insert_host: " + std::to_string(t.host_leaf_count() - leaves_before) +
           " new host leaves for one new host-only chain";
  }
  SanityReport sanity;
  t.sanity_check(sanity);
  if (!sanity.ok()) return "insert_host left the tree insane: " + sanity.summary();
  return "";
}

std::string new_tree_problem(const RadixTree& t) {
  const RadixTree fresh(t.options());
  if (walked_nodes(t) != 1 || t.node_count() != 1 || t.find(0) != t.root()) {
    return "a walk visits " + std::to_string(walked_nodes(t)) + " node(s) and the index holds " +
           std::to_string(t.node_count()) + ", not the root alone under id 0";
  }
  if (t.evictable_size() != 0 || t.protected_size() != 0 || t.host_size() != 0 ||
      t.device_leaf_count() != 0 || t.host_leaf_count() != 0 || t.next_device_victim() != nullptr ||
      t.next_host_victim() != nullptr) {
    return "sizes, leaf sets or victims left over";
  }
  const TreeSnapshot s = t.snapshot();
  const TreeSnapshot want = fresh.snapshot();
  if (s.next_id != want.next_id || s.clock != want.clock) {
    return "next id " + std::to_string(s.next_id) + " and clock " + std::to_string(s.clock) +
           ", a new tree's " + std::to_string(want.next_id) + " and " + std::to_string(want.clock);
  }
  if (!(s == want)) return "its snapshot differs from a new tree's";
  return "";
}

// "" when `t`, after refusing a restore, is a new tree again and takes `s` (the snapshot it came
// from) as any new tree would; `after` starts each complaint.
static std::string reuse_after_refusal_problem(RadixTree& t, const TreeSnapshot& s,
                                               const std::string& after) {
  if (std::string p = new_tree_problem(t); !p.empty()) return after + " the tree is not new: " + p;
  try {
    t.restore(s);
  } catch (const SnapshotError& e) {
    return after + ", the tree's own snapshot was refused: " + e.what();
  } catch (const AssertionFailure& e) {
    return after + ", restore asserted: " + e.what();
  }
  if (!(t.snapshot() == s)) return after + ", the restored tree differs";
  return "";
}

// A snapshot refused at the sanity stage, after linking filed its leaves: `dead` of its unlocked
// leaves lose both copies (tree.dead_node each). The refusal names the first violation and counts
// the rest; the tree is then new again and takes the original snapshot.
static std::string sanity_refused_problem(const RadixTreeOptions& options, const TreeSnapshot& s,
                                          size_t dead) {
  std::set<NodeId> parents;
  for (const NodeSnapshot& n : s.nodes)
    parents.insert(n.parent);
  TreeSnapshot bad = s;
  size_t killed = 0;
  for (NodeSnapshot& n : bad.nodes) {
    if (killed == dead) break;
    if (parents.count(n.id) != 0 || n.lock_ref != 0 || n.host_lock_ref != 0 ||
        n.write_through_pending || !n.aux_data.empty()) {
      continue;
    }
    n.value.reset();
    n.host_value.reset();
    n.hash_value.clear();
    ++killed;
  }
  if (killed < dead) return "";  // not enough plain leaves in this tree
  RadixTree t(options);
  try {
    t.restore(bad);
    return "refused restore: a snapshot with " + std::to_string(dead) +
           " leaf(s) without a copy was accepted";
  } catch (const SnapshotError& e) {
    const std::string what = e.what();
    const std::string more = " (and " + std::to_string(dead - 1) + " more)";
    const bool counted =
        dead == 1 ? what.find(" more)") == std::string::npos : what.find(more) != std::string::npos;
    if (what.find("sanity_check after restore: tree.dead_node") == std::string::npos || !counted) {
      return "refused restore of " + std::to_string(dead) +
             " leaf(s) without a copy: the refusal says \"" + what + "\"";
    }
  } catch (const AssertionFailure& e) {
    return std::string("refused restore (sanity stage): a core assertion: ") + e.what();
  }
  return reuse_after_refusal_problem(t, s, "after a restore refused at the sanity stage");
}

std::string refused_restore_problem(const RadixTreeOptions& options, const TreeSnapshot& s) {
  for (const size_t dead : {size_t{1}, size_t{2}}) {
    if (std::string p = sanity_refused_problem(options, s, dead); !p.empty()) return p;
  }
  const auto first = std::find_if(s.nodes.begin(), s.nodes.end(),
                                  [](const NodeSnapshot& n) { return n.parent == 0; });
  if (first == s.nodes.end()) return "";
  TreeSnapshot bad = s;
  NodeSnapshot twin = *first;  // same namespace and first page as a root child: refused
  twin.id = s.next_id;
  twin.lock_ref = 0;
  twin.host_lock_ref = 0;
  twin.write_through_pending.reset();
  bad.nodes.push_back(twin);
  bad.next_id = s.next_id + 1;
  RadixTree t(options);
  try {
    t.restore(bad);
    return "refused restore: a snapshot with two root children sharing a first page was "
           "accepted";
  } catch (const SnapshotError& e) {
    if (e.field() != "key") {
      return std::string("refused restore: refused before linking, not for the shared page: ") +
             e.what();
    }
  } catch (const AssertionFailure& e) {
    return std::string("refused restore: a core assertion: ") + e.what();
  }
  return reuse_after_refusal_problem(t, s, "after a refused restore");
}

std::string wide_helpers_problem(std::span<const Token> key, std::span<const int64_t> ids,
                                 WideFitFn fit, WideChunksFn chunks) {
  const bool fits = std::all_of(ids.begin(), ids.end(), fits_token);
  if (fit(ids.data(), ids.size()) != fits) {
    return std::string("all_wide_ids_fit says ") + (fits ? "false" : "true") + " for " +
           std::to_string(ids.size()) + " ids";
  }
  std::vector<Token> narrowed(ids.size());
  if (narrow_wide_ids(ids.data(), ids.size(), narrowed.data()) != fits) {
    return std::string("narrow_wide_ids says ") + (fits ? "false" : "true");
  }
  if (fits && !std::equal(narrowed.begin(), narrowed.end(), ids.begin(), ids.end())) {
    return "narrow_wide_ids changed an id that fits";
  }
  constexpr size_t kChunk = 64;  // equal_wide_chunks's unit (wide_ids.h)
  const size_t limit = std::min(key.size(), ids.size());
  size_t equal = 0;
  while (equal < limit && static_cast<int64_t>(key[equal]) == ids[equal])
    ++equal;
  const size_t want = equal / kChunk * kChunk;
  const size_t got = chunks(key.data(), ids.data(), limit);
  if (got != want) {
    return "equal_wide_chunks counts " + std::to_string(got) +
           " equal leading ids in whole chunks of 64 (of " + std::to_string(limit) +
           "), the first " + std::to_string(equal) + " agree: " + std::to_string(want);
  }
  return "";
}

std::string rebuild_problem(const RadixTree& tree) {
  const TreeSnapshot s = tree.snapshot();
  // Read against the nodes first: a hybrid tree's snapshot is never restored, so this is the
  // only check its fields (aux_data above all) get.
  if (std::string p = snapshot_fields_problem(tree, s); !p.empty()) return p;
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
  if (std::string p = node_fields_problem(tree, rebuilt); !p.empty()) return p;
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
    // The host-only inserts a storage prefetch makes, with and without page keys, on the
    // rebuilt tree (the original is only read).
    if (std::string p = host_insert_problem(rebuilt); !p.empty()) return p;
  } catch (const AssertionFailure& e) {
    return std::string("insert_host: a core assertion: ") + e.what();
  }
  try {
    if (std::string p = wide_problem(tree, s, leaves); !p.empty()) return p;
  } catch (const AssertionFailure& e) {
    return std::string("wide ids: a core assertion: ") + e.what();
  }
  return refused_restore_problem(tree.options(), s);
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
