// The per-token slots of page-granular index vectors (IndexVector::pages): page k of `page`
// tokens holds the slots firsts[k] .. firsts[k] + page - 1. Expanding them is what a match hands
// SGLang (one int64 slot per token) and what an evict hands the allocator's free, so the loop
// runs over every matched or evicted token; it lives in its own file, built with AVX-512 and
// AVX2 clones picked at load time on x86-64.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/common/types.h"

namespace kvsim {

// out[k * page + t] = firsts[k] + t for k < pages, t < page.
void expand_page_slots(const SlotIndex* firsts, size_t pages, int32_t page, SlotIndex* out);

}  // namespace kvsim
