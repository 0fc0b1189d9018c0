// The API contract (sim/model/api_contract.h): every swarm shape keeps it, and each part fails
// when the call it checks is planted wrong (the core's own calls cannot be broken in a test, so
// the parts take the calls as parameters).
#include "sim/model/api_contract.h"

#include <gtest/gtest.h>

#include <chrono>

#include "core/common/assert.h"
#include "sim/campaign/swarm.h"

namespace kvsim::sim {
namespace {

HiCacheOptions full_only() {
  HiCacheOptions o;
  o.page_size = 4;
  return o;
}

HiCacheOptions hybrid() {  // SWA and Mamba
  HiCacheOptions o = full_only();
  o.swa_window_tokens = 8;
  o.mamba_device_states = 4;
  return o;
}

HiCacheOptions swa_only() {
  HiCacheOptions o = full_only();
  o.page_size = 1;
  o.swa_window_tokens = 3;
  return o;
}

void expect_found(const std::optional<std::string>& problem, const std::string& part) {
  ASSERT_TRUE(problem.has_value()) << "not found: " << part;
  EXPECT_NE(problem->find(part), std::string::npos) << *problem;
}

TEST(ApiContract, EverySwarmShapeKeepsIt) {
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const Scenario s = draw_scenario(seed);
    const std::optional<std::string> broken = check_api_contract(s.cache);
    EXPECT_FALSE(broken.has_value()) << "seed " << seed << ": " << *broken;
  }
  for (const HiCacheOptions& o : {full_only(), hybrid(), swa_only()})
    EXPECT_FALSE(check_api_contract(o)) << *check_api_contract(o);
  // Cheap: it runs once per hunt unit (about a millisecond a shape; generous for CI boxes).
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ms / 203, 20.0);
}

// (a) A root guard missing from dec_full_lock (mutant 1736 of seed 36) unlocks the root; one
// missing from inc_full_lock locks it; the real dec asserts on a second call. Each is found.
TEST(ApiContract, RootLockCallsThatMoveTheRootAreFound) {
  TreeCalls unlocks_root = TreeCalls::core();
  unlocks_root.dec_full = [](RadixTree& t, TreeNode& n) {
    if (n.is_root()) {
      KV_ASSERT(n.full().lock_ref > 0, "Cannot decrement reference count = zero");
      --n.full().lock_ref;
      return;
    }
    t.dec_full_lock(n);
  };
  for (const HiCacheOptions& o : {full_only(), hybrid()}) {
    EXPECT_FALSE(root_locks_problem(o)) << *root_locks_problem(o);
    expect_found(root_locks_problem(o, unlocks_root),
                 "dec_full_lock(root): the root's lock_ref went from 1 to 0");
  }
  TreeCalls locks_root = TreeCalls::core();
  locks_root.inc_full = [](RadixTree& t, TreeNode& n) {
    if (n.is_root()) ++n.full().lock_ref;
    if (!n.is_root()) t.inc_full_lock(n);
  };
  expect_found(root_locks_problem(full_only(), locks_root),
               "inc_full_lock(root): the root's lock_ref went from 1 to 2");
  TreeCalls root_lock_recorded = TreeCalls::core();
  root_lock_recorded.lock = [](RadixTree& t, TreeNode& n) {
    LockRecord r = t.lock(n);
    if (n.is_root()) r.start[0] = 0;
    return r;
  };
  expect_found(root_locks_problem(full_only(), root_lock_recorded), "lock(root) recorded");
  TreeCalls aux_root_accepted = TreeCalls::core();
  aux_root_accepted.inc_aux = [](RadixTree& t, TreeNode& n, ComponentType type) {
    if (!n.is_root()) t.inc_aux_lock(n, type);
  };
  expect_found(root_locks_problem(hybrid(), aux_root_accepted),
               "inc_aux_lock(root, swa) was accepted instead of refused");
}

// (b) set_aux_host_value without its type check (mutant 1415 of seed 36) still refuses the
// full type, but by a later assertion: found by the refusal's reason. One that accepts it, and
// auxiliary calls that move the wrong sizes or keep a victim, are found too.
TEST(ApiContract, AuxCallsThatTakeTheFullTypeOrMisCountAreFound) {
  TreeCalls no_type_check = TreeCalls::core();
  no_type_check.set_aux_host = [](RadixTree&, TreeNode& n, ComponentType type, IndexVector v) {
    ComponentData& d = n.component(type);
    KV_ASSERT(!n.is_root() && !d.host_value, "aux host value set twice");
    KV_ASSERT(n.backed_up(), "aux host value on a node without full host value");
    d.host_value = std::move(v);
  };
  for (const HiCacheOptions& o : {full_only(), hybrid(), swa_only()}) {
    EXPECT_FALSE(aux_calls_problem(o)) << *aux_calls_problem(o);
    expect_found(aux_calls_problem(o, no_type_check),
                 "full) was refused for another reason than \"not an auxiliary component\": ");
  }
  TreeCalls full_accepted = TreeCalls::core();
  full_accepted.next_aux_victim = [](const RadixTree& t, ComponentType type) {
    return type == ComponentType::kFull ? nullptr : t.next_aux_victim(type);
  };
  expect_found(aux_calls_problem(full_only(), full_accepted),
               "next_aux_victim(full) was accepted instead of refused");
  TreeCalls lock_counts_nothing = TreeCalls::core();
  lock_counts_nothing.inc_aux = [](RadixTree& t, TreeNode& n, ComponentType type) {
    if (type == ComponentType::kFull || !n.component(type).value) t.inc_aux_lock(n, type);
    ++n.component(type).lock_ref;  // the count without the accounting
  };
  expect_found(aux_calls_problem(hybrid(), lock_counts_nothing),
               "swa) left swa evictable/protected");
  TreeCalls most_recent = TreeCalls::core();  // the most recently used value, not the least
  most_recent.next_aux_victim = [](const RadixTree& t, ComponentType type) {
    TreeNode* victim = t.next_aux_victim(type);  // refuses the full type
    t.for_each_node([&](const TreeNode& n) {
      const ComponentData& d = n.component(type);
      if (!n.is_root() && d.value && d.lock_ref == 0 &&
          (victim == nullptr || n.last_access > victim->last_access))
        victim = t.find(n.id);
    });
    return victim;
  };
  expect_found(aux_calls_problem(swa_only(), most_recent), "next_aux_victim(swa) is node");
  TreeCalls take_keeps = TreeCalls::core();
  take_keeps.take_aux = [](RadixTree& t, TreeNode& n, ComponentType type) {
    IndexVector v = t.take_aux_value(n, type);
    t.set_aux_value(n, type, v);  // a take that leaves the value
    return v;
  };
  expect_found(aux_calls_problem(hybrid(), take_keeps), "swa) left swa evictable/protected");
}

// (c) A held_locks_problem that misses the lowest id (mutant 1854 of seed 36) or the highest,
// or finds nothing, is found; so is one that refuses a snapshot whose locks agree.
TEST(ApiContract, HeldLocksProblemThatMissesANodeIsFound) {
  for (const HiCacheOptions& o : {full_only(), hybrid()})
    EXPECT_FALSE(held_locks_contract_problem(o)) << *held_locks_contract_problem(o);
  auto misses_lowest = [](const TreeSnapshot& s) {
    const std::string p = held_locks_problem(s);
    return p.rfind("node " + std::to_string(s.nodes.front().id) + ":", 0) == 0 ? std::string() : p;
  };
  auto misses_highest = [](const TreeSnapshot& s) {
    const std::string p = held_locks_problem(s);
    return p.rfind("node " + std::to_string(s.nodes.back().id) + ":", 0) == 0 ? std::string() : p;
  };
  expect_found(held_locks_contract_problem(full_only(), misses_lowest),
               "\"\"");  // node 1 is leaf b: its dropped lock goes unreported first
  expect_found(held_locks_contract_problem(full_only(), misses_highest), "node 4's lock_ref");
  expect_found(
      held_locks_contract_problem(hybrid(), [](const TreeSnapshot&) { return std::string(); }),
      "missing the held lock of leaf");
  expect_found(held_locks_contract_problem(full_only(),
                                           [](const TreeSnapshot& s) {
                                             return s.held_locks ? held_locks_problem(s)
                                                                 : std::string("no locks");
                                           }),
               "a snapshot without held locks recorded: no locks");
}

// (d) A decode admit (no prefix cache) that matches the cached prompt, or whose result check
// fails (an SWA cache's request left without SWA slots: mutant 821 of seed 36), is found.
TEST(ApiContract, DecodeAdmitThatMatchesOrFailsIsFound) {
  for (const HiCacheOptions& o : {full_only(), hybrid(), swa_only()})
    EXPECT_FALSE(decode_admit_problem(o)) << *decode_admit_problem(o);
  auto uses_prefix = [](RequestKV& kv, std::span<const Token> tokens) {
    return kv.admit(tokens, false, /*use_prefix_cache=*/true);
  };
  expect_found(decode_admit_problem(hybrid(), uses_prefix), "matched the cached prompt");
  auto result_check_fails = [](RequestKV& kv,
                               std::span<const Token> tokens) -> std::optional<AdmitOutcome> {
    std::optional<AdmitOutcome> out = kv.admit(tokens, false, false);
    KV_ASSERT(false, "admit.result: the SWA slots do not cover the prefix one per token");
    return out;
  };
  expect_found(decode_admit_problem(swa_only(), result_check_fails), "failed an assertion: ");
  auto refused = [](RequestKV&, std::span<const Token>) -> std::optional<AdmitOutcome> {
    return std::nullopt;
  };
  expect_found(decode_admit_problem(full_only(), refused), "was refused (nullopt)");
}

}  // namespace
}  // namespace kvsim::sim
