// A hybrid-model HiCache (full attention + SWA + Mamba) on the CPU backend, with a forward
// stand-in that writes full KV, SWA KV and the Mamba state as pure functions of the token
// prefix, and checkers that read every pool back (DESIGN.md invariant 6, for side pools too).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <span>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/cache/request_kv.h"
#include "core/common/assert.h"

namespace kvsim::testing {

class HybridFixture : public ::testing::Test {
 public:
  explicit HybridFixture(HiCacheOptions options = hybrid_options());
  ~HybridFixture() override;
  void TearDown() override;

  // page 4, 2 layers, 64 device / 128 host tokens, SWA window 8, 8 Mamba states.
  static HiCacheOptions hybrid_options();

  // Admits, checks the reused prefix, forwards the rest, checkpoints the state at the last
  // page boundary and finishes. Returns the admit outcome.
  AdmitOutcome serve(Namespace ns, std::span<const Token> tokens);
  // Writes every pool's bytes for positions [from, tokens.size()) of `req`.
  void forward(const RequestKV& req, std::span<const Token> tokens, size_t from);
  // The request's view of its prefix [0, owned_from) is right in every pool.
  ::testing::AssertionResult prefix_ok(const RequestKV& req, std::span<const Token> tokens);
  // A tree node's values in every pool hold the bytes of its prefix.
  ::testing::AssertionResult node_ok(const TreeNode& node);
  void expect_sane();

  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  std::unique_ptr<HiCache> cache_;
};

}  // namespace kvsim::testing
