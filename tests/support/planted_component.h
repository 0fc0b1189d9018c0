// A planted bug for simulator tests: a component whose sanity check fails once the tree has
// split `fire_from_split` nodes (default: from the second split on, reported as
// `planted.second_split`). Shared by the planted-bug, timeline, tree-picture and hunt tests.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "core/tree/component.h"
#include "core/tree/radix_tree.h"

namespace kvsim::sim::testing {

class PlantedBugComponent final : public TreeComponent {
 public:
  explicit PlantedBugComponent(int fire_from_split = 2,
                               std::string invariant = "planted.second_split")
      : fire_from_split_(fire_from_split), invariant_(std::move(invariant)) {}
  ComponentType type() const override { return ComponentType::kMamba; }  // unused slot here
  std::string_view name() const override { return "planted"; }
  std::unique_ptr<MatchValidator> make_validator() const override {
    struct AcceptAll final : MatchValidator {
      MatchVerdict visit(const TreeNode&) override { return {true, true}; }
    };
    return std::make_unique<AcceptAll>();
  }
  void acquire_lock(RadixTree&, TreeNode&, LockRecord&) override {}
  void release_lock(RadixTree&, const LockRecord&) override {}
  void on_split(TreeNode&, TreeNode&, size_t) override { ++splits_; }
  void sanity_check(const RadixTree&, SanityReport& report) const override {
    if (splits_ >= fire_from_split_) report.add(invariant_, "the planted bug fired");
  }

 private:
  int fire_from_split_;
  std::string invariant_;
  int splits_ = 0;
};

}  // namespace kvsim::sim::testing
