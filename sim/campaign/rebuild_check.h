// A hunt unit's tree, rebuilt: the path RadixTree::snapshot() / restore() that only the Python
// module and call-trace replays drive (issue 28: paths no hunt drives). While a unit runs, at op
// 256, 512, 1024, ... and when its executor goes, the core's tree is snapshotted and restored
// into a fresh tree, which must be indistinguishable from the original: the same snapshot, the
// same derived sizes and leaf counts, the same next eviction victims, and a match of every
// leaf's path (up to 32 a check) must find the nodes, device hit and host hit the original's
// structure says; and two more rebuilds, given the same inserts and matches with narrow
// (int32) and wide (int64, as the Python module passes them) token ids, must stay identical
// (the wide-id paths are the module's only). A tree with auxiliary components must be refused
// by name (SnapshotError).
// The original tree is only read, so the unit's ops and event hash are unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

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

}  // namespace kvsim::sim
