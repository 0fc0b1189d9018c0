#include "core/tree/wide_ids.h"

#include "core/common/simd_clones.h"

namespace kvsim {

// v fits exactly when v + 2^31 has no bit above bit 31: one add and one OR per id.
KVSIM_SIMD_CLONES bool all_wide_ids_fit(const int64_t* ids, size_t n) {
  uint64_t high = 0;
  for (size_t i = 0; i < n; ++i)
    high |= static_cast<uint64_t>(ids[i]) + 0x80000000ull;
  return (high >> 32) == 0;
}

KVSIM_SIMD_CLONES bool narrow_wide_ids(const int64_t* ids, size_t n, Token* dst) {
  uint64_t high = 0;
  for (size_t i = 0; i < n; ++i) {
    high |= static_cast<uint64_t>(ids[i]) + 0x80000000ull;
    dst[i] = static_cast<Token>(ids[i]);
  }
  return (high >> 32) == 0;
}

KVSIM_SIMD_CLONES size_t equal_wide_chunks(const Token* key, const int64_t* ids, size_t limit) {
  constexpr size_t kChunk = 64;
  size_t n = 0;
  while (n + kChunk <= limit) {
    uint64_t diff = 0;
    for (size_t k = 0; k < kChunk; ++k)
      diff |= static_cast<uint64_t>(static_cast<int64_t>(key[n + k]) ^ ids[n + k]);
    if (diff != 0) break;
    n += kChunk;
  }
  return n;
}

}  // namespace kvsim
