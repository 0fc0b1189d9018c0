// A hunt unit's tree, rebuilt: the path RadixTree::snapshot() / restore() that only the Python
// module and call-trace replays drive (issue 28: paths no hunt drives). While a unit runs, at op
// 256, 512, 1024, ... and when its executor goes, the core's tree is snapshotted and restored
// into a fresh tree, which must be indistinguishable from the original: the same snapshot, the
// same derived sizes and leaf counts, the same next eviction victims, and a match of every
// leaf's path (up to 32 a check) must find the nodes, device hit and host hit the original's
// structure says; and two more rebuilds, given the same inserts and matches with narrow
// (int32) and wide (int64, as the Python module passes them) token ids, must stay identical
// (the wide-id paths are the module's only), also for keys that leave a stored key mid-node and
// ids one past Token's range (refused, naming the bad id's own index), with the wide-id helpers
// compared with plain references. Every node's fields are compared with its rebuilt twin's
// directly (not only through snapshot(), whose omissions would hide on both sides). A restore
// refused while linking (discard_restored, which only a bad recorded snapshot drives) must
// leave the tree new, able to restore again;
// so must one refused by the sanity check after linking filed the leaves (one, then two, leaves
// without a copy: the refusal must count its violations exactly).
// A tree with auxiliary components must be refused by name (SnapshotError); its snapshot is
// read against its nodes instead (snapshot_fields_problem).
// The original tree is only read, so the unit's ops and event hash are unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/tree/radix_tree.h"

#include "sim/model/chained_observer.h"
#include "sim/model/executor.h"

namespace kvsim::sim {

class RebuildCheck final : public ChainedObserver {
 public:
  // Watches `executor` (set_observer); call before its first op. An observer already set (a
  // test's planted loop, a hunt setup's own) keeps receiving every call, after this one's.
  void attach(Executor& executor);

  void after_op(size_t index, const Op& op, const OpOutcome& outcome) override;
  void on_executor_gone() override;

  // The first mismatch ("op N: ..."), if any.
  const std::optional<std::string>& problem() const { return problem_; }
  int64_t checks() const { return checks_; }

 private:
  void check(const std::string& when);

  Executor* executor_ = nullptr;
  std::optional<std::string> problem_;
  int64_t checks_ = 0;
};

// "" when a tree rebuilt from `tree`'s snapshot is indistinguishable from it, else what
// differs. Reads `tree` only.
std::string rebuild_problem(const RadixTree& tree);

// The parts of rebuild_problem, each public so a test can plant what it must catch.
// The nodes a walk of `t` visits (for_each_node), the root included: what the index's count
// (node_count) must equal.
size_t walked_nodes(const RadixTree& t);
// "" when every node of `a` has a node of the same id in `b` with the same fields (parent, key,
// values, lock counts, access times, creation, hit count, hashes, backup state), read off the
// nodes themselves rather than through snapshot() (a field snapshot() drops would otherwise
// drop out of both sides of the comparison), and the two trees have as many nodes.
std::string node_fields_problem(const RadixTree& a, const RadixTree& b);
// "" when `s` (`tree`'s snapshot) holds each node's fields as the node itself holds them, read
// off the nodes (and aux_data recomputed from the auxiliary components' data): the only check
// a hybrid tree's snapshot gets, since restore refuses it.
std::string snapshot_fields_problem(const RadixTree& tree, const TreeSnapshot& s);
// "" when `t` is indistinguishable from a new tree with its options: what a refused restore
// must leave (discard_restored), so that the same tree can restore again.
std::string new_tree_problem(const RadixTree& t);
// The failure path of restore, which no unit drives: `s` (a tree's own snapshot) with one
// more root child that repeats an existing one's first page must be refused by a fresh tree
// while linking it; the tree must then be new again and restore `s` itself.
std::string refused_restore_problem(const RadixTreeOptions& options, const TreeSnapshot& s);
// The wide-id helpers (core/tree/wide_ids.h) against plain references on `key` and `ids`:
// all_wide_ids_fit, narrow_wide_ids and equal_wide_chunks (whole chunks of 64 equal leading
// positions). The helpers are parameters so a test can plant a wrong one.
using WideFitFn = bool (*)(const int64_t*, size_t);
using WideChunksFn = size_t (*)(const Token*, const int64_t*, size_t);
std::string wide_helpers_problem(std::span<const Token> key, std::span<const int64_t> ids,
                                 WideFitFn fit, WideChunksFn chunks);

}  // namespace kvsim::sim
