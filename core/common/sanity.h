// SanityReport: collects invariant violations found by sanity_check() walks.
//
// Each violation carries a stable invariant name (e.g. "tree.residency_root_closed"; the names
// are listed in docs/invariants.md and embedded in traces — do not rename) plus the node or
// slot involved. Checks keep going after the first violation so a report can list several,
// but callers usually act on first().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/common/types.h"

namespace kvsim {

struct Violation {
  std::string invariant;  // stable name
  std::string detail;     // human-readable explanation
  std::optional<NodeId> node;
  std::optional<SlotIndex> slot;
};

class SanityReport {
 public:
  void add(std::string invariant, std::string detail, std::optional<NodeId> node = std::nullopt,
           std::optional<SlotIndex> slot = std::nullopt) {
    violations_.push_back({std::move(invariant), std::move(detail), node, slot});
  }
  bool ok() const { return violations_.empty(); }
  const std::vector<Violation>& violations() const { return violations_; }
  const Violation* first() const { return violations_.empty() ? nullptr : &violations_.front(); }
  bool has(const std::string& invariant) const {
    for (const auto& v : violations_) {
      if (v.invariant == invariant) return true;
    }
    return false;
  }
  // "invariant: detail (node N, slot S)" of the first violation, or "ok".
  std::string summary() const {
    if (ok()) return "ok";
    const Violation& v = violations_.front();
    std::string s = v.invariant + ": " + v.detail;
    if (v.node) s += " (node " + std::to_string(*v.node) + ")";
    if (v.slot) s += " (slot " + std::to_string(*v.slot) + ")";
    return s;
  }

 private:
  std::vector<Violation> violations_;
};

}  // namespace kvsim
