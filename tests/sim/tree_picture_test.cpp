// Tree pictures (sim/report/tree_picture.h): the DOT written for the radix tree at an op has one
// node statement per tree node and one edge per parent link, the residency and lock fields, and the
// highlighted node drawn red; a failing run's capture draws the tree at its failure.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "core/tree/component.h"
#include "core/tree/radix_tree.h"
#include "sim/campaign/runner.h"
#include "sim/report/tree_picture.h"
#include "tests/support/planted_component.h"

namespace kvsim::sim {
namespace {

struct Parsed {
  std::set<NodeId> nodes;
  size_t edges = 0;
  std::set<NodeId> red;
  size_t with_residency = 0;
};

Parsed parse_dot(const std::string& dot) {
  Parsed p;
  EXPECT_EQ(dot.rfind("digraph kvsim_tree {", 0), 0u);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  static const std::regex kNode(
      R"(^  n(\d+) \[label="\{#(\d+) .*\}", fillcolor=\w+(, color=red.*)?\];$)");
  static const std::regex kEdge(R"(^  n(\d+) -> n(\d+);$)");
  std::istringstream in(dot);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, kNode)) {
      const NodeId id = std::stoull(m[1].str());
      EXPECT_EQ(m[1].str(), m[2].str());
      EXPECT_TRUE(p.nodes.insert(id).second) << "node drawn twice: " << line;
      if (m[3].matched) p.red.insert(id);
      if (line.find("|residency: ") != std::string::npos &&
          line.find("|lock ") != std::string::npos)
        ++p.with_residency;
    } else if (std::regex_match(line, m, kEdge)) {
      ++p.edges;
      EXPECT_TRUE(p.nodes.count(std::stoull(m[1].str()))) << line;
      EXPECT_TRUE(p.nodes.count(std::stoull(m[2].str()))) << line;
    }
  }
  return p;
}

// Counts the tree's nodes after op `at` (chained behind a TreeCapture).
class NodeCounter final : public ExecutorObserver {
 public:
  NodeCounter(size_t at, Executor** executor) : at_(at), executor_(executor) {}
  void before_op(size_t, const Op&) override {}
  void after_op(size_t index, const Op&, const OpOutcome&) override {
    if (index != at_) return;
    Executor& e = **executor_;
    count = e.cache().tree().node_count();
    e.cache().tree().for_each_node([&](const TreeNode& n) {
      if (!n.is_root() && !some_node) some_node = n.id;
    });
    highlighted = tree_dot(e, {.title = "t", .highlight = some_node});
  }
  void on_fault(std::string_view) override {}
  void on_executor_gone() override {}
  size_t count = 0;
  std::optional<NodeId> some_node;
  std::string highlighted;

 private:
  size_t at_;
  Executor** executor_;
};

TEST(TreePicture, OneNodeStatementPerTreeNodeAtEveryOp) {
  const AnyTrace t =
      read_trace(std::string(KVSIM_SOURCE_DIR "/traces/found-swa-fallback-anchor.trace.jsonl"));
  const size_t n_ops = t.ops.ops.size();
  ASSERT_GT(n_ops, 4u);
  size_t drawn_with_children = 0;
  for (size_t at = 0; at < n_ops; at += std::max<size_t>(1, n_ops / 8)) {
    Executor* executor = nullptr;
    NodeCounter counter(at, &executor);
    TreeCapture capture(at, "found-swa-fallback-anchor", &counter);
    replay_trace(t.ops, {.setup =
                             [&](Executor& e) {
                               executor = &e;
                               capture.attach(e);
                             },
                         .stop_at_problem = false});
    if (!capture.at_dot()) break;  // the replay stopped before this op
    const Parsed p = parse_dot(*capture.at_dot());
    EXPECT_EQ(p.nodes.size(), counter.count) << "after op " << at;
    EXPECT_EQ(p.edges, counter.count - 1) << "after op " << at;
    EXPECT_EQ(p.with_residency, counter.count);
    EXPECT_TRUE(p.red.empty());
    if (counter.some_node) {
      ++drawn_with_children;
      const Parsed h = parse_dot(counter.highlighted);
      EXPECT_EQ(h.red, std::set<NodeId>{*counter.some_node});
    }
  }
  EXPECT_GT(drawn_with_children, 0u);
}

TEST(TreePicture, ViolationNodeIsParsedFromTheDetail) {
  EXPECT_EQ(violation_node({.invariant = "x", .detail = "lock underflow (node 17, slot 3)"}),
            std::optional<NodeId>(17));
  EXPECT_EQ(violation_node({.invariant = "x", .detail = "no node named"}), std::nullopt);
}

using testing::PlantedBugComponent;

TEST(TreePicture, FailingRunIsDrawnAtItsFailure) {
  Scenario s = default_scenario();
  s.faults.enabled = false;
  TreeCapture capture(std::nullopt, "planted");
  const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = 1, .setup = [&](Executor& e) {
                                                e.cache().tree().add_component(
                                                    std::make_unique<PlantedBugComponent>());
                                                capture.attach(e);
                                              }});
  ASSERT_FALSE(r.ok());
  ASSERT_TRUE(capture.failure_dot().has_value());
  const Parsed p = parse_dot(*capture.failure_dot());
  EXPECT_GE(p.nodes.size(), 3u);  // two splits happened
  EXPECT_NE(capture.failure_dot()->find(r.violation->invariant), std::string::npos);
  EXPECT_NE(capture.failure_dot()->find("planted: "), std::string::npos);  // component row
}

}  // namespace
}  // namespace kvsim::sim
