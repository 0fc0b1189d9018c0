// Reading and writing HiCache pools through the content oracle (sim/model/content_oracle.h), for
// the property tests and the conformance kit: a model-forward stand-in that writes what a request
// computes, and checkers that compare tree nodes and request prefixes with the oracle. Unlike
// tests/support/hybrid_fixture.h these take any HiCache (with or without storage) and return
// an error text instead of a GoogleTest assertion, so RapidCheck properties can use them.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"

namespace kvsim::conformance {

// Enqueues on the compute stream the bytes of positions [from, tokens.size()) of `req` in
// every pool it holds slots in (full KV, SWA KV), and its Mamba state checkpoint at the last
// page boundary (what the tree may adopt at finish).
void forward(HiCache& cache, const RequestKV& req, std::span<const Token> tokens, size_t from);

struct ValueTiers {
  bool device = true;  // device reads synchronize the backend (read_item_sync)
  bool host = true;    // host reads are direct: call only when no copy into them is pending
};

// Error text when the `type` values of `node` differ from the oracle, nullopt when they agree.
std::optional<std::string> node_values_error(HiCache& cache, const TreeNode& node,
                                             ComponentType type, ValueTiers tiers = {});
// Every component the cache has.
std::optional<std::string> node_all_values_error(HiCache& cache, const TreeNode& node,
                                                 ValueTiers tiers = {});
// A running request's slots for positions [0, tokens.size()): full KV everywhere, SWA within
// the window below owned_from and wherever it owns slots, its Mamba state. Synchronizes.
std::optional<std::string> request_error(HiCache& cache, const RequestKV& req,
                                         std::span<const Token> tokens);

}  // namespace kvsim::conformance
