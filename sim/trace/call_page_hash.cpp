#include "sim/trace/call_page_hash.h"

#include <cstring>

#include "core/common/simd_clones.h"

// Built at -O2 even in the Python module (python/CMakeLists.txt): GCC's -O3 vectorises these
// loops worse (measured 2x slower, 2026-11-24).

namespace kvsim::sim {
namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kFold = 0xC2B2AE3D27D4EB4FULL;
constexpr size_t kStride = 16;  // tokens per step: eight 64-bit words, one per lane

struct Lanes {
  uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};

  // One step: word k (tokens 2k and 2k+1, the first in the low half) into lane k.
  KVSIM_ALWAYS_INLINE void mix(const uint64_t* w) {
    for (size_t k = 0; k < 8; ++k) {
      const uint64_t h = (v[k] ^ w[k]) * kMul;
      v[k] = h ^ (h >> 32);
    }
  }
  // The tokens past the last whole step, one at a time into lane 0.
  KVSIM_ALWAYS_INLINE void mix_tail(uint32_t token) {
    const uint64_t h = (v[0] ^ token) * kMul;
    v[0] = h ^ (h >> 32);
  }
  // The lanes folded pairwise (three levels of independent multiplies, not eight in a chain),
  // then the length mixed in and the result avalanched. Each step is a bijection of each input
  // given the other, and not symmetric, so lanes holding swapped states fold differently.
  KVSIM_ALWAYS_INLINE uint64_t fold(size_t n) const {
    const auto pair = [](uint64_t x, uint64_t y) {
      const uint64_t m = x * kFold;
      return ((m << 31) | (m >> 33)) ^ y;
    };
    const uint64_t a = pair(pair(v[0], v[1]), pair(v[2], v[3]));
    const uint64_t b = pair(pair(v[4], v[5]), pair(v[6], v[7]));
    uint64_t h = pair(a, b) ^ (n * kMul);
    h = (h ^ (h >> 29)) * kFold;
    return h ^ (h >> 32);
  }
};

// The tokens of a page, step by step (16 tokens as eight 64-bit words, the first of each pair
// in the low half), from 32-bit Tokens or from int64 ids cut to 32 bits (noting any id that
// does not fit: v fits exactly when v + 2^31 has no bit above bit 31, as in
// core/tree/wide_ids.cpp).
struct TokenSteps {
  const Token* t;
  KVSIM_ALWAYS_INLINE void load(size_t i, uint64_t* w) {
    std::memcpy(w, t + i, 8 * sizeof(uint64_t));
  }
  KVSIM_ALWAYS_INLINE uint32_t at(size_t i) { return static_cast<uint32_t>(t[i]); }
};
struct WideSteps {
  const int64_t* p;
  uint64_t high = 0;
  KVSIM_ALWAYS_INLINE void load(size_t i, uint64_t* w) {
    uint32_t cut[kStride];
    for (size_t j = 0; j < kStride; ++j)
      cut[j] = at(i + j);
    std::memcpy(w, cut, sizeof cut);
  }
  KVSIM_ALWAYS_INLINE uint32_t at(size_t i) {
    high |= (static_cast<uint64_t>(p[i]) + 0x80000000ull) >> 32;
    return static_cast<uint32_t>(p[i]);
  }
};

// The hash of one page of n tokens: even steps into one set of eight lanes, odd steps into
// another (two independent multiply chains in flight: one chain measured 1 ms slower per replay
// of the oracle stream), the tokens past the last whole step into lane 0 of the first set, then
// both sets folded with the length. Inlined into each clone of the callers below: the loop must
// be built for the clone's ISA (an outlined copy would be the baseline one, measured 4x slower).
template <typename Steps>
KVSIM_ALWAYS_INLINE uint64_t page_hash(Steps& s, size_t n) {
  Lanes even;
  Lanes odd;
  odd.v[0] = 9;
  size_t i = 0;
  for (; i + 2 * kStride <= n; i += 2 * kStride) {
    uint64_t w[8];
    uint64_t x[8];
    s.load(i, w);
    s.load(i + kStride, x);
    even.mix(w);
    odd.mix(x);
  }
  if (i + kStride <= n) {
    uint64_t w[8];
    s.load(i, w);
    even.mix(w);
    i += kStride;
  }
  for (; i < n; ++i)
    even.mix_tail(s.at(i));
  return even.fold(n) ^ (odd.fold(n) * kMul);
}

}  // namespace

KVSIM_SIMD_CLONES uint64_t hash_token_page(const Token* tokens, size_t n) {
  TokenSteps s{tokens};
  return page_hash(s, n);
}

KVSIM_SIMD_CLONES void hash_token_pages(const Token* tokens, size_t pages, size_t page,
                                        uint64_t* out) {
  for (size_t k = 0; k < pages; ++k) {
    TokenSteps s{tokens + k * page};
    out[k] = page_hash(s, page);
  }
}

KVSIM_SIMD_CLONES bool hash_wide_pages(const int64_t* ids, size_t pages, size_t page,
                                       uint64_t* out) {
  uint64_t high = 0;
  for (size_t k = 0; k < pages; ++k) {
    WideSteps s{ids + k * page};
    out[k] = page_hash(s, page);
    high |= s.high;
  }
  return high == 0;
}

}  // namespace kvsim::sim
