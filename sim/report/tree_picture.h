// Tree pictures: the radix tree of an executor as Graphviz DOT (kvsim replay --tree-at, and
// beside the op trace of every failing run; docs/outputs.md). One box per node:
//
//   #id  ns  tokens (first and last few, and how many)
//   residency of its full KV: device / host / both / storage / evicted; the storage pages
//   locks: device lock_ref, host protection (host_lock_ref)
//   pending: a device→host write, a host→device load in flight
//   per auxiliary component (SWA window, Mamba state): device / host / tombstone and its lock
//
// Fill colour by residency; the node a violation names is drawn red and thick.
#pragma once

#include <optional>
#include <string>

#include "sim/model/executor.h"

namespace kvsim::sim {

struct TreePictureOptions {
  std::string title;                // the graph's label (scenario, seed, op)
  std::optional<NodeId> highlight;  // drawn red: the node a violation names
  size_t tokens_shown = 6;          // tokens printed per node (first half, …, last half)
};

std::string tree_dot(Executor& executor, const TreePictureOptions& options);

// The node a violation's detail names ("... (node 17, slot 3)"), if any.
std::optional<NodeId> violation_node(const SimViolation& violation);

// Runs Graphviz `dot -Tsvg` on `dot_text` into `svg_path`. False (and why in *error) when dot
// is not installed or fails.
bool dot_to_svg(const std::string& dot_text, const std::string& svg_path, std::string* error);

// Draws the tree after op `at` (nullopt: never) and after the op that fails the run. Chains to
// another observer (the timeline) when given one.
class TreeCapture final : public ExecutorObserver {
 public:
  TreeCapture(std::optional<size_t> at, std::string title, ExecutorObserver* next = nullptr)
      : at_(at), title_(std::move(title)), next_(next) {}
  void attach(Executor& executor);

  const std::optional<std::string>& at_dot() const { return at_dot_; }
  const std::optional<std::string>& failure_dot() const { return failure_dot_; }
  size_t ops_seen() const { return ops_seen_; }

  void before_op(size_t index, const Op& op) override;
  void after_op(size_t index, const Op& op, const OpOutcome& outcome) override;
  void on_fault(std::string_view site) override;
  void on_executor_gone() override;

 private:
  std::optional<size_t> at_;
  std::string title_;
  ExecutorObserver* next_;
  Executor* executor_ = nullptr;
  std::optional<std::string> at_dot_;
  std::optional<std::string> failure_dot_;
  size_t ops_seen_ = 0;
};

}  // namespace kvsim::sim
