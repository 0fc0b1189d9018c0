// A HiCache on the deterministic CPU backend, with a model-forward stand-in that writes each
// token's KV as a pure function of (namespace, token prefix, position, layer), and a checker
// that reads device slots back and compares — the content oracle of DESIGN.md invariant 6.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/backend/cpu_backend.h"
#include "core/cache/hi_cache.h"
#include "core/common/assert.h"

namespace kvsim::testing {

class CacheFixture : public ::testing::Test {
 public:
  explicit CacheFixture(HiCacheOptions options = default_options(),
                        StorageBackend* storage = nullptr);
  ~CacheFixture() override;
  void TearDown() override;

  static HiCacheOptions default_options();
  // Writes KV for tokens[begin, end) into `slots` (slot i holds position begin + i) on compute.
  void forward(Namespace ns, std::span<const Token> tokens, const IndexVector& slots,
               size_t begin = 0);
  // Runs a whole request: match, allocate, forward the uncached part, insert, free dups.
  void run_request(Namespace ns, std::span<const Token> tokens);
  // True when device slots hold the expected KV of tokens[0, slots.size()).
  ::testing::AssertionResult device_content_ok(Namespace ns, std::span<const Token> tokens,
                                               const IndexVector& slots);
  void expect_sane();

  ScopedThrowingAsserts asserts_;
  CpuBackend backend_;
  std::unique_ptr<HiCache> cache_;
};

std::vector<Token> tokens_from(Token first, size_t n);

}  // namespace kvsim::testing
