// The 64-bit page hashes a recorded call trace writes instead of a key's tokens ("pages",
// sim/trace/call_trace.h): the Python module's recorder hashes each page it must spell, and replay
// turns each distinct hash into one synthetic page. Only equality matters, within one recording:
// nothing compares hashes across files, and replay never recomputes them.
//
// One function of the token values, whichever form the caller holds: a page of 32-bit Tokens
// (the tree's own keys) and the same page as int64 ids (what SGLang passes) hash the same.
// Multiply-xorshift lanes over 64-bit words (two tokens each): steps of 16 tokens alternate
// between two sets of eight lanes, which are folded together with the page length. The loops
// are built with AVX2 and AVX-512 clones, picked at load time on x86-64, so hashing runs at
// about the speed of reading the page.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/types.h"

namespace kvsim::sim {

// The hash of one page of `n` tokens.
uint64_t hash_token_page(const Token* tokens, size_t n);

// out[k] = hash_token_page(tokens + k * page, page) for k < pages.
void hash_token_pages(const Token* tokens, size_t pages, size_t page, uint64_t* out);

// The same hashes from int64 ids: out[k] is the hash of page k of the ids cut to 32 bits. False
// when some id does not fit a Token (the hashes are then of the cut ids: the caller decides
// whether to keep them).
bool hash_wide_pages(const int64_t* ids, size_t pages, size_t page, uint64_t* out);

}  // namespace kvsim::sim
