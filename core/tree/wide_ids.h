// Wide token ids: the int64 ids a Python caller (SGLang) passes, read in place by the tree
// next to its 32-bit Tokens. These are the per-id loops, kept in one file that is built for
// speed (-O3, and an AVX2 clone picked at load time on x86-64) because a wide match or insert
// runs them over every token of a prompt.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/common/types.h"

namespace kvsim {

// True when a wide id fits kvsim's 32-bit Token.
constexpr bool fits_token(int64_t v) {
  return v == static_cast<int64_t>(static_cast<Token>(v));
}

// True when every one of ids[0, n) fits a Token.
bool all_wide_ids_fit(const int64_t* ids, size_t n);

// Writes ids[0, n) into dst as Tokens; false when some id did not fit (dst then holds
// truncated values, which the caller must not keep).
bool narrow_wide_ids(const int64_t* ids, size_t n, Token* dst);

// Index of the first of `ids` that does not fit a Token, or ids.size() when all fit.
inline size_t first_wide_token_out_of_range(std::span<const int64_t> ids) {
  if (all_wide_ids_fit(ids.data(), ids.size())) return ids.size();
  return static_cast<size_t>(
      std::find_if(ids.begin(), ids.end(), [](int64_t v) { return !fits_token(v); }) - ids.begin());
}

// How many leading positions of key[0, limit) and ids[0, limit) agree, counted in whole chunks
// of 64 (the caller finishes inside the first differing chunk id by id).
size_t equal_wide_chunks(const Token* key, const int64_t* ids, size_t limit);

// How many leading positions of key[0, n) and ids[0, n) agree (the wide twin of
// common_token_prefix, core/tree/token_run.h).
inline size_t common_wide_prefix(const Token* key, const int64_t* ids, size_t n) {
  size_t k = equal_wide_chunks(key, ids, n);
  while (k < n && static_cast<int64_t>(key[k]) == ids[k])
    ++k;
  return k;
}

}  // namespace kvsim
