// The API contract: public calls of the core that no driver makes, checked by the simulator once
// per run beside the option contract (sim/model/option_contract.h), on small trees and caches of
// the run's shape (page size, eviction policy, auxiliary components). Issue 28, kind 3: a call
// only the Python module, a component author (docs/new-component.md) or nobody makes is code
// whose wrong result survives every hunt; this compares those calls' results with their
// documented contract.
//
// The contract:
//  (a) Root locks. inc_full_lock / dec_full_lock on the root (in any order, dec first included),
//      lock(root) / unlock of its record (anchor 0, no component start), and lock / unlock of a
//      leaf leave the root's lock counts, every size (evictable, protected, per auxiliary
//      component), the node count and every next victim as they were; inc_aux_lock /
//      dec_aux_lock on the root (which holds no auxiliary value) are refused and change nothing.
//  (b) Auxiliary calls. set_aux_value, take_aux_value, set_aux_host_value, next_aux_victim,
//      inc_aux_lock and dec_aux_lock refuse the full-attention type as "not an auxiliary
//      component" (a KV_ASSERT: an AssertionFailure under ScopedThrowingAsserts) and change
//      nothing. For each auxiliary component the tree has: a value set on the root, a host
//      value set twice, on the root or on a node without a full host value, a tombstone taken,
//      locked or re-set, a locked value taken and a lock released at zero are refused and change
//      nothing; the accepted calls move the aux evictable / protected sizes by the value's size
//      and file the node as a victim exactly while it holds an unlocked value.
//  (c) held_locks_problem (core/tree/tree_snapshot.h; today only the Python recorder calls it)
//      is "" for a snapshot of a tree whose every node is on a held lock's path, with those
//      locks recorded (and for one without held locks recorded), and names the node ("node N:
//      field lock_ref") when any single node's lock_ref is one off in a copy, for every node.
//  (d) RequestKV::admit with use_prefix_cache false (PD decode; the scenario rules keep PD
//      from SWA and Mamba, so no run makes this call on a hybrid cache) works on every shape,
//      as SGLang's decode side does with its chunk cache: the cached prompt matches nothing,
//      no lock is taken, the request holds no slot until extend and then only fresh slots (SWA
//      slots too, one per token; its own Mamba state), and abort gives every one back.
// Each part builds its own tree or cache: the run's cache is never touched, so its ops and
// event hash are unchanged.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "core/cache/hi_cache_options.h"
#include "core/cache/request_kv.h"
#include "core/tree/radix_tree.h"

namespace kvsim::sim {

// nullopt when every part holds; otherwise what the core did instead ("root locks: ...").
std::optional<std::string> check_api_contract(const HiCacheOptions& options);

// The parts. The calls each makes are parameters (the core's by default) so a test can plant a
// wrong one and see the part fail.
struct TreeCalls {
  void (*inc_full)(RadixTree&, TreeNode&);
  void (*dec_full)(RadixTree&, TreeNode&);
  LockRecord (*lock)(RadixTree&, TreeNode&);
  void (*unlock)(RadixTree&, const LockRecord&);
  void (*set_aux)(RadixTree&, TreeNode&, ComponentType, IndexVector);
  IndexVector (*take_aux)(RadixTree&, TreeNode&, ComponentType);
  void (*set_aux_host)(RadixTree&, TreeNode&, ComponentType, IndexVector);
  TreeNode* (*next_aux_victim)(const RadixTree&, ComponentType);
  void (*inc_aux)(RadixTree&, TreeNode&, ComponentType);
  void (*dec_aux)(RadixTree&, TreeNode&, ComponentType);
  static TreeCalls core();
};
using HeldLocksFn = std::string (*)(const TreeSnapshot&);
using DecodeAdmitFn = std::optional<AdmitOutcome> (*)(RequestKV&, std::span<const Token>);

std::optional<std::string> root_locks_problem(const HiCacheOptions& shape,
                                              const TreeCalls& calls = TreeCalls::core());
std::optional<std::string> aux_calls_problem(const HiCacheOptions& shape,
                                             const TreeCalls& calls = TreeCalls::core());
std::optional<std::string> held_locks_contract_problem(const HiCacheOptions& shape,
                                                       HeldLocksFn problem = &held_locks_problem);
// `admit` is called as RequestKV::admit(tokens, false, /*use_prefix_cache=*/false) by default.
std::optional<std::string> decode_admit_problem(const HiCacheOptions& shape,
                                                DecodeAdmitFn admit = nullptr);

}  // namespace kvsim::sim
