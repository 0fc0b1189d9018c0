// A planted bug for simulator tests: a component whose sanity check fails from the second node
// split on, so a run that splits twice reports `planted.second_split`. Shared by the planted-bug,
// timeline and tree-picture tests.
#pragma once

#include <memory>
#include <string_view>

#include "core/tree/component.h"
#include "core/tree/radix_tree.h"

namespace kvsim::sim::testing {

class PlantedBugComponent final : public TreeComponent {
 public:
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
    if (splits_ >= 2) report.add("planted.second_split", "the planted bug fired");
  }

 private:
  int splits_ = 0;
};

}  // namespace kvsim::sim::testing
