// Page mosaics (workload kind page_mosaic, sim/workload/page_mosaic.h): prompts of whole pages
// from a small alphabet, recombined so that inserts diverge inside a node whose child begins
// with the diverging page (probe tree_insert_diverge_at_grandchild), a shape random prompts from
// a large vocabulary almost never make (issue 28 kind 4: mutant 1598 of seed 36 survived it).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/common/probe.h"
#include "sim/base/json_reader.h"
#include "sim/campaign/covering_array.h"
#include "sim/campaign/runner.h"
#include "sim/campaign/swarm.h"
#include "sim/workload/page_mosaic.h"
#include "sim/workload/workload.h"
#include "tests/support/tree_fixture.h"

namespace kvsim::sim {
namespace {

uint64_t probe_count(std::string_view name) {
  for (const probes::Count& c : probes::snapshot())
    if (c.name == name) return c.count;
  ADD_FAILURE() << "no probe " << name;
  return 0;
}

constexpr std::string_view kShape = "tree_insert_diverge_at_grandchild";

// The probe counts exactly the shape: a divergence inside a node whose child begins with the
// diverging page, not one inside a node without such a child, nor one at a node's end.
TEST(PageMosaic, ProbeCountsADivergenceInsideANodeAtItsChildsPage) {
  using kvsim::testing::dev;
  using kvsim::testing::seq;
  ScopedThrowingAsserts asserts;
  RadixTree tree{RadixTreeOptions{.page_size = 4}};
  auto pages = [](std::initializer_list<Token> firsts) {
    std::vector<Token> t;
    for (Token f : firsts)
      for (Token x : seq(f, 4))
        t.push_back(x);
    return t;
  };
  tree.insert(0, pages({100, 200, 300}), dev(4, 12));       // one node: a b c
  tree.insert(0, pages({100, 200, 300, 400}), dev(4, 16));  // its child: d
  probes::reset();
  tree.insert(0, pages({100, 500}), dev(4, 8));  // diverges inside a b c with e: no child e
  tree.insert(0, pages({100, 200, 300, 400, 600}), dev(4, 20));  // no divergence inside
  EXPECT_EQ(probe_count(kShape), 0u);
  // a b c was split into a | b c by the first insert; b c has child d.
  const InsertResult r = tree.insert(0, pages({100, 200, 400}), dev(4, 12));
  EXPECT_EQ(r.prefix_len, 8);
  EXPECT_EQ(probe_count(kShape), 1u);
  SanityReport report;
  tree.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

Scenario mosaic_scenario(int64_t alphabet) {
  Scenario s = default_scenario();
  s.workload.kind = WorkloadKind::kPageMosaic;
  s.workload.page_alphabet = alphabet;
  s.workload.requests = 150;
  return s;
}

// Every prompt is whole alphabet pages (then at most a partial page of fresh tokens), within
// the largest prompt the device pool is sized for, and its recipe re-expands to it.
TEST(PageMosaic, PromptsAreAlphabetPagesAndTheirRecipesReexpand) {
  for (int32_t page : {1, 4, 16}) {
    Scenario s = mosaic_scenario(3);
    s.cache.page_size = page;
    s.cache.device_tokens = 4096;
    const size_t p = static_cast<size_t>(page);
    const int64_t cap = s.workload.system_prompt_tokens + 4 * s.workload.prompt_max;
    std::set<std::vector<Token>> alphabet;
    size_t whole_pages = 0, recurring = 0;
    std::map<std::vector<Token>, std::set<size_t>> depths;  // page -> positions it occurs at
    for (const Arrival& a : generate_workload(s, 7)) {
      ASSERT_LE(static_cast<int64_t>(a.prompt.size()), cap);
      EXPECT_EQ(expand_recipe(recipe_from_json(recipe_json(a.recipe), "test", "prompt")), a.prompt);
      for (size_t i = 0; i + p <= a.prompt.size(); i += p) {
        std::vector<Token> pg(a.prompt.begin() + i, a.prompt.begin() + i + p);
        alphabet.insert(pg);
        depths[pg].insert(i / p);
        ++whole_pages;
      }
    }
    EXPECT_LE(alphabet.size(), 3u) << "page " << page;
    for (const auto& [pg, at] : depths)
      recurring += at.size() > 1;
    EXPECT_GT(whole_pages, 300u) << "page " << page;
    EXPECT_GE(recurring, 2u) << "pages recur at different depths (page " << page << ")";
  }
}

// A run of a page mosaic makes the shape dozens of times and is clean; unrelated prompts from a
// large vocabulary (the uniform kind) and forks at any token make it far less often.
TEST(PageMosaic, RunsMakeTheShapeWhereOtherKindsRarelyDo) {
  auto shapes = [](const Scenario& s) {
    uint64_t n = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      probes::reset();
      const RunResult r = run_scenario(RunRequest{.scenario = &s, .seed = seed});
      EXPECT_TRUE(r.ok()) << s.workload.page_alphabet << " seed " << seed << ": "
                          << r.violation->invariant << ": " << r.violation->detail;
      n += probe_count(kShape);
    }
    return n;
  };
  const uint64_t mosaic = shapes(mosaic_scenario(3));
  Scenario fork = mosaic_scenario(3);
  fork.workload.kind = WorkloadKind::kFork;
  const uint64_t forks = shapes(fork);
  EXPECT_GE(mosaic, 30u);
  EXPECT_GT(mosaic, 3 * forks) << "forks: " << forks;
  shapes(mosaic_scenario(1));  // one page, repeated: runs clean
}

TEST(PageMosaic, BadAlphabetIsRefusedNamingTheField) {
  nlohmann::json j = to_json(mosaic_scenario(4));
  for (const nlohmann::json& bad :
       {nlohmann::json(0), nlohmann::json(-3), nlohmann::json("x"), nlohmann::json(1 << 17)}) {
    j["workload"]["page_alphabet"] = bad;
    try {
      parse_scenario(j, "bad.json");
      ADD_FAILURE() << bad.dump() << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("page_alphabet"), std::string::npos) << e.what();
    }
  }
  j["workload"]["page_alphabet"] = 2;
  EXPECT_EQ(parse_scenario(j, "ok.json").workload.page_alphabet, 2);
  EXPECT_EQ(to_string(WorkloadKind::kPageMosaic), "page_mosaic");
}

// The swarm draws page mosaics as the covering array's tree-shape level `mosaic`: every
// rows()-long run of swarm seeds holds one, with several pages per prompt at any page size.
TEST(PageMosaic, SwarmDrawsMosaicsFromTheirCoveringArrayLevel) {
  const CoveringArray& a = swarm_covering_array();
  size_t drawn = 0;
  for (uint64_t seed = 500; seed < 500 + a.rows(); ++seed) {
    const Scenario s = draw_scenario(seed);
    const bool row_mosaic = swarm_row(seed)[kFactorTreeShape] == 4;
    EXPECT_EQ(s.workload.kind == WorkloadKind::kPageMosaic, row_mosaic) << seed;
    if (!row_mosaic) continue;
    ++drawn;
    const std::vector<std::string> f = features(s);
    EXPECT_NE(std::find(f.begin(), f.end(), "page_mosaic"), f.end());
    EXPECT_GE(s.workload.system_prompt_tokens + 4 * s.workload.prompt_max,
              3 * static_cast<int64_t>(s.cache.page_size));
  }
  EXPECT_GE(drawn, a.rows() / 6);
}

}  // namespace
}  // namespace kvsim::sim
